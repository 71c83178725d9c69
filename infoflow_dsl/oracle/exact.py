"""Comparisons decided on exact values: the reference evaluator stays exact where float64 is not.

A token program's numbers are exact rationals (0.3 is 3/10: docs/language.md, "Numbers"), and
every value it computes lies in a finite set of them (:mod:`~infoflow_dsl.language.value_sets`).
The evaluator computes in float64, which is not exact: 1 + 0.1·3 is 1.3000000000000003 while
0 + 0.1·13 is 1.3, so ``[a < b]`` on the floats can disagree with the rationals at a tie. Each
comparison (and each argmin/argmax score, and each table key) whose operands have finite value
sets is therefore decided on the rationals:

- :func:`float64_error` bounds |computed − exact| of an expression in float64, a rule per node
  (ϱ = 2⁻⁵³: a literal is off by its decimal's rounding, + and − add ϱ·|result|, · adds the
  operands' errors times the other's size, a sum of n terms n·(body error + ϱ·|partial sums|));
- where that bound, e, of each operand is below half the smallest gap between the floats of
  that operand's own exact values (and those floats are distinct), its computed value lies
  nearer the float of its exact value than of any other of its values: :func:`snapped` maps it
  to that value, read as its index in the sorted union U of both sides' values, and the indices
  compare as the rationals do (a sum of whole numbers against 1e-14: each side is exact on its
  own, however close the two sides come);
- where it is not, the comparison cannot be decided in float64 and evaluation stops with a
  located ProgramError (a tie-break of 1e-17 beside a token: :mod:`~infoflow_dsl.language.lexicographic`
  writes the common ones as the order of pairs first, so this takes a program that sought it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import torch

from ..errors import single_error
from ..language import typed as ir
from ..language.exact import decimal
from ..language.syntax import NO_SPAN
from ..language.value_sets import FiniteDomain, value_set

ROUNDOFF = 2.0**-53  # float64's unit roundoff

Tensor = torch.Tensor


@dataclass(frozen=True)
class ExactValues:
    """The sorted exact values U an operand can take, and their floats' midpoints: a computed
    value within ``tolerance`` of its exact value's float is snapped to that value's index."""

    values: tuple[Fraction, ...]
    midpoints: tuple[float, ...]

    def index(self, computed: Tensor) -> Tensor:
        """The index in U of each computed value (int64, the shape of ``computed``)."""
        bounds = torch.tensor(self.midpoints, dtype=torch.float64, device=computed.device)
        return torch.bucketize(computed.to(torch.float64).contiguous(), bounds)


class Undecidable(Exception):
    """Two exact values of a comparison's operands closer than float64 can tell apart."""


def _magnitude(values: frozenset[Fraction]) -> float:
    return float(max(abs(v) for v in values))


def _representation(value: float) -> float:
    """|float − the decimal it stands for|: how far the float64 of a literal is off."""
    return float(abs(Fraction(value) - decimal(value)))


def float64_error(expr: object, domain: FiniteDomain) -> float | None:
    """A bound on |float64 value − exact value| of ``expr`` (None: not finite, or no rule)."""
    return _error(expr, _key(domain))


@dataclass(frozen=True)
class _Key:
    """A hashable view of a finite domain (the caches' key)."""

    length: int
    token_values: tuple[Fraction, ...] | None
    names: tuple[str, ...] | None

    @property
    def domain(self) -> FiniteDomain:
        return FiniteDomain(self.length, self.token_values, self.names)


def _key(domain: FiniteDomain) -> _Key:
    return _Key(domain.length, domain.token_values, domain.names)


@lru_cache(maxsize=8192)
def _error(expr: object, key: _Key) -> float | None:
    values = value_set(expr, key.domain)
    if values is None or not values:
        return None
    rule = _ERROR_RULES.get(type(expr))
    if rule is None:
        return None
    return rule(expr, key, _magnitude(values))


def _children(expr: object, key: _Key, *children: object) -> list[float] | None:
    errors = [_error(child, key) for child in children]
    return None if any(e is None for e in errors) else errors  # type: ignore[return-value]


def _size(expr: object, key: _Key) -> float:
    values = value_set(expr, key.domain)
    assert values is not None
    return _magnitude(values)


