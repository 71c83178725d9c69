"""Finite value sets of a token program's expressions (:func:`value_set`), what ``check`` reads
to see that a table covers its arguments, and the finite analysis builds on (``analysis.finite``).

On a finite vocabulary every value a program computes from tokens, literals, brackets,
positions and ``len`` lies in a finite set fixed by the program (a rule per node class in
:data:`VALUE_SET_RULES`, exact rationals): a token's value is one of the vocabulary's, a bracket
is 0 or 1, a sum of n-tuples of values with quantum q is a multiple of q within 0..Tⁿ times the
body's range, a mean over m ≤ Tⁿ tuples is such a sum divided by m, min, max and top(k) take
one of their body's values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from . import typed as ir
from .exact import decimal, over_common_denominator, product_numerators

if TYPE_CHECKING:
    from .lookup_table import Table

#: A finite set of exact values, or None (continuous, unknown, or larger than MAX_VALUES).
ValueSet = frozenset[Fraction] | None


#: The largest value set kept (a set past it is treated as unknown: no gap is derived from it).
MAX_VALUES = 200_000


#: The most pairs a binary operation on two value sets combines.
MAX_PAIRS = 2_000_000


@dataclass
class FiniteDomain:
    """What value sets are computed from: T, the tokens' values (None for a continuous input),
    and the value set of each comparison node's result, filled in as the tree is built.

    ``known`` remembers each expression's set (by the object's id, the object kept alive beside
    it) while the results stay as they were: results are only ever added, so a set computed
    beside n of them holds while there are n."""

    length: int
    token_values: tuple[Fraction, ...] | None
    names: tuple[str, ...] | None = None  # a categorical vocabulary's tokens (literals of substitutions)
    results: dict[str, ValueSet] = field(default_factory=dict)
    known: dict[tuple[int, int], tuple[object, ValueSet]] = field(default_factory=dict, repr=False, compare=False)


def finite_domain(program: ir.Program) -> FiniteDomain | None:
    """The finite domain of a token program (None for a program over vectors)."""
    return None if program.vocabulary is None else vocabulary_domain(program.vocabulary, program.length)


def vocabulary_domain(vocabulary: ir.Vocabulary, length: int) -> FiniteDomain:
    """The finite domain of a vocabulary at length T: a categorical token's value is its id."""
    if vocabulary.values is None:
        return FiniteDomain(length, tuple(Fraction(i) for i in range(vocabulary.size)), vocabulary.names)
    return FiniteDomain(length, tuple(decimal(v) for v in vocabulary.values))


def value_set(expr: object, domain: FiniteDomain) -> ValueSet:
    """Every value ``expr`` can take (a scalar or a token; None for a vector or past the cap)."""
    if getattr(getattr(expr, "type", None), "shape", ()) != ():
        return None
    key = (id(expr), len(domain.results))
    if key in domain.known:
        return domain.known[key][1]
    rule = VALUE_SET_RULES.get(type(expr))
    if rule is None:
        raise TypeError(f"no value set rule for {type(expr).__name__}")
    values = rule(expr, domain)
    values = values if values is None or len(values) <= MAX_VALUES else None
    domain.known[key] = (expr, values)
    return values


def _finite(values: Iterable[Fraction]) -> ValueSet:
    out = frozenset(values)
    return out if len(out) <= MAX_VALUES else None


def _pairwise(left: ValueSet, right: ValueSet, combine: Callable[[Fraction, Fraction], Fraction]) -> ValueSet:
    if left is None or right is None or len(left) * len(right) > MAX_PAIRS:
        return None
    return _finite(combine(a, b) for a in left for b in right)


def _map(values: ValueSet, function: Callable[[Fraction], Fraction]) -> ValueSet:
    return None if values is None else _finite(function(v) for v in values)


def _quantum(values: frozenset[Fraction]) -> Fraction:
    """The largest q with every value a whole multiple of q (0 for {0})."""
    numerator = math.gcd(*(v.numerator for v in values))
    denominator = math.lcm(*(v.denominator for v in values))
    return Fraction(numerator, denominator)


