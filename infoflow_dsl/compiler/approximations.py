"""Univariate FFN approximations, the routes side by side: (function, interval, tolerance) ->
ReLU units over L consecutive FFN layers, their error and their rounding.

The lowering (``vectors.squares``) asks for "u² within τ on [low, high]" and emits what a
route answers; it does not care which route it is. A route is one class here:

- :class:`WideSquare` — one hidden layer: the piecewise-linear interpolant of u² on a uniform
  grid of spacing h = 2√τ (⌈(b − a)/h⌉ units, error in [0, h²/4] ⊆ [0, τ]). Units ~ τ^(-1/2)
  (optimal for one hidden layer); one FFN layer.
- :class:`DeepSquare` — Yarotsky (2017, "Error bounds for approximations with deep ReLU
  networks", Prop. 2): on [0, 1] with the tent map g(y) = 2y for y < 1/2, 2(1 − y) else,
  written as g(y) = 2 relu(y) − 4 relu(y − 1/2) for y ∈ [0, 1], and g_s its s-fold
  composition, f_m(x) = x − Σ_{s=1..m} g_s(x)/4^s is the piecewise-linear interpolant of x² on
  the 2^m + 1 knots k/2^m, so 0 ≤ f_m(x) − x² ≤ (2^-m)²/4 = 4^-(m+1). For u ∈ [a, b], w = b − a,
  x = (u − a)/w: u² = a² + 2aw·x + w²x², hence
  u² ≈ (a + b)·u − a·b − w² Σ_s g_s(x)/4^s, error in [0, w²·4^-(m+1)],
  with m the least level count such that w²·4^-(m+1) ≤ τ, i.e. m = ⌈log₄(w²/τ)⌉ − 1
  (m = 0: the chord, no units). Level s is one FFN layer of 2 units reading the previous level's
  direction (level 1 reads x, a linear form of u) and writing g_s into a fresh direction; the
  sum is a linear form read by whatever consumes u². Units 2m = O(log(1/τ)), layers m.

Rounding (unit roundoff ϱ). A wide square sums n units: ϱ(√(n+1)·swing + max|slope|·reach).
A deep square's level s stores g_s with its own rounding (≤ 8ϱ: relu(y − 1/2) rounds by ϱ,
times 4, plus 2·relu(y)) plus twice the previous level's (the tent map is 2-Lipschitz): each
level doubles the rounding of the level before it, r_s = 2r_(s−1) + 8ϱ. But level s enters
the result with weight w²/4^s, so an error δ made at level r reaches the result as at most
w²·Σ_{s≥r} 2^(s−r)δ/4^s ≤ 2w²δ/4^r, and the input's rounding δ_x as 2w²δ_x (f_m is
2-Lipschitz): in all w²(2δ_x + 16ϱ/3), independent of m, plus the rounding of reading the
m + 3 terms of the result. So float32 stops honouring ε for deep squares where it does for
wide ones (ε ~ ϱ times the magnitudes): the lowering refuses below that, as for wide squares.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .circuit import ComputedFunction, LinearForm, ReLUUnit

#: Nonzero parameters per tent level after the first: relu(D) (W_in, W_out), relu(D − 1/2)
#: (W_in, b_in, W_out), and the level's term in the form that reads the result.
DEEP_LEVEL_PARAMETERS = 6
ROUTES = ("wide", "deep", "auto")


@dataclass(frozen=True)
class Level(ComputedFunction):
    """The ReLU units one FFN layer of an approximation adds, all into ``direction``;
    ``offset`` counts layers after the approximation's first. As ``circuit.FFNBlock`` records
    it: the direction holds ``function``(``argument``) − ``bias`` within ``approximation``
    plus ``rounding`` (a wide square: "square" of u; a tent level: "tent" of the level before,
    exactly)."""

    offset: int
    direction: str
    formula: str
    units: tuple[ReLUUnit, ...]


@dataclass(frozen=True)
class Approximation:
    """What a route builds: its levels, the result as a linear form, its interpolation error
    (the result minus the true value lies in [0, error]) and its rounding estimate."""

    levels: tuple[Level, ...]
    form: LinearForm
    error: float
    rounding: float

    @property
    def depth(self) -> int:
        """FFN layers used (0: the result is a linear form of the input)."""
        return max((level.offset for level in self.levels), default=-1) + 1


#: names(offset, stem) -> a fresh residual direction for a level ``offset`` layers after the first.
Names = Callable[[int, str], str]


def interpolant(u: LinearForm, reach_of_u: float, function: Callable[[float], float], knots: Sequence[float],
                direction: str, unit_roundoff: float) -> tuple[tuple[ReLUUnit, ...], float, float]:
    """(units, f(k_a), rounding) of the piecewise-linear interpolant g of ``function`` at ``knots``
    applied to u, the units writing ``direction`` (``reach_of_u`` = max |u| over its range).

    Anchored at the knot k_a of smallest |slope| (the minimum of u², the flat end of √u):
    g(u) = f(k_a) + s_a relu(u − k_a) − s_(a−1) relu(k_a − u) + Σ_(i>a) (s_i − s_(i−1)) relu(u − k_i)
                  + Σ_(0<i<a) (s_i − s_(i−1)) relu(k_i − u),
    s_i the slope on [k_i, k_(i+1)]. For a convex or monotone concave f every active term
    has one sign, so the sum never cancels (float32 keeps its precision). The constant
    f(k_a) is returned for the caller to fold into its form.
    """
    values = [function(k) for k in knots]
    slopes = [(values[i + 1] - values[i]) / (knots[i + 1] - knots[i]) for i in range(len(knots) - 1)]
    steepness = [abs(s) for s in slopes]
    # the knot's anchor score: its flatter neighbouring slope (the ends have one neighbour)
    flatness = [steepness[0], *map(min, steepness, steepness[1:]), steepness[-1]] if slopes else [0.0]
    anchor = flatness.index(min(flatness))  # the first flattest, as min(range, key=...) picks it
    terms: list[tuple[LinearForm, float]] = []
    right = u.plus(LinearForm.const(-knots[anchor]))
    if anchor < len(slopes):
        terms.append((right, slopes[anchor]))
    if anchor > 0:
        terms.append((right.scaled(-1.0), -slopes[anchor - 1]))
    rising, falling = u.plus(LinearForm()), u.scaled(-1.0).plus(LinearForm())  # u and −u, zero terms dropped
    for i in range(anchor + 1, len(slopes)):  # u − k_i (a wide square has a million of these: built directly)
        terms.append((LinearForm(rising.terms, rising.constant - knots[i]), slopes[i] - slopes[i - 1]))
    for i in range(1, anchor):  # k_i − u
        terms.append((LinearForm(falling.terms, falling.constant + knots[i]), slopes[i] - slopes[i - 1]))
    units = tuple(ReLUUnit(form, direction, c) for form, c in terms if c != 0.0)
    swing = max(max(values) - values[anchor], values[anchor] - min(values))  # max |v − f(k_a)|, the same bits
    reach = max(max(knots), -min(knots)) + reach_of_u  # max |k| + reach of u
    rounding = unit_roundoff * (math.sqrt(len(units) + 1) * swing + max(abs(c) for c in slopes) * reach)
    return units, values[anchor], rounding


def _square(v: float) -> float:
    return v * v


class WideSquare:
    """u² by one hidden layer: interpolation on a uniform grid of spacing 2√τ (error [0, τ])."""

    name = "wide"
    law = "sqrt"  # units ∝ τ^(-1/2)

    @staticmethod
    def pieces(low: float, high: float, tolerance: float) -> int:
        return max(1, math.ceil((high - low) / (2 * math.sqrt(tolerance))))

    def parameters(self, low: float, high: float, tolerance: float, terms: int) -> int:
        """Nonzero parameters: per unit its input's terms, a bias, one output weight."""
        return self.pieces(low, high, tolerance) * (terms + 2)

    def units(self, low: float, high: float, tolerance: float) -> int:
        return self.pieces(low, high, tolerance)

    def depth(self, low: float, high: float, tolerance: float) -> int:
        return 1

    @staticmethod
    def cost(intervals: Sequence[tuple[float, float]], terms: int, scale: float) -> float:
        """c with parameters ≈ c·e^(-1/2) when each square gets τ = scale·e (the allocation's weights)."""
        return sum(high - low for low, high in intervals) / (2 * math.sqrt(scale)) * (terms + 2)

    def build(self, u: LinearForm, reach_of_u: float, low: float, high: float, tolerance: float,
              names: Names, unit_roundoff: float, formula: str) -> Approximation:
        pieces = self.pieces(low, high, tolerance)
        knots = [low + (high - low) * i / pieces for i in range(pieces + 1)]
        h = (high - low) / pieces
        direction = names(0, "f")
        units, anchor, rounding = interpolant(u, reach_of_u, _square, knots, direction, unit_roundoff)
        spacing = max(b - a for a, b in itertools.pairwise(knots)) ** 2 / 4
        return Approximation((Level(0, direction, formula, units, bias=anchor, function="square", argument=u,
                                           rounding=rounding, approximation=spacing),),
                             LinearForm.const(anchor).plus(LinearForm.of(direction)), h * h / 4, rounding)


