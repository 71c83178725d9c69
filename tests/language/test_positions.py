"""``positions.smallest_range`` against brute-force counting of position tuples.

A reduction over binders B with conditions C ranges, for given values of the outer variables
(those C mentions that are not in B), over the tuples of B in {1..T}^|B| satisfying C. The
brute force counts those tuples for every value of the outer variables, each over all of 1..T:
with plain loops for small T, and by a full-grid count (numpy, every tuple) for T large enough
that ``smallest_range`` decides emptiness on its compressed domain.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infoflow_dsl.language import positions
from infoflow_dsl.language.typed import FixedPosition, LastPosition, PositionCondition, PositionVariable

OPERATORS = ("!=", "<", "<=", ">", ">=", "==")


def v(name: str) -> PositionVariable:
    return PositionVariable(name)


def cond(left: object, operator: str, right: object) -> PositionCondition:
    def term(value: object) -> object:
        if isinstance(value, int):
            return FixedPosition(value)
        if value == "T":
            return LastPosition()
        return v(value) if isinstance(value, str) else value

    return PositionCondition(term(left), operator, term(right))  # type: ignore[arg-type]


def holds(left: int, operator: str, right: int) -> bool:
    return {
        "!=": left != right, "<": left < right, "<=": left <= right,
        ">": left > right, ">=": left >= right, "==": left == right,
    }[operator]


def value_of(term: object, env: dict[str, int], length: int) -> int:
    if isinstance(term, PositionVariable):
        return env[term.name]
    if isinstance(term, LastPosition):
        return length
    assert isinstance(term, FixedPosition)
    return term.index


def mentioned(conditions: list[PositionCondition]) -> list[str]:
    names: list[str] = []
    for c in conditions:
        for term in (c.left, c.right):
            if isinstance(term, PositionVariable) and term.name not in names:
                names.append(term.name)
    return names


def count_at(binders: tuple[str, ...], conditions: list[PositionCondition], length: int, outer: dict[str, int]) -> int:
    """How many tuples of ``binders`` in {1..T} satisfy ``conditions`` given the outer values (loops)."""
    total = 0
    for values in itertools.product(range(1, length + 1), repeat=len(binders)):
        env = {**outer, **dict(zip(binders, values, strict=True))}
        if all(holds(value_of(c.left, env, length), c.operator, value_of(c.right, env, length)) for c in conditions):
            total += 1
    return total


def brute_smallest(binders: tuple[str, ...], conditions: list[PositionCondition], length: int) -> int:
    """The smallest range over every value of the outer variables (plain loops)."""
    outer = [name for name in mentioned(conditions) if name not in binders]
    return min(
        count_at(binders, conditions, length, dict(zip(outer, values, strict=True)))
        for values in itertools.product(range(1, length + 1), repeat=len(outer))
    )


def grid_counts(
    binders: tuple[str, ...], conditions: list[PositionCondition], length: int,
) -> tuple[list[str], np.ndarray]:
    """Every tuple counted on the full grid {1..T}^n: counts per value of the outer variables."""
    outer = [name for name in mentioned(conditions) if name not in binders]
    inner = [name for name in mentioned(conditions) if name in binders]
    axes = outer + inner
    grid = np.ones([length] * len(axes), dtype=bool)
    for c in conditions:
        sides = []
        for term in (c.left, c.right):
            if isinstance(term, PositionVariable):
                shape = [1] * len(axes)
                shape[axes.index(term.name)] = length
                sides.append(np.arange(1, length + 1, dtype=np.int32).reshape(shape))
            else:
                sides.append(np.int32(value_of(term, {}, length)))
        grid &= {
            "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        }[c.operator](*sides)
    counts = grid.reshape([length] * len(outer) + [-1]).sum(axis=-1, dtype=np.int64)
    free = len(binders) - len(inner)  # binders no condition mentions: all T values each
    return outer, counts * length**free


# ----------------------------------------------------------------------------- small T: exact counts


@st.composite
def range_cases(
    draw: st.DrawFn, names: tuple[str, ...], literals: st.SearchStrategy[int], every_name: bool = False,
) -> tuple:
    """(binders, conditions); with ``every_name`` the conditions mention every name (all are involved)."""
    binders = tuple(draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True)))
    term = st.one_of(st.sampled_from(names), literals, st.just("T"))
    conditions = [
        (name, draw(st.sampled_from(OPERATORS)), draw(term)) for name in (names if every_name else ())
    ]
    conditions += draw(st.lists(st.tuples(term, st.sampled_from(OPERATORS), term), max_size=3))
    return binders, [cond(*c) for c in conditions]


@settings(max_examples=300, deadline=None)
@given(case=range_cases(("a", "b", "c"), st.integers(1, 7)), length=st.integers(1, 6))
def test_smallest_range_counts_exactly_for_small_t(case: tuple, length: int) -> None:
    binders, conditions = case
    result = positions.smallest_range(binders, conditions, length)
    assert result.exact
    assert result.smallest == brute_smallest(binders, conditions, length)
    outer = [name for name in mentioned(conditions) if name not in binders]
    assert set(result.witness) == set(outer)
    assert all(1 <= value <= length for value in result.witness.values())
    assert count_at(binders, conditions, length, result.witness) == result.smallest, "the witness reaches it"


@pytest.mark.parametrize(
    ("binders", "conditions", "length", "smallest", "witness"),
    [
        (("s", "t"), [], 4, 16, {}),
        (("s", "t"), [cond("s", "!=", "t")], 1, 0, {}),
        (("s", "t"), [cond("s", "!=", "t")], 2, 2, {}),
        (("s", "t"), [cond("s", "<", "t")], 5, 10, {}),
        (("t",), [cond("t", "<", "s")], 5, 0, {"s": 1}),
        (("t",), [cond("t", ">=", "s")], 5, 1, {"s": 5}),
        (("t",), [cond("t", ">", 1), cond("t", "<", "T")], 2, 0, {}),
        (("t",), [cond("t", ">", 1), cond("t", "<", "T")], 3, 1, {}),
        (("t",), [cond("t", ">", 3), cond("t", "<", 5)], 3, 0, {}),
        (("t",), [cond("t", "==", 9)], 5, 0, {}),
        # conditions without a variable of the reduction: all tuples or none
        (("t",), [cond(1, "!=", 1)], 3, 0, {}),
        (("t",), [cond("T", ">", 3)], 3, 0, {}),
        (("t", "u"), [cond("T", ">", 3)], 4, 16, {}),
        (("t",), [cond("s", "<", 3)], 4, 0, {"s": 3}),
    ],
)
def test_smallest_range_examples(binders, conditions, length, smallest, witness) -> None:
    result = positions.smallest_range(binders, conditions, length)
    assert (result.smallest, result.witness, result.exact) == (smallest, witness, True)
    assert brute_smallest(binders, conditions, length) == smallest


# ----------------------------------------------------------------------------- large T: the compressed domain

LARGE_T = 3000


def check_large(binders: tuple[str, ...], conditions: list[PositionCondition], length: int) -> None:
    result = positions.smallest_range(binders, conditions, length)
    outer, counts = grid_counts(binders, conditions, length)
    true_smallest = int(counts.min())
    assert (result.smallest == 0) == (true_smallest == 0), (result, true_smallest)
    if result.exact:
        assert result.smallest == true_smallest
    if result.smallest == 0:  # the witness really leaves the range empty, counted on all of 1..T
        assert set(result.witness) == set(outer)
        assert counts[tuple(result.witness[name] - 1 for name in outer)] == 0


def test_large_t_uses_the_compressed_domain() -> None:
    assert LARGE_T**2 > positions.FULL_GRID_LIMIT
    result = positions.smallest_range(("s", "t"), [cond("s", "<", "t")], LARGE_T)
    assert not result.exact and result.smallest > 0
    assert len(positions.compressed_positions([cond("s", "<", "t")], LARGE_T, 2)) < 20


@pytest.mark.parametrize(
    ("binders", "conditions"),
    [
        (("s", "t"), [cond("s", "<", "t")]),
        (("s", "t"), [cond("s", "!=", "t"), cond("t", "<", 2)]),
        (("t",), [cond("t", ">", "s")]),  # empty at s = T
        (("t",), [cond("t", ">=", "s")]),
        (("t",), [cond("t", ">", 1500), cond("t", "<", 1501)]),  # between two literals: empty
        (("t",), [cond("t", ">", 1500), cond("t", "<", 1502)]),  # one position
        (("t",), [cond("t", ">", "s"), cond("t", "<", 1500)]),  # empty for s >= 1499
        (("t",), [cond("t", "<", "s"), cond("t", ">", 2990)]),
        (("t",), [cond("t", "!=", "s"), cond("t", "==", 1500)]),  # empty at s = 1500
        (("t",), [cond("t", "!=", "T"), cond("t", ">=", "T")]),
        (("s", "t"), [cond("s", ">", "T")]),
    ],
)
def test_compressed_domain_examples(binders, conditions) -> None:
    check_large(binders, conditions, LARGE_T)


@settings(max_examples=40, deadline=None)
@given(case=range_cases(("a", "b"), st.sampled_from([1, 2, 3, 1499, 1500, 1501, LARGE_T - 1, LARGE_T, LARGE_T + 1]),
                       every_name=True))
def test_compressed_domain_decides_emptiness_with_two_variables(case: tuple) -> None:
    binders, conditions = case
    check_large(binders, conditions, LARGE_T)


@settings(max_examples=15, deadline=None)
@given(case=range_cases(("a", "b", "c"), st.sampled_from([1, 2, 50, 51, 100, 199, 200]), every_name=True))
def test_compressed_domain_decides_emptiness_with_three_variables(case: tuple) -> None:
    length = 200
    assert length**3 > positions.FULL_GRID_LIMIT
    binders, conditions = case
    check_large(binders, conditions, length)
