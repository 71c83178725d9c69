"""Value ranges: sound on every program (the reference never leaves them), and the norms that can be 0."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from programs import ALL, by_name
from random_programs import random_programs

import infoflow_dsl as ifl
from infoflow_dsl.analysis.ranges import Interval, roots_at_zero, value_ranges
from infoflow_dsl.measure.vectors import model_inputs

SLACK = 1e-9  # float64 rounding of the reference against exact interval ends


def assert_within_ranges(target: ifl.Program, samples: int) -> None:
    values = ifl.evaluate(target, model_inputs(target, samples, seed=11, corners=64))
    ranges = value_ranges(target.target, target)
    values = values.reshape(-1, len(ranges))  # (N, components), or (N·T, components) per token
    values = values[~values.isnan().any(dim=-1)]  # a per-token target's undefined positions
    low = torch.tensor([r.low for r in ranges], dtype=torch.float64)
    high = torch.tensor([r.high for r in ranges], dtype=torch.float64)
    scale = 1.0 + torch.maximum(low.abs(), high.abs())
    assert bool((values >= low - SLACK * scale).all()) and bool((values <= high + SLACK * scale).all())


@pytest.mark.parametrize("example", ALL, ids=lambda e: e.name)
def test_the_target_never_leaves_its_range(example):
    assert_within_ranges(_program(example.name), 2_000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=random_programs())
def test_random_programs_never_leave_their_range(case):
    source, length = case
    try:
        target = ifl.parse_program(source, "random.iflow", length=max(length, 3))
    except ifl.ProgramError:
        return  # an empty range at this T
    assert_within_ranges(target, 200)


def test_interval_arithmetic():
    assert Interval(-1, 2) * Interval(-3, 1) == Interval(-6, 3)
    assert Interval(-1, 2).squared() == Interval(0, 4) and Interval(1, 2).squared() == Interval(1, 4)
    assert Interval(-2, -1).squared() == Interval(1, 4) and Interval(1, 3).scaled(-2) == Interval(-6, -2)


def _program(name: str) -> ifl.Program:
    example = by_name(name)
    return ifl.parse_program(example.source, example.path)


def _roots(body: str, domain: str = "in [-1, 1]") -> list[str]:
    source = f"input x : R^2 {domain}\nlength T = 4\nconst shift : R^2 = [3, 0]\ntarget {body}\n"
    target = ifl.parse_program(source, "roots.iflow")
    return [r.expression for r in roots_at_zero(target)]


@pytest.mark.parametrize(("body", "domain", "expected"), [
    ("max_<t> ||x(t)||", "in [-1, 1]", ["||x(t)||"]),
    ("max_<t> ||x(t)||", "in [1, 2]", []),
    ("max_<t> ||x(t)||", "in [-2, -1]", []),
    ("max_<t> ||x(t)||", "in ball(1)", ["||x(t)||"]),
    ("max_<t> ||x(t)||^2", "in [-1, 1]", []),  # no square root
    ("||x(1) - x(2)||", "in [1, 2]", ["||x(1) - x(2)||"]),  # a difference of two tokens can vanish
    ("||x(1) + x(2)||", "in [1, 2]", []),
    ("min_<s, t : s != t> ||x(s) - x(t)||", "in [-1, 1]", ["||x(s) - x(t)||"]),
    ("max_<t> ||x(t) + shift||", "in [-1, 1]", []),  # the first component stays in [2, 4]
])
def test_norms_that_can_be_zero(body, domain, expected):
    assert _roots(body, domain) == expected


def test_analyze_reports_eps_to_the_minus_one_for_a_norm_reaching_zero():
    cost = ifl.analyze(_program("norm_reaching_zero")).cost()
    assert cost["exponent"] == 1.0 and cost["roots_at_zero"][0]["norm"] == "||x(t)||"
    assert cost["roots_at_zero"][0]["span"] == {"line": 3, "column": 16, "end_line": 3, "end_column": 24}
    away = ifl.analyze(_program("norms_away_from_zero")).cost()
    assert away["exponent"] == 0.5 and away["roots_at_zero"] == []
