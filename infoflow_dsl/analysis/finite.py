"""Finite value sets of a token program, the smallest gap of every comparison, and the
separation of pairwise functions of finite-valued features.

On a finite vocabulary every value a program computes from tokens, literals, brackets,
positions and ``len`` lies in a finite set fixed by the program (:func:`value_set`, a rule per
node class in :data:`VALUE_SET_RULES`, exact rationals): a token's value is one of the
vocabulary's, a bracket is 0 or 1, a sum of n-tuples of values with quantum q is a multiple of
q within 0..Tⁿ times the body's range, a mean over m ≤ Tⁿ tuples is such a sum divided by m
(two means over counts m ≠ m′ differ by at least 1/(m·m′) ≥ 1/(T(T−1)) when they differ),
min, max and top(k) take one of their body's values. The **smallest gap** of a comparison
a < b is the least |u − v| over u in a's set and v in b's with u ≠ v (:func:`smallest_gap`):
a comparison step narrower than it is exact on every input.

A function g(a, b) of a feature a of position p and a feature b of position q that takes
finitely many values (``[x(r) < x(s)]``, ``|rank(s) − (t − 1)|``) is a finite sum of products
of per-token features: g(a, b) = Σ_v [a = v] · g(v, b) over the values v of the side with
fewer, so an order-2 comparison of it is a score a head can compute; its **rank** is that
number of values (V for a token, about T for a count or a position). :func:`finite_split`
gives the decomposition; ``features`` uses it where a polynomial expansion fails.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..language import typed as ir
from ..language.printer import describe
from ..language.syntax import Span
from ..language.typed import map_children
from .comparisons import ComparisonTree, NodeResult

#: A finite set of exact values, or None (continuous, unknown, or larger than MAX_VALUES).
ValueSet = frozenset[Fraction] | None

#: The largest value set kept (a set past it is treated as unknown: no gap is derived from it).
MAX_VALUES = 200_000
#: The most pairs a binary operation on two value sets combines.
MAX_PAIRS = 2_000_000


@dataclass
class FiniteDomain:
    """What value sets are computed from: T, the tokens' values (None for a continuous input),
    and the value set of each comparison node's result, filled in as the tree is built."""

    length: int
    token_values: tuple[Fraction, ...] | None
    names: tuple[str, ...] | None = None  # a categorical vocabulary's tokens (literals of substitutions)
    results: dict[str, ValueSet] = field(default_factory=dict)


def finite_domain(program: ir.Program) -> FiniteDomain | None:
    """The finite domain of a token program (None for a program over vectors)."""
    vocabulary = program.vocabulary
    if vocabulary is None:
        return None
    if vocabulary.values is None:
        return FiniteDomain(program.length, tuple(Fraction(i) for i in range(vocabulary.size)), vocabulary.names)
    return FiniteDomain(program.length, tuple(Fraction(v) for v in vocabulary.values))


def tree_value_sets(tree: ComparisonTree, domain: FiniteDomain) -> FiniteDomain:
    """``domain`` with the value set of every node's result (children first, as the tree lists them)."""
    for node in tree.nodes:
        if node.kind in ("argmin", "argmax"):
            domain.results[node.name] = None  # a position: read as a number through PositionNumber
            continue
        reduce = ir.Reduce("max" if node.kind == "top" else node.kind, node.variables, node.conditions,  # type: ignore[arg-type]
                           node.body, node.body.type)
        domain.results[node.name] = value_set(reduce, domain)
    return domain


def value_set(expr: object, domain: FiniteDomain) -> ValueSet:
    """Every value ``expr`` can take (a scalar or a token; None for a vector or past the cap)."""
    if getattr(getattr(expr, "type", None), "shape", ()) != ():
        return None
    rule = VALUE_SET_RULES.get(type(expr))
    if rule is None:
        raise TypeError(f"no value set rule for {type(expr).__name__}")
    values = rule(expr, domain)
    return values if values is None or len(values) <= MAX_VALUES else None


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


