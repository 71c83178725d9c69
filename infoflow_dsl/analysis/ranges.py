"""Value ranges of a checked program by interval arithmetic over the declared domain.

analyze uses them for one question that changes a cost law: can the argument of a square root
reach 0? A norm ‖v‖ = √(Σ v_i²) is computed as interpolated squares, then an interpolated √.
Away from 0, √ is Lipschitz and an error δ in Σ v_i² moves ‖v‖ by δ/(2√low): every
interpolation costs ε^-1/2 pieces. Where Σ v_i² can be 0, an error δ becomes up to √δ, so the
squares before it must be within (ε/2)², which costs ε^-1 pieces (compile pays exactly that).

Intervals are sound (every value the expression takes on the domain lies inside) and as tight
as plain interval arithmetic gives: a box domain bounds every coordinate by [low, high], a
ball of radius r by [−r, r]; min, max, mean and top(k) over positions stay within their body's
range (every token shares the domain), a sum over n positions lies within 0..Tⁿ times it.
compile's own ranges, on linear forms, can only be tighter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from ..language import typed as ir
from ..language.functions import POINTWISE
from ..language.printer import describe
from ..language.syntax import Span


@dataclass(frozen=True)
class Interval:
    """[low, high] ∋ every value a scalar takes on the domain."""

    low: float
    high: float

    def __add__(self, other: Interval) -> Interval:
        return Interval(self.low + other.low, self.high + other.high)

    def __mul__(self, other: Interval) -> Interval:
        corners = [a * b for a in (self.low, self.high) for b in (other.low, other.high)]
        return Interval(min(corners), max(corners))

    def scaled(self, factor: float) -> Interval:
        return Interval(min(self.low * factor, self.high * factor), max(self.low * factor, self.high * factor))

    def absolute(self) -> Interval:
        """|x| for x in the interval: 0 at the bottom when the interval holds 0."""
        low = 0.0 if self.low <= 0.0 <= self.high else min(abs(self.low), abs(self.high))
        return Interval(low, max(abs(self.low), abs(self.high)))

    def squared(self) -> Interval:
        magnitude = self.absolute()
        return Interval(magnitude.low ** 2, magnitude.high ** 2)

    def root(self) -> Interval:
        """√x for x in the interval (its negative part clipped to 0)."""
        return Interval(math.sqrt(max(self.low, 0.0)), math.sqrt(max(self.high, 0.0)))

    def hull(self, other: Interval) -> Interval:
        return Interval(min(self.low, other.low), max(self.high, other.high))


@dataclass(frozen=True)
class RootAtZero:
    """A norm whose squared argument can be 0: compile's cost for it grows as ε^-1."""

    expression: str
    span: Span | None


def point(value: float) -> Interval:
    return Interval(value, value)


def _total(intervals: Sequence[Interval]) -> Interval:
    return reduce(Interval.__add__, intervals, point(0.0))


def _squared_norm(vector: Sequence[Interval]) -> Interval:
    return _total([c.squared() for c in vector])


def _broadcast(left: list[Interval], right: list[Interval]) -> tuple[list[Interval], list[Interval]]:
    """A scalar beside a vector stands for that scalar in every component."""
    if len(left) == 1 and len(right) > 1:
        left = left * len(right)
    if len(right) == 1 and len(left) > 1:
        right = right * len(left)
    return left, right


def value_ranges(expr: object, program: ir.Program) -> list[Interval]:
    """One interval per component of ``expr`` (a scalar has one)."""
    rule = RANGE_RULES.get(type(expr))
    if rule is None:
        raise TypeError(f"no value range for {type(expr).__name__}")
    return rule(expr, program)


def _token(expr: ir.Token, program: ir.Program) -> list[Interval]:
    domain = program.domain
    low, high = (domain.low, domain.high) if isinstance(domain, ir.Box) else (-domain.radius, domain.radius)
    return [Interval(low, high)] * program.dimension


def _inner(expr: ir.Inner, program: ir.Program) -> list[Interval]:
    left, right = value_ranges(expr.left, program), value_ranges(expr.right, program)
    if expr.left == expr.right:  # <v, v> = ‖v‖² ≥ 0
        return [_squared_norm(left)]
    return [_total([a * b for a, b in zip(left, right, strict=True)])]


def _square(expr: ir.Square, program: ir.Program) -> list[Interval]:
    if isinstance(expr.argument, ir.Norm):
        return [_squared_norm(value_ranges(expr.argument.argument, program))]
    return [value_ranges(expr.argument, program)[0].squared()]


