"""Squares and products in FFN blocks, built by a route of ``approximations`` (``--ffn``).

- **u²** within τ = its share on [low, high] (u's range padded by its error): ``wide``, the
  piecewise-linear interpolant on a uniform grid of spacing h in one layer (error in
  [0, h²/4]); ``deep``, m tent-map levels over m attention-free layers (error w²·4^-(m+1),
  O(log 1/ε) units), after which every head that reads the square waits
  (``scores.placed``); ``auto``, per function the one with fewer nonzero parameters. The
  square's error: its share, plus 2|u|·err_u + err_u² from u's own error.
- **a·b** = ((λa + b/λ)² − (λa − b/λ)²)/4 with λ² = |b|/|a|: both squares within 4e by one
  route, errors in [0, 4e] of one sign, so the product errs by at most e (wide: grids of one
  spacing h = 4√e), plus |b|·err_a + |a|·err_b + err_a·err_b.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from ...analysis.ranges import Interval
from ...analysis.stages import ffn_stage
from ..approximations import Approximation, SquareRoute, choose_square
from ..circuit import FFNBlock
from .builder import CircuitBuilder, layer_after
from .quantity import ErrorVec, Quantity, constant, interval_product, linear


def _route(builder: CircuitBuilder, name: str, intervals: Sequence[tuple[float, float]], scale: float,
           terms: int) -> SquareRoute:
    """The square route for the function ``name`` (its tolerance: ``scale`` × its share),
    registered as an FFN error source with that route's cost law."""
    route = choose_square(builder.route, intervals, scale * builder.share(name), terms)
    builder.source(name, "ffn", cost=route.cost(intervals, terms, scale), law=route.law)
    return route


def _squares(builder: CircuitBuilder, layer: int, route: SquareRoute,
             inputs: Sequence[tuple[Quantity, float, float]], tolerance: float) -> list[Approximation]:
    """u² within ``tolerance`` for each (u, low, high), built by ``route`` from ``layer`` on."""
    approximations = []
    builder.reserve_units(sum(route.units(low, high, tolerance) for _, low, high in inputs))
    for u, low, high in inputs:

        def names(offset: int, stem: str) -> str:
            return builder.direction(builder.fresh(f"L{layer + offset}:{stem}"))

        approximations.append(route.build(u.form, u.magnitude, low, high, tolerance, names, builder.unit_roundoff,
                                          f"({u.form})^2"))
    return approximations


def _emit(builder: CircuitBuilder, layer: int, approximations: Sequence[Approximation], error: float,
          stage: int) -> int:
    """Append the approximations' levels as FFN blocks from ``layer`` on (the last block records
    ``error``); the stage of the result (``stage`` if no level was needed)."""
    emitted = 0
    for approximation in approximations:
        for level in approximation.levels:
            builder.units += len(level.units)
            builder.blocks.append(FFNBlock(
                name=level.direction, layer=layer + level.offset, output=level.direction, formula=level.formula,
                units=level.units, error=0.0, bias=level.bias, function=level.function, argument=level.argument,
                rounding=level.rounding, approximation=level.approximation))
            emitted += 1
    if emitted:
        builder.blocks[-1] = dataclasses.replace(builder.blocks[-1], error=error)
    depth = max(a.depth for a in approximations)
    return ffn_stage(layer + depth - 1) if depth else stage


def _nonempty(low: float, high: float) -> tuple[float, float]:
    return low, max(high, low + 1e-12)


def square(builder: CircuitBuilder, u: Quantity) -> Quantity:
    """u², one FFN error source (see the module docstring)."""
    if u.is_constant:
        return constant(u.form.constant ** 2)
    low, high = _nonempty(*builder.padded(u))
    name = builder.fresh_source("ffn:square")
    route = _route(builder, name, [(low, high)], 1.0, len(u.form.terms))
    layer = layer_after(u.stage)
    (approximation,) = _squares(builder, layer, route, [(u, low, high)], builder.share(name))
    stage = _emit(builder, layer, [approximation], approximation.error, u.stage)
    square_low = Interval(u.low, u.high).squared().low  # analyze's rule for "can reach 0"
    err_u = builder.error(u.error)
    error = ErrorVec.source(name).plus(u.error, 2 * u.magnitude)
    error = error.plus(ErrorVec(extra=err_u * err_u, rounding=approximation.rounding))
    return Quantity(form=approximation.form, stage=stage, low=square_low, high=u.magnitude ** 2, error=error)


def product(builder: CircuitBuilder, a: Quantity, b: Quantity) -> Quantity:
    """a·b by polarisation, one FFN error source (see the module docstring); linear where a
    factor is constant, a square where both are one form."""
    if a.is_constant:
        return linear([(a.form.constant, b)])
    if b.is_constant:
        return linear([(b.form.constant, a)])
    if a.form == b.form:
        return square(builder, a)
    # (λa)(b/λ) with λ² = |b|/|a| balances the ranges of λa ± b/λ, so the grids are shortest
    scale = math.sqrt(max(b.magnitude, 1e-12) / max(a.magnitude, 1e-12))
    total, difference = linear([(scale, a), (1 / scale, b)]), linear([(scale, a), (-1 / scale, b)])
    (low1, high1), (low2, high2) = _nonempty(*builder.padded(total)), _nonempty(*builder.padded(difference))
    name = builder.fresh_source("ffn:product")
    route = _route(builder, name, [(low1, high1), (low2, high2)], 4.0, len(total.form.terms))
    layer = layer_after(max(a.stage, b.stage))
    plus, minus = _squares(builder, layer, route, [(total, low1, high1), (difference, low2, high2)],
                           4.0 * builder.share(name))
    rounding = 0.25 * plus.rounding + 0.25 * minus.rounding
    # both errors lie in [0, E_i], so their difference over 4 lies within max(E_1, E_2)/4
    stage = _emit(builder, layer, [plus, minus], max(plus.error, minus.error) / 4, max(a.stage, b.stage))
    low, high = interval_product(a, b)
    err_a, err_b = builder.error(a.error), builder.error(b.error)
    error = ErrorVec.source(name).plus(a.error, b.magnitude).plus(b.error, a.magnitude)
    error = error.plus(ErrorVec(extra=err_a * err_b, rounding=rounding))
    return Quantity(form=plus.form.scaled(0.25).plus(minus.form.scaled(-0.25)), stage=stage, low=low, high=high,
                    error=error)
