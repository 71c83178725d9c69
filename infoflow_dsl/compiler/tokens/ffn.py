"""FFN constructions on finite-valued features: steps, gates, logic, tables and products.

Every construction is exact in exact arithmetic on the values its inputs can take; what it
adds is the dtype's rounding (estimated as 4ϱ times the largest pre-activation a unit can see,
ϱ the unit roundoff), and what it passes on is its inputs' error, as stated per function.

- **Robust step** [z ≥ c] when no value of z lies in (lo, c) (lo = the largest value below c):
  relu((z − a₀)/w) − relu((z − a₁)/w) with a₀ = lo + g/4, a₁ = c − g/4, w = a₁ − a₀ = g/2
  (g = c − lo). For a computed z within g/4 of its value the output is exactly 1 or 0: a step
  **re-quantises**, so errors never accumulate through brackets. 2 units.
- **Gate** a·b for an indicator a and b ∈ [lo, hi]: relu(b − lo + (hi − lo)(a − 1)) + lo·a.
  1 unit; error: b's, plus (hi − lo) times a's.
- **and** of n indicators relu(Σ aᵢ − (n − 1)); **or** 1 − relu(1 − Σ aᵢ); 1 unit each, exact on
  0/1 inputs. **not** is 1 − a (no unit).
- **relu**, |z| = relu(z) + relu(−z), min(a, b) = a − relu(a − b), max(a, b) = a + relu(b − a):
  exact for every real input (Lipschitz 1): :mod:`infoflow_dsl.compiler.exact`, one
  construction and one rounding rule with the lowering over vectors.
- **Staircase** start + Σ cᵢ·[zᵢ ≥ cutᵢ]: robust steps of several arguments into one direction.
- **Table** φ(f) on f's values a₀ < … < aₙ: φ(a₀) + Σₖ (φ(aₖ) − φ(aₖ₋₁))·[f ≥ aₖ]: n robust
  steps, exact.
- **Product** f·g of two features: a constant scales; an indicator gates; otherwise the side
  with fewer values is stepped, f·g = a₀·g + Σₖ (aₖ − aₖ₋₁)·[f ≥ aₖ]·g: n steps, then n gates one
  FFN later.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ...analysis.stages import ffn_layer, ffn_stage
from ...errors import CompileError, NoConstruction
from ...language.exact import product_numerators
from ..circuit import LinearForm
from ..exact import ExactFunction, abs_function, extremum_function, relu_function, unit_rounding
from .builder import Feature, TokenCircuitBuilder, constant_feature
from .units import INDICATOR, ONE_VALUE, ZERO, Unit, feature_stage, gate_term_values, gate_values, unit_feature


@dataclass(frozen=True)
class Threshold:
    """A cut of f's values at ``cut``: none lies in (below, cut); the robust ramp runs over
    [start, end] = [below + g/4, cut − g/4], g = cut − below. ``upward``: the units are active
    above the ramp (they compute [f ≥ cut]), else below it (1 − [f ≥ cut]); the side whose
    values lie nearer the ramp is chosen, so the active pre-activations stay small."""

    below: Fraction
    cut: Fraction
    upward: bool
    reach: float  # max |f| over the active side, plus |ramp end|

    @property
    def gap(self) -> float:
        return float(self.cut - self.below)

    @property
    def start(self) -> float:
        return float(self.below) + self.gap / 4

    @property
    def end(self) -> float:
        return float(self.cut) - self.gap / 4

    @property
    def width(self) -> float:
        return self.end - self.start


def threshold(f: Feature, cut: Fraction, text: str) -> Threshold:
    """The cut of f at ``cut`` (a value of f above its least), checked against f's error."""
    assert f.values is not None
    below = max(v for v in f.values if v < cut)
    gap = float(cut - below)
    if f.error >= gap / 4:
        raise CompileError(f"{text}: the compared value's error {f.error:.3g} is not below a quarter of its gap "
                           f"{gap:.3g}, so the step cannot be exact")
    up = max(abs(float(v)) for v in f.values if v >= cut) + abs(float(cut))
    down = max(abs(float(v)) for v in f.values if v < cut) + abs(float(cut))
    return Threshold(below, cut, up <= down, min(up, down))


