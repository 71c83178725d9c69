"""Retrieval heads alone on a builder: a readout min within the Gibbs bound min(ln N, (N−1)/e)/β,
a per-token max of products within its a-priori bound, and argmax token retrieval under a margin."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from lowered import builder, inputs, model, program, run, schedule_of

from infoflow_dsl.compiler.vectors.retrieval import comparison_head
from infoflow_dsl.errors import CompileError

SHARE = 1e-3


def _lowered_node(source: str, share: float = SHARE):
    checked = program(source)
    schedule = schedule_of(checked)
    built = builder(checked, share=share)
    (node,) = schedule.tree.nodes
    comparison_head(built, node, next(h for h in schedule.heads if h.name == node.name))
    return checked, built, built.results[node.name]


def test_a_readout_min_lies_above_the_minimum_within_the_gibbs_bound():
    checked, built, (result,) = _lowered_node("""
input x : R^2 in [-1, 1]
length T = 6
target min_<s> x(s)[1]
""")
    (head,) = built.heads
    assert head.site == "readout" and head.kind == "readout"
    gibbs = min(math.log(6), 5 / math.e) / head.beta
    assert gibbs <= built.share("head:c1")
    x = inputs(checked)
    y = run(model(built, [result]), x).numpy()
    error = y - x[..., 0].min(dim=1).values.numpy()
    assert error.min() >= -1e-12  # a Gibbs mean of the values is never below their minimum
    assert 0 < error.max() <= gibbs
    assert error.max() <= built.error(result.error)


def test_a_per_token_max_of_products_errs_within_its_bound():
    checked, built, (result,) = _lowered_node("""
input x : R^2 in [-1, 1]
length T = 5
target(t) = max_<s : s <= t> <x(s), x(t)>
""")
    (head,) = built.heads
    assert head.site == "token" and head.mask == (("key", "<=", "query"),)
    assert {b.function for b in built.blocks} == {"square"}  # the query side times the retrieved means
    x = inputs(checked)
    y = run(model(built, [result], site="token"), x).numpy()
    scores = torch.einsum("bsd,btd->bts", x, x).numpy()  # [b, t, s] = <x(s), x(t)>
    causal = np.tril(np.ones((5, 5), dtype=bool))
    expected = np.where(causal, scores, -np.inf).max(axis=2)
    error = np.abs(y - expected)
    # the head's share and the two products x(t)_j · mean_j that recombine the result: three shares
    assert 0 < error.max() <= built.error(result.error) <= 3 * SHARE + 1e-9


MARGIN_TARGET = """
input x : R^2 in [-1, 1]
length T = 6
margin 0.2
target x(argmax_<s> x(s)[1])
"""


def test_a_token_retrieval_fetches_the_best_token_within_its_share_under_the_margin():
    _, built, results = _lowered_node(MARGIN_TARGET)
    generator = torch.Generator().manual_seed(3)
    scores = torch.stack([torch.linspace(-1, 1, 6, dtype=torch.float64)[torch.randperm(6, generator=generator)]
                          for _ in range(200)])  # distinct scores 0.4 > δ apart
    x = torch.stack([scores, 2 * torch.rand(200, 6, generator=generator, dtype=torch.float64) - 1], dim=-1)
    y = run(model(built, results), x).numpy()
    best = x[torch.arange(200), scores.argmax(dim=1)].numpy()
    error = np.abs(y - best).max()
    assert 0 < error <= built.share("head:c1")
    assert all(built.error(q.error) == built.share("head:c1") for q in results)
    (constraint,) = built.constraints
    assert constraint.limit == pytest.approx(0.05)  # the score's error stays below δ/4


def test_a_token_retrieval_without_a_margin_is_refused():
    with pytest.raises(CompileError, match="declare `margin"):
        _lowered_node(MARGIN_TARGET.replace("margin 0.2\n", ""))
