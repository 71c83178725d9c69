"""Fetch heads: the token at a position (``x(3)``, ``x(T)``, ``x(t − 1)``) and presence guards.

- **position head** on angle codes p(s) = (cos θs, sin θs), θ = π/(T+1): for ``x(k)`` the score
  β cos θ(s−k) peaks at k with gap 1 − cos θ; for ``x(T)`` the score −β cos θs peaks at the last
  position with gap ≥ 2 sin(3θ/4) sin(θ/2). Error ≤ (T−1)e^(−β·gap)·diam.
- **masked fetch** of ``x(t − k)`` (and of fixed positions where the angle code would not do):
  a structural mask leaves one key, whose softmax weight is exactly 1: error 0.
- **presence head**: 1 where a gathered slot is in range for the reading token, else 0, by a
  mask: exact.

Every mask is written by one rule (``transformer.masks.term_side``): a condition's terms become ``key``,
``query``, ``last`` (each with an optional offset, ``query-1``) or a literal position.
"""

from __future__ import annotations

import math

from ...analysis.causality import is_causal
from ...analysis.schedule import Head
from ...analysis.stages import attention_stage
from ...language import typed as ir
from ...language.printer import describe
from ...transformer import masks
from ..circuit import POS_COS, POS_SIN, AttentionHead, LinearForm, input_direction
from .builder import CircuitBuilder
from .quantity import ErrorVec, in_direction

MaskCondition = masks.Condition
ZERO_FORMS = (LinearForm(),)


def _fetched_token(builder: CircuitBuilder, head: Head, position: ir.PositionTerm) -> tuple[str, ...]:
    """The directions ``x(position)@site[i]`` that receive the fetched token's coordinates."""
    label = ir.position_label(position)
    return tuple(builder.direction(f"x({label})@{head.site}[{i + 1}]") for i in range(builder.program.dimension))


def _token_values(builder: CircuitBuilder) -> tuple[LinearForm, ...]:
    return tuple(LinearForm.of(input_direction(i)) for i in range(builder.program.dimension))


def position_head(builder: CircuitBuilder, head: Head) -> None:
    """x(k) (or x(T)) fetched to ``head.site`` on angle codes; an offset x(t − k) or x(T − k), a
    per-token target's or the gather route's fetch at the tokens, by a structural mask instead
    (:func:`masked_position_head`)."""
    position = head.position
    assert isinstance(position, ir.PositionVariable | ir.FixedPosition | ir.LastPosition | ir.RunLength), \
        f"position head {head.name} fetches no position of a program over vectors"
    exact_here = (builder.program.per_token or builder.gathered) and head.site == "token"
    by_offset = isinstance(position, ir.PositionVariable) or (isinstance(position, ir.LastPosition) and position.offset)
    if by_offset or exact_here:
        masked_position_head(builder, head, position)
        return
    builder.direction(POS_COS)
    builder.direction(POS_SIN)
    name = f"head:{head.name}"
    low, high = builder.token_range()
    theta, length = builder.theta, builder.length
    share, target = builder.head_source(name, builder.unit_roundoff * (math.sqrt(length) + 4) * max(abs(low),
                                                                                                   abs(high)))
    if isinstance(position, ir.LastPosition):
        query = (LinearForm.const(-1.0), LinearForm.const(0.0))
        gap = 2 * math.sin(0.75 * theta) * math.sin(0.5 * theta)
    else:
        assert isinstance(position, ir.FixedPosition), f"position head {head.name}: {position!r}"
        k = position.index
        query = (LinearForm.const(math.cos(theta * k)), LinearForm.const(math.sin(theta * k)))
        gap = 1 - math.cos(theta)
    gap -= 8 * builder.unit_roundoff  # rounding of q·k
    diameter = builder.token_diameter()
    beta = max(math.log(max(length - 1, 1) * max(diameter, 1e-300) / target), 0.0) / gap
    outputs = _fetched_token(builder, head, position)
    builder.heads.append(AttentionHead(
        name=head.name, layer=head.layer, kind="position", site=head.site, query=query,
        key=(LinearForm.of(POS_COS), LinearForm.of(POS_SIN)), value=_token_values(builder), outputs=outputs,
        beta=beta, mask=(), error=share, formula=f"x({ir.position_label(position)}) by angle codes"))
    stage = attention_stage(head.layer)
    builder.fetched[(position, head.site)] = [in_direction(o, stage, low, high, ErrorVec.source(name)) for o in outputs]


def masked_position_head(builder: CircuitBuilder, head: Head, position: ir.PositionTerm) -> None:
    """x(t − k) at every token t, or x(k), x(T), x(T − k) at ``head.site``, by a structural mask
    key == query − k (key == k, key == last − k): the one allowed key gets softmax weight
    exactly 1, so the fetch is exact (error 0, no rounding), needs no β and does not grow with
    T. Rotating the query's angle code by kθ instead errs by (T − 1)·e^(−β(1 − cos θ))·diam, and
    an angle-code head gives every later key a weight e^(−β·gap) > 0 ("almost" causal is not
    causal), so offsets and per-token targets' fixed positions are fetched this way. In a causal
    target a token-site fetch also masks keys after the query, so the output at t never reads
    x(t+1..) even where the target is undefined. A query with no allowed key receives 0 (the
    checker proved the target never reads it there)."""
    side = masks.term_side(position, "")  # no variable is the key: t - k is the query's
    low, high = builder.token_range()
    outputs = _fetched_token(builder, head, position)
    mask: tuple[MaskCondition, ...] = (("key", "==", side),)
    if head.site == "token" and is_causal(builder.program) and not isinstance(position, ir.PositionVariable):
        mask += (("key", "<=", "query"),)
    builder.heads.append(AttentionHead(
        name=head.name, layer=head.layer, kind="position", site=head.site, query=ZERO_FORMS, key=ZERO_FORMS,
        value=_token_values(builder), outputs=outputs, beta=0.0, mask=mask, error=0.0,
        formula=f"x({ir.position_label(position)}) by the mask key == {side}"))
    builder.fetched[(position, head.site)] = [in_direction(o, attention_stage(head.layer), low, high) for o in outputs]


def presence_head(builder: CircuitBuilder, head: Head) -> None:
    """present(j : conditions): 1 at the tokens where slot j is in range, else 0. A head with
    the mask key == j plus the conditions (j read as the key, the token's variable as the
    query) and the constant 1 as its value: exact, like any masked fetch."""
    presence = head.presence
    assert presence is not None, f"presence head {head.name} computes no guard"
    mask = masks.presence_mask(presence.index, presence.conditions)
    text = describe(presence)
    output = builder.direction(f"{text}@token")
    builder.heads.append(AttentionHead(
        name=head.name, layer=head.layer, kind="presence", site="token", query=ZERO_FORMS, key=ZERO_FORMS,
        value=(LinearForm.const(1.0),), outputs=(output,), beta=0.0, mask=mask, error=0.0,
        formula=f"{text} by a mask"))
    builder.fetched[(presence, "token")] = [in_direction(output, attention_stage(head.layer), 0.0, 1.0)]
