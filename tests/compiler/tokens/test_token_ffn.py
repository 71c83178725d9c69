"""compiler/tokens/ffn.py: each construction is exact on the values its inputs can take, and a
robust step stays exact for inputs within a quarter of the gap (it re-quantises)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl.analysis.finite import finite_domain
from infoflow_dsl.compiler.circuit import LinearForm
from infoflow_dsl.compiler.tokens import ffn
from infoflow_dsl.compiler.tokens.builder import Feature, TokenCircuitBuilder
from infoflow_dsl.compiler.tokens.counts import count_keys
from infoflow_dsl.compiler.tokens.heads import length
from infoflow_dsl.compiler.tokens.lower import TokenLowering
from infoflow_dsl.compiler.vectors import UNIT_ROUNDOFF
from infoflow_dsl.errors import CompileError

PROGRAM = ifl.parse_program('input x : token {"a", "b"}\nlength T = 6\ntarget(t) = len\n', "unit.iflow")


def builder() -> TokenCircuitBuilder:
    return TokenCircuitBuilder(PROGRAM, UNIT_ROUNDOFF[torch.float64])


def evaluate(built: TokenCircuitBuilder, form: LinearForm, known: dict[str, float]) -> float:
    """The value of ``form`` once every FFN block has run in layer order, from ``known`` inputs."""
    values = dict(known, one=1.0)
    for block in sorted(built.blocks, key=lambda b: b.layer):
        total = 0.0
        for unit in block.units:
            pre = unit.input.constant + sum(c * values.get(d, 0.0) for d, c in unit.input.terms)
            total += unit.coefficient * max(pre, 0.0)
        values[block.output] = values.get(block.output, 0.0) + total
    return form.constant + sum(c * values.get(d, 0.0) for d, c in form.terms)


def feature(name: str, values: set[Fraction], error: float = 0.0) -> Feature:
    return Feature(LinearForm.of(name), frozenset(values), 0, error)


value_sets = st.sets(st.integers(-20, 20).map(Fraction), min_size=2, max_size=8)
#: sets whose gates' sums stay within the values a block records (6 · 6 ≤ 64)
small_sets = st.sets(st.integers(-20, 20).map(Fraction), min_size=2, max_size=5)


def _drawn_cut(values: set[Fraction], data: st.DataObject) -> tuple[list[Fraction], Fraction, float]:
    """(the values in order, a cut drawn above the least, the gap below it)."""
    ordered = sorted(values)
    cut = data.draw(st.sampled_from(ordered[1:]))
    return ordered, cut, float(cut - max(v for v in ordered if v < cut))


@settings(max_examples=60, deadline=None)
@given(value_sets, st.data())
def test_a_robust_step_is_exact_within_a_quarter_gap(values: set[Fraction], data: st.DataObject) -> None:
    ordered, cut, gap = _drawn_cut(values, data)
    z = feature("z", values, error=gap / 5)
    built = builder()
    step = ffn.at_least(built, z, cut, "z")
    for v in ordered:
        noise = data.draw(st.floats(-gap / 5, gap / 5))
        assert abs(evaluate(built, step.form, {"z": float(v) + noise}) - float(v >= cut)) < 1e-12


@settings(max_examples=30, deadline=None)
@given(value_sets, st.data())
def test_a_step_whose_input_error_reaches_a_quarter_gap_is_refused(values: set[Fraction], data: st.DataObject) -> None:
    """The gap fact of the bound's argument, broken: an input within g/4 of the ramp is refused."""
    _, cut, gap = _drawn_cut(values, data)
    with pytest.raises(CompileError, match="not below a quarter of its gap"):
        ffn.at_least(builder(), feature("z", values, error=gap / 4), cut, "z")


def _offset(name: str, coefficient: float, constant: int, values: set[Fraction]) -> Feature:
    """coefficient·name + constant, with its values."""
    form = LinearForm.of(name, coefficient).plus(LinearForm.const(float(constant)))
    return Feature(form, frozenset(Fraction(int(coefficient)) * v + constant for v in values), 0)


def _units(built: TokenCircuitBuilder) -> int:
    return sum(len(block.units) for block in built.blocks)


