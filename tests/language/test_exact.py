"""Numbers are the exact decimals they are written as (language/exact.py, NumberLiteral.exact)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.exact import decimal
from infoflow_dsl.language.printer import describe
from infoflow_dsl.language.value_sets import finite_domain, value_set


@pytest.mark.parametrize(("text", "exact"), [("0.3", Fraction(3, 10)), ("1e-14", Fraction(1, 10**14)),
                                              ("2", Fraction(2)), ("0.1", Fraction(1, 10)), ("2.5e3", Fraction(2500))])
def test_a_literal_is_the_decimal_written(text: str, exact: Fraction) -> None:
    program = ifl.parse_program(f"input x : token {{0, 1}}\nlength T = 2\ntarget(t) = x(t) + {text}\n")
    literal = program.target.right  # type: ignore[attr-defined]
    assert isinstance(literal, ir.NumberLiteral) and literal.exact == exact
    assert literal.value == float(text)


@given(st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, width=64))
def test_decimal_rounds_back_to_its_float_and_keeps_order(value: float) -> None:
    assert float(decimal(value)) == value
    nudged = value + abs(value) * 2**-50 + 2**-1070
    if nudged != value:
        assert decimal(value) < decimal(nudged)


def test_value_sets_hold_the_decimals_not_the_binary_floats() -> None:
    program = ifl.parse_program("input x : token {0, 1}\nlength T = 3\ntarget(t) = x(t) + 0.1 * (t - 1)\n")
    values = value_set(program.target, finite_domain(program))  # type: ignore[arg-type]
    assert values == {Fraction(k, 10) + x for k in range(3) for x in (0, 1)}


def test_a_literal_of_a_derived_value_prints_as_a_fraction() -> None:
    odd = Fraction(1, 3_000_017)  # a denominator past 10⁶: no float stands for it
    derived = ir.NumberLiteral(float(odd), exact=odd)
    assert describe(derived) == "(1 / 3000017)"
    assert derived != ir.NumberLiteral(float(odd))  # the float's own rational is its shortest decimal
    assert describe(ir.NumberLiteral(0.3)) == "0.3"
    assert ir.NumberLiteral(1 / 3).exact == Fraction(1, 3)  # Python's 1/3 stands for 1/3
