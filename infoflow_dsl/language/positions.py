"""Position ranges: which tuples of positions a reduction compares, and how many.

A reduction ``min_<v1..vk : conditions>`` ranges over the tuples in {1..T}^k that satisfy
its conditions, given the values of the enclosing variables the conditions mention.
Conditions are comparisons between variables, literals and T, so whether a range is empty
depends only on the *order type* of the variables relative to the literals: on a compressed
domain that keeps, around each landmark (1, T, every literal), n positions on either side
(n = the number of variables involved), every order type that {1..T} has is present. This
makes emptiness decidable exactly for any T in a few thousand evaluations. Exact counts use
the full domain {1..T}.

In a program over a token vocabulary the run-time length ``len`` (1..T) is one more variable
of the grid, named :data:`LENGTH_AXIS`, and every bound position variable v satisfies v ≤ len
(:func:`within_length`): a position read there must lie in 1..len for every len.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .typed import (
    FixedPosition,
    LastPosition,
    PositionCondition,
    PositionTerm,
    PositionVariable,
    ReflectedPosition,
    RunLength,
)

COMPARE = {
    "!=": operator.ne, "==": operator.eq, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}

#: Above this many grid points, emptiness is decided on the compressed domain.
FULL_GRID_LIMIT = 4_000_000


class TooManyLinkedPositions(Exception):
    """The conditions link so many position variables that no grid small enough can decide them."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


#: The grid axis of the run-time length ``len`` (a reserved name: no binder can take it).
LENGTH_AXIS = "len"


def within_length(names: Sequence[str]) -> tuple[PositionCondition, ...]:
    """v ≤ len for each variable: in a token program no position past the input's length exists."""
    return tuple(PositionCondition(PositionVariable(name), "<=", RunLength()) for name in names)


def _term_variables(term: object) -> list[str]:
    if isinstance(term, PositionVariable):
        return [term.name]
    if isinstance(term, RunLength):
        return [LENGTH_AXIS]
    if isinstance(term, ReflectedPosition):
        return ([LENGTH_AXIS] if term.from_length else []) + _term_variables(term.mirrored)
    return []


def variables_of(conditions: Sequence[PositionCondition]) -> list[str]:
    """The variables the conditions mention (``len`` as :data:`LENGTH_AXIS`), in order of first appearance."""
    names: list[str] = []
    for condition in conditions:
        for term in (condition.left, condition.right):
            names.extend(name for name in _term_variables(term) if name not in names)
    return names


def _term_value(term: object, axes: dict[str, np.ndarray], length: int) -> np.ndarray | int:
    if isinstance(term, PositionVariable):
        return axes[term.name] + term.offset
    if isinstance(term, LastPosition):
        return length + term.offset
    if isinstance(term, RunLength):  # without a len axis the input has its full length
        return axes.get(LENGTH_AXIS, length) + term.offset
    if isinstance(term, ReflectedPosition):
        base = axes.get(LENGTH_AXIS, length) if term.from_length else 0
        return base + term.offset - _term_value(term.mirrored, axes, length)
    assert isinstance(term, FixedPosition)
    return term.index


def position_value(term: PositionTerm, values: dict[str, int], length: int) -> int:
    """The value of a position term where the variables (and ``len``) take ``values``."""
    return int(_term_value(term, {name: np.int64(v) for name, v in values.items()}, length))


def largest_offset(conditions: Sequence[PositionCondition]) -> int:
    """The largest |offset| any term of the conditions carries (0 without offsets)."""
    return max((abs(getattr(t, "offset", 0)) for c in conditions for t in (c.left, c.right)), default=0)


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
    # with offsets up to k, order types need (k + 1) positions of room per variable around each landmark
    reach = variables * (largest_offset(conditions) + 1)
    keep = {p + k for p in landmarks for k in range(-reach, reach + 1)}
    return np.array(sorted(p for p in keep if 1 <= p <= length), dtype=np.int64)


#: The "smallest range" of a reduction that no enclosing value reaches (its enclosing range is empty).
VACUOUS = 1 << 62


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
    enclosing: Sequence[PositionCondition] = (),
) -> RangeSize:
    """How small the range of a reduction over ``binders`` can get, over all outer values
    that the ``enclosing`` conditions (of the reductions around it, or of a per-token target)
    allow."""
    every = (*enclosing, *conditions)
    involved = variables_of(every)
    outer = [v for v in involved if v not in binders]
    inner = [v for v in involved if v in binders]
    free_binders = len(binders) - len(inner)  # binders no condition mentions range over all of 1..T
    variables = outer + inner
    exact = length ** len(variables) <= FULL_GRID_LIMIT
    values = np.arange(1, length + 1) if exact else compressed_positions(every, length, len(variables))
    if len(values) ** len(variables) > FULL_GRID_LIMIT:
        raise TooManyLinkedPositions(len(variables))
    mask = condition_mask(variables, every, values, length)
    counts = mask.reshape((*mask.shape[:len(outer)], -1)).sum(axis=-1)  # 0-d when no variable: 1 or 0
    enclosing_mask = condition_mask(variables, enclosing, values, length)
    allowed = enclosing_mask.reshape((*enclosing_mask.shape[:len(outer)], -1)).any(axis=-1)  # outer values allowed
    if not allowed.any():  # the enclosing range is itself empty (reported there): nothing to check here
        return RangeSize(VACUOUS, {}, exact)
    counts = np.where(allowed, counts, np.iinfo(np.int64).max)
    flat = int(np.argmin(counts))
    smallest = int(np.min(counts)) * length**free_binders
    index = np.unravel_index(flat, counts.shape) if outer else ()
    witness = {name: int(values[i]) for name, i in zip(outer, index, strict=False)}
    return RangeSize(smallest, witness, exact or smallest == 0)