@settings(max_examples=40, deadline=None)
@given(value_sets, st.integers(-5, 5), st.data())
def test_one_comparison_written_in_any_orientation_or_offset_is_one_step(values: set[Fraction], shift: int,
                                                                        data: st.DataObject) -> None:
    """[h + c ≥ cut + c], [h − cut ≥ 0] and [−h − c + cut + c ≤ 0] are the same comparison: one
    step's units, and each exact on every value of h."""
    cut = data.draw(st.sampled_from(sorted(values)[1:]))
    built = builder()
    forms = [ffn.at_least(built, _offset("h", 1.0, shift, values), cut + shift, "h + c").form,
             ffn.compare(built, _offset("h", 1.0, -int(cut), values), ">=", "h - cut").form,
             ffn.compare(built, _offset("h", -1.0, int(cut), values), "<=", "cut - h").form]
    alone = builder()
    ffn.at_least(alone, feature("h", values), cut, "h")
    assert _units(built) == _units(alone) > 0
    for v in values:
        for form in forms:
            assert abs(evaluate(built, form, {"h": float(v)}) - float(v >= cut)) < 1e-12


@settings(max_examples=40, deadline=None)
@given(value_sets, value_sets)
def test_a_product_and_a_table_are_exact_on_their_values(left: set[Fraction], right: set[Fraction]) -> None:
    built = builder()
    f, g = feature("f", left), feature("g", right)
    product = ffn.product(built, f, g, "f*g")
    square = ffn.table(built, f, lambda v: v * v, "f^2")
    for a in left:
        assert abs(evaluate(built, square.form, {"f": float(a)}) - float(a * a)) < 1e-9
        for b in right:
            assert abs(evaluate(built, product.form, {"f": float(a), "g": float(b)}) - float(a * b)) < 1e-9