def _sumsets(body: frozenset[Fraction], most: int) -> list[set[int]] | None:
    """The m-fold sumsets {v₁ + … + v_m : vᵢ ∈ body} for m = 0..``most``, over the body's quantum
    q (whole numbers k, the sums being k·q), built one term at a time, or None when one passes
    MAX_VALUES or the work (Σ |sumset|·|body|) passes MAX_PAIRS. Where the body takes few values
    (an affine map of a token: 997·x + 13) they are far fewer than the lattice of its quantum
    between the extremes (9m + 1 sums of m terms, not 8,973·m)."""
    quantum = _quantum(body)
    if quantum == 0:
        return [{0}] * (most + 1)
    steps = sorted({int(v / quantum) for v in body})
    sums, found, work = {0}, [{0}], 0
    for _ in range(most):
        work += len(sums) * len(steps)
        if work > MAX_PAIRS:
            return None
        sums = {u + v for u in sums for v in steps}
        if len(sums) > MAX_VALUES:
            return None
        found.append(sums)
    return found


def _reduce(expr: ir.Reduce, domain: FiniteDomain) -> ValueSet:
    body = value_set(expr.body, domain)
    if body is None or expr.kind in ("min", "max", "top"):
        return body  # one of the body's values
    most = domain.length ** len(expr.variables)
    sumsets = _sumsets(body, most)
    if sumsets is not None:  # a sum of 0..most terms; a mean of m = 1..most terms, the sum over m
        quantum = _quantum(body)
        if expr.kind == "sum":
            return _finite(quantum * k for k in set().union(*sumsets))
        return _means(quantum, ((k, m) for m, sums in enumerate(sumsets) if m for k in sums))
    quantum = _quantum(body)
    if quantum == 0:
        return frozenset({Fraction(0)})
    low, high = min(body) / quantum, max(body) / quantum  # whole numbers
    if expr.kind == "sum":
        bottom, top = min(Fraction(0), most * low), max(Fraction(0), most * high)
        if top - bottom > MAX_VALUES:
            return None
        return _finite(quantum * k for k in range(int(bottom), int(top) + 1))
    if sum(m * (high - low) + 1 for m in range(1, most + 1)) > MAX_PAIRS:
        return None
    return _means(quantum, ((k, m) for m in range(1, most + 1) for k in range(int(m * low), int(m * high) + 1)))


