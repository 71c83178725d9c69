"""Stage 5, assemble: a :class:`~infoflow_dsl.compiler.circuit.Circuit` -> tensors + the model's card.

Every residual direction gets one coordinate of the residual stream, in the circuit's order
(so ``card.residual_labels[i]`` names coordinate i). Each linear form becomes a column
(or row) of the matrix that reads it; its constant is read from the ``one`` direction, except
in FFN inputs, where it becomes the bias b_in. Tensor names follow TransformerLens
(``blocks.{l}.attn.W_Q`` of shape [H, d_model, d_head], ...). All weights are built in float64
and cast once to the requested dtype, so the same circuit always gives the same bytes. The ReLU
blocks' matrices are built entry by entry (:class:`MatrixEntries`) and come out sparse COO where
the model holds them sparse, so a compile's memory follows the nonzero count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch

from ..transformer.card import (
    CARD_FORMAT,
    BlockCard,
    ErrorBudget,
    HeadCard,
    LayerCard,
    ModelCard,
    OutputVocabularyCard,
    VocabularyCard,
)
from ..transformer.sparse import holds_sparse
from .circuit import ONE, POS_COS, POS_SIN, AttentionHead, Circuit, FFNBlock, LinearForm, input_direction


class MatrixEntries:
    """A matrix built entry by entry (``add((i, j), value)``: += in the order written, from 0.0, the
    same float64 sums as ``+=`` on a dense zero matrix), then made dense or, where the model holds
    it sparse (:func:`~infoflow_dsl.transformer.sparse.holds_sparse`), a sparse COO tensor: a ReLU block of a
    million units is never a dense matrix during a compile."""

    def __init__(self, name: str, rows: int, columns: int) -> None:
        self.name, self.shape = name, (rows, columns)
        self.entries: dict[tuple[int, int], float] = {}

    def add(self, key: tuple[int, int], value: float) -> None:
        """``matrix[key] += value`` (from 0.0)."""
        entries = self.entries
        entries[key] = entries.get(key, 0.0) + value

    def tensor(self) -> torch.Tensor:
        """The matrix, float64: dense, or sparse COO (its nonzero entries) if held sparse."""
        kept = sorted((key, value) for key, value in self.entries.items() if value != 0.0)
        coordinates = torch.tensor([key for key, _ in kept], dtype=torch.int64).reshape(-1, 2).T  # (2, nnz)
        values = torch.tensor([value for _, value in kept], dtype=torch.float64)
        if holds_sparse(self.name, self.shape, len(kept)):
            return torch.sparse_coo_tensor(coordinates, values, self.shape, is_coalesced=True, check_invariants=True)
        dense = torch.zeros(self.shape, dtype=torch.float64)
        dense[coordinates[0], coordinates[1]] = values
        return dense


def _write_form(column: torch.Tensor, form: LinearForm, index: dict[str, int], constant_on_one: bool = True) -> None:
    """column[index[d]] += coefficient for each term (the constant on ``one`` if asked)."""
    for direction, coefficient in form.terms:
        column[index[direction]] += coefficient
    if constant_on_one and form.constant:
        column[index[ONE]] += form.constant


def _embedding(circuit: Circuit, index: dict[str, int], blocks: list[FFNBlock]) -> dict[str, torch.Tensor]:
    d, size = circuit.dimension, len(circuit.directions)
    units = [u for b in blocks for u in b.units]
    w_e = torch.zeros(d + 1, size, dtype=torch.float64)  # [x; 1] -> residual
    coordinates = {input_direction(i): i for i in range(d)}
    for direction, i in coordinates.items():
        w_e[i, index[direction]] = 1.0
    w_e[d, index[ONE]] = 1.0
    w_e1 = MatrixEntries("embed.W_E1", d + 1, len(units))
    biases = [0.0] * len(units)  # float64 sums, as += on a float64 tensor
    w_e2 = MatrixEntries("embed.W_E2", len(units), size)
    for m, unit in enumerate(units):
        for direction, coefficient in unit.input.terms:
            if direction == ONE:
                biases[m] += coefficient
            elif direction in coordinates:
                w_e1.add((coordinates[direction], m), coefficient)
            else:
                raise AssertionError(f"the embedding's ReLU block cannot read {direction}")
        biases[m] += unit.input.constant
        w_e2.add((m, index[unit.output]), unit.coefficient)
    b_e1 = torch.tensor(biases, dtype=torch.float64)  # (M,)
    cls = torch.zeros(size, dtype=torch.float64)
    cls[index[ONE]] = 1.0
    positions = torch.zeros(circuit.length + 1, size, dtype=torch.float64)  # rows: positions 1..T+1
    if POS_COS in index:
        for p in range(1, circuit.length + 1):
            positions[p - 1, index[POS_COS]] = math.cos(circuit.theta * p)
            positions[p - 1, index[POS_SIN]] = math.sin(circuit.theta * p)
    return {"embed.W_E": w_e, "embed.W_E1": w_e1.tensor(), "embed.b_E1": b_e1, "embed.W_E2": w_e2.tensor(),
            "embed.cls": cls,
            "pos_embed.W_pos": positions}


def _token_embedding(circuit: Circuit, index: dict[str, int]) -> dict[str, torch.Tensor]:
    """A token circuit's embedding: W_E [V, D], row v the token columns' values for token v
    (``one`` = 1 in every row); no ReLU block ([V, 0]); W_pos [T+1, D] from the position columns."""
    assert circuit.vocabulary is not None
    size, vocabulary = len(index), len(circuit.vocabulary[0])
    w_e = torch.zeros(vocabulary, size, dtype=torch.float64)
    w_e[:, index[ONE]] = 1.0
    for direction, values in circuit.token_columns:
        w_e[:, index[direction]] = torch.tensor(values, dtype=torch.float64)
    positions = torch.zeros(circuit.length + 1, size, dtype=torch.float64)
    for direction, values in circuit.position_columns:
        positions[:, index[direction]] = torch.tensor(values, dtype=torch.float64)
    cls = torch.zeros(size, dtype=torch.float64)
    cls[index[ONE]] = 1.0
    return {"embed.W_E": w_e, "embed.W_E1": torch.zeros(vocabulary, 0, dtype=torch.float64),
            "embed.b_E1": torch.zeros(0, dtype=torch.float64), "embed.W_E2": torch.zeros(0, size, dtype=torch.float64),
            "embed.cls": cls, "pos_embed.W_pos": positions}


def _attention(layer: int, heads: list[AttentionHead], index: dict[str, int]) -> dict[str, torch.Tensor]:
    size = len(index)
    d_head = max((len(h.query) for h in heads), default=0)
    d_value = max((len(h.value) for h in heads), default=0)
    w_q = torch.zeros(len(heads), size, d_head, dtype=torch.float64)
    w_k = torch.zeros(len(heads), size, d_head, dtype=torch.float64)
    w_v = torch.zeros(len(heads), size, d_value, dtype=torch.float64)
    w_o = torch.zeros(len(heads), d_value, size, dtype=torch.float64)
    beta = torch.zeros(len(heads), dtype=torch.float64)
    for h, head in enumerate(heads):
        for j, (query, key) in enumerate(zip(head.query, head.key, strict=True)):
            _write_form(w_q[h, :, j], query, index)
            _write_form(w_k[h, :, j], key, index)
        for j, (value, output) in enumerate(zip(head.value, head.outputs, strict=True)):
            _write_form(w_v[h, :, j], value, index)
            w_o[h, j, index[output]] = 1.0
        beta[h] = head.beta
    prefix = f"blocks.{layer}.attn."
    return {prefix + "W_Q": w_q, prefix + "W_K": w_k, prefix + "W_V": w_v, prefix + "W_O": w_o, prefix + "beta": beta}


def _mlp(layer: int, blocks: list[FFNBlock], index: dict[str, int]) -> dict[str, torch.Tensor]:
    size = len(index)
    units = [u for b in blocks for u in b.units]
    prefix = f"blocks.{layer}.mlp."
    w_in = MatrixEntries(prefix + "W_in", size, len(units))
    w_out = MatrixEntries(prefix + "W_out", len(units), size)
    for m, unit in enumerate(units):
        for direction, coefficient in unit.input.terms:  # _write_form on column m, the constant in b_in
            w_in.add((index[direction], m), coefficient)
        w_out.add((m, index[unit.output]), unit.coefficient)
    b_in = torch.tensor([unit.input.constant for unit in units], dtype=torch.float64)  # (M,)
    return {prefix + "W_in": w_in.tensor(), prefix + "b_in": b_in, prefix + "W_out": w_out.tensor(),
            prefix + "b_out": torch.zeros(size, dtype=torch.float64)}


def assemble(circuit: Circuit, dtype: torch.dtype = torch.float64,
             metadata: Mapping[str, Any] | None = None) -> tuple[ModelCard, dict[str, torch.Tensor]]:
    """(card, tensors) of the model realising ``circuit``; ``metadata`` (card fields by name:
    the program, ε, the schedule, ...) is added to the card (:meth:`ModelCard.with_fields`)."""
    index = {name: i for i, name in enumerate(circuit.directions)}
    if circuit.vocabulary is None:
        tensors = _embedding(circuit, index, [b for b in circuit.blocks if b.layer == 0])
    else:
        tensors = _token_embedding(circuit, index)
    layers = []
    for layer in range(circuit.layers):  # block l holds the heads of schedule layer l+1 and FFN stage l+1
        heads = [h for h in circuit.heads if h.layer == layer + 1]
        blocks = [b for b in circuit.blocks if b.layer == layer + 1]
        tensors.update(_attention(layer, heads, index))
        tensors.update(_mlp(layer, blocks, index))
        layers.append(LayerCard(heads=tuple(_head_card(h) for h in heads), mlp=tuple(map(_block_card, blocks))))
    outputs = max(1, math.prod(circuit.output_shape))
    w_u = torch.zeros(len(index), outputs, dtype=torch.float64)
    b_u = torch.zeros(outputs, dtype=torch.float64)
    for k, form in enumerate(circuit.output):
        _write_form(w_u[:, k], form, index, constant_on_one=False)
        b_u[k] = form.constant
    tensors["unembed.W_U"] = w_u
    tensors["unembed.b_U"] = b_u
    card = ModelCard(
        format=CARD_FORMAT, T=circuit.length, d=circuit.dimension, d_model=len(index),
        output_shape=tuple(circuit.output_shape), layers=tuple(layers),
        embedding_mlp=tuple(_block_card(b) for b in circuit.blocks if b.layer == 0),
        residual_labels=tuple(circuit.directions), theta=circuit.theta,
        exact_length_only=circuit.exact_length_only, min_length=circuit.min_length,
        dtype=str(dtype).replace("torch.", ""),
        error_budget=ErrorBudget(eps=circuit.budget.eps, bound=circuit.budget.bound, rounding=circuit.budget.rounding,
                                 shares=tuple((name, share) for name, share in circuit.budget.shares)),
    )
    if circuit.output_site == "token":  # sequence targets keep their v1 config (and bytes)
        card = dataclasses.replace(card, output="token", causal=circuit.causal)
    if circuit.vocabulary is not None:  # a token model (docs/design.md): ids in, W_E [V, D]
        names, numbers = circuit.vocabulary
        card = dataclasses.replace(
            card, input="tokens", token_output=circuit.token_output,
            vocabulary=VocabularyCard.of(tuple(names), None if numbers is None else tuple(numbers)),
            output_vocabulary=None if circuit.output_vocabulary is None else OutputVocabularyCard(
                names=tuple(circuit.output_vocabulary)))
    card = card.with_fields(**(metadata or {}))
    return card, {name: tensor.to(dtype).coalesce() if tensor.is_sparse else tensor.to(dtype).contiguous()
                  for name, tensor in tensors.items()}


def _head_card(h: AttentionHead) -> HeadCard:
    """A head as the card describes it."""
    return HeadCard(name=h.name, kind=h.kind, site=h.site, mask=h.mask, beta=h.beta, computes=h.formula,
                    error=h.error, outputs=tuple(h.outputs))


def _block_card(b: FFNBlock) -> BlockCard:
    """An FFN block as the card describes it (its values and group where it has them)."""
    return BlockCard(name=b.name, computes=b.formula, units=len(b.units), error=b.error, output=b.output,
                     values=None if b.values is None else tuple(b.values), group=b.group)
