"""compiler/tokens/rewrites.py: each rewrite is the reference evaluator's identity (the rewritten
target against the original on random inputs of every length), and the lowering of what it
writes is exact on every short input; what no rewrite reaches is refused with the reason."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from token_circuits import assert_exact_on_short_inputs

import infoflow_dsl as ifl
from infoflow_dsl.compiler.tokens.rewrites import nested, top_as_counts
from infoflow_dsl.errors import CompileError
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.value_sets import finite_domain, value_set
from infoflow_dsl.oracle.tokens import random_ids

torch.set_num_threads(1)

NUMBERS = "input x : token {1, 2, 3, 4}\nlength T = 5\n"

TOP = [
    "target(t : t >= 2) = top(2)_<s : s <= t> x(s)",
    "target(t : t >= 3) = top(3)_<s : s <= t> 2 * x(s) - [x(s) == 1]",
    "target(t : len >= 3) = top(2)_<s : s != t> x(s)",
    "target(t : t >= 3) = top(2)_<s, r : s < r and r <= t> x(s) + x(r)",  # counts over pairs, nested
]
NESTED = [
    "target sum_<s, r : s <= r> [x(s) == x(r)]",  # the inner range r >= s: never empty
    "target(t : t >= 2) = sum_<s, r : s < r and r <= t> [x(s) > x(r)] + 1",  # r > s is empty at s = len
    "target(t) = max_<s, r : s <= r and r <= t> x(r) - x(s)",
    "target mean_<s, r : s <= 2> x(s) * x(r)",
    "target(t : t >= 2) = min_<s, r : s < r and r <= t> |x(s) - x(r)|",  # r outermost, narrowed to r >= 2
]


def _rewritten(source: str) -> tuple[ifl.Program, ifl.Program]:
    """(the program, the program whose target's outermost construct is rewritten)."""
    program = ifl.parse_program(NUMBERS + source + "\n", "rewrite.iflow")
    target = program.target
    if isinstance(target, ir.Reduce) and target.kind == "top":
        domain = finite_domain(program)
        assert domain is not None
        new: ir.Expr = top_as_counts(target, value_set(target.body, domain))
    else:
        assert isinstance(target, ir.Reduce)
        new = nested(target, program.length, "t" if program.per_token else None, program.token_conditions)
    return program, dataclasses.replace(program, target=new)


@settings(max_examples=20, deadline=None)
@given(source=st.sampled_from(TOP + NESTED), length=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_a_rewrite_has_the_original_meaning_on_random_inputs(source: str, length: int, seed: int) -> None:
    program, rewritten = _rewritten(source)
    ids = random_ids(program, 64, seed=seed, length=length)
    want, got = ifl.evaluate(program, ids), ifl.evaluate(rewritten, ids)
    assert torch.equal(want.isnan(), got.isnan())
    # equal up to the float64 rounding of a different order of sums (a mean of means)
    assert torch.allclose(torch.nan_to_num(want), torch.nan_to_num(got), rtol=0.0, atol=1e-12), source


@pytest.mark.parametrize("target", TOP + NESTED)
def test_what_a_rewrite_writes_lowers_exactly_on_every_short_input(target: str) -> None:
    assert_exact_on_short_inputs(NUMBERS + target + "\n")


def test_top_k_is_one_count_per_step_between_values() -> None:
    """top(2) over the values {1, 2, 3, 4}: three counts [x(s) ≥ v] for v = 4, 3, 2."""
    _, rewritten = _rewritten(TOP[0])
    counts = [n for n in ir.sub_nodes(rewritten.target) if isinstance(n, ir.Reduce)]
    assert {n.kind for n in counts} == {"sum"}
    steps = [n.right for count in counts for n in ir.sub_nodes(count.body) if isinstance(n, ir.Compare)]
    assert sorted(n.value for n in steps if isinstance(n, ir.NumberLiteral)) == [2.0, 3.0, 4.0]


def test_an_inner_sum_that_can_be_empty_takes_its_conditions_as_brackets() -> None:
    """s < r ≤ t: r outermost (s, then r, would compare r with s and t at once), the inner range
    of s is empty at r = 1: it keeps s ≤ len only, and its body is multiplied by [s < r]."""
    _, rewritten = _rewritten(NESTED[1])
    inner = next(n for n in ir.sub_nodes(rewritten.target) if isinstance(n, ir.Reduce))
    assert all(c.right == ir.RunLength() for c in inner.conditions)
    assert any(isinstance(n, ir.Compare) and n.operator == "<" for n in ir.sub_nodes(inner.body))


def test_an_outer_range_is_narrowed_where_the_inner_min_would_be_empty() -> None:
    """min over s < r ≤ t: r outermost (s first would compare r with s and t), s < r empty at r = 1:
    the outer range takes r ≥ 2, which no pair breaks."""
    _, rewritten = _rewritten(NESTED[-1])
    outer = rewritten.target
    assert isinstance(outer, ir.Reduce) and outer.variables == ("r",)
    assert ir.PositionCondition(ir.PositionVariable("r"), ">=", ir.FixedPosition(2)) in outer.conditions


@pytest.mark.parametrize("target, why", [
    ("target mean_<s, r : s <= r> x(s) * x(r)", "a mean over positions its conditions link"),
    ("target(t : t >= 5) = max_<s, r : r >= s + 4 and r <= t> x(r) - x(s)", "every nesting of this max"),
])
def test_what_no_rewrite_reaches_is_refused_with_the_reason(target: str, why: str) -> None:
    program = ifl.parse_program(NUMBERS + target + "\n", "bad.iflow")
    with pytest.raises(CompileError, match=why):
        ifl.compile(program, samples=0)
