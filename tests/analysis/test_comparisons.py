"""The comparison tree: normalisation identities, node splitting, orders and counts."""

from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from programs import ALL, by_name

import infoflow_dsl as ifl
from infoflow_dsl.analysis.normalise import normalise, split_nesting
from infoflow_dsl.analysis.tree import build_tree
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.positions import condition_mask
from infoflow_dsl.oracle.evaluate import ReferenceEvaluator, at_length, target_value


def _tree(name: str, length: int | None = None):
    example = by_name(name)
    return build_tree(ifl.parse_program(example.source, example.path, length=length))


@pytest.mark.parametrize("example", ALL, ids=lambda e: e.name)
@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.sampled_from([2, 3, 5]))
def test_normalised_target_equals_the_original(example, seed, length):
    """Hoisting, the norm pull-out and the top(k) rewrite are exact identities."""
    try:
        program = at_length(ifl.parse_program(example.source, example.path), length)
    except ifl.ProgramError:
        return  # this T leaves a range empty: nothing to compare (test_evaluate covers the refusal)
    x = ifl.sample_inputs(program, 8, seed=seed)
    x[0] = x[0, :1].expand_as(x[0])  # every token equal: all scores tie
    x[1] = x[1].round()  # integer coordinates: many exact ties
    evaluator = ReferenceEvaluator(x)
    original = target_value(program, evaluator)  # a per-token target: (B, T, ...), NaN where undefined
    rewritten = target_value(dataclasses.replace(program, target=normalise(program.target)), evaluator)
    torch.testing.assert_close(rewritten, original, rtol=0, atol=1e-12, equal_nan=True)


def test_min_pairwise_splits_into_an_order_2_node_under_an_order_1_node():
    tree = _tree("min_pairwise")
    inner, outer = tree.nodes
    expected = ("min", ("t2",), ("t1",), 2, "token")
    assert (inner.kind, inner.variables, inner.context, inner.order, inner.site) == expected
    assert (outer.kind, outer.variables, outer.context, outer.order, outer.site) == ("min", ("t1",), (), 1, "readout")
    assert outer.children == (inner.name,)
    assert tree.order == 2
    assert tree.comparisons == (Fraction(0), Fraction(1), Fraction(1))  # T^2 + T
    assert tree.comparisons_text == "T^2 + T"
    assert tree.comparisons_at_length == 32**2 + 32


def test_triangle_center_has_order_3_and_cubic_comparisons():
    tree = _tree("triangle_center")
    assert tree.order == 3
    assert tree.comparisons_text == "T^3 + T^2 + T"
    worst = max(tree.nodes, key=lambda n: n.order)
    assert worst.origin.startswith("min_<t1, t2, t3>")  # the three-variable minimum, before splitting
    assert (worst.span.line, worst.span.column) == (5, 8)


@pytest.mark.parametrize("name", ["d_retrieval", "shadowed_sum_of_maxes"])
def test_nested_sum_of_maxes_is_hoisted_into_independent_order_1_nodes(name):
    """`max_<t> f(t) + max_<t> g(t)` parses nested (the body extends right) but separates."""
    tree = _tree(name)
    assert tree.order == 1
    assert all(n.order == 1 and not n.children for n in tree.nodes)


def test_separable_two_variable_max_becomes_order_1():
    program = ifl.parse_program("input x : R^2\nlength T = 6\ntarget max_<s, t> x(s)[1] + x(t)[2]\n")
    assert build_tree(program).order == 1


def test_top2_is_rewritten_as_max_of_min_with_order_2():
    tree = _tree("kth_largest")
    assert tree.order == 2
    assert [n.kind for n in tree.nodes] == ["max", "max"]
    assert all(n.origin == "top(2)_<t> <x(t), w>" for n in tree.nodes)
    assert tree.nodes[0].conditions[0].operator == "!="


def test_top_k_has_order_k():
    for k in (3, 4):
        program = ifl.parse_program(f"input x : R^2\nlength T = 8\ntarget top({k})_<t> x(t)[1]\n")
        assert build_tree(program).order == k


def test_fixed_positions_count_in_the_context():
    tree = _tree("nearest_neighbour")
    (node,) = tree.nodes
    assert (node.kind, node.context, node.order, node.site) == ("argmin", ("T",), 2, "readout")
    assert tree.comparisons_text == "T - 1"


def test_first_three_compares_nothing():
    tree = _tree("first_three")
    assert tree.nodes == () and tree.order == 0 and tree.comparisons_text == "0"