class DeepSquare:
    """u² by m tent-map levels over m FFN layers (Yarotsky 2017, Prop. 2): error [0, w²·4^-(m+1)]."""

    name = "deep"
    law = "log"  # units ∝ log(1/τ)

    @staticmethod
    def levels(low: float, high: float, tolerance: float) -> int:
        """The least m ≥ 0 with w²·4^-(m+1) ≤ τ."""
        width = high - low
        m = max(0, math.ceil(math.log(width * width / tolerance, 4)) - 1) if width > 0 else 0
        while m > 0 and width * width * 4.0 ** -m <= tolerance:  # guard log's rounding
            m -= 1
        while width * width * 4.0 ** -(m + 1) > tolerance:
            m += 1
        return m

    def parameters(self, low: float, high: float, tolerance: float, terms: int) -> int:
        """Nonzero parameters: level 1 reads u (2 units of terms + 2), later levels 6 each
        (see DEEP_LEVEL_PARAMETERS), plus the result's chord and level terms."""
        m = self.levels(low, high, tolerance)
        return 0 if m == 0 else 2 * (terms + 2) + 1 + DEEP_LEVEL_PARAMETERS * (m - 1)

    def units(self, low: float, high: float, tolerance: float) -> int:
        return 2 * self.levels(low, high, tolerance)

    def depth(self, low: float, high: float, tolerance: float) -> int:
        return self.levels(low, high, tolerance)

    @staticmethod
    def cost(intervals: Sequence[tuple[float, float]], terms: int, scale: float) -> float:
        """k with parameters ≈ k·ln(1/e) + const: DEEP_LEVEL_PARAMETERS per level and square, a level
        per factor 4 of e."""
        return len(intervals) * DEEP_LEVEL_PARAMETERS / math.log(4)

    def build(self, u: LinearForm, reach_of_u: float, low: float, high: float, tolerance: float,
              names: Names, unit_roundoff: float, formula: str) -> Approximation:
        width = high - low
        m = self.levels(low, high, tolerance)
        x = u.plus(LinearForm.const(-low)).scaled(1.0 / width)  # (u − a)/w ∈ [0, 1]
        result = u.scaled(low + high).plus(LinearForm.const(-low * high))  # the chord (a + b)u − ab
        levels = []
        previous = x
        input_rounding = unit_roundoff * (math.sqrt(len(u.terms) + 1) * (reach_of_u + abs(low)) / width + 1)
        for s in range(1, m + 1):
            direction = names(s - 1, "t")
            units = (ReLUUnit(previous, direction, 2.0),
                     ReLUUnit(previous.plus(LinearForm.const(-0.5)), direction, -4.0))
            own = 8 * unit_roundoff + (2 * input_rounding if s == 1 else 0.0)
            levels.append(Level(s - 1, direction, f"tent^{s} of {formula}", units, function="tent", argument=previous,
                                rounding=own))
            result = result.plus(LinearForm.of(direction), -width * width / 4.0 ** s)
            previous = LinearForm.of(direction)
        inner = width * width * (2 * input_rounding + 16 * unit_roundoff / 3) if m else 0.0
        reading = unit_roundoff * math.sqrt(m + 3) * (abs(low + high) * reach_of_u + abs(low * high) + width * width)
        return Approximation(tuple(levels), result, width * width * 4.0 ** -(m + 1), inner + reading)


WIDE, DEEP = WideSquare(), DeepSquare()
SquareRoute = WideSquare | DeepSquare


def choose_square(route: str, intervals: Sequence[tuple[float, float]], tolerance: float, terms: int) -> SquareRoute:
    """The route for the squares of one function (a square: one interval; a product: two):
    ``wide``, ``deep``, or (``auto``) the one with fewer nonzero parameters at this tolerance
    (ties: wide, which uses one layer)."""
    if route == "wide":
        return WIDE
    if route == "deep":
        return DEEP
    wide = sum(WIDE.parameters(low, high, tolerance, terms) for low, high in intervals)
    deep = sum(DEEP.parameters(low, high, tolerance, terms) for low, high in intervals)
    return DEEP if deep < wide else WIDE