def _means(quantum: Fraction, sums: Iterable[tuple[int, int]]) -> ValueSet:
    """{q·k/m : (k, m) ∈ sums}: the ratios reduced on integers first, a Fraction made once per
    distinct value."""
    reduced = {(k // math.gcd(k, m), m // math.gcd(k, m)) for k, m in sums}
    if len(reduced) > MAX_VALUES:
        return None
    return _finite(Fraction(quantum.numerator * k, quantum.denominator * m) for k, m in reduced)


def _position(expr: ir.PositionNumber, domain: FiniteDomain) -> ValueSet:
    position, length = expr.position, domain.length
    if isinstance(position, ir.FixedPosition):
        return frozenset({Fraction(position.index)})
    if isinstance(position, ir.LastPosition):
        return frozenset({Fraction(length + position.offset)})
    if isinstance(position, ir.ReflectedPosition):
        return _finite(Fraction(v) for v in range(position.offset - length, position.offset + length + 1))
    offset = getattr(position, "offset", 0)
    return _finite(Fraction(v + offset) for v in range(1, length + 1))


def _token(expr: ir.Token, domain: FiniteDomain) -> ValueSet:
    return None if domain.token_values is None else frozenset(domain.token_values)


def _pointwise(expr: ir.Pointwise, domain: FiniteDomain) -> ValueSet:
    arguments = [value_set(a, domain) for a in expr.arguments]
    if expr.function == "relu":
        return _map(arguments[0], lambda v: max(v, Fraction(0)))
    if expr.function == "abs":
        return _map(arguments[0], abs)
    if expr.function in ("min", "max"):
        return _pairwise(arguments[0], arguments[1], min if expr.function == "min" else max)
    return None  # sqrt: irrational values


def _arithmetic(expr: ir.Arithmetic, domain: FiniteDomain) -> ValueSet:
    """{a ∘ b}, on whole numbers: a = m/D and b = n/D over one common denominator D give a ± b =
    (m ± n)/D; with a = m/D_a and b = n/D_b, a·b = mn/(D_a·D_b); a Fraction per distinct result."""
    left, right = value_set(expr.left, domain), value_set(expr.right, domain)
    if left is None or right is None or len(left) * len(right) > MAX_PAIRS:
        return None
    if expr.operator == "*":
        return _finite_ratios(*product_numerators(left, right))
    (whole_left, whole_right), below = over_common_denominator(left, right)
    sign = 1 if expr.operator == "+" else -1
    return _finite_ratios({m + sign * n for m in whole_left for n in whole_right}, below)


def _finite_ratios(numerators: set[int], denominator: int) -> ValueSet:
    return None if len(numerators) > MAX_VALUES else _finite(Fraction(n, denominator) for n in numerators)


BOOLEAN_VALUES = frozenset({Fraction(0), Fraction(1)})


def _table(expr: ir.TableLookup, domain: FiniteDomain) -> ValueSet:
    """The table's values at the argument values it can meet (a key matches the value whose
    rational it stands for: :func:`.exact.decimal`); every value it holds when an argument's set
    is unknown."""
    table = expr.table
    arguments = [value_set(a, domain) for a in expr.arguments]
    known = [a for a in arguments if a is not None]
    if len(known) < len(arguments) or math.prod(len(a) for a in known) > MAX_PAIRS:
        return frozenset(decimal(v) for v in table.outputs())
    found = {exact_lookup(table, key) for key in itertools.product(*known)}
    return frozenset(decimal(v) for v in found if v is not None)


def exact_lookup(table: Table, key: tuple[Fraction, ...]) -> float | None:
    """The table's value at the exact ``key`` (each entry's key read as its decimal), its
    default, or None."""
    for entry, value in zip(table.keys, table.values, strict=True):
        if all(decimal(part) == wanted for part, wanted in zip(entry, key, strict=True)):
            return value
    return table.default


#: The value set rule of each value node (``analysis.finite`` adds a comparison node's result).
VALUE_SET_RULES: dict[type, Callable[[Any, FiniteDomain], ValueSet]] = {
    ir.NumberLiteral: lambda expr, domain: frozenset({expr.exact}),
    ir.Constant: lambda expr, domain: frozenset({decimal(expr.values[0])}),
    ir.Token: _token,
    ir.Component: lambda expr, domain: None,
    ir.Inner: lambda expr, domain: None,
    ir.Norm: lambda expr, domain: None,
    ir.Square: lambda expr, domain: _map(value_set(expr.argument, domain), lambda v: v * v),
    ir.Pointwise: _pointwise,
    ir.Arithmetic: _arithmetic,
    ir.Negate: lambda expr, domain: _map(value_set(expr.argument, domain), lambda v: -v),
    ir.Divide: lambda expr, domain: _map(value_set(expr.numerator, domain), lambda v: v / decimal(expr.divisor)),
    ir.MatVec: lambda expr, domain: None,
    ir.Reduce: _reduce,
    ir.Presence: lambda expr, domain: BOOLEAN_VALUES,
    ir.TokenLiteral: lambda expr, domain: frozenset({Fraction(expr.index)}),
    ir.PositionNumber: _position,
    ir.Compare: lambda expr, domain: BOOLEAN_VALUES,
    ir.Logical: lambda expr, domain: BOOLEAN_VALUES,
    ir.Not: lambda expr, domain: BOOLEAN_VALUES,
    ir.Bracket: lambda expr, domain: BOOLEAN_VALUES,
    ir.TableLookup: _table,
}