@pytest.mark.parametrize(("name", "polynomial"), [
    ("pairwise_distinct", "T^2"),                 # T(T-1) pairs t1 != t2, then T
    ("ordered_pairs", "T^2/2 + T/2 - 1"),         # T(T-1)/2 pairs s < t, then the T-1 values s < T
    ("equal_positions", "T"),                     # s == t pins t: one sum over T positions
    ("causal_sum", "T^2/2 + 3T/2 - 2"),           # Σ_{t=2..T} t pairs s <= t, then T - 1
    ("window", "T - 2"),                          # 1 < t < T
    ("intrinsic_4", "4T^2 + 4T"),
])
def test_number_of_comparisons_is_exact_under_conditions(name, polynomial):
    """Each expected polynomial is derived by hand in the comment; the value at T must match it."""
    tree = _tree(name)
    assert tree.comparisons_text == polynomial
    length = tree.length
    value = sum(c * length**k for k, c in enumerate(tree.comparisons))
    assert value == tree.comparisons_at_length


def test_counts_do_not_depend_on_the_length_they_were_built_at():
    assert _tree("min_pairwise", 8).comparisons == _tree("min_pairwise", 100).comparisons


MULTI_VARIABLE = [
    "max_<s, t : s < t> x(s)[1] * x(t)[2]",
    "min_<s, t : s <= t and t < T> x(s)[1] - x(t)[2]",
    "max_<a, b, c : a < b and b < c> x(a)[1] + x(b)[2] * x(c)[1]",
    "min_<s, t : s > 2 and t >= s> x(s)[2] * x(t)[1]",
    "sum_<s, t : s == t> x(s)[1] * x(t)[2]",
    "max_<s, t : t == 3> x(s)[1] * x(t)[2]",
    "min_<u, s : s <= u and u != s> x(u)[1]",
    "max_<u, s : s != 1 and s <= u> x(u)[2]",
    "min_<u, s : s != 2 and s <= u> x(u)[1]",
    "max_<u, s : u != s and s >= u and s < T> x(u)[1] * x(s)[2]",
]


@pytest.mark.parametrize("target", MULTI_VARIABLE)
@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.sampled_from([3, 4, 6]))
def test_every_nesting_of_a_multi_variable_reduction_is_exact(target, seed, length):
    """Splitting (with the projected outer conditions) and equality elimination keep the value."""
    program = ifl.parse_program(f"input x : R^2\nlength T = {length}\ntarget {target}\n")
    x = ifl.sample_inputs(program, 6, seed=seed)
    evaluator = ReferenceEvaluator(x)
    expected = evaluator.value(program.target, ())
    torch.testing.assert_close(evaluator.value(normalise(program.target), ()), expected, rtol=0, atol=1e-12)
    reduce = program.target
    for order in itertools.permutations(reduce.variables):
        nested = split_nesting(reduce, order)
        if nested is not None:
            torch.testing.assert_close(evaluator.value(nested, ()), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("target", MULTI_VARIABLE)
@pytest.mark.parametrize("length", [1, 2, 3, 5])
def test_no_nesting_leaves_an_inner_range_empty(target: str, length: int) -> None:
    """Each level's conditions are exactly the projection of the ones below: an outer tuple is in
    range iff some inner tuple completes it (a min over an empty inner range has no value)."""
    reduce = ifl.parse_program(f"input x : R^2\nlength T = {max(length, 3)}\ntarget {target}\n").target
    positions = np.arange(1, length + 1)
    for order in itertools.permutations(reduce.variables):
        nested = split_nesting(reduce, order)
        if nested is None:
            continue
        levels = []
        while isinstance(nested, ir.Reduce) and nested.variables[0] in order and len(levels) < len(order):
            levels.append(nested.conditions)
            nested = nested.body
        joint = condition_mask(order, reduce.conditions, positions, length)
        for depth in range(1, len(order)):
            outer = condition_mask(order[:depth], [c for level in levels[:depth] for c in level], positions, length)
            completed = joint.any(axis=tuple(range(depth, len(order))))
            assert (outer == completed).all(), (order, depth, length)


RENAMED = """input x : R^2 in [-1, 1]
length T = 6
target mean_<s> relu(x(s)[1]) + x(argmax_<s>   x(s)[1])[2]
"""


def test_messages_quote_the_users_own_text_not_renamed_variables() -> None:
    """The second ``s`` is renamed ``s′`` inside the compiler; messages quote the source span
    (white space folded), so the user reads what they wrote."""
    program = ifl.parse_program(RENAMED, "renamed.iflow")
    report = ifl.analyze(program)
    notes = report.to_dict()["notes"]
    assert any(n.startswith("argmax_<s> x(s)[1] retrieves a token") for n in notes), notes
    assert "′" not in report.to_text().split("comparison tree")[0] + "\n".join(notes)
    with pytest.raises(ifl.CompileError) as refused:
        ifl.compile(program, eps=1e-2, samples=0)
    assert "argmax_<s> x(s)[1] retrieves a token" in str(refused.value) and "′" not in str(refused.value)

