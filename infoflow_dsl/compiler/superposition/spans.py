"""Embedding columns that other embedding columns span share their coordinates (exact).

A direction j written by the embedding alone (``embed.W_E``, ``pos_embed.W_pos``, ``embed.cls``;
no embedding FFN, no later writer) holds at every token row h_j = E_j[token] + P_j[position]
(the readout row: c_j + P_j[length]): a fixed function of the token and the position, the same at
every stage. Stack its columns into one vector e_j = (E_j, P_j, c_j) (:func:`embedding_columns`).
When e_j = Σ_i a_i·e_i + c·s over other such directions i, with s the shift (+1 on the token and
class rows, −1 on the positions: a constant moved from one table to the other changes no
row), then h_j = Σ_i a_i·h_i at every row, so a reader forms r_j·h_j = Σ_i (a_i·r_j)·h_i:
:func:`spanned` adds a_i·r_j to every reader's row of i, sets j's columns to 0 (j is never
written, and :mod:`~infoflow_dsl.compiler.compress` gives it no dimension), and the model
computes the same function, exactly in real arithmetic (in floats, each reader's row of i is
rounded once more). A per-token model never reads its readout row (its output is read at the
tokens, and keys and values are the input tokens), so there the rows only the readout row adds
(the class token, position T + 1) are left out of e_j: the identity holds at the token rows.
The identity must hold over j's whole lifetime, so every i is alive (under tight lifetimes) at
least as long as j: its lifetime's end is at or after j's (both start at the embedding).

What this folds in the compiled models: a token's threshold ``[x(t) < k]`` is the sum of the
indicators x = v for v < k, which the same models carry for their value reads; a position's
``t`` and its steps ``[t < k]`` beside the position's other indicators and ``one`` (more such
columns than the T positions cannot be independent); ``one``, the sum of the token's
indicators. Like the duplicates (:mod:`.duplicates`, the case e_j = e_i) it is sharing at one
depth that loses nothing: j's value is Σ a_i·h_i, which the feature dictionary states (its
``read`` ``combination``).

**Which j.** The shortest-lived direction first (it leaves the longer-lived ones, which can
support more, to the others; ties: the higher index), each tried against the directions not
folded that live at least as long; one token's or one position's own indicator (a column with
a single entry, 1) is never folded, so the one-hot groups stay what they were for the
clean-ups, and the labels in ``kept`` are not either (compile tries ``one`` both ways). The
coefficients are the unique ones over a basis chosen in index order (the shift first), kept
only when they are exact binary fractions whose combination reproduces e_j exactly (checked in
rational arithmetic), so a fold is never approximate.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from ...transformer.card import ModelCard
from ..compress import drop_unread_writes, lifetimes, stage_map
from .duplicates import fold_onto

Tensor = torch.Tensor

#: the largest denominator of a coefficient tried (a power of two: the coefficient is exact in floats)
DENOMINATOR = 1 << 12

#: {j: ((i, a_i), ...)}: direction j folded onto the directions i with coefficients a_i
Combinations = dict[int, tuple[tuple[int, float], ...]]


@dataclass(frozen=True)
class Spans:
    """What :func:`spanned` folded: ``terms`` {j: ((i, a_i), ...)} (h_j = Σ a_i·h_i at every
    token row) and ``ends`` {j: the stage whose FFN erased j under tight lifetimes (inf: none)},
    up to which the identity is what j's readers used."""

    terms: Combinations
    ends: dict[int, float]

    def labelled(self, labels: list[str]) -> list[list[Any]]:
        """The certificate's ``spanned``: [[j's label, [[i's label, a_i], ...]], ...]."""
        return [[labels[j], [[labels[i], a] for i, a in terms]] for j, terms in sorted(self.terms.items())]


def embedding_only(tensors: dict[str, Tensor], size: int, layers: int) -> list[int]:
    """The directions the embedding alone writes (token table, positional code, class token),
    no embedding FFN among their writers."""
    writes, _ = stage_map(tensors, size, layers)
    second = tensors.get("embed.W_E2")
    return [i for i in range(size) if writes[i] == [0] and (second is None or not bool(second[..., i].ne(0).any()))]


def embedding_columns(tensors: dict[str, Tensor], per_token: bool) -> Tensor:
    """(rows, D + 1) float64: every residual direction's embedding rows stacked (tokens,
    positions, the class token), and last the shift s (+1 on the token and class rows, −1 on the
    positions): h_j(v, p) = E_j[v] + P_j[p] does not change when c·s is added to column j.
    A ``per_token`` model reads its output at the tokens, and no key or value is ever the
    readout row (``transformer.model``: keys and values are the input tokens), so its rows that
    only the readout row adds (the class token, the last position T + 1) are left out: the
    identity is needed at the token rows alone."""
    positions = tensors["pos_embed.W_pos"]
    parts = [tensors["embed.W_E"], positions[:-1] if per_token else positions]
    if not per_token:
        parts.append(tensors["embed.cls"].reshape(1, -1))
    stacked = torch.cat([p.to(torch.float64).reshape(-1, p.shape[-1]) for p in parts], dim=0)
    shift = torch.ones(stacked.shape[0], 1, dtype=torch.float64)
    shift[parts[0].shape[0] : parts[0].shape[0] + parts[1].shape[0]] = -1.0
    return torch.cat([stacked, shift], dim=1)


