"""The lowering's error arithmetic.

Every quantity the target needs is a :class:`Quantity`: a linear form over named residual
directions, the stage at which it exists (see ``analysis.schedule``), the interval [low, high]
of its true value over the declared domain (interval arithmetic), and an a-priori bound on
|computed − true| as an :class:`ErrorVec`: Σ_i c_i·e_i, linear in the shares e_i of the error
sources it passed through, plus a numeric remainder for second-order terms, plus the
floating-point rounding estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..circuit import LinearForm

#: How many times its estimate a bound allows for rounding.
ROUNDING_SAFETY = 2.0


@dataclass(frozen=True)
class ErrorShares:
    """The share e_i of ε each error source may spend: ``by_source[name]``, else ``default``
    (a source the allocation has not seen yet)."""

    default: float
    by_source: Mapping[str, float] = field(default_factory=dict)

    def of(self, name: str) -> float:
        return self.by_source.get(name, self.default)


@dataclass(frozen=True)
class ErrorVec:
    """An error bound Σ_i coefficient_i·e_i + extra + SAFETY·rounding, e_i the share of source i.

    ``rounding`` is the floating-point estimate (docs/theory.md §4: a sum of n terms of size ≤ R rounds
    to about √n·R·u), carried with the same coefficients as the values it spoils.
    """

    linear: tuple[tuple[str, float], ...] = ()
    extra: float = 0.0
    rounding: float = 0.0

    @staticmethod
    def source(name: str) -> ErrorVec:
        """e_name: the error of one source, coefficient 1."""
        return ErrorVec(((name, 1.0),))

    @staticmethod
    def rounded(amount: float) -> ErrorVec:
        return ErrorVec(rounding=amount)

    def plus(self, other: ErrorVec, scale: float = 1.0) -> ErrorVec:
        """self + |scale|·other (an error passed through a factor ``scale``)."""
        merged = dict(self.linear)
        for name, c in other.linear:
            merged[name] = merged.get(name, 0.0) + abs(scale) * c
        return ErrorVec(tuple(merged.items()), self.extra + abs(scale) * other.extra,
                        self.rounding + abs(scale) * other.rounding)

    def widest(self, other: ErrorVec) -> ErrorVec:
        """A bound on max(e_self, e_other): coefficient by coefficient the larger (every share
        is ≥ 0, so Σ max(a_i, b_i)·e_i ≥ max(Σ a_i e_i, Σ b_i e_i)). min and max of two
        values err by at most the larger of their errors."""
        merged = dict(self.linear)
        for name, c in other.linear:
            merged[name] = max(merged.get(name, 0.0), c)
        return ErrorVec(tuple(merged.items()), max(self.extra, other.extra), max(self.rounding, other.rounding))

    def scaled(self, factor: float) -> ErrorVec:
        return ErrorVec(tuple((n, abs(factor) * c) for n, c in self.linear), abs(factor) * self.extra,
                        abs(factor) * self.rounding)

    def value(self, shares: ErrorShares) -> float:
        """The bound's number under ``shares``."""
        return sum(c * shares.of(n) for n, c in self.linear) + self.extra + ROUNDING_SAFETY * self.rounding


ZERO = ErrorVec()


@dataclass(frozen=True)
class Quantity:
    """A scalar at a site: its form, stage, true range [low, high] and error bound."""

    form: LinearForm
    stage: int
    low: float
    high: float
    error: ErrorVec = ZERO

    @property
    def magnitude(self) -> float:
        return max(abs(self.low), abs(self.high))

    @property
    def is_constant(self) -> bool:
        return self.form.is_constant


def in_direction(direction: str, stage: int, low: float, high: float, error: ErrorVec = ZERO) -> Quantity:
    """The quantity a single residual direction holds from ``stage`` on."""
    return Quantity(form=LinearForm.of(direction), stage=stage, low=low, high=high, error=error)


def constant(value: float) -> Quantity:
    """A constant: exact, at stage 0."""
    return Quantity(form=LinearForm.const(value), stage=0, low=value, high=value)


def linear(parts: Sequence[tuple[float, Quantity]], offset: float = 0.0) -> Quantity:
    """Σ c_i q_i + offset: exact, folded into the form; its error Σ |c_i|·err_i."""
    form = LinearForm.const(offset)
    low = high = offset
    error = ZERO
    stage = 0
    for c, q in parts:
        form = form.plus(q.form, c)
        low += min(c * q.low, c * q.high)
        high += max(c * q.low, c * q.high)
        error = error.plus(q.error, c)
        stage = max(stage, q.stage)
    return Quantity(form=form, stage=stage, low=low, high=high, error=error)


def interval_product(a: Quantity, b: Quantity) -> tuple[float, float]:
    """The range of a·b over a ∈ [a.low, a.high], b ∈ [b.low, b.high]: the extreme corners."""
    corners = [a.low * b.low, a.low * b.high, a.high * b.low, a.high * b.high]
    return min(corners), max(corners)


def sqrt_knots(first: float, last: float, tolerance: float) -> list[float]:
    """Roots r_0 = first < r_1 < ... < r_n = last of the knots r_i² of √u's interpolant, each
    piece as long as the tolerance allows.

    On [a², b²] the chord of √u departs from it by at most (b − a)²/(4(a + b)) (at √u = (a+b)/2),
    so the longest piece from a has b − a = d with d² = 4τ(2a + d): d = 2τ + √(4τ² + 8τa).
    Steps grow like √a, so n ≈ (last^(1/2) − first^(1/2))/√(2τ) + 1 = O(τ^(-1/2)) pieces, even
    from 0 (a grid uniform in √u would need (last − first)/(4τ) = O(τ^-1)).
    """
    roots = [first]
    while roots[-1] < last:
        a = roots[-1]
        roots.append(min(last, a + 2 * tolerance + math.sqrt(4 * tolerance * tolerance + 8 * tolerance * a)))
    return roots if len(roots) > 1 else [first, last]
