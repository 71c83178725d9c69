"""Exact FFN constructions and √u.

- relu(u), |u| = relu(u) + relu(−u), min(a, b) = a − relu(a − b), max(a, b) = a + relu(b − a):
  exact, built by :mod:`infoflow_dsl.compiler.exact` (the token lowering's too); each adds only
  the rounding of its active unit, 2ϱ(|u| + Σ|coefficients|).
- √u on the fewest knots whose chords stay within e/2 of √u (``quantity.sqrt_knots``: a piece
  [a², b²] departs by (b − a)²/(4(a + b))), e its share; u's error passes with factor
  1/(2√(low − err)) away from 0, and near 0 (where an input error δ becomes up to √δ) the
  input's error is held below (e/2)² by a constraint.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence

from ...analysis.stages import ffn_stage
from ..approximations import interpolant
from ..circuit import FFNBlock, LinearForm
from ..exact import ExactFunction, abs_function, extremum_function, relu_function, unit_rounding
from .budget import Constraint
from .builder import CircuitBuilder, layer_after
from .quantity import ErrorVec, Quantity, constant, linear, sqrt_knots

#: Every unit of a √ reads its input's whole form, and a deep square's form has a term per tent
#: level: a √ input (≥ 0) of more terms is first collected into one direction by one exact
#: relu unit (one more layer), so that its units read one term each.
COLLECT_TERMS = 8


def relu_rounding(builder: CircuitBuilder, u: Quantity) -> ErrorVec:
    """The rounding of a relu unit reading u (``exact.unit_rounding``)."""
    return ErrorVec.rounded(unit_rounding(builder.unit_roundoff, u.magnitude, u.form))


def exact_units(builder: CircuitBuilder, exact: ExactFunction, u: Quantity, formula: str) -> tuple[LinearForm, int]:
    """The units of ``exact`` (reading u: its argument) into one new direction, in the first FFN
    after u exists: (the function's value form, its layer)."""
    layer = layer_after(u.stage)
    direction = builder.direction(builder.fresh(f"L{layer}:r"))
    builder.blocks.append(FFNBlock(
        name=direction, layer=layer, output=direction, formula=formula, units=exact.units(direction), error=0.0,
        bias=0.0, function=exact.function, argument=u.form, rounding=relu_rounding(builder, u).rounding))
    return exact.value(direction), layer


def relu(builder: CircuitBuilder, u: Quantity) -> Quantity:
    if u.is_constant:
        return constant(max(u.form.constant, 0.0))
    form, layer = exact_units(builder, relu_function(u.form), u, f"relu({u.form})")
    return Quantity(form=form, stage=ffn_stage(layer), low=max(u.low, 0.0), high=max(u.high, 0.0),
                    error=u.error.plus(relu_rounding(builder, u)))


def absolute(builder: CircuitBuilder, u: Quantity) -> Quantity:
    if u.is_constant:
        return constant(abs(u.form.constant))
    form, layer = exact_units(builder, abs_function(u.form), u, f"|{u.form}|")
    low = 0.0 if u.low <= 0 <= u.high else min(abs(u.low), abs(u.high))
    return Quantity(form=form, stage=ffn_stage(layer), low=low, high=u.magnitude,
                    error=u.error.plus(relu_rounding(builder, u)))


def _extremum(builder: CircuitBuilder, a: Quantity, b: Quantity, kind: str) -> Quantity:
    """min(a, b) or max(a, b) (``exact.extremum_function``)."""
    exact = extremum_function(a.form, b.form, kind)
    sign = 1.0 if kind == "min" else -1.0
    gap = linear([(sign, a), (-sign, b)])  # the gap's range and error; its form is exact.argument
    if gap.is_constant:
        return a if gap.form.constant <= 0 else b  # gap = ±(a − b): a wins when it is ≤ 0
    form, layer = exact_units(builder, exact, gap, f"relu({gap.form})")
    pick = min if kind == "min" else max
    # the gather route's slot trees take the larger error (sound and T times tighter over T
    # slots); the efficient route keeps the sum
    joint = a.error.widest(b.error) if builder.gathered else a.error.plus(b.error)
    error = joint.plus(relu_rounding(builder, gap))
    return Quantity(form=form, stage=ffn_stage(layer), low=pick(a.low, b.low), high=pick(a.high, b.high), error=error)


def minimum(builder: CircuitBuilder, a: Quantity, b: Quantity) -> Quantity:
    return _extremum(builder, a, b, "min")


def maximum(builder: CircuitBuilder, a: Quantity, b: Quantity) -> Quantity:
    return _extremum(builder, a, b, "max")


def _into_one_direction(builder: CircuitBuilder, u: Quantity) -> Quantity:
    """relu(u) = u (u ≥ 0) into one direction (see COLLECT_TERMS); reading a form of n terms
    rounds like a sum of n: √(n+1) times the single relu's estimate."""
    single = relu(builder, u)
    spoiled = math.sqrt(len(u.form.terms) + 1) * relu_rounding(builder, u).rounding
    builder.blocks[-1] = dataclasses.replace(builder.blocks[-1], rounding=spoiled)
    return dataclasses.replace(single, error=u.error.plus(ErrorVec.rounded(spoiled)))


def _interpolated(builder: CircuitBuilder, layer: int, u: Quantity, function: Callable[[float], float],
                  knots: Sequence[float], formula: str, error: float) -> tuple[LinearForm, float]:
    """The piecewise-linear interpolant of ``function`` at ``knots`` applied to u, as one FFN
    block at ``layer`` within ``error`` (see :func:`~infoflow_dsl.compiler.approximations.interpolant`):
    (its form, its rounding)."""
    builder.reserve_units(len(knots) - 1)  # one unit per piece
    direction = builder.direction(builder.fresh(f"L{layer}:f"))
    units, anchor, rounding = interpolant(u.form, u.magnitude, function, knots, direction, builder.unit_roundoff)
    builder.units += len(units)
    builder.blocks.append(FFNBlock(
        name=direction, layer=layer, output=direction, formula=formula, units=units, error=error, bias=anchor,
        function="sqrt", argument=u.form, rounding=rounding, approximation=error))
    return LinearForm.const(anchor).plus(LinearForm.of(direction)), rounding


def square_root(builder: CircuitBuilder, u: Quantity) -> Quantity:
    """√u, one FFN error source whose share covers the interpolation and u's error (see the
    module docstring)."""
    if u.is_constant:
        return constant(math.sqrt(max(u.form.constant, 0.0)))
    if builder.route != "wide" and len(u.form.terms) > COLLECT_TERMS:
        u = _into_one_direction(builder, u)
    low, high = builder.padded(u)
    low, high = max(low, 0.0), max(high, low + 1e-12)
    name = builder.fresh_source("ffn:sqrt")
    share = builder.source(name, "ffn", cost=(high ** 0.25 - low ** 0.25) * (len(u.form.terms) + 2))
    roots = sqrt_knots(math.sqrt(low), math.sqrt(high), share / 2)
    knots = [r * r for r in roots]
    interpolation = max((b - a) ** 2 / (4 * (a + b)) for a, b in itertools.pairwise(roots) if a + b > 0)
    layer = layer_after(u.stage)
    form, rounding = _interpolated(builder, layer, u, lambda v: math.sqrt(max(v, 0.0)), knots, f"sqrt({u.form})",
                                   interpolation)
    err_u = builder.error(u.error)
    true_low = max(u.low, 0.0)
    if true_low - err_u > 0:  # √ is Lipschitz away from 0
        error = ErrorVec.source(name).plus(u.error, 1 / (2 * math.sqrt(true_low - err_u)))
    else:
        error = ErrorVec.source(name)
        builder.constraints.append(Constraint(u.error, (share / 2) ** 2))
    return Quantity(form=form, stage=ffn_stage(layer), low=math.sqrt(true_low), high=math.sqrt(max(u.high, 0.0)),
                    error=error.plus(ErrorVec.rounded(rounding)))
