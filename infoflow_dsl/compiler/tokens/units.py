"""The token lowering's FFN units at their lowest level: ReLU units Σ cₖ·relu(formₖ) into one
fresh direction, the rounding they add, and the values that direction records for
:mod:`..superposition.values` (the constructions that build units are in :mod:`.ffn`)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from ...analysis.stages import ffn_layer, ffn_stage
from ..circuit import LinearForm, ReLUUnit
from .builder import Feature, TokenCircuitBuilder

ZERO, ONE_VALUE = Fraction(0), Fraction(1)
INDICATOR = frozenset({ZERO, ONE_VALUE})
NO_TERMS = LinearForm()


def feature_stage(*features: Feature) -> int:
    return max(f.stage for f in features)


#: A hidden unit as built here: (pre-activation form, output coefficient, reach: a bound on the
#: sizes Σ|cᵢxᵢ| + |b| its pre-activation sums wherever the unit is active, for the rounding).
Unit = tuple[LinearForm, float, float]


def unit_feature(builder: TokenCircuitBuilder, *, stem: str, formula: str, inputs: Sequence[Feature],
                  units: list[Unit], values: frozenset[Fraction] | None, error: float,
                  extra: LinearForm = NO_TERMS, rounding: float | None = None,
                  own: frozenset[Fraction] | None = None) -> Feature:
    """Units Σ cₖ·relu(formₖ) into one fresh direction (plus the linear ``extra``), one FFN after
    the inputs; the result's error is ``error`` plus the units' rounding: ``rounding`` where the
    caller knows which units can be active together, else 2ϱ·Σₖ |cₖ|·reachₖ (an inactive unit
    adds exactly 0). The block records its direction's values: ``own`` where the caller knows
    them (the units' sum alone, ``extra`` left out), else the feature's less a constant ``extra``
    (:func:`direction_values`)."""
    layer = ffn_layer(feature_stage(*inputs))
    output = builder.fresh(stem)
    if rounding is None:
        rounding = 2 * builder.unit_roundoff * sum(abs(c) * reach for _, c, reach in units)
    builder.add_units(name=output, layer=layer, output=output, formula=formula,
                      units=[ReLUUnit(form, output, c) for form, c, _ in units], error=error + rounding,
                      values=direction_values(values, extra) if own is None else direction_values(own, NO_TERMS),
                      bias=extra.constant, partial=bool(extra.terms))
    return Feature(LinearForm.of(output).plus(extra), values, ffn_stage(layer), error + rounding)


#: the most values an FFN block's record lists (:func:`direction_values`)
RECORDED_VALUES = 64


def direction_values(values: frozenset[Fraction] | None, extra: LinearForm) -> tuple[float, ...] | None:
    """The values of a block's own direction: the feature's values less ``extra`` where that is a
    constant (a feature that adds other directions' terms has no values of its own), at most
    :data:`RECORDED_VALUES` of them."""
    if values is None or extra.terms or len(values) > RECORDED_VALUES:
        return None
    return tuple(sorted(float(v - Fraction(extra.constant)) for v in values))


def gate_term_values(builder: TokenCircuitBuilder, coefficient: float, a: Feature, b: Feature,
              low: float) -> frozenset[Fraction] | None:
    """The values cᵢ·aᵢ·(bᵢ − lo) of one gate term where aᵢ and bᵢ are columns of the embedding
    (their values are then exactly those of the tables: aᵢ an exact indicator, bᵢ one of its
    column's entries), else None (a head's mean is bounded, not one of its ``values``)."""
    indicator, bounded = builder.embedded_values(a.form), builder.embedded_values(b.form)
    if indicator is None or bounded is None or not set(indicator[1]) <= {0.0, 1.0}:
        return None
    return frozenset(Fraction(coefficient) * (Fraction(v) - Fraction(low)) for v in bounded[1]) | {Fraction(0)}


def gate_values(parts: Sequence[frozenset[Fraction] | None], exclusive: bool) -> frozenset[Fraction] | None:
    """The values of a gate's own direction Σ cᵢ·aᵢ·(bᵢ − lo): each term 0 or cᵢ·(v − lo), one
    term at a time where the aᵢ are exclusive (their union), else their sums; None where a bᵢ's
    values are unknown or past :data:`RECORDED_VALUES`."""
    if any(p is None for p in parts):
        return None
    known = [p for p in parts if p is not None]
    if exclusive:
        return frozenset().union(*known)
    total: frozenset[Fraction] = frozenset({Fraction(0)})
    for p in known:
        total = frozenset(a + b for a in total for b in p)
        if len(total) > RECORDED_VALUES:
            return None
    return total
