"""The reference decides comparisons on exact values where float64 does not (oracle/exact.py)."""

from __future__ import annotations

import pytest
import torch

import infoflow_dsl as ifl
from infoflow_dsl.errors import ProgramError
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.value_sets import finite_domain
from infoflow_dsl.oracle.exact import float64_error


def test_a_sum_that_float64_rounds_still_ties() -> None:
    # 0.1 + 0.2 is 0.30000000000000004 in float64; the program's numbers are 1/10 + 2/10 = 3/10
    program = ifl.parse_program("input x : token {1, 2}\nlength T = 2\ntarget(t) = [0.1 * x(t) + 0.2 == 0.3 * x(t)]\n")
    assert ifl.evaluate(program, torch.tensor([[0, 1]])).tolist() == [[1.0, 0.0]]  # x = 1: 3/10 = 3/10


def test_scores_tie_exactly_and_go_to_the_smallest_position() -> None:
    # 0.3·3 + 0.9·1 and 0.3·0 + 0.9·2 are both 9/5; float64 makes the first 1.7999999999999998,
    # the second 1.8, and would pick s = 2
    program = ifl.parse_program("input x : token {0, 3}\nlength T = 2\ntarget x(argmax_<s> (0.3 * x(s) + 0.9 * s))\n")
    assert ifl.evaluate(program, torch.tensor([[1, 0]])).tolist() == [1]  # the token of s = 1: id 1


def test_the_float64_error_bound_covers_a_computed_key() -> None:
    program = ifl.parse_program("input x : token {0, 1, 2, 3}\nlength T = 12\ntarget(t) = x(t) + 0.3 * (t - 1)\n")
    bound = float64_error(program.target, finite_domain(program))  # type: ignore[arg-type]
    assert bound is not None and 0 < bound < 1e-14
    ids = torch.tensor([[0, 1, 2, 3] * 3])
    computed = ifl.evaluate(program, ids)
    exact = [x + 0.3 * p for p, x in enumerate([0, 1, 2, 3] * 3)]
    assert torch.allclose(computed, torch.tensor([exact], dtype=torch.float64), rtol=0, atol=bound)


def test_values_float64_cannot_separate_are_refused_where_they_are_compared() -> None:
    source = "input x : token {0, 1}\nlength T = 2\ntarget(t) = [x(t) * 1e-17 + 1 > 1]\n"
    program = ifl.parse_program(source, "tiny.iflow")
    with pytest.raises(ProgramError, match=r"tiny.iflow:3:.*cannot decide this exactly"):
        ifl.evaluate(program, torch.tensor([[0, 1]]))


def test_a_program_over_vectors_compares_its_floats() -> None:
    program = ifl.parse_program("input x : R^1\nlength T = 2\nmargin 0.01\ntarget [x(1)[1] < x(2)[1]]\n")
    assert isinstance(program.target, ir.Bracket)
    assert ifl.evaluate(program, torch.tensor([[[0.1], [0.2]]], dtype=torch.float64)).tolist() == [1.0]
