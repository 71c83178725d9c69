"""The error budget: the Lagrange allocation (equal marginal cost per unit of sensitivity), the
mixed-law bisection, the fixpoint loop (constraints tighten their sources, rounding is refused),
and a whole lowering whose model measures within ε."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lowered import inputs, program, schedule_of

import infoflow_dsl as ifl
from infoflow_dsl.compiler.assemble import assemble
from infoflow_dsl.compiler.circuit import LinearForm
from infoflow_dsl.compiler.vectors import lower
from infoflow_dsl.compiler.vectors.budget import (
    HEAD_SHARE,
    Constraint,
    RoundingLimit,
    Source,
    allocate,
    allocate_mixed,
    fit_budget,
)
from infoflow_dsl.compiler.vectors.builder import CircuitBuilder
from infoflow_dsl.compiler.vectors.quantity import ErrorShares, ErrorVec, Quantity

BUDGET = 0.09


def test_ffn_shares_equalise_the_marginal_cost_per_sensitivity_and_heads_take_one_percent():
    sources = {"f1": Source("f1", "ffn", cost=2.0), "f2": Source("f2", "ffn", cost=5.0),
               "h": Source("h", "head"), "unfelt": Source("unfelt", "ffn", cost=1.0)}
    sensitivity = {"f1": 1.0, "f2": 3.0, "h": 2.0}
    shares = allocate(sources, sensitivity, BUDGET)
    assert shares["unfelt"] == BUDGET
    assert sensitivity["h"] * shares["h"] == pytest.approx(HEAD_SHARE * BUDGET)
    spent = sum(sensitivity[n] * shares[n] for n in ("f1", "f2"))
    assert spent == pytest.approx((1 - HEAD_SHARE) * BUDGET)
    # d/de (c·e^(-1/2)) = λ·w: c·e^(-3/2)/w is the same for every source
    marginal = [sources[n].cost * shares[n] ** -1.5 / sensitivity[n] for n in ("f1", "f2")]
    assert marginal[0] == pytest.approx(marginal[1])


def test_heads_alone_share_the_whole_budget_evenly():
    sources = {"h1": Source("h1", "head"), "h2": Source("h2", "head")}
    shares = allocate(sources, {"h1": 1.0, "h2": 4.0}, BUDGET)
    assert shares == pytest.approx({"h1": BUDGET / 2, "h2": BUDGET / 8})


def test_mixed_laws_meet_the_budget_with_one_multiplier():
    ffns = [Source("wide", "ffn", cost=3.0), Source("deep", "ffn", cost=0.5, law="log")]
    sensitivity = {"wide": 2.0, "deep": 1.0}
    shares = allocate_mixed(ffns, sensitivity, BUDGET)
    assert sum(sensitivity[n] * e for n, e in shares.items()) == pytest.approx(BUDGET, rel=1e-9)
    wide_lambda = 3.0 / (2 * shares["wide"] ** 1.5 * 2.0)  # c·e^(-1/2): c/(2 e^(3/2)) = λw
    deep_lambda = 0.5 / (shares["deep"] * 1.0)  # k·ln(1/e): k/e = λw
    assert wide_lambda == pytest.approx(deep_lambda, rel=1e-9)


CHECKED = program("""
input x : R^2 in [1, 2]
length T = 6
target max_<s> x(s)[1]^2 + x(T)[2]
""")


def _one_source_attempt(limit: float, rounding: float = 0.0):
    """A lowering with one FFN source s whose output error is 2·e_s, constrained to e_s ≤ limit."""

    def attempt(shares: ErrorShares) -> tuple[CircuitBuilder, list[Quantity]]:
        built = CircuitBuilder(program=CHECKED, shares=shares, unit_roundoff=2.0**-53)
        built.source("s", "ffn", cost=1.0)
        built.constraints.append(Constraint(ErrorVec.source("s"), limit))
        error = ErrorVec((("s", 2.0),), rounding=rounding)
        return built, [Quantity(form=LinearForm.of("x[1]"), stage=0, low=0.0, high=1.0, error=error)]

    return attempt


def test_the_fixpoint_spends_most_of_eps_and_a_constraint_tightens_its_source():
    free = fit_budget(0.1, _one_source_attempt(limit=1.0))
    assert 0.08 <= free.bound <= 0.1
    tight = fit_budget(0.1, _one_source_attempt(limit=0.01))
    assert tight.builder.shares.of("s") <= 0.01 and tight.bound <= 0.1


def test_rounding_that_takes_half_of_eps_is_refused():
    with pytest.raises(RoundingLimit) as refused:
        fit_budget(0.1, _one_source_attempt(limit=1.0, rounding=0.03))
    assert refused.value.rounding == pytest.approx(0.06)


@pytest.mark.parametrize("eps", [0.05, 0.005])
def test_a_whole_lowering_measures_within_its_bound_and_eps(eps):
    circuit = lower(CHECKED, schedule_of(CHECKED), eps, torch.float64, "wide")
    assert circuit.budget.bound <= eps and circuit.budget.eps == eps
    config, tensors = assemble(circuit, torch.float64)
    model = ifl.CompiledTransformer(config, tensors, dtype=torch.float64)
    x = inputs(CHECKED)
    with torch.no_grad():
        y = model(x).numpy()
    expected = (x[..., 0] ** 2).max(dim=1).values.numpy() + x[:, -1, 1].numpy()
    error = np.abs(y - expected).max()
    assert 0 < error <= circuit.budget.bound
    heads = [share for name, share in circuit.budget.shares if name.startswith("head")]
    ffns = [share for name, share in circuit.budget.shares if name.startswith("ffn")]
    assert heads and ffns and max(heads) < min(ffns)  # β is free: heads get 1% of the budget