def step_units(f: Feature, cut: Threshold, coefficient: float) -> tuple[list[Unit], float]:
    """coefficient·[f ≥ cut] as (units, constant): upward relu((f − a₀)/w) − relu((f − a₁)/w);
    downward, coefficient·(1 − [relu((a₁ − f)/w) − relu((a₀ − f)/w)])."""
    reach = cut.reach / cut.width + 1.0
    if cut.upward:
        return [(f.form.plus(LinearForm.const(-cut.start)).scaled(1 / cut.width), coefficient, reach),
                (f.form.plus(LinearForm.const(-cut.end)).scaled(1 / cut.width), -coefficient, reach)], 0.0
    rising = f.form.scaled(-1.0)
    return [(rising.plus(LinearForm.const(cut.end)).scaled(1 / cut.width), -coefficient, reach),
            (rising.plus(LinearForm.const(cut.start)).scaled(1 / cut.width), coefficient, reach)], coefficient


def gated_units(f: Feature, cut: Threshold, m: Feature, coefficient: float) -> tuple[list[Unit], LinearForm]:
    """coefficient·[f ≥ cut]·m for m ∈ [lo, hi] (span S) in one stage, as (units, linear part):
    [f ≥ cut]·(m − lo) = relu((m − lo) + K(f − a₁)) − relu(K(f − a₁)), K = S/w (upward), or
    (m − lo) − [relu((m − lo) + K(a₀ − f)) − relu(K(a₀ − f))] (downward); plus lo·[f ≥ cut] by
    a step. Exact for f within g/4 of its value and m in [lo, hi]."""
    low, high = m.low - m.error, m.high + m.error
    span = max(high - low, 1e-300)
    k = span / cut.width
    shifted = m.form.plus(LinearForm.const(-low))
    reach = k * cut.reach + span + m.magnitude
    if cut.upward:
        lever = f.form.plus(LinearForm.const(-cut.end)).scaled(k)
        units = [(shifted.plus(lever), coefficient, reach), (lever, -coefficient, reach)]
        linear_part = LinearForm()
    else:
        lever = f.form.scaled(-1.0).plus(LinearForm.const(cut.start)).scaled(k)
        units = [(shifted.plus(lever), -coefficient, reach), (lever, coefficient, reach)]
        linear_part = shifted.scaled(coefficient)
    if low != 0.0:
        more, constant = step_units(f, cut, coefficient * low)
        units += more
        linear_part = linear_part.plus(LinearForm.const(constant))
    return units, linear_part


def at_least(builder: TokenCircuitBuilder, z: Feature, cut: Fraction, text: str) -> Feature:
    """[z ≥ cut] by a robust step; a constant where every value of z is on one side. One step
    serves every comparison of the same value (:func:`canonical_step`): [h − 3 ≥ 0], [h ≥ 3] and
    [3 − h > 0] = 1 − [h ≥ 3] share their units."""
    if z.values is None:
        raise NoConstruction(f"{text}: the compared value is not finite, so no step is exact (declare a margin)")
    if all(v >= cut for v in z.values) or all(v < cut for v in z.values):
        return constant_feature(ONE_VALUE if all(v >= cut for v in z.values) else ZERO)
    flipped, w, at = _canonical(z, cut)
    step = _step(builder, w, at, text)
    return negation(step) if flipped else step


def known_step(builder: TokenCircuitBuilder, z: Feature, cut: Fraction) -> Feature | None:
    """[z ≥ cut] where it costs nothing (a constant, or a step already built or remembered), else None."""
    assert z.values is not None
    if all(v >= cut for v in z.values) or all(v < cut for v in z.values):
        return at_least(builder, z, cut, "")
    flipped, w, at = _canonical(z, cut)
    step = builder.steps.get(_step_key(w, at))
    return None if step is None else negation(step) if flipped else step


