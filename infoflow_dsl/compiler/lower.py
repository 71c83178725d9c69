"""Stage 5, lower: an :class:`~infoflow_dsl.analysis.schedule.Schedule` -> a
:class:`~infoflow_dsl.compiler.circuit.Circuit`.

Every quantity the target needs becomes a :class:`Quantity`: a linear form over named
residual directions, the stage at which it exists (see ``schedule``), the interval of its
true value over the declared domain (interval arithmetic), and an a-priori bound on
|computed − true| as an :class:`ErrorVec` (linear in the error shares of the sources it
passed through, plus a numeric remainder for second-order terms).

Constructions and the error each adds (THEORY.md §4):

- **retrieval / readout head** for ``min_s f(t, s)`` with ``f = Σ_j φ_j(t) ψ_j(s)``: query rows
  φ_j, key rows ψ_j, β·(q·k) = ±β f, values ψ_j. Token t receives the Gibbs means ψ̄_j and an
  FFN forms Σ_j φ_j ψ̄_j = Σ_s p_s f(t, s), which lies within min(ln N, (N−1)/e)/β of the
  minimum (no gap assumption), plus max|f̃ − f| for approximate features.
- **token retrieval** (``x(argmin_s ...)``), values x(s): ‖Σ p v − v_best‖ ≤ (N−1)e^(−β(δ−2δf))·diam
  under the margin δ (δf the score's error).
- **position head** on angle codes p(s) = (cos θs, sin θs), θ = π/(T+1): for ``x(k)`` the score
  β cos θ(s−k) peaks at k with gap 1 − cos θ; for ``x(T)`` the score −β cos θs peaks at the last
  position with gap ≥ 2 sin(3θ/4) sin(θ/2). Error ≤ (T−1)e^(−β·gap)·diam.
- **uniform head** (sum, mean): β = 0, exact.
- **FFN blocks**: relu, |u|, min(a, b) = a − relu(a − b), max(a, b) = a + relu(b − a) exact;
  u² by piecewise-linear interpolation on a uniform grid of spacing h (error in [0, h²/4]);
  a·b = ((a+b)² − (a−b)²)/4 (error ≤ h²/16); √u on a grid uniform in √u (error per piece
  (√k' − √k)²/(4(√k + √k')), at most δ/4 for spacing δ in √u).
  Squares (hence products) are built by a route of ``approximations`` (``--ffn``): ``wide``,
  the interpolation above in one layer; ``deep``, m tent-map levels over m attention-free
  layers (error w²·4^-(m+1), O(log 1/ε) units), after which every head that reads the square
  waits (``Lowerer._placed``); ``auto``, per function the one with fewer nonzero parameters.

**Error budget.** β costs no parameters, so heads get 1% of the budget; FFN sources share
the rest to minimise parameters: a source with sensitivity w_i (how much of its error reaches
the output) and cost c_i/√e_i units gets e_i ∝ (c_i/w_i)^(2/3) (Lagrange); a deep square,
cost k_j·ln(1/e_j), gets e_j ∝ k_j/w_j (``_allocate_mixed``). The circuit is
lowered again with the new shares, the exact a-priori bound recomputed, and the shares scaled
until the bound, rounding allowance included, is at most ε.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ..analysis.comparisons import ComparisonNode, NodeResult, is_causal
from ..analysis.features import Atom, FeaturePair, NotSeparable, separate
from ..analysis.ranges import Interval
from ..analysis.schedule import Head, Schedule, layer_for, layers_for_output, next_ffn, presences_read, relative_label
from ..errors import CompileError
from ..language import typed as ir
from ..language.positions import count_tuples
from ..language.printer import describe
from .approximations import ROUTES, Approximation, SquareRoute, choose_square, interpolant
from .circuit import (
    ONE,
    POS_COS,
    POS_SIN,
    AttentionHead,
    Circuit,
    ErrorBudget,
    FFNBlock,
    LinearForm,
    NodeValue,
    ReLUUnit,
)

HEAD_SHARE = 0.01
MAX_UNITS = 1_000_000
ROUNDING_SAFETY = 2.0
UNIT_ROUNDOFF = {torch.float64: 2.0**-53, torch.float32: 2.0**-24}
#: Every unit of a √ reads its input's whole form, and a deep square's form has a term per tent
#: level: a √ input (≥ 0) of more terms is first collected into one direction by one exact
#: relu unit (one more layer), so that its units read one term each.
COLLECT_TERMS = 8


class _RoundingLimit(Exception):
    """Rounding alone would take half of ε (internal: ``lower`` turns it into a CompileError)."""

    def __init__(self, rounding: float) -> None:
        super().__init__(rounding)
        self.rounding = rounding


# ----------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ErrorVec:
    """An error bound Σ_i coefficient_i·e_i + extra + SAFETY·rounding, e_i the share of source i.

    ``rounding`` is the floating-point estimate (THEORY §4: a sum of n terms of size ≤ R rounds
    to about √n·R·u), carried with the same coefficients as the values it spoils.
    """

    linear: tuple[tuple[str, float], ...] = ()
    extra: float = 0.0
    rounding: float = 0.0

    @staticmethod
    def source(name: str) -> ErrorVec:
        return ErrorVec(((name, 1.0),))

    @staticmethod
    def rounded(amount: float) -> ErrorVec:
        return ErrorVec((), 0.0, amount)

    def plus(self, other: ErrorVec, scale: float = 1.0) -> ErrorVec:
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

    def value(self, shares: dict[str, float]) -> float:
        return sum(c * shares[n] for n, c in self.linear) + self.extra + ROUNDING_SAFETY * self.rounding


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


def constant(value: float) -> Quantity:
    return Quantity(LinearForm.const(value), 0, value, value)


def linear(parts: Sequence[tuple[float, Quantity]], offset: float = 0.0) -> Quantity:
    """Σ c_i q_i + offset: exact, folded into the form."""
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
    return Quantity(form, stage, low, high, error)


def _interval_product(a: Quantity, b: Quantity) -> tuple[float, float]:
    corners = [a.low * b.low, a.low * b.high, a.high * b.low, a.high * b.high]
    return min(corners), max(corners)


# ----------------------------------------------------------------------------- sources


@dataclass
class Source:
    """An error source: an FFN approximation (costs units) or a head's β (free)."""

    name: str
    kind: str  # ffn | head
    cost: float = 0.0
    law: str = "sqrt"  # an FFN's parameters ≈ cost·e^(-1/2) (sqrt) or cost·ln(1/e) + const (log)