def _arithmetic(expr: ir.Arithmetic, key: _Key, magnitude: float) -> float | None:
    errors = _children(expr, key, expr.left, expr.right)
    if errors is None:
        return None
    left, right = errors
    if expr.operator == "*":
        carried = left * _size(expr.right, key) + right * _size(expr.left, key) + left * right
    else:
        carried = left + right
    return carried + ROUNDOFF * (magnitude + carried)


def _reduce(expr: ir.Reduce, key: _Key, magnitude: float) -> float | None:
    errors = _children(expr, key, expr.body)
    if errors is None:
        return None
    body = errors[0]
    if expr.kind in ("min", "max", "top"):
        return body
    terms = key.length ** len(expr.variables)
    partial = terms * (_size(expr.body, key) + body)  # every partial sum is at most this
    total = terms * body + terms * ROUNDOFF * partial
    return total + ROUNDOFF * (magnitude + total) if expr.kind == "mean" else total


def _unary(expr: object, key: _Key, magnitude: float) -> float | None:
    """Negation, relu, abs, min, max: 1-Lipschitz in each argument, exact in float64."""
    errors = _children(expr, key, *ir.children(expr))
    return None if errors is None else max(errors)


def _square(expr: ir.Square, key: _Key, magnitude: float) -> float | None:
    errors = _children(expr, key, expr.argument)
    if errors is None:
        return None
    carried = 2 * errors[0] * _size(expr.argument, key) + errors[0] ** 2
    return carried + ROUNDOFF * (magnitude + carried)


def _divide(expr: ir.Divide, key: _Key, magnitude: float) -> float | None:
    errors = _children(expr, key, expr.numerator)
    if errors is None:
        return None
    carried = errors[0] / abs(float(expr.divisor)) + magnitude * _representation(expr.divisor) / abs(expr.divisor)
    return carried + ROUNDOFF * (magnitude + carried)


def _table(expr: ir.TableLookup, key: _Key, magnitude: float) -> float | None:
    """A lookup whose arguments are decided exactly: its output's decimal rounding."""
    return max(_representation(v) for v in expr.table.outputs()) if expr.table.outputs() else 0.0


_ERROR_RULES = {
    ir.NumberLiteral: lambda expr, key, magnitude: float(abs(Fraction(expr.value) - expr.exact)),
    ir.Constant: lambda expr, key, magnitude: _representation(expr.values[0]),
    ir.Token: lambda expr, key, magnitude: max((_representation(float(v)) for v in key.token_values or ()),
                                               default=0.0) if key.names is None else 0.0,
    ir.TokenLiteral: lambda expr, key, magnitude: 0.0,
    ir.PositionNumber: lambda expr, key, magnitude: 0.0,
    ir.Bracket: lambda expr, key, magnitude: 0.0,  # its comparison is decided exactly
    ir.Compare: lambda expr, key, magnitude: 0.0,  # a truth value, decided exactly (a split's [c] = true)
    ir.Logical: lambda expr, key, magnitude: 0.0,
    ir.Not: lambda expr, key, magnitude: 0.0,
    ir.Presence: lambda expr, key, magnitude: 0.0,
    ir.Arithmetic: _arithmetic,
    ir.Negate: _unary,
    ir.Pointwise: lambda expr, key, magnitude: None if expr.function == "sqrt" else _unary(expr, key, magnitude),
    ir.Square: _square,
    ir.Divide: _divide,
    ir.Reduce: _reduce,
    ir.TableLookup: _table,
}


@lru_cache(maxsize=4096)
def _own_values(operand: object, key: _Key) -> ExactValues | None:
    """The exact values one operand takes, where float64 tells them apart: its computed error
    below half the smallest gap between them (None where the operand is not finite: a program
    over vectors, a value past the caps)."""
    values = value_set(operand, key.domain)
    if values is None or not values:
        return None
    ordered = tuple(sorted(values))
    floats = [float(v) for v in ordered]
    gaps = [b - a for a, b in itertools.pairwise(floats)]
    error = _error(operand, key)
    if error is None or error >= min(gaps, default=float("inf")) / 2:
        raise Undecidable(f"it takes values as close as {min(gaps):.3g} (exact: "
                          f"{min(b - a for a, b in itertools.pairwise(ordered))}), which float64 cannot separate "
                          f"from its computed error")
    return ExactValues(ordered, tuple((a + b) / 2 for a, b in itertools.pairwise(floats)))