def test_comparisons_and_logic_on_every_pair() -> None:
    built = builder()
    values = {Fraction(v) for v in range(-3, 4)}
    z = feature("z", values)
    a, b = feature("a", {Fraction(0), Fraction(1)}), feature("b", {Fraction(0), Fraction(1)})
    ops = {op: ffn.compare(built, z, op, "z") for op in ("==", "!=", "<", "<=", ">", ">=")}
    both, either = ffn.conjunction(built, [a, b], "and"), ffn.disjunction(built, [a, b], "or")
    truth = {"==": int.__eq__, "!=": int.__ne__, "<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__}
    for v in range(-3, 4):
        for op, built_op in ops.items():
            assert evaluate(built, built_op.form, {"z": float(v)}) == float(truth[op](v, 0)), (op, v)
    for x in (0, 1):
        for y in (0, 1):
            assert evaluate(built, both.form, {"a": x, "b": y}) == float(x and y)
            assert evaluate(built, either.form, {"a": x, "b": y}) == float(x or y)


def test_len_is_decoded_exactly_from_one_over_len() -> None:
    built = builder()
    decoded = length(built)
    (head,) = built.heads
    for n in range(1, PROGRAM.length + 1):
        assert abs(evaluate(built, decoded.form, {head.outputs[0]: 1.0 / n}) - n) < 1e-12


def _side(value: str | int, t: int) -> int:
    return value if isinstance(value, int) else t + int(value[len("query"):] or 0)


def test_key_counts_match_enumeration() -> None:
    """#{s in 1..len : mask}, for masks of every shape, at every (t, len)."""
    masks = [(), (("key", "<=", "query"),), (("key", "<", "query"),), (("key", ">", "query"),),
             (("key", "!=", "query"),), (("key", ">=", "query-2"), ("key", "<=", "query+1")), (("key", "==", 3),)]
    ops = {"<=": int.__le__, "<": int.__lt__, ">": int.__gt__, ">=": int.__ge__, "!=": int.__ne__, "==": int.__eq__}
    for mask in masks:
        built = builder()
        lowering = TokenLowering(built, finite_domain(PROGRAM))
        count = count_keys(lowering, mask, "t")
        (inverse,) = [h.outputs[0] for h in built.heads] or [None]
        for n in range(1, PROGRAM.length + 1):
            for t in range(1, n + 1):
                expected = sum(all(ops[op](s, _side(right, t)) for _, op, right in mask) for s in range(1, n + 1))
                known = {"pos:t": float(t)} | ({inverse: 1.0 / n} if inverse else {})
                assert abs(evaluate(built, count.form, known) - expected) < 1e-9, (mask, t, n)


@settings(max_examples=40, deadline=None)
@given(value_sets, st.data())
def test_a_cut_between_two_values_is_the_step_at_the_next_one(values: set[Fraction], data: st.DataObject) -> None:
    """[h ≥ c] for c in (v′, v] is [h ≥ v] on h's values: one step, found again by known_step."""
    ordered = sorted(values)
    index = data.draw(st.integers(1, len(ordered) - 1))
    low, high = ordered[index - 1], ordered[index]
    built, h = builder(), feature("h", values)
    between = ffn.at_least(built, h, (low + high) / 2, "h")
    assert ffn.at_least(built, h, high, "h") == between == ffn.known_step(built, h, high)
    assert _units(built) == 2
    for v in values:
        assert abs(evaluate(built, between.form, {"h": float(v)}) - float(v >= high)) < 1e-12


@settings(max_examples=40, deadline=None)
@given(value_sets, st.data())
def test_a_remembered_step_is_the_one_at_least_gives(values: set[Fraction], data: st.DataObject) -> None:
    """A step built elsewhere (a width's own step directions) and remembered for (h, cut) is what
    at_least returns for h, for h shifted by a whole number and for −h: no second unit."""
    cut = data.draw(st.sampled_from(sorted(values)[1:]))
    built, h = builder(), feature("h", values)
    made = Feature(LinearForm.of("made"), ffn.INDICATOR, 1)
    ffn.remember_step(built, h, cut, made)
    assert ffn.known_step(built, h, cut) == made == ffn.at_least(built, _offset("h", 1.0, 3, values), cut + 3, "h")
    flipped = ffn.compare(built, _offset("h", -1.0, int(cut), values), "<=", "cut − h")
    assert _units(built) == 0
    for v in values:
        assert evaluate(built, flipped.form, {"h": float(v), "made": float(v >= cut)}) == float(v >= cut)


@settings(max_examples=40, deadline=None)
@given(small_sets, small_sets, st.booleans())
def test_a_gates_block_records_the_values_its_own_direction_takes(first: set[Fraction], second: set[Fraction],
                                                                   exclusive: bool) -> None:
    """Σ cᵢ·aᵢ·bᵢ over two indicators and two numbers, all columns of the embedding: the block's
    direction alone (the units, the lo·aᵢ left to the aᵢ) takes one of its recorded values at
    every pair of indicators the gates allow (one at a time where they are exclusive) and every
    value of the bᵢ. A number that is no column (a head's mean: bounded, not one of its values)
    leaves the block without a record."""
    built = builder()
    positions = built.length + 1  # the positional code's rows, p = 1..T+1

    def column(name: str, values: set[Fraction]) -> Feature:
        built.position_columns[name] = tuple(float(sorted(values)[p % len(values)]) for p in range(positions))
        return Feature(LinearForm.of(name), frozenset(values), 0, 0.0)  # its own column (no merging)

    indicator = {Fraction(0), Fraction(1)}
    a, b = column("a", indicator), column("b", indicator)
    f, g = column("f", first), column("g", second)
    ffn.gates(built, [(1.0, a, f), (-2.0, b, g)], None, "a·f − 2·b·g", exclusive=exclusive)
    (block,) = built.blocks
    recorded = set(block.values or ())
    assert recorded
    pairs = [(1, 0), (0, 1), (0, 0)] + ([] if exclusive else [(1, 1)])
    for (on_a, on_b), u, v in ((p, u, v) for p in pairs for u in first for v in second):
        held = evaluate(built, LinearForm.of(block.output), {"a": on_a, "b": on_b, "f": float(u), "g": float(v)})
        assert min(abs(held - r) for r in recorded) < 1e-9
    bounded = builder()
    ffn.gates(bounded, [(1.0, a, feature("mean", first))], None, "a·mean")
    assert bounded.blocks[0].values is None