@dataclass
class Constraint:
    """An error that must stay below ``limit`` (a retrieval's score error vs its margin)."""

    error: ErrorVec
    limit: float
    what: str


# ----------------------------------------------------------------------------- the lowerer


@dataclass
class Lowerer:
    """Lowers one schedule under one allocation of error shares."""

    program: ir.Program
    schedule: Schedule
    shares: dict[str, float]
    unit_roundoff: float
    route: str = "wide"  # how squares are built: wide | deep | auto (see approximations)
    directions: list[str] = field(default_factory=list)
    blocks: list[FFNBlock] = field(default_factory=list)
    heads: list[AttentionHead] = field(default_factory=list)
    sources: dict[str, Source] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    results: dict[str, list[Quantity]] = field(default_factory=dict)
    fetched: dict[tuple[str, str], list[Quantity]] = field(default_factory=dict)
    cache: dict[tuple[str, str], list[Quantity]] = field(default_factory=dict)
    rounding: float = 0.0
    counter: int = 0
    source_counter: int = 0
    units: int = 0
    gathered: bool = False  # the gather route: fixed positions at the tokens are fetched exactly, by masks

    def __post_init__(self) -> None:
        self._known: set[str] = set(self.directions)
        self.length = self.program.length
        self.theta = math.pi / (self.length + 1)
        self._direction(ONE)
        for i in range(self.program.dimension):
            self._direction(f"x[{i + 1}]")

    # ------------------------------------------------------------------ bookkeeping

    def _direction(self, name: str) -> str:
        if name not in self._known:
            self._known.add(name)
            self.directions.append(name)
        return name

    def _source(self, name: str, kind: str, cost: float = 0.0, law: str = "sqrt") -> float:
        """Register an error source; its current share (a default before allocation)."""
        source = self.sources.setdefault(name, Source(name, kind, cost, law))
        source.cost, source.law = cost, law
        return self._share(name)

    def _share(self, name: str) -> float:
        return self.shares.get(name, self.shares.get("*default*", 1e-3))

    def _err(self, error: ErrorVec) -> float:
        return error.value({n: self.shares.get(n, self.shares.get("*default*", 1e-3)) for n, _ in error.linear})

    def _fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def _fresh_source(self, stem: str) -> str:
        """The name of a new FFN error source. Sources are numbered on their own: their names key
        the error budget's allocation and tightening from one lowering attempt to the next, and
        the deep route creates a number of directions that depends on the shares, which would
        shift a shared number. (The shared counter still advances, so direction names are the
        same as before this split and the wide route's files keep their bytes.)"""
        self.counter += 1
        self.source_counter += 1
        return f"{stem}#{self.source_counter}"

    # ------------------------------------------------------------------ inputs

    def token_range(self) -> tuple[float, float]:
        domain = self.program.domain
        if isinstance(domain, ir.Box):
            return domain.low, domain.high
        return -domain.radius, domain.radius

    def token_diameter(self) -> float:
        low, high = self.token_range()
        return high - low

    def own_token(self) -> list[Quantity]:
        low, high = self.token_range()
        return [Quantity(LinearForm.of(f"x[{i + 1}]"), 0, low, high) for i in range(self.program.dimension)]

    # ------------------------------------------------------------------ FFN constructions

    def _pwl(self, layer: int, u: Quantity, function: Callable[[float], float], knots: Sequence[float],
             formula: str, error: float, kind: str = "square") -> tuple[LinearForm, float]:
        """The piecewise-linear interpolant of ``function`` at ``knots`` applied to u, as one FFN
        block at ``layer`` (see :func:`~infoflow_dsl.compiler.approximations.interpolant`): (form, rounding)."""
        self._reserve_units(len(knots) - 1)  # one unit per piece
        direction = self._direction(self._fresh(f"L{layer}:f"))
        units, anchor, rounding = interpolant(u.form, u.magnitude, function, knots, direction, self.unit_roundoff)
        self.units += len(units)
        approximation = error if kind == "sqrt" else max(b - a for a, b in itertools.pairwise(knots)) ** 2 / 4
        self.blocks.append(FFNBlock(direction, layer, direction, formula, units, error, anchor, kind, u.form,
                                    rounding, approximation))
        return LinearForm.const(anchor).plus(LinearForm.of(direction)), rounding

    def _route(self, name: str, intervals: Sequence[tuple[float, float]], scale: float, terms: int) -> SquareRoute:
        """The square route for the function ``name`` (its tolerance: ``scale`` × its share),
        registered as an FFN error source with that route's cost law."""
        route = choose_square(self.route, intervals, scale * self._share(name), terms)
        self._source(name, "ffn", cost=route.cost(intervals, terms, scale), law=route.law)
        return route

    def _squares(self, layer: int, route: SquareRoute, inputs: Sequence[tuple[Quantity, float, float]],
                 tolerance: float) -> list[Approximation]:
        """u² within ``tolerance`` for each (u, low, high), built by ``route`` from ``layer`` on."""
        approximations = []
        for u, low, high in inputs:
            self._reserve_units(route.units(low, high, tolerance))

            def names(offset: int, stem: str) -> str:
                return self._direction(self._fresh(f"L{layer + offset}:{stem}"))

            approximations.append(route.build(u.form, u.magnitude, low, high, tolerance, names, self.unit_roundoff,
                                              f"({u.form})^2"))
        return approximations

    def _emit(self, layer: int, approximations: Sequence[Approximation], error: float, stage: int) -> int:
        """Append the approximations' levels as FFN blocks from ``layer`` on (the last block records
        ``error``); the stage of the result (``stage`` if no level was needed)."""
        emitted = 0
        for approximation in approximations:
            for level in approximation.levels:
                self.units += len(level.units)
                self.blocks.append(FFNBlock(level.direction, layer + level.offset, level.direction, level.formula,
                                            level.units, 0.0, level.bias, level.function, level.argument,
                                            level.rounding, level.approximation))
                emitted += 1
        if emitted:
            self.blocks[-1] = _with_error(self.blocks[-1], error)
        depth = max(a.depth for a in approximations)
        return 2 * (layer + depth - 1) + 1 if depth else stage

    def _reserve_units(self, count: int) -> None:
        """Refuse, before building them, ``count`` more units that would pass MAX_UNITS."""
        if self.units + count > MAX_UNITS:
            raise CompileError(f"the model would need more than {MAX_UNITS:,} hidden units at this ε; raise ε "
                               "(analyze's cost law says how the units grow; a norm that can be 0 costs ε^-1)")

    def _layer_after(self, stage: int) -> int:
        return (next_ffn(stage) - 1) // 2

    def _padded(self, u: Quantity) -> tuple[float, float]:
        pad = self._err(u.error)
        return u.low - pad, u.high + pad

    def square(self, u: Quantity) -> Quantity:
        if u.is_constant:
            return constant(u.form.constant ** 2)
        low, high = self._padded(u)
        high = max(high, low + 1e-12)
        name = self._fresh_source("ffn:square")
        route = self._route(name, [(low, high)], 1.0, len(u.form.terms))
        layer = self._layer_after(u.stage)
        (approximation,) = self._squares(layer, route, [(u, low, high)], self._share(name))
        stage = self._emit(layer, [approximation], approximation.error, u.stage)
        square_low = Interval(u.low, u.high).squared().low  # analyze's rule for "can reach 0"
        err_u = self._err(u.error)
        error = ErrorVec.source(name).plus(u.error, 2 * u.magnitude)
        error = error.plus(ErrorVec((), err_u * err_u, approximation.rounding))
        return Quantity(approximation.form, stage, square_low, u.magnitude ** 2, error)

    def product(self, a: Quantity, b: Quantity) -> Quantity:
        """a·b = ((a+b)² − (a−b)²)/4, both squares within 4e by one route (wide: grids of one
        spacing h = 4√e), errors in [0, 4e] of one sign: error ≤ e."""
        if a.is_constant:
            return linear([(a.form.constant, b)])
        if b.is_constant:
            return linear([(b.form.constant, a)])
        if a.form == b.form:
            return self.square(a)
        # (λa)(b/λ) with λ² = |b|/|a| balances the ranges of λa ± b/λ, so the grids are shortest
        scale = math.sqrt(max(b.magnitude, 1e-12) / max(a.magnitude, 1e-12))
        total, difference = linear([(scale, a), (1 / scale, b)]), linear([(scale, a), (-1 / scale, b)])
        (low1, high1), (low2, high2) = self._padded(total), self._padded(difference)
        high1, high2 = max(high1, low1 + 1e-12), max(high2, low2 + 1e-12)
        name = self._fresh_source("ffn:product")
        route = self._route(name, [(low1, high1), (low2, high2)], 4.0, len(total.form.terms))
        layer = self._layer_after(max(a.stage, b.stage))
        plus, minus = self._squares(layer, route, [(total, low1, high1), (difference, low2, high2)],
                                    4.0 * self._share(name))
        rounding = 0.25 * plus.rounding + 0.25 * minus.rounding
        # both errors lie in [0, E_i], so their difference over 4 lies within max(E_1, E_2)/4
        stage = self._emit(layer, [plus, minus], max(plus.error, minus.error) / 4, max(a.stage, b.stage))
        low, high = _interval_product(a, b)
        err_a, err_b = self._err(a.error), self._err(b.error)
        error = ErrorVec(((name, 1.0),)).plus(a.error, b.magnitude).plus(b.error, a.magnitude)
        error = error.plus(ErrorVec((), err_a * err_b, rounding))
        return Quantity(plus.form.scaled(0.25).plus(minus.form.scaled(-0.25)), stage, low, high, error)

    def relu_units(self, u: Quantity, formula: str, coefficient: float = 1.0,
                   extra_inputs: Sequence[LinearForm] = (), function: str = "relu") -> tuple[str, int]:
        """Exact ReLU units relu(u) (and relu(w) for each extra input) into one new direction."""
        layer = self._layer_after(u.stage)
        direction = self._direction(self._fresh(f"L{layer}:r"))
        inputs = [u.form, *extra_inputs]
        units = tuple(ReLUUnit(form, direction, coefficient) for form in inputs)
        rounding = self._relu_rounding(u).rounding
        self.blocks.append(FFNBlock(direction, layer, direction, formula, units, 0.0, 0.0, function, u.form, rounding))
        return direction, layer

    def _relu_rounding(self, u: Quantity) -> ErrorVec:
        return ErrorVec.rounded(self.unit_roundoff * 2 * (u.magnitude + sum(abs(c) for _, c in u.form.terms)))

    def relu(self, u: Quantity) -> Quantity:
        if u.is_constant:
            return constant(max(u.form.constant, 0.0))
        direction, layer = self.relu_units(u, f"relu({u.form})")
        return Quantity(LinearForm.of(direction), 2 * layer + 1, max(u.low, 0.0), max(u.high, 0.0),
                        u.error.plus(self._relu_rounding(u)))

    def absolute(self, u: Quantity) -> Quantity:
        if u.is_constant:
            return constant(abs(u.form.constant))
        direction, layer = self.relu_units(u, f"|{u.form}|", extra_inputs=(u.form.scaled(-1.0),), function="abs")
        low = 0.0 if u.low <= 0 <= u.high else min(abs(u.low), abs(u.high))
        return Quantity(LinearForm.of(direction), 2 * layer + 1, low, u.magnitude, u.error.plus(self._relu_rounding(u)))

    def minimum(self, a: Quantity, b: Quantity, sign: float = 1.0) -> Quantity:
        """min(a, b) = a − relu(a − b); max(a, b) = a + relu(b − a) (sign = −1)."""
        gap = linear([(sign, a), (-sign, b)])
        if gap.is_constant:
            return a if gap.form.constant <= 0 else b  # gap = ±(a − b): a wins when it is ≤ 0
        direction, layer = self.relu_units(gap, f"relu({gap.form})")
        form = a.form.plus(LinearForm.of(direction), -sign)
        pick = min if sign > 0 else max
        # the gather route's slot trees take the larger error (sound and T times tighter over T
        # slots); the efficient route keeps the sum, which its compiled models were built with
        joint = a.error.widest(b.error) if self.gathered else a.error.plus(b.error)
        error = joint.plus(self._relu_rounding(gap))
        return Quantity(form, 2 * layer + 1, pick(a.low, b.low), pick(a.high, b.high), error)

    def _into_one_direction(self, u: Quantity) -> Quantity:
        """relu(u) = u (u ≥ 0) into one direction (see COLLECT_TERMS); reading a form of n terms
        rounds like a sum of n: √(n+1) times the single relu's estimate."""
        single = self.relu(u)
        spoiled = math.sqrt(len(u.form.terms) + 1) * self._relu_rounding(u).rounding
        self.blocks[-1] = dataclasses.replace(self.blocks[-1], rounding=spoiled)
        return Quantity(single.form, single.stage, single.low, single.high,
                        u.error.plus(ErrorVec.rounded(spoiled)))

    def square_root(self, u: Quantity) -> Quantity:
        """√u on the fewest knots whose chords stay within e/2 of √u (``sqrt_knots``); its share e
        covers that interpolation and the input's error: away from 0 that error passes with
        factor 1/(2√(low − err)); near 0 an input error δ becomes up to √δ, so the input's error
        is held below (e/2)² (a constraint)."""
        if u.is_constant:
            return constant(math.sqrt(max(u.form.constant, 0.0)))
        if self.route != "wide" and len(u.form.terms) > COLLECT_TERMS:
            u = self._into_one_direction(u)
        low, high = self._padded(u)
        low, high = max(low, 0.0), max(high, low + 1e-12)
        name = self._fresh_source("ffn:sqrt")
        share = self._source(name, "ffn", cost=(high ** 0.25 - low ** 0.25) * (len(u.form.terms) + 2))
        roots = sqrt_knots(math.sqrt(low), math.sqrt(high), share / 2)
        knots = [r * r for r in roots]
        interp = max((b - a) ** 2 / (4 * (a + b)) for a, b in itertools.pairwise(roots) if a + b > 0)
        layer = self._layer_after(u.stage)
        form, rounding = self._pwl(layer, u, lambda v: math.sqrt(max(v, 0.0)), knots, f"sqrt({u.form})", interp, "sqrt")
        err_u = self._err(u.error)
        true_low = max(u.low, 0.0)
        if true_low - err_u > 0:  # √ is Lipschitz away from 0
            error = ErrorVec.source(name).plus(u.error, 1 / (2 * math.sqrt(true_low - err_u)))
        else:
            error = ErrorVec.source(name)
            self.constraints.append(Constraint(u.error, (share / 2) ** 2, f"the input of {name}"))
        return Quantity(form, 2 * layer + 1, math.sqrt(true_low), math.sqrt(max(u.high, 0.0)),
                        error.plus(ErrorVec.rounded(rounding)))

    # ------------------------------------------------------------------ expressions

    def values(self, expr: object, site: str) -> list[Quantity]:
        """The components of ``expr`` at ``site`` (every position variable is the site's own token)."""
        key = (describe(expr), site)
        if key not in self.cache:
            self.cache[key] = self._values(expr, site)
        return self.cache[key]

    def scalar(self, expr: object, site: str) -> Quantity:
        (value,) = self.values(expr, site)
        return value

    def _values(self, expr: object, site: str) -> list[Quantity]:
        if isinstance(expr, ir.NumberLiteral):
            return [constant(expr.value)]
        if isinstance(expr, ir.Constant):
            return [constant(v) for v in expr.values]
        if isinstance(expr, NodeResult):
            return self.results[expr.node]
        if isinstance(expr, ir.Token):
            return self._token(expr, site)
        if isinstance(expr, ir.Component):
            return [self.values(expr.vector, site)[expr.index - 1]]
        if isinstance(expr, ir.Inner):
            left, right = self.values(expr.left, site), self.values(expr.right, site)
            return [linear([(1.0, self.product(a, b)) for a, b in zip(left, right, strict=True)])]
        if isinstance(expr, ir.Arithmetic):
            return self._arithmetic(expr, site)
        if isinstance(expr, ir.Negate):
            return [linear([(-1.0, q)]) for q in self.values(expr.argument, site)]
        if isinstance(expr, ir.Divide):
            return [linear([(1.0 / expr.divisor, q)]) for q in self.values(expr.numerator, site)]
        if isinstance(expr, ir.MatVec):
            rows, columns = expr.matrix.type.shape
            vector = self.values(expr.vector, site)
            return [linear([(expr.matrix.values[r * columns + c], vector[c]) for c in range(columns)])
                    for r in range(rows)]
        if isinstance(expr, ir.Square):
            if isinstance(expr.argument, ir.Norm):
                return [self._squared_norm(expr.argument.argument, site)]
            return [self.square(self.scalar(expr.argument, site))]
        if isinstance(expr, ir.Norm):
            return [self.square_root(self._squared_norm(expr.argument, site))]
        if isinstance(expr, ir.Pointwise):
            return [self._pointwise(expr, site)]
        if isinstance(expr, ir.Presence):
            return self.fetched[(describe(expr), site)]
        raise CompileError(f"cannot lower {describe(expr)}")

    def _squared_norm(self, vector: object, site: str) -> Quantity:
        return linear([(1.0, self.square(q)) for q in self.values(vector, site)])

    def _pointwise(self, expr: ir.Pointwise, site: str) -> Quantity:
        arguments = [self.scalar(a, site) for a in expr.arguments]
        if expr.function == "relu":
            return self.relu(arguments[0])
        if expr.function == "abs":
            return self.absolute(arguments[0])
        if expr.function == "sqrt":
            return self.square_root(arguments[0])
        return self.minimum(arguments[0], arguments[1], 1.0 if expr.function == "min" else -1.0)

    def _arithmetic(self, expr: ir.Arithmetic, site: str) -> list[Quantity]:
        left, right = self.values(expr.left, site), self.values(expr.right, site)
        if expr.operator == "*":
            if len(left) == 1:
                return [self.product(left[0], q) for q in right]
            return [self.product(q, right[0]) for q in left]
        sign = 1.0 if expr.operator == "+" else -1.0
        return [linear([(1.0, a), (sign, b)]) for a, b in zip(left, right, strict=True)]

    def _token(self, expr: ir.Token, site: str) -> list[Quantity]:
        position = expr.position
        if isinstance(position, ir.PositionVariable) and position.offset:
            return self.fetched[(relative_label(position.offset), "token")]
        if isinstance(position, ir.PositionVariable):
            return self.own_token()
        if isinstance(position, NodeResult):
            return self.results[position.node]
        label = ir.position_label(position)
        return self.fetched[(label, site)]

    # ------------------------------------------------------------------ heads

    def _head_share(self, name: str, rounding: float) -> tuple[float, float]:
        """(share, what β must achieve): the head's share covers its own rounding too, so the
        FFN allocation never depends on T (only β does)."""
        share = self._source(name, "head")
        spoiled = ROUNDING_SAFETY * rounding
        return share, max(share - spoiled, share / 2)

    def position_head(self, head: Head) -> None:
        """x(k) (or x(T)) fetched to ``head.site`` on angle codes; an offset x(t − k) or x(T − k)
        by a structural mask instead."""
        label = head.compares[2:-1]
        exact_here = (self.program.per_token or self.gathered) and head.site == "token"
        if label.startswith("t") or label.startswith("T ") or exact_here:
            self.masked_position_head(head, label)
            return
        self._direction(POS_COS)
        self._direction(POS_SIN)
        name = f"head:{head.name}"
        low, high = self.token_range()
        share, target = self._head_share(name, self.unit_roundoff * (math.sqrt(self.length) + 4) * max(abs(low),
                                                                                                       abs(high)))
        if label == "T":
            query = (LinearForm.const(-1.0), LinearForm.const(0.0))
            gap = 2 * math.sin(0.75 * self.theta) * math.sin(0.5 * self.theta)
        else:
            k = int(label)
            query = (LinearForm.const(math.cos(self.theta * k)), LinearForm.const(math.sin(self.theta * k)))
            gap = 1 - math.cos(self.theta)
        gap -= 8 * self.unit_roundoff  # rounding of q·k
        diameter = self.token_diameter()
        beta = max(math.log(max(self.length - 1, 1) * max(diameter, 1e-300) / target), 0.0) / gap
        outputs = tuple(self._direction(f"x({label})@{head.site}[{i + 1}]") for i in range(self.program.dimension))
        self.heads.append(AttentionHead(
            head.name, head.layer, "position", head.site, query, (LinearForm.of(POS_COS), LinearForm.of(POS_SIN)),
            tuple(LinearForm.of(f"x[{i + 1}]") for i in range(self.program.dimension)), outputs, beta, (), share,
            f"x({label}) by angle codes"))
        self.fetched[(label, head.site)] = [
            Quantity(LinearForm.of(o), 2 * head.layer, low, high, ErrorVec.source(name)) for o in outputs]

    def masked_position_head(self, head: Head, label: str) -> None:
        """x(t − k) at every token t, or x(k), x(T), x(T − k) at ``head.site``, by a structural mask
        key == query − k (key == k, key == last − k): the one allowed key gets softmax weight
        exactly 1, so the fetch is exact (error 0, no rounding), needs no β and does not grow with
        T. The alternative, rotating the query's angle code by kθ, errs by
        (T − 1)·e^(−β(1 − cos θ))·diam, so the error budget always prefers the mask for offsets,
        and per-token targets fetch fixed positions this way too (an angle-code head would give
        every later key a weight e^(−β·gap) > 0: "almost" causal is not causal). In a causal
        target a token-site fetch also masks keys after the query, so the output at t never
        reads x(t+1..) even where the target is undefined. A query with no allowed key
        receives 0 (the checker proved the target never reads it there)."""
        side = self._position_side(label)
        low, high = self.token_range()
        outputs = tuple(self._direction(f"x({label})@{head.site}[{i + 1}]") for i in range(self.program.dimension))
        zero = (LinearForm(),)
        mask: tuple[tuple[str | int, str, str | int], ...] = (("key", "==", side),)
        if head.site == "token" and is_causal(self.program) and not label.startswith("t"):
            mask += (("key", "<=", "query"),)
        self.heads.append(AttentionHead(
            head.name, head.layer, "position", head.site, zero, zero,
            tuple(LinearForm.of(f"x[{i + 1}]") for i in range(self.program.dimension)), outputs, 0.0, mask, 0.0,
            f"x({label}) by the mask key == {side}"))
        self.fetched[(label, head.site)] = [Quantity(LinearForm.of(o), 2 * head.layer, low, high) for o in outputs]

    def presence_head(self, head: Head, presence: ir.Presence) -> None:
        """present(j : conditions): 1 at the tokens where slot j is in range, else 0. A head with
        the mask key == j plus the conditions (j read as the key, the token's variable as the
        query) and the constant 1 as its value: exact, like any masked fetch."""
        def side(term: object) -> str | int:
            if isinstance(term, ir.FixedPosition) and term.index == presence.index:
                return "key"
            if isinstance(term, ir.PositionVariable):
                return mask_side("query", term.offset)
            if isinstance(term, ir.LastPosition):
                return mask_side("last", term.offset)
            return term.index  # type: ignore[attr-defined]

        linked = tuple((side(c.left), c.operator, side(c.right)) for c in presence.conditions)
        mask = (("key", "==", presence.index), *linked)
        output = self._direction(f"{head.compares}@token")
        zero = (LinearForm(),)
        self.heads.append(AttentionHead(head.name, head.layer, "presence", "token", zero, zero,
                                        (LinearForm.const(1.0),), (output,), 0.0, mask, 0.0,
                                        f"{head.compares} by a mask"))
        self.fetched[(head.compares, "token")] = [Quantity(LinearForm.of(output), 2 * head.layer, 0.0, 1.0)]

    @staticmethod
    def _position_side(label: str) -> str | int:
        """The mask side a fetch label names: ``t - 1`` -> ``query-1``, ``T - 2`` -> ``last-2``, ``3`` -> 3."""
        if label.isdigit():
            return int(label)
        side = "query" if label.startswith("t") else "last"
        offset = label[1:].replace(" ", "")
        return mask_side(side, int(offset) if offset else 0)

    def _monomial(self, monomial: tuple[Atom, ...], site: str) -> Quantity:
        if not monomial:
            return constant(1.0)
        value = self.scalar(monomial[0].expr, site)
        for atom in monomial[1:]:
            value = self.product(value, self.scalar(atom.expr, site))
        return value

    def _query(self, pair: FeaturePair, site: str) -> Quantity:
        return linear([(c, self._monomial(m, site)) for m, c in sorted(pair.query.items())])

    def _separated(self, body: object, variable: str, site: str) -> tuple[list[tuple[Quantity, Quantity]],
                                                                          list[Quantity]]:
        """The score Σ_j φ_j ψ_j as (query, key) quantity pairs (those with a constant query merged
        into one, first) and the terms free of ``variable`` (offsets)."""
        try:
            pairs = separate(body, variable, self.gathered)
        except NotSeparable as error:
            raise CompileError(f"the score of {describe(body)} is not a sum of products of per-token "
                               f"features: {error}") from None
        keyed = [(self._query(p, site), self._monomial(p.key, "token")) for p in pairs if p.key]
        offset = [self._query(p, site) for p in pairs if not p.key]
        constant_query = [(q, k) for q, k in keyed if q.is_constant]
        varying = [(q, k) for q, k in keyed if not q.is_constant]
        if constant_query:
            merged = linear([(q.form.constant, k) for q, k in constant_query])
            varying.insert(0, (constant(1.0), merged))
        return varying, offset

    def _placed(self, head: Head, features: Sequence[tuple[Quantity, Quantity]]) -> Head:
        """The head at the first layer, from the schedule's on, whose attention can read its query
        and key features. The schedule counts one FFN stage per square; a deep square takes one
        per tent level, so the lowering moves a head that reads one to the layer after its last
        level (and everything that reads the head's result follows, by its stage). For wide
        squares the schedule's layer always suffices."""
        ready = max((max(q.stage, k.stage) for q, k in features), default=0)
        layer = max(head.layer, layer_for(ready))
        if layer != head.layer and self.route == "wide" and not self.gathered:
            raise AssertionError(f"features of {head.name} not ready for layer {head.layer}")  # a scheduling bug
        return dataclasses.replace(head, layer=layer)

    def comparison_head(self, node: ComparisonNode, head: Head) -> None:
        if len(node.variables) != 1:
            raise CompileError(f"{node.quoted} compares several positions jointly")
        if node.kind in ("sum", "mean"):
            self._uniform_head(node, head)
            return
        varying, offset = self._separated(node.body, node.variables[0], node.site)
        head = self._placed(head, varying)
        if not varying:
            varying = [(constant(0.0), constant(0.0))]
        kind = node.kind
        count = self._key_count(node)
        sign = -1.0 if kind in ("min", "argmin") else 1.0
        name = f"head:{node.name}"
        score_error = ZERO
        for q, k in varying:
            score_error = score_error.plus(k.error, q.magnitude).plus(q.error, k.magnitude)
            score_error = score_error.plus(ErrorVec((), self._err(q.error) * self._err(k.error)))
        score_magnitude = sum(q.magnitude * k.magnitude for q, k in varying)
        queries = tuple(q.form.scaled(sign) for q, _ in varying)
        keys = tuple(k.form for _, k in varying)
        mask = self._mask(node)
        if kind in ("argmin", "argmax"):
            self._token_retrieval(node, head, queries, keys, mask, count, score_error, score_magnitude)
            return
        value_magnitude = max((k.magnitude for _, k in varying), default=0.0)
        rounding = self.unit_roundoff * (4 * math.sqrt(len(varying)) * score_magnitude
                                         + (math.sqrt(count) + 4) * value_magnitude)
        share, target = self._head_share(name, rounding)
        beta = min(math.log(count), (count - 1) / math.e) / target if count > 1 else 0.0
        outputs = tuple(self._direction(f"{node.name}:mean[{j + 1}]") for j in range(len(varying)))
        self.heads.append(AttentionHead(
            node.name, head.layer, head.kind, node.site, queries, keys, keys, outputs, beta, mask, share,
            head.compares))
        combined = self._combine(varying, offset, outputs, head.layer)
        low, high = self._body_range(varying, offset)
        error = combined.error.plus(ErrorVec.source(name)).plus(score_error)
        self.results[node.name] = [Quantity(combined.form, combined.stage, low, high, error)]

    def _combine(self, varying: list[tuple[Quantity, Quantity]], offset: list[Quantity], outputs: Sequence[str],
                 layer: int) -> Quantity:
        """Σ_j φ_j ψ̄_j + offsets: the retrieved means ψ̄_j (directions ``outputs``) times the query side."""
        means = [Quantity(LinearForm.of(o), 2 * layer, k.low, k.high) for o, (_, k) in zip(outputs, varying,
                                                                                             strict=True)]
        return linear([(1.0, self.product(q, m)) for (q, _), m in zip(varying, means, strict=True)]
                      + [(1.0, o) for o in offset])

    def _uniform_head(self, node: ComparisonNode, head: Head) -> None:
        """sum/mean: β = 0, so attention averages its values exactly; values are the key features of
        every component of the body, and each component is recombined with its query side."""
        variable = node.variables[0]
        shape = node.body.type.shape  # type: ignore[union-attr]
        components = [node.body] if not shape else [ir.Component(node.body, i + 1) for i in range(shape[0])]
        separated = [self._separated(c, variable, node.site) for c in components]
        head = self._placed(head, [pair for varying, _ in separated for pair in varying])
        rows = [k for varying, _ in separated for _, k in varying]
        mask = self._mask(node)
        count = self._key_count(node)
        scale = 1.0
        if node.kind == "sum":
            if any("query" in (c[0], c[2]) for c in mask):
                raise CompileError(f"{node.quoted}: a sum whose range depends on the querying position "
                                   f"is not supported; write it as a mean")
            scale = float(count)
        outputs = tuple(self._direction(f"{node.name}:mean[{j + 1}]") for j in range(len(rows)))
        zero = (LinearForm(),)
        self.heads.append(AttentionHead(node.name, head.layer, head.kind, node.site, zero, zero,
                                        tuple(k.form for k in rows), outputs, 0.0, mask, 0.0, head.compares))
        results = []
        start = 0
        for varying, offset in separated:
            own = outputs[start:start + len(varying)]
            start += len(varying)
            combined = self._combine(varying, offset, own, head.layer)
            magnitude = max((k.magnitude for _, k in varying), default=0.0)
            rounding = ErrorVec.rounded(self.unit_roundoff * (math.sqrt(count) + 4) * magnitude)
            error = combined.error.plus(rounding)
            for q, k in varying:  # a mean of approximate features errs by at most their error
                error = error.plus(k.error, q.magnitude).plus(q.error, k.magnitude)
            low, high = self._body_range(varying, offset)
            results.append(Quantity(combined.form.scaled(scale), combined.stage, low * scale, high * scale,
                                    error.scaled(scale)))
        self.results[node.name] = results

    def _body_range(self, varying: list[tuple[Quantity, Quantity]], offset: list[Quantity]) -> tuple[float, float]:
        low = high = 0.0
        for q, k in varying:
            a, b = _interval_product(q, k)
            low, high = low + a, high + b
        for o in offset:
            low, high = low + o.low, high + o.high
        return low, high

    def _token_retrieval(self, node: ComparisonNode, head: Head, queries: tuple[LinearForm, ...],
                         keys: tuple[LinearForm, ...], mask: tuple, count: int, score_error: ErrorVec,
                         score_magnitude: float) -> None:
        margin = self.program.margin
        if margin is None:
            raise CompileError(f"{node.quoted} retrieves a token, which jumps where two scores tie: declare "
                               f"`margin δ` (or pass --margin) so the error bound can hold")
        name = f"head:{node.name}"
        low, high = self.token_range()
        share, target = self._head_share(name, self.unit_roundoff * (math.sqrt(count) + 4) * max(abs(low), abs(high)))
        self.constraints.append(Constraint(score_error, margin / 4, f"the score error of {node.quoted}"))
        rounding = 4 * len(keys) * self.unit_roundoff * score_magnitude
        effective = margin - 2 * self._err(score_error) - 2 * rounding
        if effective <= 0:
            effective = margin / 2
        diameter = self.token_diameter()
        beta = max(math.log(max(count - 1, 1) * diameter / target), 0.0) / effective
        outputs = tuple(self._direction(f"{node.name}:x[{i + 1}]") for i in range(self.program.dimension))
        self.heads.append(AttentionHead(
            node.name, head.layer, head.kind, node.site, queries, keys,
            tuple(LinearForm.of(f"x[{i + 1}]") for i in range(self.program.dimension)), outputs, beta, mask, share,
            head.compares))
        self.results[node.name] = [Quantity(LinearForm.of(o), 2 * head.layer, low, high, ErrorVec.source(name))
                                   for o in outputs]

    def _key_count(self, node: ComparisonNode) -> int:
        """The most keys a query of this node can see (N in the Gibbs bound)."""
        variable = node.variables[0]
        own = [c for c in node.conditions if {getattr(c.left, "name", None), getattr(c.right, "name", None)}
               <= {variable, None}]
        return max(count_tuples((variable,), own, self.length), 1)

    def _mask(self, node: ComparisonNode) -> tuple[tuple[str | int, str, str | int], ...]:
        variable = node.variables[0]

        def term(t: object) -> str | int:
            if isinstance(t, ir.PositionVariable):
                return mask_side("key" if t.name == variable else "query", t.offset)
            if isinstance(t, ir.LastPosition):
                return mask_side("last", t.offset)
            return t.index  # type: ignore[attr-defined]

        return tuple((term(c.left), c.operator, term(c.right)) for c in node.conditions)

    # ------------------------------------------------------------------ the whole circuit

    def _read_out(self, q: Quantity) -> Quantity:
        """The unembedding sums the readout's directions: one more rounding, √D·|y|·u."""
        reading = math.sqrt(len(q.form.terms) + 1) * (q.magnitude + sum(abs(c) for _, c in q.form.terms))
        return Quantity(q.form, q.stage, q.low, q.high, q.error.plus(ErrorVec.rounded(self.unit_roundoff * reading)))

    def run(self) -> tuple[list[Quantity], int]:
        by_name = {h.name: h for h in self.schedule.heads}
        presences = {describe(p): p for p in presences_read(self.schedule.tree)}
        for head in self.schedule.heads:
            if head.kind == "position":
                self.position_head(head)
            elif head.kind == "presence":
                self.presence_head(head, presences[head.compares])
        for node in self.schedule.tree.nodes:
            self.comparison_head(node, by_name[node.name])
        tree = self.schedule.tree
        outputs = [self._read_out(q) for q in self.values(tree.output, tree.output_site)]
        layers = max([self.schedule.layers, *(h.layer for h in self.heads), *(b.layer for b in self.blocks),
                      *(layers_for_output(q.stage) for q in outputs)])
        return outputs, layers


