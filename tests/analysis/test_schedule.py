"""The InfoFlow schedule: layers, heads, information sets, verdicts and the laws they cite."""

from __future__ import annotations

import pytest
from programs import ALL, by_name

import infoflow_dsl as ifl
from infoflow_dsl.analysis.features import NotSeparable, separate
from infoflow_dsl.analysis.schedule import build_schedule
from infoflow_dsl.analysis.stages import layer_for, layers_for_output, next_ffn
from infoflow_dsl.analysis.tree import build_tree


def _schedule(name: str, heads=None, length=None):
    example = by_name(name)
    program = ifl.parse_program(example.source, example.path, length=length)
    return build_schedule(build_tree(program), heads, program.margin)


def test_stage_arithmetic():
    assert [next_ffn(s) for s in range(5)] == [1, 3, 3, 5, 5]
    assert [layer_for(s) for s in range(6)] == [1, 1, 2, 2, 3, 3]
    assert [layers_for_output(s) for s in range(6)] == [0, 0, 1, 1, 2, 2]


def test_min_pairwise_is_two_layers_of_one_head():
    schedule = _schedule("min_pairwise")
    assert (schedule.layers, schedule.heads_per_layer, schedule.dimension) == (2, (1, 1), 1)
    assert schedule.verdict == "efficient"
    retrieval, readout = schedule.heads
    assert (retrieval.kind, retrieval.site, retrieval.layer) == ("retrieval", "token", 1)
    assert (readout.kind, readout.site, readout.layer) == ("readout", "readout", 2)
    assert retrieval.key_features == tuple(f"x(t2)[{i}]" for i in range(1, 5))
    sets = {s.layer: s for s in schedule.info_sets}
    assert sets[1].token == ("t", "t2*(t)") and sets[1].readout == ("T+1",)
    assert sets[2].readout == ("T+1", "t1*", "t2*(t1*)")


@pytest.mark.parametrize("big_d", [2, 3, 4, 5, 6])
def test_intrinsic_d_needs_d_heads_in_each_of_two_layers(big_d):
    schedule = _schedule(f"intrinsic_{big_d}")
    assert schedule.heads_per_layer == (big_d, big_d)
    assert schedule.dimension == big_d
    assert schedule.verdict == "efficient"


