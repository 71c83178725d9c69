"""The exact piecewise-linear FFN functions, one construction for both lowerings.

    relu(u)    = relu(u)              1 unit
    |u|        = relu(u) + relu(−u)   2 units (at most one active)
    min(a, b)  = a − relu(a − b)      1 unit
    max(a, b)  = a + relu(b − a)      1 unit

Each is exact for every real input (Lipschitz 1 in each argument): its output's error is its
inputs' (each lowering adds them in its own error type: ``vectors.quantity.ErrorVec``,
``tokens.builder.Feature``'s float), plus the rounding of its one active unit, by one rule:

    2ϱ·(m + Σ|cᵢ|)  for a unit reading u = Σ cᵢ·xᵢ + b with |u| ≤ m  (:func:`unit_rounding`),

ϱ the dtype's unit roundoff. The units write one fresh direction with coefficient 1; the
function's value is read as ``passthrough + read·direction`` (:meth:`ExactFunction.value`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .circuit import LinearForm, ReLUUnit


@dataclass(frozen=True, kw_only=True)
class ExactFunction:
    """f = passthrough + read·Σₖ relu(formₖ), the units reading ``argument`` (u, or the gap)."""

    function: str  # relu, abs, min, max
    argument: LinearForm
    unit_forms: tuple[LinearForm, ...]
    read: float
    passthrough: LinearForm

    def units(self, direction: str) -> tuple[ReLUUnit, ...]:
        """The hidden units, each writing ``direction`` with coefficient 1."""
        return tuple(ReLUUnit(form, direction, 1.0) for form in self.unit_forms)

    def value(self, direction: str) -> LinearForm:
        """The function's value over the residual, once ``direction`` holds the units' sum."""
        return self.passthrough.plus(LinearForm.of(direction), self.read)


def relu_function(u: LinearForm) -> ExactFunction:
    return ExactFunction(function="relu", argument=u, unit_forms=(u,), read=1.0, passthrough=LinearForm())


def abs_function(u: LinearForm) -> ExactFunction:
    return ExactFunction(function="abs", argument=u, unit_forms=(u, u.scaled(-1.0)), read=1.0,
                         passthrough=LinearForm())


def extremum_function(a: LinearForm, b: LinearForm, kind: str) -> ExactFunction:
    """min(a, b) = a − relu(a − b), max(a, b) = a + relu(b − a)."""
    sign = 1.0 if kind == "min" else -1.0
    gap = extremum_gap(a, b, kind)
    return ExactFunction(function="relu", argument=gap, unit_forms=(gap,), read=-sign, passthrough=a)


def extremum_gap(a: LinearForm, b: LinearForm, kind: str) -> LinearForm:
    """What min's or max's unit reads: a − b (min), b − a (max)."""
    sign = 1.0 if kind == "min" else -1.0
    return LinearForm.const(0.0).plus(a, sign).plus(b, -sign)


def unit_rounding(unit_roundoff: float, magnitude: float, argument: LinearForm) -> float:
    """The rounding of one active unit reading ``argument`` (|argument| ≤ ``magnitude``):
    2ϱ·(magnitude + Σ|coefficients|)."""
    return unit_roundoff * 2 * (magnitude + sum(abs(c) for _, c in argument.terms))