def mask_side(side: str, offset: int) -> str:
    """A mask side in the model's config: ``query``, ``key``, ``last``, or with an offset
    ``query-1``, ``last-2``, ``key+1`` (model.py reads them back)."""
    return f"{side}{offset:+d}" if offset else side


def _with_error(block: FFNBlock, error: float) -> FFNBlock:
    return dataclasses.replace(block, error=error)


# ----------------------------------------------------------------------------- budget


def _allocate(sources: dict[str, Source], sensitivity: dict[str, float], budget: float) -> dict[str, float]:
    """Shares minimising the parameters Σ c_i/√e_i (+ Σ k_j ln(1/e_j) for deep squares) subject to
    Σ w_i e_i = budget (heads: 1%, evenly)."""
    heads = [s for s in sources.values() if s.kind == "head" and sensitivity.get(s.name, 0) > 0]
    ffns = [s for s in sources.values() if s.kind == "ffn" and sensitivity.get(s.name, 0) > 0]
    head_budget = budget * (HEAD_SHARE if ffns else 1.0)
    shares: dict[str, float] = {s.name: budget for s in sources.values()}
    for s in heads:
        shares[s.name] = head_budget / (len(heads) * sensitivity[s.name])
    if any(s.law == "log" for s in ffns):
        shares.update(_allocate_mixed(ffns, sensitivity, budget - head_budget))
    elif ffns:
        weights = {s.name: (max(s.cost, 1e-12) / sensitivity[s.name]) ** (2 / 3) for s in ffns}
        scale = (budget - head_budget) / sum(sensitivity[n] * w for n, w in weights.items())
        for n, w in weights.items():
            shares[n] = scale * w
    return shares