def _canonical(z: Feature, cut: Fraction) -> tuple[bool, Feature, Fraction]:
    """:func:`canonical_step`, or (not flipped, z, cut) where z has no canonical form."""
    canonical = canonical_step(z, cut)
    return canonical if canonical is not None else (False, z, cut)


def _step_key(z: Feature, cut: Fraction) -> tuple[LinearForm, Fraction]:
    """The key of [z ≥ cut] in ``builder.steps``: z's form and the least value at or above the cut."""
    return z.form, _at_value(z, cut)


def canonical_step(z: Feature, cut: Fraction) -> tuple[bool, Feature, Fraction] | None:
    """[z ≥ cut] as [w ≥ at] (or 1 − [w ≥ at] when ``flipped``) with w = ±(z − c) the form
    without its whole-number constant c, signed so that its first direction (by name) counts
    positively: comparisons that differ in orientation or offset meet on one (w, at). None
    where z's constant is not a whole number (its values are exact rationals the float
    constant only approximates)."""
    constant = z.form.constant
    if not float(constant).is_integer() or z.values is None or not z.form.terms:
        return None
    shift = Fraction(int(constant))
    terms = tuple(sorted(z.form.terms))
    values = frozenset(v - shift for v in z.values)
    if terms[0][1] > 0:
        return False, Feature(LinearForm(terms), values, z.stage, z.error), cut - shift
    negated = frozenset(-v for v in values)
    above = [v for v in negated if v > shift - cut]  # [z ≥ cut] = [−w ≤ cut − c] = 1 − [−w ≥ the next value]
    return True, Feature(LinearForm(tuple((d, -c) for d, c in terms)), negated, z.stage, z.error), min(above)


def _step(builder: TokenCircuitBuilder, z: Feature, cut: Fraction, text: str) -> Feature:
    key = _step_key(z, cut)
    cached = builder.steps.get(key)
    if cached is not None:
        return cached
    cut_at = threshold(z, key[1], text)
    feature = _embedded_step(builder, z, cut_at, 2 * (len(z.form.terms) + 2))
    if feature is None:
        units, constant = step_units(z, cut_at, 1.0)
        feature = unit_feature(builder, stem="step", formula=f"[{text} ≥ {key[1]}]", inputs=[z], units=units,
                                values=INDICATOR, error=0.0, extra=LinearForm.const(constant))
    builder.steps[key] = feature
    return feature


def _embedded_step(builder: TokenCircuitBuilder, z: Feature, cut: Threshold, unit_weights: int) -> Feature | None:
    """[z ≥ cut] as a column of the embedding or of the positional code, where z reads only such
    columns (:meth:`TokenCircuitBuilder.embedded_values`) and the column has no more nonzero
    entries than the step's units have weights (``unit_weights``): exact, and ready at stage 0.
    Each entry is z's value there against the middle of the gap below the cut."""
    embedded = builder.embedded_values(z.form)
    if embedded is None or z.error:
        return None
    kind, values = embedded
    middle = float(cut.below + cut.cut) / 2
    above = tuple(1.0 if value >= middle else 0.0 for value in values)
    below = tuple(1.0 - a for a in above)
    complement = sum(below) < sum(above)  # the sparser column: [z ≥ c] = 1 − [z < c]
    column, relation = (below, "<") if complement else (above, "≥")
    if sum(column) > unit_weights:
        return None
    name = f"{kind}:[{_form_text(z.form)} {relation} {cut.cut}]"
    direction = builder.token_column(name, column) if kind == "tok" else builder.position_column(name, column)
    step = Feature(LinearForm.of(direction), INDICATOR, 0)
    return negation(step) if complement else step