@dataclass(frozen=True)
class DecidedOperands:
    """Operands decided together: each snapped to its own exact values (:func:`_own_values`),
    then read as an index in the sorted union U of all of them, so that comparing indices is
    comparing the rationals (1e-14 against a sum of whole numbers: each side exact on its own)."""

    values: tuple[Fraction, ...]
    own: tuple[ExactValues, ...]
    in_union: tuple[tuple[int, ...], ...]

    def indices(self, computed: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Each computed operand as the index in U of its exact value."""
        return tuple(torch.tensor(places, dtype=torch.int64, device=value.device)[own.index(value)]
                     for own, places, value in zip(self.own, self.in_union, computed, strict=True))


@lru_cache(maxsize=4096)
def _exact_values(operands: tuple[object, ...], key: _Key) -> DecidedOperands | None:
    """U for ``operands`` decided together, or None where an operand is not finite (the float
    comparison is then the only one)."""
    own = [_own_values(operand, key) for operand in operands]
    if any(values is None for values in own):
        return None
    union = tuple(sorted(frozenset().union(*(values.values for values in own))))  # type: ignore[union-attr]
    position = {value: index for index, value in enumerate(union)}
    return DecidedOperands(union, tuple(own),  # type: ignore[arg-type]
                           tuple(tuple(position[v] for v in values.values) for values in own))  # type: ignore[union-attr]


def exact_values(operands: tuple[object, ...], domain: FiniteDomain, path: str = "<string>") -> DecidedOperands | None:
    """U of ``operands`` decided together (None where one is not finite); a located
    ProgramError where float64 cannot decide them."""
    try:
        return _exact_values(operands, _key(domain))
    except Undecidable as reason:
        span = getattr(operands[0], "span", None) or NO_SPAN
        raise single_error(path, span, f"the reference evaluator cannot decide this exactly: {reason}") from None


def snapped(operands: tuple[object, ...], computed: tuple[Tensor, ...], domain: FiniteDomain,
            path: str = "<string>") -> tuple[Tensor, ...] | None:
    """Each computed operand as the index of its exact value in the operands' union U (the
    indices order as the rationals do), or None where an operand's values are not finite."""
    exact = exact_values(operands, domain, path)
    return None if exact is None else exact.indices(computed)


def decided(exprs: tuple[object, ...], computed: tuple[Tensor, ...], domain: FiniteDomain | None,
            path: str = "<string>") -> tuple[Tensor, ...]:
    """The computed operands as the indices of their exact values where a token program's finite
    value sets decide them (:func:`snapped`), else as they are (``domain`` None: over vectors)."""
    if domain is None:
        return computed
    return snapped(exprs, computed, domain, path) or computed


def key_matcher(argument: object, domain: FiniteDomain | None, path: str = "<string>") -> Callable[[Tensor, float],
                                                                                                   Tensor]:
    """How a computed table argument meets a key: on exact values where they decide it (the key
    read as the rational it stands for), else as floats."""
    exact = None if domain is None else exact_values((argument,), domain, path)
    if exact is None:
        return lambda computed, key: computed == key
    positions = {value: index for index, value in enumerate(exact.values)}
    return lambda computed, key: exact.indices((computed,))[0] == positions.get(decimal(key), -1)


def looked_up(expr: ir.TableLookup, arguments: list[Tensor] | tuple[Tensor, ...], domain: FiniteDomain | None,
              path: str = "<string>") -> Tensor:
    """A table's value at each tuple of computed ``arguments`` (broadcast, float64; a categorical
    token's is its id, as the keys are): each key met by :func:`key_matcher`, NaN at a tuple it
    lacks (the checker proved none occurs)."""
    table = expr.table
    keys = [key_matcher(a, domain, path) for a in expr.arguments]
    out = torch.full_like(arguments[0], torch.nan if table.default is None else table.default)
    for key, value in zip(table.keys, table.values, strict=True):
        hit = torch.ones_like(arguments[0], dtype=torch.bool)
        for argument, part, matches in zip(arguments, key, keys, strict=True):
            hit &= matches(argument, part)
        out = torch.where(hit, value, out)
    return out