def _allocate_mixed(ffns: Sequence[Source], sensitivity: dict[str, float], budget: float) -> dict[str, float]:
    """Lagrange with both laws: ∂/∂e of c·e^(-1/2) and k·ln(1/e) equal to λ·w give
    e = (c/(2λw))^(2/3) (wide) and e = k/(λw) (deep); λ by bisection (in log λ) on Σ w e = budget."""

    def shares(log_lambda: float) -> dict[str, float]:
        lam = math.exp(log_lambda)
        return {s.name: (max(s.cost, 1e-12) / (2 * lam * sensitivity[s.name])) ** (2 / 3) if s.law == "sqrt"
                else max(s.cost, 1e-12) / (lam * sensitivity[s.name]) for s in ffns}

    def spent(log_lambda: float) -> float:
        return sum(sensitivity[n] * e for n, e in shares(log_lambda).items())

    low, high = -50.0, 50.0
    while spent(low) < budget:
        low -= 50.0
    while spent(high) > budget:
        high += 50.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if spent(middle) > budget else (low, middle)
    return shares(high)


def lower(program: ir.Program, schedule: Schedule, eps: float, dtype: torch.dtype = torch.float64,
          ffn: str = "wide", gathered: bool = False) -> Circuit:
    """The circuit of an efficient target, with a-priori error ≤ eps in ``dtype``.

    ``gathered``: the schedule of compile's gather route (``unroll``), whose comparisons read
    gathered fixed positions, so the order-of-comparison verdict does not apply to it.

    Raises :class:`CompileError` for a target the verdict calls inefficient, and for an ε
    below what the dtype's rounding allows, saying the smallest ε (within a factor 2^(1/4))
    that it can honour: finer grids need more units, whose sums round more, so that limit
    is found by trying. ``ffn`` picks the square route (``approximations.ROUTES``): deep squares
    take extra attention-free layers, and every head that reads one waits for its last level.
    """
    if ffn not in ROUTES:
        raise CompileError(f"--ffn must be one of {', '.join(ROUTES)}, got {ffn!r}")
    if ffn != "wide" and schedule.budget is not None:
        raise CompileError(f"--ffn {ffn} adds layers, which a head budget (--heads) fixes; use --ffn wide")
    try:
        return _lower(program, schedule, eps, dtype, ffn, gathered)
    except _RoundingLimit as limit:
        dtype_name = str(dtype).replace("torch.", "")
        smallest = eps
        for _ in range(80):
            smallest *= 2 ** 0.25
            try:
                _lower(program, schedule, smallest, dtype, ffn, gathered)
                break
            except _RoundingLimit:
                continue
        raise CompileError(f"ε = {eps:g} is below what {dtype_name} can honour for this program (its rounding alone "
                           f"may reach {limit.rounding:.2g}); the smallest ε it can is about {smallest:.2g}") from None