def _form_text(form: LinearForm) -> str:
    """A column's form as text: its one column's name without the prefix, else the sum."""
    if len(form.terms) == 1 and form.terms[0][1] == 1.0 and not form.constant:
        return form.terms[0][0].split(":", 1)[-1]
    return str(form)


def _at_value(z: Feature, cut: Fraction) -> Fraction:
    """The least value of z at or above ``cut``: [z ≥ cut] is [z ≥ it] on z's values, and every
    cut between two values meets on one step."""
    assert z.values is not None
    return min(v for v in z.values if v >= cut)


def remember_step(builder: TokenCircuitBuilder, z: Feature, cut: Fraction, step: Feature) -> None:
    """Record ``step`` (a feature equal to [z ≥ cut] on z's values, built by the caller) as the
    step :func:`at_least` gives for (z, cut), under the key it looks up."""
    flipped, w, at = _canonical(z, cut)
    builder.steps[_step_key(w, at)] = negation(step) if flipped else step


def negation(a: Feature) -> Feature:
    """1 − a."""
    values = None if a.values is None else frozenset(ONE_VALUE - v for v in a.values)
    return Feature(LinearForm.const(1.0).plus(a.form, -1.0), values, a.stage, a.error)


def compare(builder: TokenCircuitBuilder, z: Feature, operator: str, text: str) -> Feature:
    """[z op 0] for a finite-valued difference z (op one of ==, !=, <, <=, >, >=)."""
    if operator in ("<", "<="):
        return negation(compare(builder, z, ">=" if operator == "<" else ">", text))
    if operator == "!=":
        return negation(compare(builder, z, "==", text))
    if z.values is None:
        raise NoConstruction(f"{text}: the compared value is not finite, so no step is exact (declare a margin)")
    if operator == ">=":  # one step; [z > 0] is built only where it is read
        return at_least(builder, z, ZERO, text)
    positive = [v for v in z.values if v > 0]
    strictly = at_least(builder, z, min(positive), text) if positive else constant_feature(ZERO)
    if operator == ">":
        return strictly
    return linear([(1.0, at_least(builder, z, ZERO, text)), (-1.0, strictly)], INDICATOR)


def linear(terms: Sequence[tuple[float, Feature]], values: frozenset[Fraction] | None,
           constant: float = 0.0) -> Feature:
    """Σ cᵢ·fᵢ + constant: no unit; errors add with |cᵢ|."""
    form = LinearForm.const(constant)
    for coefficient, feature in terms:
        form = form.plus(feature.form, coefficient)
    stage = max((f.stage for _, f in terms), default=0)
    return Feature(form, values, stage, sum(abs(c) * f.error for c, f in terms))


def hinge_sum(builder: TokenCircuitBuilder, hinges: Sequence[tuple[float, Feature, float]], text: str) -> Feature:
    """Σₖ cₖ·relu(zₖ) into one fresh direction, one FFN after the zₖ (``hinges``: (cₖ, zₖ, a
    bound on Σ|terms| of zₖ's pre-activation where it is active)). Exact for every real input:
    relu is 1-Lipschitz, so it passes Σₖ |cₖ|·errorₖ on, plus its rounding. 1 unit per hinge."""
    if not hinges:
        return constant_feature(ZERO)
    units = [(z.form, c, reach) for c, z, reach in hinges]
    passed = sum(abs(c) * z.error for c, z, _ in hinges)
    return unit_feature(builder, stem="hinges", formula=text, inputs=[z for _, z, _ in hinges], units=units,
                         values=None, error=passed)


def gate(builder: TokenCircuitBuilder, a: Feature, b: Feature, text: str) -> Feature:
    """a·b for an indicator a and a bounded b (1 unit)."""
    if b.values is None:
        raise NoConstruction(f"{text}: a product needs a bounded factor")
    return gates(builder, [(1.0, a, b)], _products(a.values or INDICATOR, b.values), text)