def _indicator(column: Tensor) -> bool:
    """Whether the column is one token's or one position's indicator: a single entry, 1."""
    nonzero = torch.nonzero(column).flatten()
    return len(nonzero) == 1 and float(column[nonzero[0]]) == 1.0


def basis(columns: Tensor, candidates: list[int]) -> list[int]:
    """The candidates, in their order, whose columns are independent of the earlier ones kept."""
    kept: list[int] = []
    for i in candidates:
        trial = columns[:, [*kept, i]]
        if int(torch.linalg.matrix_rank(trial)) == len(kept) + 1:
            kept.append(i)
    return kept


def _exact(value: float, binary: bool = True) -> Fraction | None:
    """``value`` as a fraction of denominator at most DENOMINATOR (a power of two where
    ``binary``), where one is that close."""
    near = Fraction(value).limit_denominator(DENOMINATOR)
    if abs(float(near) - value) > 1e-9 * max(1.0, abs(value)) or (binary and near.denominator & (near.denominator - 1)):
        return None
    return near


def combination(columns: Tensor, target: int, over: list[int],
                binary: bool = True) -> tuple[tuple[int, float], ...] | None:
    """((i, a_i), ...) with column ``target`` = Σ a_i·column i exactly (in rationals) over the
    independent columns ``over`` (:func:`basis`), the terms a_i ≠ 0, else None. ``binary``: every
    a_i a binary fraction (so that a_i·w is a float's exact scaling), else any fraction of
    denominator at most DENOMINATOR (a_i·w then rounds once where it is used)."""
    if not over:
        return None
    a = columns[:, over]
    b = columns[:, target : target + 1]
    solution = torch.linalg.lstsq(a, b).solution.flatten().tolist()
    found: list[tuple[int, Fraction]] = []
    for i, value in zip(over, solution, strict=True):
        near = _exact(value, binary)
        if near is None:
            return None
        if near != 0:
            found.append((i, near))
    if not found:
        return None
    exact = [Fraction(float(v)) for v in columns[:, target].tolist()]
    rows = [[Fraction(float(v)) for v in columns[:, i].tolist()] for i, _ in found]
    formed = [sum((coefficient * row[r] for (_, coefficient), row in zip(found, rows, strict=True)), Fraction(0))
              for r in range(len(exact))]
    if formed != exact:
        return None
    return tuple((i, float(c)) for i, c in found)


def scaled_sum(*parts: tuple[float, tuple[tuple[int, float], ...]]) -> tuple[tuple[int, float], ...]:
    """Σ scale·terms over ``parts`` as ((index, weight), ...), indices in first-seen order, the
    zero weights dropped (a combination substituted into another, a sum moved onto another)."""
    merged: dict[int, float] = {}
    for scale, terms in parts:
        for i, weight in terms:
            merged[i] = merged.get(i, 0.0) + scale * weight
    return tuple((i, weight) for i, weight in merged.items() if weight != 0.0)


def _substituted(found: Combinations, j: int, combo: tuple[tuple[int, float], ...]) -> Combinations:
    """Every earlier combination with j replaced by its own combination."""
    return {k: tuple(sorted(scaled_sum(*((a, combo if i == j else ((i, 1.0),)) for i, a in terms))))
            for k, terms in found.items()}


def spanned(tensors: dict[str, Tensor], config: ModelCard,
            kept: frozenset[str] = frozenset()) -> tuple[dict[str, Tensor], Spans]:
    """(the tensors with every spanned embedding column folded but those labelled in ``kept``,
    what was folded) as the module docstring says; ``tensors`` unchanged."""
    labels, layers = list(config.labels), len(config.layers)
    size = len(labels)
    out = dict(tensors)
    tight = dict(tensors)
    drop_unread_writes(tight, size, layers)
    alive = {f.index: f for f in lifetimes(tight, labels, layers)}
    candidates = [i for i in embedding_only(tensors, size, layers) if i in alive]
    columns = embedding_columns(tensors, config.per_token)
    indicators = {i for i in candidates if _indicator(columns[:, i])}
    found: Combinations = {}
    for j in sorted(candidates, key=lambda i: (alive[i].end - alive[i].start, -i)):
        if j in indicators or labels[j] in kept:
            continue
        supporters = [i for i in candidates if i != j and i not in found and alive[i].end >= alive[j].end]
        combo = combination(columns, j, basis(columns, [size, *sorted(supporters)]))
        combo = None if combo is None else tuple((i, a) for i, a in combo if i != size)  # the shift: no direction
        if not combo:
            continue
        fold_onto(out, layers, j, combo)
        found = _substituted(found, j, combo)
        found[j] = combo
    return out, Spans(found, {j: alive[j].end for j in found})


__all__ = ["Combinations", "Spans", "basis", "combination", "embedding_columns", "embedding_only", "scaled_sum",
           "spanned"]
