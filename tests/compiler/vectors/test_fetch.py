"""Fetch heads alone on a builder: x(k) and x(T) on angle codes (within the head's share, β as
docs/theory.md §4's gap gives it), x(t − 1) and per-token fixed positions by masks (exact), presence
guards (0/1 by a mask), and the one rule that writes every mask side."""

from __future__ import annotations

import math

import numpy as np
import pytest
from lowered import builder, inputs, model, program, run, schedule_of

from infoflow_dsl.analysis.schedule import Head
from infoflow_dsl.compiler.vectors.fetch import masked_position_head, position_head, presence_head
from infoflow_dsl.language import typed as ir

SHARE = 1e-3
ROUNDOFF = 2.0**-53  # float64's unit roundoff


def _position_heads(checked: ir.Program) -> list[Head]:
    return [h for h in schedule_of(checked).heads if h.kind == "position"]


def test_fixed_and_last_positions_are_fetched_on_angle_codes_within_the_heads_share():
    checked = program("""
input x : R^2 in [-1, 1]
length T = 6
target x(3)[1] + x(T)[2]
""")
    built = builder(checked, share=SHARE)
    heads = _position_heads(checked)
    assert [h.position for h in heads] == [ir.FixedPosition(3), ir.LastPosition()]
    for head in heads:
        position_head(built, head)
    three = built.fetched[(ir.FixedPosition(3), "readout")]
    last = built.fetched[(ir.LastPosition(), "readout")]
    x = inputs(checked)
    y = run(model(built, [*three, *last]), x).numpy()
    measured = np.abs(y - np.concatenate([x[:, 2].numpy(), x[:, -1].numpy()], axis=1)).max(axis=0)
    assert 0 < measured.max() <= SHARE  # the softmax leaves weight on the other keys
    assert all(built.error(q.error) == SHARE for q in (*three, *last))
    theta, length = math.pi / 7, 6
    rounding = ROUNDOFF * (math.sqrt(length) + 4) * 1.0
    target = SHARE - 2 * rounding
    gaps = [1 - math.cos(theta), 2 * math.sin(0.75 * theta) * math.sin(0.5 * theta)]
    for head, gap in zip(built.heads, gaps, strict=True):
        expected = math.log((length - 1) * 2.0 / target) / (gap - 8 * ROUNDOFF)
        assert head.beta == pytest.approx(expected, rel=1e-12)
        assert (length - 1) * math.exp(-head.beta * (gap - 8 * ROUNDOFF)) * 2.0 == pytest.approx(target)
    assert [h.formula for h in built.heads] == ["x(3) by angle codes", "x(T) by angle codes"]
    assert "x(3)@readout[1]" in built.directions and "pos:cos" in built.directions


def test_an_offset_token_is_fetched_exactly_by_a_mask_and_the_first_token_receives_zero():
    checked = program("""
input x : R^2
length T = 6
target(t : t >= 2) = x(t - 1)
""")
    built = builder(checked)
    (head,) = _position_heads(checked)
    assert head.position == ir.PositionVariable("t", offset=-1) and head.compares == "x(t - 1)"
    position_head(built, head)
    (fetch,) = built.heads
    assert fetch.mask == (("key", "==", "query-1"),) and fetch.beta == 0.0 and fetch.error == 0.0
    x = inputs(checked)
    y = run(model(built, built.fetched[(head.position, "token")], site="token"), x).numpy()
    assert np.array_equal(y[:, 1:], x[:, :-1].numpy()) and not y[:, 0].any()


def test_a_per_token_causal_target_fetches_a_fixed_position_by_a_mask_that_hides_later_keys():
    checked = program("""
input x : R^2
length T = 6
target(t : t >= 3) = x(3)[1] * x(t)[1]
""")
    built = builder(checked)
    (head,) = _position_heads(checked)
    position_head(built, head)
    assert built.heads[0].mask == (("key", "==", 3), ("key", "<=", "query"))
    x = inputs(checked)
    y = run(model(built, built.fetched[(ir.FixedPosition(3), "token")], site="token"), x).numpy()
    assert np.array_equal(y[:, 2:], np.broadcast_to(x[:, 2:3].numpy(), y[:, 2:].shape))
    assert not y[:, :2].any()  # before position 3 the key is hidden: no key, 0


def test_the_last_token_but_one_is_fetched_by_a_mask_at_the_readout():
    checked = program("""
input x : R^2
length T = 5
target x(T - 1)[1]
""")
    built = builder(checked)
    (head,) = _position_heads(checked)
    masked_position_head(built, head, head.position)
    assert built.heads[0].mask == (("key", "==", "last-1"),)
    x = inputs(checked)
    y = run(model(built, built.fetched[(ir.LastPosition(offset=-1), "readout")]), x).numpy()
    assert np.array_equal(y, x[:, -2].numpy())


def test_a_presence_guard_is_one_exactly_where_the_slot_is_in_range():
    checked = program("""
input x : R^1
length T = 6
target(t) = x(t)[1]
""")
    built = builder(checked, gathered=True)
    slot = ir.Presence(2, (ir.PositionCondition(ir.FixedPosition(2), "<", ir.PositionVariable("t")),
                           ir.PositionCondition(ir.PositionVariable("t"), "!=", ir.LastPosition(offset=-1))))
    presence_head(built, Head(name="g1", kind="presence", site="token", layer=1, compares="present(2 : ...)",
                              is_comparison=False, presence=slot))
    assert built.heads[0].mask == (("key", "==", 2), ("key", "<", "query"), ("query", "!=", "last-1"))
    y = run(model(built, built.fetched[(slot, "token")], site="token"), inputs(checked, 4)).numpy()
    positions = np.arange(1, 7)
    expected = ((2 < positions) & (positions != 5)).astype(float)
    assert np.array_equal(y, np.broadcast_to(expected, y.shape))
