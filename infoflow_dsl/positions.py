"""Position ranges: which tuples of positions a reduction compares, and how many.

A reduction ``min_<v1..vk : conditions>`` ranges over the tuples in {1..T}^k that satisfy
its conditions, given the values of the enclosing variables the conditions mention.
Conditions are comparisons between variables, literals and T, so whether a range is empty
depends only on the *order type* of the variables relative to the literals: on a compressed
domain that keeps, around each landmark (1, T, every literal), n positions on either side
(n = the number of variables involved), every order type that {1..T} has is present. This
makes emptiness decidable exactly for any T in a few thousand evaluations. Exact counts use
the full domain {1..T}.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .typed import FixedPosition, LastPosition, PositionCondition, PositionTerm, PositionVariable

COMPARE = {
    "!=": operator.ne, "==": operator.eq, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}

#: Above this many grid points, emptiness is decided on the compressed domain.
FULL_GRID_LIMIT = 4_000_000


def variables_of(conditions: Sequence[PositionCondition]) -> list[str]:
    """The variables the conditions mention, in order of first appearance."""
    names: list[str] = []
    for condition in conditions:
        for term in (condition.left, condition.right):
            if isinstance(term, PositionVariable) and term.name not in names:
                names.append(term.name)
    return names


def _term_value(term: PositionTerm, axes: dict[str, np.ndarray], length: int) -> np.ndarray | int:
    if isinstance(term, PositionVariable):
        return axes[term.name]
    if isinstance(term, LastPosition):
        return length
    assert isinstance(term, FixedPosition)
    return term.index


def condition_mask(
    variables: Sequence[str], conditions: Sequence[PositionCondition], values: np.ndarray, length: int,
) -> np.ndarray:
    """Boolean array over ``len(variables)`` axes (each of ``values``): which tuples satisfy all."""
    n = len(variables)
    axes = {name: values.reshape([-1 if i == k else 1 for i in range(n)]) for k, name in enumerate(variables)}
    mask = np.ones([len(values)] * n, dtype=bool)
    for condition in conditions:
        left = _term_value(condition.left, axes, length)
        right = _term_value(condition.right, axes, length)
        mask &= COMPARE[condition.operator](left, right)
    return mask


def compressed_positions(conditions: Sequence[PositionCondition], length: int, variables: int) -> np.ndarray:
    """Positions that realise every order type of ``variables`` variables w.r.t. the landmarks."""
    landmarks = {1, length}
    for condition in conditions:
        for term in (condition.left, condition.right):
            if isinstance(term, FixedPosition):
                landmarks.add(term.index)
    keep = {p + k for p in landmarks for k in range(-variables, variables + 1)}
    return np.array(sorted(p for p in keep if 1 <= p <= length), dtype=np.int64)


@dataclass(frozen=True)
class RangeSize:
    """The smallest number of tuples the range has over all values of the outer variables.

    ``witness`` gives outer values that reach it (empty when no outer variable matters);
    ``exact`` is False when the count was taken on the compressed domain (then only
    ``smallest == 0`` is meaningful).
    """

    smallest: int
    witness: dict[str, int]
    exact: bool


def smallest_range(
    binders: Sequence[str], conditions: Sequence[PositionCondition], length: int,
) -> RangeSize:
    """How small the range of a reduction over ``binders`` can get, over all outer values."""
    involved = variables_of(conditions)
    outer = [v for v in involved if v not in binders]
    inner = [v for v in involved if v in binders]
    free_binders = len(binders) - len(inner)  # binders no condition mentions range over all of 1..T
    variables = outer + inner
    exact = length ** len(variables) <= FULL_GRID_LIMIT
    values = np.arange(1, length + 1) if exact else compressed_positions(conditions, length, len(variables))
    mask = condition_mask(variables, conditions, values, length)
    counts = mask.reshape((*mask.shape[:len(outer)], -1)).sum(axis=-1) if variables else np.array(1)
    flat = int(np.argmin(counts))
    smallest = int(np.min(counts)) * length**free_binders
    index = np.unravel_index(flat, counts.shape) if outer else ()
    witness = {name: int(values[i]) for name, i in zip(outer, index, strict=False)}
    return RangeSize(smallest, witness, exact or smallest == 0)
