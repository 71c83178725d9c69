"""Directions only the unembedding reads share a coordinate where W_U's rows allow (exact).

A direction j whose only reader is the unembedding adds W_U[j]·h_j to the output and nothing
else. When W_U[j] = Σ_i a_i·W_U[i] over other directions i that the unembedding alone reads,
each first written no later than j (so i's coordinate is alive whenever j's is), j's writers
can write into the i's coordinates instead: :func:`unembedded` adds a_i times every writer's
column of j to i's, and sets j's columns and its row of W_U to 0. Coordinate i then holds
g_i = h_i + a_i·h_j, and the unembedding reads Σ_i W_U[i]·g_i = Σ_i W_U[i]·h_i + W_U[j]·h_j: the
same output, exactly in real arithmetic (in floats each writer's column of i is rounded once
more). Before j's first write h_j = 0, so g_i = h_i there. A numeric output (one column of W_U)
is the case in point: every number that only the output reads shares one coordinate holding
the output's linear form (Tracr's nary_add, 2·x(t) − (t − 1): the token's 2·x(t) and the
position's t, alive together and read only by the output, become one direction holding
2·x(t) − t).

Unlike the other folds this one keeps no separate values: coordinate i holds a sum that no reader
splits, so the feature dictionary lists i's record as that ``sum`` (its terms' names and weights)
and j on no direction of its own (``in_sums``: the records that hold it). A direction of a
categorical group (:mod:`.categorical`) is never folded nor folded onto: the groups stay what
they were for the clean-ups. The coefficients are exact binary fractions checked in rational
arithmetic (:func:`.spans.combination`), so the fold is never approximate.
"""

from __future__ import annotations

from typing import Any

import torch

from ..compress import drop_unread_writes, stage_map, stage_tensors
from .categorical import usage
from .spans import basis, combination, scaled_sum

Tensor = torch.Tensor

#: {i: ((name index, weight), ...)}: coordinate i holds Σ weight·h_name (i's own term first)
Sums = dict[int, tuple[tuple[int, float], ...]]


def read_by_unembedding_alone(tensors: dict[str, Tensor], config: dict[str, Any]) -> dict[int, int]:
    """{direction: its first write} of every direction whose reads after its first write are
    the unembedding's alone (under tight lifetimes), outside the categorical groups."""
    labels, layers = list(config["residual_labels"]), len(config["layers"])
    tight = dict(tensors)
    drop_unread_writes(tight, len(labels), layers)
    writes, reads = stage_map(tight, len(labels), layers)
    grouped = set() if config.get("vocabulary") is None else set(usage(tensors, config).group_of())
    return {i: min(writes[i]) for i in range(len(labels))
            if writes[i] and i not in grouped and [r for r in reads[i] if r > min(writes[i])] == [2 * layers + 1]}


def _fold_writes(tensors: dict[str, Tensor], layers: int, j: int, terms: tuple[tuple[int, float], ...]) -> None:
    """In place: every writer's column of j added onto each i's times a_i; j's columns and its
    row of W_U 0."""
    for _, _, writers in stage_tensors(layers):
        for name in writers:
            t = tensors[name].clone()
            column = t[..., j].clone()
            for i, a in terms:
                t[..., i] += a * column
            t[..., j] = 0.0
            tensors[name] = t
    w_u = tensors["unembed.W_U"].clone()
    w_u[j] = 0.0
    tensors["unembed.W_U"] = w_u


def _summed(sums: Sums, j: int, terms: tuple[tuple[int, float], ...]) -> Sums:
    """The sums after j's coordinate (holding its own sum) is added onto each i's times a_i."""
    moved = sums.get(j, ((j, 1.0),))
    out = {k: v for k, v in sums.items() if k != j}
    for i, a in terms:
        out[i] = scaled_sum((1.0, out.get(i, ((i, 1.0),))), (a, moved))
    return out


def unembedded(tensors: dict[str, Tensor], config: dict[str, Any]) -> tuple[dict[str, Tensor], Sums]:
    """(the tensors with every direction the unembedding alone reads folded where W_U's rows
    allow, {i: the sum coordinate i holds}) as the module docstring says; the latest-written
    direction first (ties: the higher index); ``tensors`` unchanged."""
    layers = len(config["layers"])
    first = read_by_unembedding_alone(tensors, config)
    w_u = tensors["unembed.W_U"].to(torch.float64)
    rows = w_u.reshape(w_u.shape[0], -1).T  # (K, D): every direction's row of W_U as a column
    out, folded = dict(tensors), set[int]()
    sums: Sums = {}
    for j in sorted(first, key=lambda i: (-first[i], -i)):
        supporters = sorted(i for i in first if i != j and i not in folded and first[i] <= first[j])
        terms = combination(rows, j, basis(rows, supporters))
        if terms is None:
            continue
        _fold_writes(out, layers, j, terms)
        sums = _summed(sums, j, terms)
        folded.add(j)
    return out, sums


__all__ = ["Sums", "read_by_unembedding_alone", "unembedded"]