def _reduce(expr: ir.Reduce, domain: FiniteDomain) -> ValueSet:
    body = value_set(expr.body, domain)
    if body is None or expr.kind in ("min", "max", "top"):
        return body  # one of the body's values
    most = domain.length ** len(expr.variables)
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
    return _finite(quantum * Fraction(k, m) for m in range(1, most + 1)
                   for k in range(int(m * low), int(m * high) + 1))


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
    operations = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    return _pairwise(value_set(expr.left, domain), value_set(expr.right, domain), operations[expr.operator])


BOOLEAN_VALUES = frozenset({Fraction(0), Fraction(1)})


def _table(expr: ir.TableLookup, domain: FiniteDomain) -> ValueSet:
    """The table's values at the argument values it can meet (a key matches the value it equals
    as a float); every value it holds when an argument's set is unknown."""
    table = expr.table
    arguments = [value_set(a, domain) for a in expr.arguments]
    known = [a for a in arguments if a is not None]
    if len(known) < len(arguments) or math.prod(len(a) for a in known) > MAX_PAIRS:
        return frozenset(Fraction(v) for v in table.outputs())
    found = {table.lookup(tuple(float(v) for v in key)) for key in itertools.product(*known)}
    return frozenset(Fraction(v) for v in found if v is not None)

#: The value set rule of each value node (and of a comparison node's result).
VALUE_SET_RULES: dict[type, Callable[[Any, FiniteDomain], ValueSet]] = {
    ir.NumberLiteral: lambda expr, domain: frozenset({Fraction(expr.value)}),
    ir.Constant: lambda expr, domain: frozenset({Fraction(expr.values[0])}),
    ir.Token: _token,
    ir.Component: lambda expr, domain: None,
    ir.Inner: lambda expr, domain: None,
    ir.Norm: lambda expr, domain: None,
    ir.Square: lambda expr, domain: _map(value_set(expr.argument, domain), lambda v: v * v),
    ir.Pointwise: _pointwise,
    ir.Arithmetic: _arithmetic,
    ir.Negate: lambda expr, domain: _map(value_set(expr.argument, domain), lambda v: -v),
    ir.Divide: lambda expr, domain: _map(value_set(expr.numerator, domain), lambda v: v / Fraction(expr.divisor)),
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
    NodeResult: lambda expr, domain: domain.results.get(expr.node),
}


def smallest_gap(left: ValueSet, right: ValueSet) -> Fraction | None:
    """min |u − v| over u ∈ left, v ∈ right, u ≠ v; None when a set is unknown or no pair differs."""
    if left is None or right is None:
        return None
    ordered = sorted(right)
    best: Fraction | None = None
    for value in left:
        index = bisect.bisect_left(ordered, value)
        for neighbour in ordered[max(index - 1, 0):index + 2]:
            if neighbour != value and (best is None or abs(neighbour - value) < best):
                best = abs(neighbour - value)
    return best


# ----------------------------------------------------------------------------- the program's comparisons


@dataclass(frozen=True)
class ComparedPair:
    """One comparison of the program: its text and span, how many values each side can take,
    and the smallest gap between distinct values (None: not derivable, a margin is needed)."""

    text: str
    span: Span
    left_values: int | None
    right_values: int | None
    gap: Fraction | None


def comparison_gaps(program: ir.Program) -> tuple[ComparedPair, ...]:
    """The smallest gap of every comparison inside a bracket of a token program (none for a
    program over vectors: its compared values have no gap, its margin δ stands for one)."""
    domain = finite_domain(program)
    if domain is None:
        return ()
    pairs = []
    for node in (program.target, *ir.sub_nodes(program.target)):
        if isinstance(node, ir.Compare):
            left, right = value_set(node.left, domain), value_set(node.right, domain)
            pairs.append(ComparedPair(text=describe(node), span=node.span, left_values=_size(left),
                                      right_values=_size(right), gap=smallest_gap(left, right)))
    return tuple(pairs)


def _size(values: ValueSet) -> int | None:
    return None if values is None else len(values)


# ----------------------------------------------------------------------------- pairwise functions of finite features


