"""How many keys a structural mask leaves a query: an exact integer feature of p and len.

A mask is a conjunction of bounds on the key s: s ≥ a, s ≤ b, s = a, s ≠ e, with each side
α·p + c (p the query's position) or a literal. The keys are the integers of
[max(1, lowers), min(len, uppers)] less the excluded points inside it:
count = relu(hi − lo + 1) − Σ_e [lo ≤ e ≤ hi]. A bound that can never be the max (min) over
1 ≤ p ≤ len ≤ T is dropped (the check is exact: the difference of two bounds is linear in
(p, len), so its least value is at a vertex (1, 1), (1, T) or (T, T)); the rest are combined by
exact relu min/max units. Counts feed products (a sum is count × mean), so they are exact
integers: relu of integer forms is exact.
"""

from __future__ import annotations

from fractions import Fraction

from ...transformer.masks import Condition
from ..circuit import LinearForm
from . import ffn
from .builder import Feature, constant_feature
from .context import BuilderContext
from .heads import length

#: A bound α·p + λ·len + c on the key.
Bound = tuple[int, int, int]


def _bound(side: str | int) -> Bound:
    if isinstance(side, int):
        return (0, 0, side)
    offset = int(side[len("query"):] or 0)
    return (1, 0, offset)


def _least(difference: Bound, length: int) -> int:
    alpha, lam, c = difference
    return min(alpha * p + lam * n + c for p, n in ((1, 1), (1, length), (length, length)))


def _minus(a: Bound, b: Bound) -> Bound:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _kept(bounds: list[Bound], length: int, keep_larger: bool) -> list[Bound]:
    """Drop every bound that another one always beats (ties keep the first)."""
    out: list[Bound] = []
    for i, b in enumerate(bounds):
        beaten = any(_least(_minus(o, b) if keep_larger else _minus(b, o), length) >= 0 and (o != b or j < i)
                     for j, o in enumerate(bounds) if j != i)
        if not beaten:
            out.append(b)
    return out


def count_keys(lowering: BuilderContext, mask: tuple[Condition, ...], row: str) -> Feature:
    builder, length_t = lowering.builder, lowering.builder.length
    lowers: list[Bound] = [(0, 0, 1)]
    uppers: list[Bound] = [(0, 1, 0)]
    excluded: list[Bound] = []
    for left, op, right in mask:
        assert left == "key"
        b = _bound(right)
        if op in (">=", "=="):
            lowers.append(b)
        if op in ("<=", "=="):
            uppers.append(b)
        if op == ">":
            lowers.append((b[0], b[1], b[2] + 1))
        if op == "<":
            uppers.append((b[0], b[1], b[2] - 1))
        if op == "!=":
            excluded.append(b)

    def feature(b: Bound) -> Feature:
        terms: list[tuple[float, Feature]] = []
        if b[0]:
            terms.append((float(b[0]), Feature(LinearForm.of(builder.position_number()),
                                               frozenset(Fraction(p) for p in range(1, length_t + 1)), 0)))
        if b[1]:
            terms.append((float(b[1]), length(builder)))
        return ffn.linear(terms, _integers(length_t), float(b[2]))

    def combine(bounds: list[Bound], kind: str) -> Feature:
        kept = _kept(bounds, length_t, keep_larger=kind == "max")
        result = feature(kept[0])
        for b in kept[1:]:
            result = ffn.extreme(builder, result, feature(b), kind, _integers(length_t), f"{kind} of key bounds")
        return result

    low, high = combine(lowers, "max"), combine(uppers, "min")
    span = ffn.linear([(1.0, high), (-1.0, low)], _integers(length_t), 1.0)
    count = span if _least_feature(lowers, uppers, length_t) >= 0 else ffn.rectified(
        builder, span, frozenset(Fraction(k) for k in range(0, length_t + 1)), "count of keys")
    for e in excluded:
        point = feature(e)
        inside = ffn.conjunction(builder, [
            ffn.compare(builder, ffn.linear([(1.0, point), (-1.0, low)], _integers(length_t)), ">=", "key bound"),
            ffn.compare(builder, ffn.linear([(1.0, high), (-1.0, point)], _integers(length_t)), ">=", "key bound"),
        ], "excluded key in range")
        count = ffn.linear([(1.0, count), (-1.0, inside)], None)
    values = frozenset(Fraction(k) for k in range(0, length_t + 1))
    return Feature(count.form, values, count.stage, count.error) if count.constant is None else constant_feature(
        count.constant)


def _least_feature(lowers: list[Bound], uppers: list[Bound], length: int) -> int:
    """The least hi − lo + 1 over the domain (hi, lo every pair of bounds: a lower bound on it)."""
    return min(_least(_minus(u, lo), length) + 1 for u in uppers for lo in lowers)


def _integers(length: int) -> frozenset[Fraction]:
    return frozenset(Fraction(k) for k in range(-2 * length - 2, 2 * length + 3))