def gates(builder: TokenCircuitBuilder, terms: Sequence[tuple[float, Feature, Feature]],
          values: frozenset[Fraction] | None, text: str, exclusive: bool = False) -> Feature:
    """Σ cᵢ·aᵢ·bᵢ for indicators aᵢ and bᵢ in [lo, hi] (within their error), one unit each, all
    into one direction: aᵢ·bᵢ = relu(bᵢ − lo + (hi − lo)(aᵢ − 1)) + lo·aᵢ. Error: Σ |cᵢ|·(bᵢ's
    error + (hi − lo) times aᵢ's), or its largest term where the aᵢ are ``exclusive`` (one is 1).
    A bᵢ that is exactly a constant (hi = lo) needs no unit: aᵢ·bᵢ = lo·aᵢ. The direction alone
    holds Σ cᵢ·aᵢ·(bᵢ − lo) (the lo·aᵢ are read from the aᵢ): its values are recorded
    (:func:`~.units.gate_values`) for packing where every aᵢ and bᵢ is a column of the embedding."""
    units: list[Unit] = []
    extra, errors, parts = LinearForm(), [], []
    for coefficient, a, b in terms:
        low, high = b.low - b.error, b.high + b.error
        span = high - low
        if span == 0.0:  # b is exactly the constant lo: a·b = lo·a, no unit
            extra = extra.plus(a.form, coefficient * low)
            continue
        form = b.form.plus(LinearForm.const(-low)).plus(a.form.plus(LinearForm.const(-1.0)), span)
        units.append((form, coefficient, 2 * span + b.magnitude))
        extra = extra.plus(a.form, coefficient * low)
        errors.append(abs(coefficient) * (b.error + span * a.error))
        parts.append(gate_term_values(builder, coefficient, a, b, low))
    if not units:  # every b a constant: a linear form of the a's
        return Feature(extra, values, feature_stage(*(a for _, a, _ in terms)))
    error = max(errors) if exclusive else sum(errors)
    return unit_feature(builder, stem="gate", formula=text, inputs=[f for _, a, b in terms for f in (a, b)],
                         units=units, values=values, error=error, extra=extra, own=gate_values(parts, exclusive))


def conjunction(builder: TokenCircuitBuilder, parts: Sequence[Feature], text: str) -> Feature:
    """[all parts]: relu(Σ aᵢ − (n − 1)) (1 unit)."""
    if len(parts) == 1:
        return parts[0]
    form = LinearForm.const(-(len(parts) - 1.0))
    for part in parts:
        form = form.plus(part.form)
    return unit_feature(builder, stem="and", formula=text, inputs=parts, units=[(form, 1.0, 2.0 * len(parts))],
                         values=INDICATOR,
                         error=sum(p.error for p in parts))


def disjunction(builder: TokenCircuitBuilder, parts: Sequence[Feature], text: str) -> Feature:
    """[any part]: 1 − relu(1 − Σ aᵢ) (1 unit)."""
    if len(parts) == 1:
        return parts[0]
    form = LinearForm.const(1.0)
    for part in parts:
        form = form.plus(part.form, -1.0)
    return unit_feature(builder, stem="or", formula=text, inputs=parts, units=[(form, -1.0, 2.0 * len(parts))],
                         values=INDICATOR,
                         error=sum(p.error for p in parts), extra=LinearForm.const(1.0))


def _exact(builder: TokenCircuitBuilder, exact: ExactFunction, stem: str, inputs: Sequence[Feature],
           magnitude: float, values: frozenset[Fraction] | None, error: float, text: str) -> Feature:
    """The units of ``exact`` (:mod:`infoflow_dsl.compiler.exact`, the lowering over vectors'
    too) into one fresh direction, one FFN after the inputs; its error: the inputs' plus its
    active unit's rounding (``exact.unit_rounding``, ``magnitude`` bounding what it reads)."""
    layer = ffn_layer(feature_stage(*inputs))
    output = builder.fresh(stem)
    rounding = unit_rounding(builder.unit_roundoff, magnitude, exact.argument)
    builder.add_units(name=output, layer=layer, output=output, formula=text, units=list(exact.units(output)),
                      error=error + rounding, function=(exact.function, exact.argument, rounding))
    return Feature(exact.value(output), values, ffn_stage(layer), error + rounding)


