"""Uniform heads alone on a builder: a mean (β = 0) is exact up to rounding, a sum is T means,
a prefix mean masks later keys, and a sum over a range that moves with the query is refused."""

from __future__ import annotations

import numpy as np
import pytest
from lowered import builder, inputs, model, program, run, schedule_of

from infoflow_dsl.compiler.vectors.uniform import uniform_head
from infoflow_dsl.errors import CompileError


def _lowered_node(source: str):
    checked = program(source)
    schedule = schedule_of(checked)
    built = builder(checked)
    (node,) = schedule.tree.nodes
    uniform_head(built, node, next(h for h in schedule.heads if h.name == node.name))
    return checked, built, built.results[node.name]


def test_a_mean_of_tokens_is_exact_up_to_rounding():
    checked, built, results = _lowered_node("""
input x : R^3 in [-2, 1]
length T = 7
target mean_<s> x(s)
""")
    (head,) = built.heads
    assert head.beta == 0.0 and head.error == 0.0 and not built.sources
    x = inputs(checked)
    y = run(model(built, results), x).numpy()
    error = np.abs(y - x.mean(dim=1).numpy()).max()
    assert error <= max(built.error(q.error) for q in results) <= 1e-13


def test_a_sum_is_the_count_times_the_mean():
    checked, built, (result,) = _lowered_node("""
input x : R^2 in [0, 1]
length T = 6
target sum_<s : s != 2> 3 * x(s)[1]
""")
    assert (result.low, result.high) == (0.0, 15.0)
    x = inputs(checked)
    y = run(model(built, [result]), x).numpy()
    expected = 3 * (x[:, :, 0].sum(dim=1) - x[:, 1, 0]).numpy()
    assert np.abs(y - expected).max() <= built.error(result.error) <= 1e-12


def test_a_prefix_mean_masks_the_keys_after_the_query():
    checked, built, (result,) = _lowered_node("""
input x : R^2
length T = 5
target(t) = mean_<s : s <= t> x(s)[2]
""")
    assert built.heads[0].mask == (("key", "<=", "query"),)
    x = inputs(checked)
    y = run(model(built, [result], site="token"), x).numpy()
    expected = np.cumsum(x[..., 1].numpy(), axis=1) / np.arange(1, 6)
    assert np.abs(y - expected).max() <= 1e-13


def test_a_sum_whose_range_moves_with_the_query_is_refused():
    with pytest.raises(CompileError, match="write it as a mean"):
        _lowered_node("""
input x : R^2
length T = 5
target(t) = sum_<s : s <= t> x(s)[2]
""")
