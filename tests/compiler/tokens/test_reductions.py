"""compiler/tokens/reductions.py on the circuit it builds alone: a mean, a sum (count × mean), a
min and a max, a sum split into key classes by a comparison of its two positions, and a range
condition on len taken as a bracket."""

from __future__ import annotations

import pytest
import torch
from token_circuits import assert_exact_on_short_inputs

import infoflow_dsl as ifl
from infoflow_dsl.compiler.tokens import reductions

torch.set_num_threads(1)

NUMBERS = "input x : token {1, 2, 3}\nlength T = 6\n"


@pytest.mark.parametrize("target", [
    "target(t) = mean_<s : s <= t> x(s)",
    "target(t) = sum_<s : s <= t> x(s)",
    "target sum_<s> x(s) * x(s)",
    "target(t) = min_<s : s >= t> x(s)",
    "target max_<s> x(s) - min_<s> x(s)",
    "target(t) = sum_<s> [x(s) < x(t) or (x(s) == x(t) and s < t)]",  # key classes s < t, s = t, s > t
    "target sum_<s : s >= len - 1> x(s)",  # a condition on len: a bracket of the body
])
def test_a_reduction_is_exact_on_every_short_input(target: str) -> None:
    assert_exact_on_short_inputs(NUMBERS + target + "\n")


def test_a_sum_is_a_count_times_a_mean() -> None:
    circuit = assert_exact_on_short_inputs(NUMBERS + "target sum_<s> x(s)\n")
    assert {h.kind for h in circuit.heads} == {"uniform", "length"}  # the mean, and len for the count


def test_a_min_over_tied_keys_multiplies_the_winners_mean_not_an_indicator() -> None:
    """min_<s> [x(t) == x(s)] + t: the keys whose token differs from x(t) all score 0 and share the
    head's weight, so the retrieved [x(s) = v] is a mean over them (2/3, 1/3), not 0 or 1: the
    product with the query's factor must be exact on those values (found by the fuzz test:
    t = 3 of (1, 2, 3, 1) gave 1.667, not 3)."""
    assert_exact_on_short_inputs(NUMBERS + "target(t) = min_<s> [x(t) == x(s)] + t\n")


def test_a_class_bounded_from_below_is_a_difference_of_widths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sort's count: the class s > t (its range may not hold key 1) is Σ_s b − Σ_{s ≤ t} b, two
    widths (steps on mean and 1/count): no len head, no count × mean, fewer nonzero weights."""
    source = NUMBERS + "target(t) = sum_<s> [x(s) < x(t) or (x(s) == x(t) and s < t)]\n"
    circuit = assert_exact_on_short_inputs(source)
    assert not [h for h in circuit.heads if h.kind == "length"]
    assert len([b for b in circuit.blocks if "by steps on (mean, 1/count)" in b.formula]) == 3
    program = ifl.parse_program(source, "sort.iflow")
    widths = ifl.compile(program, eps=1e-3, dtype=torch.float64, samples=0).nonzero_parameter_count()
    monkeypatch.setattr(reductions, "_upper_bounded", lambda lowering, part, mask: [(1.0, part)])
    product = ifl.compile(program, eps=1e-3, dtype=torch.float64, samples=0).nonzero_parameter_count()
    assert widths < product