def _lower(program: ir.Program, schedule: Schedule, eps: float, dtype: torch.dtype, ffn: str,
           gathered: bool = False) -> Circuit:
    """One lowering attempt under ``eps`` (see :func:`lower`); the error-budget loop."""
    if schedule.problems and not gathered:
        problem = schedule.problems[0]
        raise CompileError(f"the target is inefficient: {problem.message}; {problem.law}")
    if not eps > 0:
        raise CompileError(f"ε must be positive, got {eps}")
    roundoff = UNIT_ROUNDOFF[dtype]
    shares: dict[str, float] = {"*default*": eps / 16}
    correction = 1.0
    allocated = False
    tightening: dict[str, float] = {}  # persistent factors from constraints (margins, √ inputs)
    best: tuple[Lowerer, list[Quantity], int, float] | None = None
    for _ in range(24):
        lowerer = Lowerer(program, schedule, shares, roundoff, ffn, gathered=gathered)
        outputs, layers = lowerer.run()
        full = {n: shares.get(n, shares["*default*"]) for n in lowerer.sources}
        rounding = max((ROUNDING_SAFETY * q.error.rounding for q in outputs), default=0.0)
        bound = max((q.error.value(full) for q in outputs), default=0.0)
        violated = [c for c in lowerer.constraints if c.error.value(full) > c.limit]
        if rounding >= 0.5 * eps:
            raise _RoundingLimit(rounding)
        if bound <= eps and not violated:
            best = (lowerer, outputs, layers, bound)
            if bound >= 0.8 * eps:
                break
        elif bound > eps and allocated:  # the allocation's first-order prediction fell short
            correction *= 0.97 * eps / bound
        sensitivity: dict[str, float] = {}
        for q in outputs:
            for n, c in q.error.linear:
                sensitivity[n] = max(sensitivity.get(n, 0.0), c)
        extra = max((q.error.extra for q in outputs), default=0.0)
        budget = max((0.97 * eps - rounding - extra) * correction, eps * 1e-9)
        for constraint in violated:
            ratio = 0.7 * constraint.limit / constraint.error.value(full)
            for n, _ in constraint.error.linear:
                tightening[n] = tightening.get(n, 1.0) * ratio
        shares = _allocate(lowerer.sources, sensitivity, budget)
        allocated = True
        for n, factor in tightening.items():
            shares[n] = shares.get(n, budget) * factor
        shares["*default*"] = budget
    if best is None:
        raise CompileError(f"could not meet ε = {eps:g}: the error budget did not converge")
    lowerer, outputs, layers, bound = best
    lowerer.rounding = max((ROUNDING_SAFETY * q.error.rounding for q in outputs), default=0.0)
    return _circuit(program, schedule, lowerer, outputs, layers, eps, bound)


