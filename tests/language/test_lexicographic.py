"""A key with a small tie-break term compares as the order of pairs (language/lexicographic.py).

The reference here is independent of the evaluator: each key is computed in Python's exact
Fractions from the decimals written, and the count [key(s) < key(t)] taken by loops."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import torch

import infoflow_dsl as ifl
from infoflow_dsl.language import typed as ir

SOURCE = """input x : token {{0, 1, 2, 3}}
length T = {length}
let key(t) = (x(t) + {c} * (t - 1))
target(t) = sum_<s> [key(s) {op} key(t)]
"""
OPERATORS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
             "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def by_fractions(ids: tuple[int, ...], c: str, op: str) -> list[int]:
    keys = [Fraction(x) + Fraction(c) * p for p, x in enumerate(ids)]
    return [sum(1 for a in keys if OPERATORS[op](a, b)) for b in keys]


def _nodes(expr: object) -> list[object]:
    return [expr, *ir.sub_nodes(expr)]


@pytest.mark.parametrize("c", ["0.3", "0.01", "1e-14"])
def test_a_tie_break_below_the_gap_is_the_order_of_pairs(c: str) -> None:
    program = ifl.parse_program(SOURCE.format(length=4, c=c, op="<"))
    compares = [n for n in _nodes(program.target) if isinstance(n, ir.Compare)]
    # x(s) < x(t) or (x(s) == x(t) and s < t): the positions compared as positions (a mask)
    assert any(isinstance(n.left, ir.PositionNumber) and isinstance(n.right, ir.PositionNumber) for n in compares)
    assert not any(isinstance(n, ir.NumberLiteral) and n.exact == Fraction(c) for n in _nodes(program.target))


def test_a_tie_break_above_the_gap_is_left_as_written() -> None:
    program = ifl.parse_program(SOURCE.format(length=12, c="0.3", op="<"))
    assert any(isinstance(n, ir.NumberLiteral) and n.exact == Fraction(3, 10) for n in _nodes(program.target))


@pytest.mark.parametrize(("c", "op", "length"), [("0.3", "<", 4), ("0.3", "<=", 12), ("0.01", ">", 5),
                                                 ("1e-14", "==", 5), ("1e-14", "!=", 3), ("0.1", "<", 12)])
def test_the_reference_is_the_exact_count(c: str, op: str, length: int) -> None:
    program = ifl.parse_program(SOURCE.format(length=length, c=c, op=op))
    for size in range(1, min(length, 4) + 1):
        ids = torch.tensor(list(itertools.product(range(4), repeat=size)))
        got = ifl.evaluate(program, ids)
        expected = torch.tensor([by_fractions(tuple(row), c, op) for row in ids.tolist()], dtype=torch.float64)
        assert torch.equal(got, expected)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 4, (300, length), generator=generator)
    expected = torch.tensor([by_fractions(tuple(row), c, op) for row in ids.tolist()], dtype=torch.float64)
    assert torch.equal(ifl.evaluate(program, ids), expected)