def rectified(builder: TokenCircuitBuilder, z: Feature, values: frozenset[Fraction] | None, text: str) -> Feature:
    """relu(z) (1 unit)."""
    return _exact(builder, relu_function(z.form), "relu", [z], z.magnitude, values, z.error, text)


def absolute(builder: TokenCircuitBuilder, z: Feature, values: frozenset[Fraction] | None, text: str) -> Feature:
    """|z| = relu(z) + relu(−z) (2 units)."""
    return _exact(builder, abs_function(z.form), "abs", [z], z.magnitude, values, z.error, text)


def extreme(builder: TokenCircuitBuilder, a: Feature, b: Feature, kind: str,
            values: frozenset[Fraction] | None, text: str) -> Feature:
    """min(a, b) = a − relu(a − b), max(a, b) = a + relu(b − a) (1 unit)."""
    return _exact(builder, extremum_function(a.form, b.form, kind), kind, [a, b], a.magnitude + b.magnitude, values,
                  a.error + b.error, text)


def _products(a: frozenset[Fraction], b: frozenset[Fraction] | None) -> frozenset[Fraction] | None:
    """{u·v : u ∈ a, v ∈ b}, on whole numbers (:func:`product_numerators`), each distinct product
    made a Fraction once."""
    if b is None or len(a) * len(b) > 1_000_000:
        return None
    numerators, denominator = product_numerators(a, b)
    return frozenset(Fraction(p, denominator) for p in numerators)


def _cut_rounding(builder: TokenCircuitBuilder, f: Feature, cuts: Sequence[tuple[Threshold, float, float]]) -> float:
    """The rounding of units cut at ``cuts`` (threshold, |coefficient|, extra reach per unit)
    for the worst value of f: 2ϱ·max_v Σ over the cuts active at v of 2·|c|·((|v| + |cut|)/w + 1 + extra)."""
    assert f.values is not None
    worst = 0.0
    for v in f.values:
        total = 0.0
        for cut, coefficient, extra in cuts:
            if (v >= cut.cut) == cut.upward:
                total += 2 * coefficient * ((abs(float(v)) + abs(float(cut.cut))) / cut.width + 1 + extra)
        worst = max(worst, total)
    return 2 * builder.unit_roundoff * worst


def table(builder: TokenCircuitBuilder, f: Feature, function: Callable[[Fraction], Fraction], text: str) -> Feature:
    """φ(f) on f's finite values by robust steps, all into one direction (2 units per value
    past the first), exact for f within a quarter gap of its value."""
    if f.values is None:
        raise NoConstruction(f"{text}: its argument is not finite-valued")
    ordered = sorted(f.values)
    units: list[Unit] = []
    cuts: list[tuple[Threshold, float, float]] = []
    constant = float(function(ordered[0]))
    for low, high in itertools.pairwise(ordered):
        change = float(function(high) - function(low))
        if change:
            cut = threshold(f, high, text)
            more, shift = step_units(f, cut, change)
            units += more
            constant += shift
            cuts.append((cut, abs(change), 0.0))
    values = frozenset(function(v) for v in ordered)
    if not units:
        return Feature(LinearForm.const(constant), values, f.stage)
    return unit_feature(builder, stem="table", formula=text, inputs=[f], units=units, values=values, error=0.0,
                         extra=LinearForm.const(constant), rounding=_cut_rounding(builder, f, cuts))