def _circuit(program: ir.Program, schedule: Schedule, lowerer: Lowerer, outputs: list[Quantity], layers: int,
             eps: float, bound: float) -> Circuit:
    shares = [(f"head {h.name}", h.error) for h in lowerer.heads if h.error]
    shares += [(f"ffn {b.name}", b.error) for b in lowerer.blocks if b.error]
    budget = ErrorBudget(eps, tuple(shares), lowerer.rounding, bound)
    fixed = [int(label) for label, _ in lowerer.fetched if label.isdigit()]
    fixed += [1 - int(label[1:].replace(" ", "")) for label, _ in lowerer.fetched if label.startswith("T ")]
    exact = any(n.kind == "sum" for n in schedule.tree.nodes)
    values = tuple(
        NodeValue(node.name, tuple(q.form for q in lowerer.results[node.name]),
                  max(q.stage for q in lowerer.results[node.name]),
                  max(lowerer._err(q.error) for q in lowerer.results[node.name]))
        for node in schedule.tree.nodes
    )
    return Circuit(
        program.dimension, program.length, tuple(lowerer.directions), tuple(lowerer.heads), tuple(lowerer.blocks),
        tuple(q.form for q in outputs), program.output_shape, layers, lowerer.theta, budget,
        exact_length_only=exact, min_length=max(fixed, default=1), output_site=schedule.tree.output_site,
        causal=is_causal(program), values=values,
    )
