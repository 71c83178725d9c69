"""Sums of a 0/1 body over a range's keys (RASP's SelectorWidth), decoded from the body's mean
and the reciprocal of the count: no count × mean product, and no ``len``.

S(t) = Σ_s b(s, t) over the c(t) keys of the range, b ∈ {0, 1}, so 0 ≤ S ≤ c ≤ T. One uniform
head over the range's keys averages the body's key factors and [s = 1]: with
b = Σₖ aₖ(t)·bₖ(s) it gives m = S/c = Σₖ aₖ(t)·mean_s bₖ (the indicator factors aₖ gate the
means, every gate into one direction) and u = 1/c, because key 1 is in every nonempty range
whose mask bounds the key from above only; an empty range gives m = u = 0 (and S = 0). (Keys
bounded from below, s ≥ t + k, are Σ_s − Σ_{s ≤ t+k−1}: ``reductions._upper_bounded``.)

For two consecutive values v′ < v of S and θ = (v′ + v)/2, z = m − θ·u = (S − θ)/c is at least
1/(2T) where S ≥ v, at most −1/(2T) where S ≤ v′ (whole-numbered values), and 0 on an empty
range, so [S ≥ v] = [z ≥ its least positive value] is a robust step, exact while z is within a
quarter of that gap (its error is the head's rounding). S = v₀ + Σ (v − v′)·[S ≥ v]: 2 units per
value of S past its least, all in one direction (a selector width: 2T units, or 2(T − 1) where
the query is always selected), against the count's table (2(T − 1) units for len) and the
product count × mean (2 units per cut, reading several directions) before. Where a reader asks
for S's steps (a retrieval scoring −|S(s) − p|: ``TokenLowering.stepped``) each step goes to a
direction of its own and S is their sum: the same units, and the reader's steps are those.

Tracr's construction of the same count (an attention that always attends to BOS as well, so BOS
weighs 1/(S + 1), decoded by an MLP of 2 units per threshold) needs a BOS position; this
model's keys are the input tokens only (docs/design.md), so 1/c comes from [s = 1] instead.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from ...transformer.masks import HeadMask
from ..circuit import LinearForm
from . import ffn
from .builder import Feature, constant_feature
from .context import LoweringContext
from .heads import uniform_mean
from .separate import KeyClass, Term, exclusive_indicators, separated_terms

INDICATOR = frozenset({Fraction(0), Fraction(1)})


def first_key_always(mask: HeadMask) -> bool:
    """Whether key 1 is in the range wherever the range has a key: the mask bounds it from above only."""
    return all(left == "key" and op in ("<", "<=") for left, op, _ in mask)


@dataclass(frozen=True)
class WidthRatio:
    """A selector width S as the head's two outputs it is decoded from: ``mean`` m = S/c and
    ``reciprocal`` u = 1/c over the c keys ``mask`` leaves (m = u = 0 on an empty range), with
    S's exact ``values`` in ascending order. Over every key (no mask) c is the length at every
    position, so u is the same at every key of a sequence (what :func:`.scores.scaled_square` uses)."""

    mean: Feature
    reciprocal: Feature
    values: tuple[Fraction, ...]
    mask: HeadMask

    @property
    def shared(self) -> bool:
        """Whether u is the same at every position of a sequence: the range is every key."""
        return not self.mask


def width_ratio(lowering: LoweringContext, part: KeyClass, key: str, row: str, mask: HeadMask,
                values: frozenset[Fraction] | None, text: str) -> WidthRatio | None:
    """Σ_s of the 0/1 body ``part.body`` over the keys ``mask`` leaves, as (m, u) of one uniform
    head (the module's construction, before its steps); ``values``: the sum's exact values where
    known (else 0..T). None where it does not apply: a body that is not 0/1 or not a sum of
    products whose query factors are indicators, or a mask that may drop key 1 from a nonempty range."""
    body_values = lowering.values(part.body)
    if not first_key_always(mask) or body_values is None or not body_values <= INDICATOR:
        return None
    terms = separated_terms(part.body, key, row, lowering.domain)
    if terms is None:
        return None
    builder = lowering.builder
    one = constant_feature(Fraction(1))
    queries = [lowering.feature(q, row) if q is not None else one for _, q, _ in terms]
    if any(not (q.is_indicator or q.constant is not None) for q in queries):
        return None
    keys = [lowering.feature(k, key) if k is not None else one for _, _, k in terms]
    if any(k.values is None for k in keys):
        return None
    averaged = [k.constant is None or bool(mask) for k in keys]  # a constant's mean: itself where never empty
    first = Feature(LinearForm.of(builder.first_position()), INDICATOR, 0)
    heads = [k for k, read in zip(keys, averaged, strict=True) if read]
    *means, reciprocal = uniform_mean(builder, [*heads, first], [None] * (len(heads) + 1), mask,
                                      f"mean over {text}'s keys, and 1/count")
    read = iter(means)
    bounded = [_bounded(next(read), k) if head else k for k, head in zip(keys, averaged, strict=True)]
    ordered = tuple(sorted(values if values is not None else (Fraction(k) for k in range(builder.length + 1))))
    return WidthRatio(_gated_mean(lowering, terms, queries, bounded, text), reciprocal, ordered, mask)


def indicator_sum(ratio: WidthRatio, lowering: LoweringContext, text: str, *, spread: bool = False) -> Feature:
    """S from its (m, u) by steps (the module's construction): :func:`_steps`."""
    return _steps(lowering, ratio.mean, ratio.reciprocal, ratio.values, ratio.mask, text, spread)


def _bounded(mean: Feature, key: Feature) -> Feature:
    """The head's mean of ``key``: in the hull of key's values and 0 (an empty range)."""
    values = key.values or frozenset({Fraction(0)})
    low, high = min(*values, Fraction(0)), max(*values, Fraction(0))  # exact: the key's own values
    return Feature(mean.form, frozenset({low, high}), mean.stage, mean.error)


def _gated_mean(lowering: LoweringContext, terms: list[Term], queries: list[Feature], means: list[Feature],
                text: str) -> Feature:
    """m = Σₖ cₖ·aₖ·meanₖ: a constant aₖ scales, an indicator gates (every gate in one direction).
    A gate is built on the exact hull of its mean's values: a mean off it by its rounding moves
    the gate's output by at most that much, so the gate passes its mean's error on, and no
    coefficient of the size of a rounding reaches the weights."""
    linear = [(c * float(q.constant), mean) for (c, _, _), q, mean in zip(terms, queries, means, strict=True)
              if q.constant is not None]
    gated = [(float(c), q, mean) for (c, _, _), q, mean in zip(terms, queries, means, strict=True)
             if q.constant is None]
    if gated:
        exclusive = exclusive_indicators([q for (_, q, _) in terms if q is not None])
        hulls = [(c, q, Feature(mean.form, mean.values, mean.stage)) for c, q, mean in gated]
        product = ffn.gates(lowering.builder, hulls, None, text, exclusive=exclusive)
        passed = [abs(c) * mean.error for c, _, mean in gated]
        linear.append((1.0, Feature(product.form, None, product.stage,
                                    product.error + (max(passed) if exclusive else sum(passed)))))
    return ffn.linear(linear, None)


def _steps(lowering: LoweringContext, mean: Feature, reciprocal: Feature, ordered: tuple[Fraction, ...],
           mask: HeadMask, text: str, spread: bool) -> Feature:
    """S = v₀ + Σ (v − v′)·[m − θ·u ≥ the least positive value of (S − θ)/c]: every step into one
    direction, or (``spread``) each into a direction of its own, the same units, which the
    steps [S ≥ v] of a later reader then are (``ffn.remember_step``: no second FFN re-cuts S)."""
    length = lowering.builder.length
    if len(ordered) == 1:
        return constant_feature(ordered[0])
    steps = []
    for low, high in itertools.pairwise(ordered):
        theta = (low + high) / 2
        reach = _extremes(ordered, low, high, theta, length, bool(mask))
        z = Feature(mean.form.plus(reciprocal.form, -float(theta)), reach, max(mean.stage, reciprocal.stage),
                    mean.error + float(theta) * reciprocal.error)
        steps.append((z, min(v for v in reach if v > 0), float(high - low)))
    formula = f"{text} = count·mean, by steps on (mean, 1/count)"
    if not spread:
        return ffn.staircase(lowering.builder, steps, float(ordered[0]), frozenset(ordered), formula)
    cuts = list(itertools.pairwise(ordered))
    bits = [ffn.staircase(lowering.builder, [(z, least, 1.0)], 0.0, INDICATOR,
                          f"[{text} ≥ {high}], a step of {formula}")
            for (z, least, _), (_, high) in zip(steps, cuts, strict=True)]
    total = ffn.linear([(float(high - low), bit) for bit, (low, high) in zip(bits, cuts, strict=True)],
                       frozenset(ordered), float(ordered[0]))
    for bit, (_, high) in zip(bits, cuts, strict=True):
        ffn.remember_step(lowering.builder, total, high, bit)
    return total


def _extremes(ordered: tuple[Fraction, ...], low: Fraction, high: Fraction, theta: Fraction, length: int,
              may_be_empty: bool) -> frozenset[Fraction]:
    """The values of z = (S − θ)/c (S one of ``ordered``, S ≤ c ≤ T) that a step reads: the least
    and the largest on each side of 0 (and 0 itself on a range that may be empty, where m = u = 0).
    Above: (high − θ)/T, the least, and 1 − θ/S_max (c = S = S_max), the largest; below:
    (low − θ)/T, the nearest 0, and (S₀ − θ)/max(S₀, 1), the farthest. These are all a robust
    step takes from its argument's values (its cut, the value below it, the largest on each side),
    and O(1) of them, where listing every (S, c) would take O(T²) per step."""
    first, last = ordered[0], ordered[-1]
    points = {(high - theta) / length, (last - theta) / last, (low - theta) / length,
              (first - theta) / max(first, Fraction(1))}
    return frozenset(points | ({Fraction(0)} if may_be_empty else set()))