def _pointwise(expr: ir.Pointwise, program: ir.Program) -> list[Interval]:
    arguments = [value_ranges(a, program)[0] for a in expr.arguments]
    return [Interval(*POINTWISE[expr.function].bounds([(a.low, a.high) for a in arguments]))]


def _arithmetic(expr: ir.Arithmetic, program: ir.Program) -> list[Interval]:
    left, right = _broadcast(value_ranges(expr.left, program), value_ranges(expr.right, program))
    if expr.operator == "+":
        return [a + b for a, b in zip(left, right, strict=True)]
    if expr.operator == "-":
        return [a + b.scaled(-1.0) for a, b in zip(left, right, strict=True)]
    return [a * b for a, b in zip(left, right, strict=True)]


def _matvec(expr: ir.MatVec, program: ir.Program) -> list[Interval]:
    rows, columns = expr.matrix.type.shape
    vector = value_ranges(expr.vector, program)
    return [_total([vector[c].scaled(expr.matrix.values[r * columns + c]) for c in range(columns)])
            for r in range(rows)]


def _position_number(expr: ir.PositionNumber, program: ir.Program) -> list[Interval]:
    """A position's number: a literal or T ± k exactly; a variable, len or a retrieved position
    in 1..T (plus its offset); a reflection c − v or len + c − v within c − T..T + c."""
    position, length = expr.position, float(program.length)
    if isinstance(position, ir.FixedPosition):
        return [point(float(position.index))]
    if isinstance(position, ir.LastPosition):
        return [point(length + position.offset)]
    if isinstance(position, ir.ReflectedPosition):
        return [Interval(position.offset - length, length + position.offset)]
    offset = float(getattr(position, "offset", 0))
    return [Interval(1.0 + offset, length + offset)]


def _reduce(expr: ir.Reduce, program: ir.Program) -> list[Interval]:
    body = value_ranges(expr.body, program)
    if expr.kind != "sum":
        return body
    most = float(program.length) ** len(expr.variables)
    return [c.scaled(most).hull(point(0.0)) for c in body]


#: The interval rule of each value node of the typed IR (positions have no value range).
RANGE_RULES: dict[type, Callable[[Any, ir.Program], list[Interval]]] = {
    ir.NumberLiteral: lambda expr, program: [point(expr.value)],
    ir.Constant: lambda expr, program: [point(v) for v in expr.values],
    ir.Token: _token,
    ir.Component: lambda expr, program: [value_ranges(expr.vector, program)[expr.index - 1]],
    ir.Inner: _inner,
    ir.Norm: lambda expr, program: [_squared_norm(value_ranges(expr.argument, program)).root()],
    ir.Square: _square,
    ir.Pointwise: _pointwise,
    ir.Arithmetic: _arithmetic,
    ir.Negate: lambda expr, program: [c.scaled(-1.0) for c in value_ranges(expr.argument, program)],
    ir.Divide: lambda expr, program: [c.scaled(1.0 / expr.divisor) for c in value_ranges(expr.numerator, program)],
    ir.MatVec: _matvec,
    ir.Presence: lambda expr, program: [Interval(0.0, 1.0)],  # compile's gather route: a 0/1 guard
    ir.Reduce: _reduce,
    ir.TokenLiteral: lambda expr, program: [point(float(expr.index))],
    ir.PositionNumber: _position_number,
    ir.Compare: lambda expr, program: [Interval(0.0, 1.0)],
    ir.Logical: lambda expr, program: [Interval(0.0, 1.0)],
    ir.Not: lambda expr, program: [Interval(0.0, 1.0)],
    ir.Bracket: lambda expr, program: [Interval(0.0, 1.0)],
    ir.TableLookup: lambda expr, program: [Interval(min(expr.table.outputs()), max(expr.table.outputs()))],
}


def roots_at_zero(program: ir.Program) -> tuple[RootAtZero, ...]:
    """The norms ‖v‖ of the target (not squared) whose Σ v_i² can be 0 on the domain."""
    nodes = [program.target, *ir.sub_nodes(program.target)]
    squared = {id(n.argument) for n in nodes if isinstance(n, ir.Square) and isinstance(n.argument, ir.Norm)}
    found: list[RootAtZero] = []
    for node in nodes:
        if isinstance(node, ir.Norm) and id(node) not in squared:
            if _squared_norm(value_ranges(node.argument, program)).low <= 0.0:
                found.append(RootAtZero(describe(node), node.span))
    return tuple(found)