@dataclass(frozen=True)
class FiniteSplit:
    """g(a, b) = Σ_v [a = v] · g(v, b): the leaves of the indicator side (their source
    ``source``), the joint values v the sum runs over, and the other side's source."""

    source: str
    leaves: tuple[object, ...]
    values: tuple[tuple[Fraction, ...], ...]
    other: str

    @property
    def rank(self) -> int:
        return len(self.values)

    @property
    def grows_with_length(self) -> bool:
        """Does the number of values grow with T (counts, positions), or is it the vocabulary's?"""
        return any(not isinstance(leaf, ir.Token | ir.TokenLiteral) for leaf in self.leaves)


def single_source_leaves(expr: object, sources_of: Callable[[object], set[str]]) -> list[object]:
    """The largest sub-expressions of ``expr`` that read one position each (constants are not leaves)."""
    found = sources_of(expr)
    if len(found) == 1:
        return [expr]
    if not found:
        return []
    return [leaf for child in ir.children(expr) if not isinstance(child, ir.PositionCondition)
            for leaf in single_source_leaves(child, sources_of)]


def finite_split(expr: object, domain: FiniteDomain, sources_of: Callable[[object], set[str]],
                 prefer: str | None = None) -> FiniteSplit | None:
    """The decomposition of a scalar function of two positions' finite-valued features, on the
    side with fewer joint values (``prefer``'s where both have as many: the compiler passes the
    reduction's query, which measured cheaper on every token program but one of 73, by up to
    42%, and makes the model independent of the variables' names; else the first by name);
    None when ``expr`` reads other than two positions, or no side is finite and has a feature of
    its position alone (so every split has at least one leaf)."""
    sources = sources_of(expr)
    if len(sources) != 2:
        return None
    leaves = single_source_leaves(expr, sources_of)
    best: FiniteSplit | None = None
    for source in sorted(sources, key=lambda s: (s != prefer, s)):
        side = tuple(dict.fromkeys(leaf for leaf in leaves if sources_of(leaf) == {source}))
        if not side:  # no feature of this position alone to enumerate
            continue
        sets = [value_set(leaf, domain) for leaf in side]
        if any(s is None for s in sets) or math.prod(len(s or ()) for s in sets) > MAX_VALUES:
            continue
        joint = tuple(itertools.product(*(sorted(s) for s in sets)))  # type: ignore[arg-type]
        other = next(s for s in sources if s != source)
        if best is None or len(joint) < best.rank:
            best = FiniteSplit(source, side, joint, other)
    return best


def indicator_terms(expr: object, split: FiniteSplit, domain: FiniteDomain) -> Iterator[tuple[ir.Bracket, object]]:
    """The terms of g(a, b) = Σ_v [a = v] · g(v, b): for each joint value v of the split's side,
    the indicator [a₁ = v₁ and a₂ = v₂ …] (read on ``split.source``) and g(v, b), ``expr`` with
    the side's leaves replaced by their literals (read on ``split.other``, or constant). The one
    writer of a finite split's terms, for the analysis and the token lowering alike."""
    for values in split.values:
        literals = {leaf: literal(leaf, value, domain) for leaf, value in zip(split.leaves, values, strict=True)}
        tests = [ir.Compare("==", leaf, lit) for leaf, lit in literals.items()]  # type: ignore[arg-type]
        condition: ir.Expr = tests[0]
        for test in tests[1:]:
            condition = ir.Logical("and", condition, test)
        yield ir.Bracket(condition), substitute_values(expr, literals)


def substitute_values(expr: object, leaves: Mapping[object, object]) -> object:
    """``expr`` with each leaf replaced by its literal (by identity of equal sub-expressions)."""
    if expr in leaves:
        return leaves[expr]
    return map_children(expr, lambda child: substitute_values(child, leaves))


def literal(leaf: object, value: Fraction, domain: FiniteDomain) -> ir.TokenLiteral | ir.NumberLiteral:
    """The literal a leaf is replaced by: a token of a categorical vocabulary, else a number."""
    if getattr(leaf, "type", None) == ir.TOKEN and domain.names is not None:
        return ir.TokenLiteral(int(value), domain.names[int(value)])
    return ir.NumberLiteral(float(value))