@pytest.mark.parametrize("big_d", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("short_layer", [0, 1])
def test_intrinsic_d_with_one_head_too_few_is_inefficient_by_the_head_count_bound(big_d, short_layer):
    budget = [big_d, big_d]
    budget[short_layer] -= 1
    schedule = _schedule(f"intrinsic_{big_d}", heads=budget)
    assert schedule.verdict == "inefficient"
    (problem,) = schedule.problems
    assert problem.kind == "heads"
    assert "HC Thm 2" in problem.law and f"s = {big_d - 1} heads, D = {big_d}" in problem.law
    assert f"layer {short_layer + 1} must run {big_d} comparisons" in problem.message


def test_a_budget_spread_over_more_layers_suffices():
    """intrinsic_2 has four comparisons, two chains of two: one head per layer needs four layers."""
    assert _schedule("intrinsic_2", heads=[1, 1, 1]).verdict == "inefficient"
    assert _schedule("intrinsic_2", heads=[1, 1, 1, 1]).verdict == "efficient"
    assert _schedule("intrinsic_2", heads=[1, 2, 1]).verdict == "efficient"


def test_triangle_center_is_inefficient_because_of_the_three_variable_minimum():
    schedule = _schedule("triangle_center")
    assert schedule.verdict == "inefficient"
    problem = schedule.problems[0]
    assert problem.kind == "order"
    assert problem.message.startswith("min_<t1, t2, t3>")
    assert (problem.span.line, problem.span.column) == (5, 8)
    assert "IF Thm 3" in problem.law and "T₀" in problem.law


def test_d_retrieval_is_one_layer_of_four_readout_heads():
    schedule = _schedule("d_retrieval")
    assert (schedule.layers, schedule.heads_per_layer, schedule.dimension) == (1, (4,), 4)
    assert {h.kind for h in schedule.heads} == {"readout"}


def test_first_three_is_specific_position_aggregation_in_one_layer():
    schedule = _schedule("first_three")
    assert (schedule.layers, schedule.heads_per_layer, schedule.dimension) == (1, (3,), 0)
    assert [h.kind for h in schedule.heads] == ["position"] * 3
    assert schedule.info_sets[0].readout == ("1", "2", "3", "T+1")


def test_kth_largest_is_two_layers_and_states_the_one_layer_bound():
    schedule = _schedule("kth_largest")
    assert (schedule.layers, schedule.heads_per_layer, schedule.verdict) == (2, (1, 1), "efficient")
    assert schedule.heads[0].mask == "t_2 != t_1"
    (note,) = schedule.notes
    assert "Ω(ε^-(T − 3)/(1 + 1))" in note and "IF Thm 2" in note


def test_top3_is_inefficient_with_order_3():
    schedule = _schedule("third_largest")
    assert schedule.verdict == "inefficient"
    assert schedule.problems[0].kind == "order"
    assert any("top(3)" in note and "T − 4" in note for note in schedule.notes)


def test_nearest_neighbour_fetches_x_T_then_retrieves_a_token_under_the_margin():
    schedule = _schedule("nearest_neighbour")
    assert schedule.heads_per_layer == (1, 1)
    fetch, retrieval = schedule.heads
    assert (fetch.kind, fetch.layer, fetch.compares) == ("position", 1, "x(T)")
    assert (retrieval.kind, retrieval.layer, retrieval.site) == ("token retrieval", 2, "readout")
    assert schedule.tree.order == 2
    (note,) = schedule.notes
    assert "margin" in note and "δ = 0.05" in note


def test_token_retrieval_without_a_margin_says_one_is_needed():
    program = ifl.parse_program("input x : R^2\nlength T = 6\ntarget x(argmax_<s> <x(s), x(1)>)\n")
    schedule = build_schedule(build_tree(program), None, program.margin)
    assert any("none is declared" in note for note in schedule.notes)


def test_a_norm_of_a_difference_is_not_separable_but_its_square_is():
    program = ifl.parse_program("input x : R^2\nlength T = 6\ntarget max_<s> min_<t> relu(<x(s), x(t)>)\n")
    schedule = build_schedule(build_tree(program))
    assert schedule.verdict == "inefficient"
    assert schedule.problems[0].kind == "not-separable"
    assert "relu(<x(s), x(t)>)" in schedule.problems[0].message


@pytest.mark.parametrize(("body", "pairs"), [
    ("<x(s), x(t)>", 2),                  # x(t)[i] · x(s)[i]
    ("||x(s) - x(t)||^2", 5),             # ||x(t)||², x(t)[i] (·−2x(s)[i]), 1 (·||x(s)||²)
    ("(x(s)[1] - x(t)[1])^2", 3),
])
def test_separation_into_per_token_features(body, pairs):
    program = ifl.parse_program(f"input x : R^2\nlength T = 4\ntarget max_<s> min_<t> {body}\n")
    inner = build_tree(program).nodes[0]
    assert len(separate(inner.body, "t")) == pairs


def test_separation_refuses_a_function_of_two_positions():
    program = ifl.parse_program("input x : R^2\nlength T = 4\ntarget max_<s> min_<t> |x(s)[1] - x(t)[1]|\n")
    inner = build_tree(program).nodes[0]
    with pytest.raises(NotSeparable):
        separate(inner.body, "t")


@pytest.mark.parametrize("example", ALL, ids=lambda e: e.name)
def test_every_table_program_gets_a_consistent_schedule(example):
    program = ifl.parse_program(example.source, example.path)
    schedule = build_schedule(build_tree(program), None, program.margin)
    assert len(schedule.heads_per_layer) == schedule.layers
    assert sum(schedule.heads_per_layer) == len(schedule.heads)
    layer_of = {h.name: h.layer for h in schedule.heads}
    for node in schedule.tree.nodes:  # a node runs after every node it reads
        assert all(layer_of[child] < layer_of[node.name] for child in node.children)
    if schedule.verdict == "efficient":
        assert schedule.tree.order <= 2


def test_a_sum_over_a_range_that_follows_the_query_is_inefficient_and_compiles_on_the_gather_route() -> None:
    """analyze and compile agree: ``sum_<s : s <= t>`` is refused with the reason unless
    --allow-inefficient, and then compiles (unrolled into T slots) within ε of the reference."""
    import torch

    program = ifl.parse_program(by_name("tok_prefix_sum").source, "tok_prefix_sum.iflow")
    report = ifl.analyze(program)
    assert report.verdict == "inefficient"
    assert "sum whose range depends on the querying position" in report.to_dict()["reason"]["message"]
    with pytest.raises(ifl.CompileError, match="sum whose range depends on the querying position"):
        ifl.compile(program, eps=1e-3, samples=0)
    model = ifl.compile(program, eps=1e-3, dtype="float64", samples=0, allow_inefficient=True)
    x = ifl.sample_inputs(program, 500, seed=3)
    with torch.no_grad():
        error = (model(x) - ifl.evaluate(program, x)).abs().max().item()
    assert error <= 1e-3


def test_a_top_notes_the_order_its_nodes_have_in_a_per_token_target() -> None:
    """top(2) over s at every t compares t and two positions: its note says order 3, as the
    verdict does (a sequence target's top(2) has order 2)."""
    for target, order in (("target(t) = top(2)_<s> <x(s), x(t)>", 3), ("target top(2)_<s> x(s)[1]", 2)):
        report = ifl.analyze(ifl.parse_program(f"input x : R^2 in [-1, 1]\nlength T = 4\n{target}\n"))
        note = next(n for n in report.to_dict()["notes"] if "nested max/min" in n)
        assert f"(order {order})" in note and report.to_dict()["order"] == order, (note, report.to_dict()["order"])
