"""The lowering's error arithmetic: ErrorVec, ErrorShares, linear forms' intervals, interval
products, and the knot placement for √u (every chord within its tolerance, O(τ^-1/2) pieces)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from infoflow_dsl.compiler.circuit import LinearForm
from infoflow_dsl.compiler.vectors.quantity import (
    ROUNDING_SAFETY,
    ErrorShares,
    ErrorVec,
    Quantity,
    constant,
    interval_product,
    linear,
    sqrt_knots,
)

BOUND = st.floats(-5.0, 5.0)


def chord_error(a: float, b: float) -> float:
    """max over u in [a², b²] of √u minus the chord through (a², a) and (b², b), by dense sampling."""
    worst = 0.0
    for k in range(1, 200):
        r = a + (b - a) * k / 200
        worst = max(worst, r - (a + (r * r - a * a) / (a + b)))
    return worst


@given(first=st.floats(0.0, 2.0), width=st.floats(1e-3, 3.0), tolerance=st.floats(1e-4, 1e-1))
def test_sqrt_knots_keep_every_chord_within_the_tolerance_with_few_pieces(first, width, tolerance):
    last = first + width
    roots = sqrt_knots(first, last, tolerance)
    assert roots[0] == first and roots[-1] == last
    assert all(a < b for a, b in itertools.pairwise(roots))
    for a, b in itertools.pairwise(roots):
        assert chord_error(a, b) <= tolerance * (1 + 1e-9)
    # From 0 the roots are exactly 2τ·i(i+1); from higher up the steps only lengthen.
    assert len(roots) - 1 <= math.sqrt(last / (2 * tolerance)) + 1


def test_sqrt_knots_from_zero_are_two_tau_i_times_i_plus_one():
    tolerance = 1e-3
    roots = sqrt_knots(0.0, 1.0, tolerance)
    for i, r in enumerate(roots[:-1]):
        assert math.isclose(r, 2 * tolerance * i * (i + 1), rel_tol=1e-9, abs_tol=1e-15)
    # each full piece is as long as the tolerance allows: its chord departs by exactly τ
    assert all(math.isclose(chord_error(a, b), tolerance, rel_tol=1e-3)
               for a, b in itertools.pairwise(roots[:-1]))


def test_error_vectors_add_scale_and_take_the_widest_coefficient_by_coefficient():
    a = ErrorVec((("f", 2.0), ("g", 1.0)), extra=0.5, rounding=1e-3)
    b = ErrorVec((("g", 3.0), ("h", 4.0)), extra=0.25, rounding=2e-3)
    assert dict(a.plus(b, -2.0).linear) == {"f": 2.0, "g": 7.0, "h": 8.0}
    assert a.plus(b, -2.0).extra == 1.0 and math.isclose(a.plus(b, -2.0).rounding, 5e-3)
    assert dict(a.widest(b).linear) == {"f": 2.0, "g": 3.0, "h": 4.0}
    assert (a.widest(b).extra, a.widest(b).rounding) == (0.5, 2e-3)
    assert dict(a.scaled(-3.0).linear) == {"f": 6.0, "g": 3.0}
    shares = ErrorShares(default=0.1, by_source={"f": 0.01})
    assert shares.of("f") == 0.01 and shares.of("g") == 0.1
    assert math.isclose(a.value(shares), 2 * 0.01 + 1 * 0.1 + 0.5 + ROUNDING_SAFETY * 1e-3)
    assert ErrorVec.source("f").value(shares) == 0.01 and ErrorVec.rounded(1.0).value(shares) == ROUNDING_SAFETY


@given(st.lists(st.tuples(st.floats(-3.0, 3.0), BOUND, BOUND), min_size=1, max_size=4), st.floats(-2.0, 2.0))
def test_a_linear_combination_holds_every_value_its_parts_can_take(parts, offset):
    quantities = [(c, Quantity(form=LinearForm.of(f"d{i}"), stage=i, low=min(u, v), high=max(u, v),
                               error=ErrorVec.source(f"s{i}")))
                  for i, (c, u, v) in enumerate(parts)]
    total = linear(quantities, offset)
    assert total.stage == len(parts) - 1
    assert dict(total.form.terms) == {f"d{i}": c for i, (c, _, _) in enumerate(parts) if c != 0.0}
    assert dict(total.error.linear) == {f"s{i}": abs(c) for i, (c, _, _) in enumerate(parts)}
    rng = np.random.default_rng(0)
    for _ in range(50):
        value = offset + sum(c * rng.uniform(q.low, q.high) for c, q in quantities)
        assert total.low - 1e-9 <= value <= total.high + 1e-9
    corners = [offset + sum(c * (q.low if pick else q.high) for (c, q), pick in zip(quantities, picks, strict=True))
               for picks in itertools.product([0, 1], repeat=len(parts))]
    assert math.isclose(total.low, min(corners), abs_tol=1e-9) and math.isclose(total.high, max(corners), abs_tol=1e-9)


@given(BOUND, BOUND, BOUND, BOUND)
def test_interval_products_are_the_extremes_of_a_times_b(a1, a2, b1, b2):
    a = Quantity(form=LinearForm.of("a"), stage=0, low=min(a1, a2), high=max(a1, a2))
    b = Quantity(form=LinearForm.of("b"), stage=0, low=min(b1, b2), high=max(b1, b2))
    grid_a, grid_b = np.linspace(a.low, a.high, 41), np.linspace(b.low, b.high, 41)
    products = np.outer(grid_a, grid_b)
    low, high = interval_product(a, b)
    assert math.isclose(low, products.min(), abs_tol=1e-12) and math.isclose(high, products.max(), abs_tol=1e-12)


def test_a_constant_is_exact_at_stage_zero():
    c = constant(-2.5)
    assert (c.low, c.high, c.magnitude, c.stage, c.is_constant) == (-2.5, -2.5, 2.5, 0, True)
    assert c.form.constant == -2.5 and c.error == ErrorVec()
