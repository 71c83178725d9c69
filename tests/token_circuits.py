"""A token circuit run straight from its IR (``compiler.circuit``: heads, FFN blocks, token and
position columns), in float64 and plain numpy, with no assembled weights and no model: the
constructions are tested on what the builder produced, against the reference evaluator.

Rows are positions 1..T' and the readout T'+1; row p holds the token columns' values for its
id (the readout holds only ``one``) plus the position columns' value at p. Layer by layer, the
heads read the stream before the layer (softmax of β·Σ q·k over the keys 1..T' their mask
admits, 0 with none) and the FFN blocks read it after the heads.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

import infoflow_dsl as ifl
from infoflow_dsl.compiler.circuit import Circuit, LinearForm
from infoflow_dsl.compiler.tokens import lower_tokens
from infoflow_dsl.transformer.masks import admitted


def _form(values: dict[str, np.ndarray], form: LinearForm, rows: int) -> np.ndarray:
    total = np.full(rows, form.constant)
    for direction, coefficient in form.terms:
        total = total + coefficient * values.get(direction, np.zeros(rows))
    return total


def simulate(circuit: Circuit, ids: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Every residual direction's value at rows 1..T'+1 after the last layer."""
    n, rows = len(ids), len(ids) + 1
    values: dict[str, np.ndarray] = {"one": np.ones(rows)}
    for name, column in circuit.token_columns:
        values[name] = np.array([column[i] for i in ids] + [0.0])
    for name, column in circuit.position_columns:
        values[name] = np.array(column[:rows], dtype=float)
    for layer in range(1, circuit.layers + 1):
        written: dict[str, np.ndarray] = {}
        for head in (h for h in circuit.heads if h.layer == layer):
            scores = sum(np.outer(_form(values, q, rows), _form(values, k, rows)[:n])
                         for q, k in zip(head.query, head.key, strict=True))  # (rows, n)
            queries, keys = np.arange(1, rows + 1)[:, None], np.arange(1, n + 1)[None, :]
            allowed = np.broadcast_to(admitted(head.mask, queries, keys, n), (rows, n))
            logits = np.where(allowed, head.beta * scores, -np.inf)
            top = np.where(allowed.any(axis=1), logits.max(axis=1, initial=-np.inf), 0.0)
            weights = np.where(allowed, np.exp(logits - top[:, None]), 0.0)
            weights = weights / np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
            for form, output in zip(head.value, head.outputs, strict=True):
                written[output] = written.get(output, 0.0) + weights @ _form(values, form, rows)[:n]
        for name, value in written.items():
            values[name] = values.get(name, np.zeros(rows)) + value
        added: dict[str, np.ndarray] = {}
        for block in (b for b in circuit.blocks if b.layer == layer):
            for unit in block.units:
                added[unit.output] = added.get(unit.output, 0.0) + unit.coefficient * np.maximum(
                    _form(values, unit.input, rows), 0.0)
        for name, value in added.items():
            values[name] = values.get(name, np.zeros(rows)) + value
    return values


def outputs(circuit: Circuit, ids: tuple[int, ...]) -> np.ndarray:
    """The circuit's outputs: (T', K) at the tokens for a per-token target, (K,) at the readout."""
    values = simulate(circuit, ids)
    columns = np.stack([_form(values, form, len(ids) + 1) for form in circuit.output], axis=-1)  # (rows, K)
    return columns[:-1] if circuit.output_site == "token" else columns[-1]


def assert_exact_on_short_inputs(source: str, longest: int = 4) -> Circuit:
    """Lower ``source`` to its circuit and check it against the reference on every id sequence
    of length 1..``longest``: token outputs pick the reference's token, numbers within 1e-9."""
    program = ifl.parse_program(source, "construction.iflow")
    circuit = lower_tokens(program, 1e-3, torch.float64)
    size = program.vocabulary.size
    for length in range(1, longest + 1):
        for ids in itertools.product(range(size), repeat=length):
            got = outputs(circuit, ids)
            want = ifl.evaluate(program, torch.tensor([ids]))[0].numpy()
            defined = ~np.isnan(want) if want.dtype.kind == "f" else want >= 0
            if program.token_output:
                assert np.array_equal(got.argmax(axis=-1)[defined], want[defined]), (ids, got, want)
            else:
                assert np.allclose(got.reshape(want.shape)[defined], want[defined], atol=1e-9), (ids, got, want)
    return circuit
