"""rasp/fits.py: the bilinear fit of a function of two numbers (a product written as one
product), tested exactly at every grid point."""

from __future__ import annotations

import itertools

from infoflow_dsl.rasp.fits import bilinear_fit, bilinear_text


def _grid(function: object, us: range, vs: range) -> tuple[list[tuple[float, ...]], list[float]]:
    points = [(float(u), float(v)) for u, v in itertools.product(us, vs)]
    return points, [float(function(u, v)) for u, v in points]  # type: ignore[operator]


def test_a_product_and_an_offset_product_are_bilinear() -> None:
    assert bilinear_fit(*_grid(lambda u, v: u * v, range(10), range(9))) == (1.0, 0.0, 0.0, 0.0)
    fit = bilinear_fit(*_grid(lambda m, i: m / 7 * (i + 1), range(5), range(4)))  # m·(i + 1) with m a mean
    assert fit is not None and abs(fit[0] - 1 / 7) < 1e-12 and abs(fit[1] - 1 / 7) < 1e-12
    assert bilinear_text((2.0, 0.0, -1.0, 3.0), "a(t)", "b(t)") == "(2 * a(t) * b(t) - b(t) + 3)"


def test_affine_and_other_functions_are_not() -> None:
    assert bilinear_fit(*_grid(lambda u, v: 2 * u + v, range(4), range(4))) is None  # α = 0: affine
    assert bilinear_fit(*_grid(lambda u, v: u * u * v, range(4), range(4))) is None
    assert bilinear_fit([(0.0, 0.0), (1.0, 1.0)], [0.0, 1.0]) is None  # not a grid