def staircase(builder: TokenCircuitBuilder, steps: Sequence[tuple[Feature, Fraction, float]], start: float,
              values: frozenset[Fraction] | None, text: str) -> Feature:
    """start + Σᵢ cᵢ·[zᵢ ≥ cutᵢ] by robust steps (2 units each), every step into one direction,
    whatever its argument zᵢ: exact for each zᵢ within a quarter gap of its value (checked)."""
    units: list[Unit] = []
    constant = start
    for z, cut, coefficient in steps:
        more, shift = step_units(z, threshold(z, cut, text), coefficient)
        units += more
        constant += shift
    return unit_feature(builder, stem="steps", formula=text, inputs=[z for z, _, _ in steps], units=units,
                         values=values, error=0.0, extra=LinearForm.const(constant))


def requantised(builder: TokenCircuitBuilder, f: Feature, text: str) -> Feature:
    """f through the identity table: the same value with the error reset to rounding."""
    if f.error == 0.0 or f.values is None or len(f.values) < 2:
        return f
    return table(builder, f, lambda v: v, f"{text} (re-quantised)")


def product(builder: TokenCircuitBuilder, f: Feature, g: Feature, text: str) -> Feature:
    """f·g: a constant scales, an indicator gates, else the side with fewer values is cut and
    each cut gates the other side in the same stage (:func:`gated_units`), into one direction."""
    for first, second in ((f, g), (g, f)):
        value = first.constant
        if value is not None:
            values = None if second.values is None else frozenset(value * v for v in second.values)
            return Feature(second.form.scaled(float(value)), values, second.stage, abs(float(value)) * second.error)
    for first, second in ((f, g), (g, f)):
        if first.is_indicator:
            return gate(builder, first, second, text)
    if f.values is None or g.values is None:
        raise NoConstruction(f"{text}: a product of two features needs one with finitely many values")
    if len(f.values) <= len(g.values):
        return _cut_product(builder, f, f.values, g, text)
    return _cut_product(builder, g, g.values, f, text)


def scaled_by(builder: TokenCircuitBuilder, finite: Feature, bounded: Feature, text: str) -> Feature:
    """finite·bounded where only ``finite`` takes exactly its values and ``bounded`` may lie
    anywhere in its values' hull (a key factor averaged over tied winners: 2/3 of an indicator):
    a constant scales, an indicator gates, else ``finite`` is cut; ``bounded`` is never cut."""
    if finite.constant is not None:
        return product(builder, finite, bounded, text)  # a scaling
    if finite.is_indicator:
        return gate(builder, finite, bounded, text)
    if finite.values is None:
        raise NoConstruction(f"{text}: a product of two features needs one with finitely many values")
    return _cut_product(builder, finite, finite.values, bounded, text)


def _cut_product(builder: TokenCircuitBuilder, cut_side: Feature, cut_values: frozenset[Fraction], other: Feature,
                 text: str) -> Feature:
    """cut_side·other: one cut between each two consecutive values of ``cut_side``, each gating
    ``other`` (exact for any ``other`` within its bounds) in one stage, into one direction."""
    f, g = cut_side, other
    ordered = sorted(cut_values)
    units: list[Unit] = []
    cuts: list[tuple[Threshold, float, float]] = []
    linear_part = other.form.scaled(float(ordered[0]))
    span = other.high - other.low + 2 * other.error
    for low, high in itertools.pairwise(ordered):
        cut = threshold(cut_side, high, text)
        more, part = gated_units(cut_side, cut, other, float(high - low))
        units += more
        linear_part = linear_part.plus(part)
        cuts.append((cut, float(high - low) * max(span, abs(other.low) + other.error, 1e-300),
                     (2 * other.magnitude + span) / max(span, 1e-300)))
    error = other.error * max(abs(float(v)) for v in ordered)
    return unit_feature(builder, stem="product", formula=text, inputs=[f, g], units=units,
                         values=_products(cut_values, g.values), error=error, extra=linear_part,
                         rounding=_cut_rounding(builder, cut_side, cuts))
