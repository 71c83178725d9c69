"""lower's knot placement for √u: every chord within its tolerance, with O(τ^-1/2) pieces."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from infoflow_dsl.compiler.lower import sqrt_knots


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
