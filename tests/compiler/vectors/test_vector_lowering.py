"""The vector lowering's entry point: the options it refuses, the shortest input its fetches allow, and
the smallest ε a dtype's rounding can honour."""

from __future__ import annotations

import pytest
import torch
from lowered import program, schedule_of

from infoflow_dsl.analysis.schedule import build_schedule
from infoflow_dsl.analysis.tree import build_tree
from infoflow_dsl.compiler.vectors import lower
from infoflow_dsl.errors import CompileError

FETCHES = program("""
input x : R^2 in [-1, 1]
length T = 8
target x(T - 2)[1] + x(4)[2] + max_<s> x(s)[1]
""")


def test_the_shortest_input_holds_every_fetched_position():
    circuit = lower(FETCHES, schedule_of(FETCHES), 0.05, torch.float64)
    assert circuit.min_length == 4  # x(4); x(T - 2) needs only 3
    assert "x(T - 2)@readout[1]" in circuit.directions and "x(4)@readout[2]" in circuit.directions


def test_unknown_routes_routes_that_add_layers_under_a_head_budget_and_inefficient_targets_are_refused():
    schedule = schedule_of(FETCHES)
    with pytest.raises(CompileError, match="--ffn must be one of wide, deep, auto"):
        lower(FETCHES, schedule, 0.05, torch.float64, "tall")
    budgeted = build_schedule(build_tree(FETCHES), (3, 1), FETCHES.margin)
    with pytest.raises(CompileError, match="a head budget"):
        lower(FETCHES, budgeted, 0.05, torch.float64, "deep")
    triple = program("""
input x : R^2
length T = 6
target max_<a, b, c> x(a)[1] * x(b)[2] * x(c)[1]
""")
    with pytest.raises(CompileError, match="the target is inefficient"):
        lower(triple, schedule_of(triple), 0.05, torch.float64)


def test_an_eps_below_float32_rounding_names_the_smallest_it_can_honour():
    with pytest.raises(CompileError, match=r"ε = 1e-09 is below what float32 can honour .* about"):
        lower(FETCHES, schedule_of(FETCHES), 1e-9, torch.float32)