def satisfiable(
    scope: Sequence[str], conditions: Sequence[PositionCondition], length: int,
) -> dict[str, int] | None:
    """Values of the scope's variables (each in 1..T) that satisfy every condition, or None.
    Exact on {1..T} when the grid is small, else on the compressed domain widened by the
    offsets (every order type of the variables against the landmarks is present there)."""
    involved = [v for v in scope if v in variables_of(conditions)]
    exact = length ** len(involved) <= FULL_GRID_LIMIT
    values = np.arange(1, length + 1) if exact else compressed_positions(conditions, length, len(involved) + 1)
    if len(values) ** len(involved) > FULL_GRID_LIMIT:
        raise TooManyLinkedPositions(len(involved))
    mask = condition_mask(involved, conditions, values, length)
    if not mask.any():
        return None
    index = np.unravel_index(int(np.argmax(mask)), mask.shape)
    return {name: int(values[i]) for name, i in zip(involved, index, strict=True)}


def offset_violation(
    scope: Sequence[str], conditions: Sequence[PositionCondition], position: PositionTerm, length: int,
    last: PositionTerm | None = None,
) -> dict[str, int] | None:
    """Values of the scope's variables, allowed by ``conditions``, at which ``position`` (a
    variable plus an offset, or any position term) leaves 1..``last`` (T, or ``len`` in a token
    program); None when there are none."""
    last = LastPosition() if last is None else last
    below, above = PositionCondition(position, "<", FixedPosition(1)), PositionCondition(position, ">", last)
    for outside in (below, above):
        witness = satisfiable(list(dict.fromkeys([*scope, *_term_variables(position)])), (*conditions, outside), length)
        if witness is not None:
            return witness
    return None


def after_query_possible(
    scope: Sequence[str], conditions: Sequence[PositionCondition], position: PositionTerm, query: str, length: int,
) -> bool:
    """Whether ``position`` can exceed the query position ``query`` under ``conditions``
    (a per-token target reading it is then not causal)."""
    later = PositionCondition(position, ">", PositionVariable(query))
    return satisfiable([*scope, query], (*conditions, later), length) is not None


def count_tuples(variables: Sequence[str], conditions: Sequence[PositionCondition], length: int) -> int:
    """How many tuples of ``variables`` in {1..T}^n satisfy every condition (exact).

    Variables no condition mentions contribute a factor T each; the others are counted on the
    grid {1..T}^k (at most 16 million points: checked programs stay far below).
    """
    linked = [v for v in variables if v in variables_of(conditions)]
    free = len(variables) - len(linked)
    if not linked:
        return length**free * (1 if condition_mask([], conditions, np.arange(1, 2), length) else 0)
    if length ** len(linked) > FULL_GRID_LIMIT * 4:
        raise TooManyLinkedPositions(len(linked))
    values = np.arange(1, length + 1)
    return int(condition_mask(linked, conditions, values, length).sum()) * length**free


def count_polynomial(variables: Sequence[str], conditions: Sequence[PositionCondition]) -> tuple[Fraction, ...]:
    """Coefficients (constant term first) of the polynomial in T that counts the tuples.

    The count is a polynomial of degree ≤ n in T once T exceeds every literal position by n;
    it is interpolated exactly (Lagrange, in rationals) from n + 1 such values of T and
    confirmed at one more.
    """
    n = len(variables)
    literals = [t.index for c in conditions for t in (c.left, c.right) if isinstance(t, FixedPosition)]
    base = max(literals, default=0) + n * (largest_offset(conditions) + 1) + 1
    points = [(base + i, count_tuples(variables, conditions, base + i)) for i in range(n + 2)]
    coefficients = _interpolate(points[: n + 1])
    check_t, check_value = points[-1]
    if sum(c * check_t**k for k, c in enumerate(coefficients)) != check_value:
        raise ArithmeticError("the tuple count is not a polynomial in T")  # pragma: no cover - a bug
    return coefficients


def _interpolate(points: list[tuple[int, int]]) -> tuple[Fraction, ...]:
    """The coefficients of the polynomial through ``points`` (Lagrange, exact)."""
    size = len(points)
    result = [Fraction(0)] * size
    for i, (xi, yi) in enumerate(points):
        basis = [Fraction(1)]
        denominator = Fraction(1)
        for j, (xj, _) in enumerate(points):
            if j == i:
                continue
            basis = [Fraction(0), *basis]  # multiply by T
            for k in range(len(basis) - 1):
                basis[k] -= xj * basis[k + 1]
            denominator *= xi - xj
        for k in range(size):
            result[k] += yi * basis[k] / denominator
    while len(result) > 1 and result[-1] == 0:
        result.pop()
    return tuple(result)


def format_polynomial(coefficients: Sequence[Fraction]) -> str:
    """The polynomial in T with ``coefficients`` (constant term first), highest power first:
    ``T^2 + T``, ``T^2/2 - T/2``, ``0``."""
    parts: list[str] = []
    for power in range(len(coefficients) - 1, -1, -1):
        c = Fraction(coefficients[power])
        if c == 0:
            continue
        sign = "-" if c < 0 else "+"
        magnitude = abs(c)
        monomial = "" if power == 0 else ("T" if power == 1 else f"T^{power}")
        if power == 0:
            text = str(magnitude)
        elif magnitude.denominator == 1:
            text = monomial if magnitude == 1 else f"{magnitude.numerator}{monomial}"
        else:
            numerator = "" if magnitude.numerator == 1 else str(magnitude.numerator)
            text = f"{numerator}{monomial}/{magnitude.denominator}"
        parts.append(f"{sign} {text}")
    if not parts:
        return "0"
    first = parts[0][2:] if parts[0].startswith("+") else "-" + parts[0][2:]
    return " ".join([first, *parts[1:]])
