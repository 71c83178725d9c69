"""Directions of a plain model that always hold the same value share one coordinate (exact).

Two residual directions i < j whose writers are identical (every writer tensor, at every stage,
has the same column for both: ``embed.W_E``, ``pos_embed.W_pos``, each head's ``W_O``, each
FFN's ``W_out`` and ``b_out``) receive the same additions at every stage, so h_i = h_j at every
row after every stage: one value held twice (a lowering that names the token's indicator
twice, e.g. ``x=1`` and ``tok:[x(t) == 1]``, as the token lowering did in Tracr's sort before
it kept one column per value; its plain models now have none, and this folds what others
build). :func:`merged` keeps i: every
reader's row of j is added to i's (a reader forms r_i·h_i + r_j·h_j = (r_i + r_j)·h_i) and j's
writer columns are set to 0, so j is never written and :mod:`~infoflow_dsl.compiler.compress`
gives it no dimension. The model computes the same function, exactly in real arithmetic; the
feature dictionary lists j on i's direction.
"""

from __future__ import annotations

import torch

from ...transformer.card import ModelCard
from ..compress import stage_tensors

Tensor = torch.Tensor


def duplicates(tensors: dict[str, Tensor], size: int, layers: int) -> dict[int, int]:
    """{j: i}: every written direction j whose writer columns equal those of an earlier i."""
    writers = [name for _, _, names in stage_tensors(layers) for name in names]
    first: dict[bytes, int] = {}
    found: dict[int, int] = {}
    for i in range(size):
        columns = [tensors[name][..., i].contiguous() for name in writers]
        if not any(bool(c.ne(0).any()) for c in columns):
            continue
        key = b"".join(c.to(torch.float64).numpy().tobytes() for c in columns)
        if key in first:
            found[i] = first[key]
        else:
            first[key] = i
    return found


def fold_onto(tensors: dict[str, Tensor], layers: int, j: int, terms: tuple[tuple[int, float], ...]) -> None:
    """In place: every reader's row of j added onto each i's times a_i (a reader forms
    r_j·h_j = Σ_i (a_i·r_j)·h_i where h_j = Σ_i a_i·h_i), j's reader rows and writer columns 0."""
    for _, readers, writers in stage_tensors(layers):
        for name in readers:
            t = tensors[name].clone()
            row = t[..., j, :].clone()
            for i, a in terms:
                t[..., i, :] += a * row
            t[..., j, :] = 0.0
            tensors[name] = t
        for name in writers:
            t = tensors[name].clone()
            t[..., j] = 0.0
            tensors[name] = t


def merged(tensors: dict[str, Tensor], config: ModelCard) -> tuple[dict[str, Tensor], dict[int, int]]:
    """(the tensors with every duplicate j folded into its i, {j: i}); ``tensors`` unchanged."""
    layers = len(config.layers)
    aliases = duplicates(tensors, len(config.labels), layers)
    out = dict(tensors)
    for j, i in aliases.items():
        fold_onto(out, layers, j, ((i, 1.0),))
    return out, aliases


__all__ = ["duplicates", "fold_onto", "merged"]
