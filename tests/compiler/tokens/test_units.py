"""compiler/tokens/units.py: the values an FFN block's direction records (what
superposition.values reads): the feature's values less a constant ``extra``, none where ``extra``
reads other directions or the values are too many to list."""

from __future__ import annotations

from fractions import Fraction

from infoflow_dsl.compiler.circuit import LinearForm
from infoflow_dsl.compiler.tokens.units import RECORDED_VALUES, direction_values


def test_a_direction_records_its_features_values_less_the_constant() -> None:
    values = frozenset({Fraction(0), Fraction(1), Fraction(5, 2)})
    assert direction_values(values, LinearForm.const(1.0)) == (-1.0, 0.0, 1.5)
    assert direction_values(values, LinearForm()) == (0.0, 1.0, 2.5)


def test_no_record_where_the_feature_reads_other_directions_or_has_too_many_values() -> None:
    assert direction_values(frozenset({Fraction(0), Fraction(1)}), LinearForm.of("x=a")) is None
    assert direction_values(None, LinearForm()) is None
    many = frozenset(Fraction(k) for k in range(RECORDED_VALUES + 1))
    assert direction_values(many, LinearForm()) is None
    assert direction_values(frozenset(list(many)[:RECORDED_VALUES]), LinearForm()) is not None
