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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from ..language import typed as ir
from ..language.printer import describe
from ..language.syntax import Span
from ..language.typed import map_children
from ..language.value_sets import (
    MAX_VALUES,
    VALUE_SET_RULES,
    FiniteDomain,
    ValueSet,
    finite_domain,
    value_set,
)
from .comparisons import ComparisonTree, NodeResult

#: a comparison node's result: the value set the tree recorded for it (:func:`tree_value_sets`)
VALUE_SET_RULES[NodeResult] = lambda expr, domain: domain.results.get(expr.node)


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


def literal(leaf: object, value: Fraction, domain: FiniteDomain) -> ir.TokenLiteral | ir.NumberLiteral | ir.Compare:
    """The literal a leaf is replaced by: a token of a categorical vocabulary, a truth value (a
    comparison of constants) for a condition, else the number, exactly."""
    if getattr(leaf, "type", None) == ir.TOKEN and domain.names is not None:
        return ir.TokenLiteral(int(value), domain.names[int(value)])
    if getattr(leaf, "type", None) == ir.BOOLEAN:  # a condition of one position: [leaf] is 0 or 1
        zero = ir.NumberLiteral(0.0)
        return ir.Compare("==" if value else "!=", zero, zero)
    return ir.NumberLiteral(float(value), exact=value)


def retrieval_note(node_quoted: str, gap: Fraction | None) -> str:
    """What a token program's argmin/argmax note says: exact, with the scores' smallest gap."""
    if gap is None:
        return (f"{node_quoted} picks a position (its token, or its number); its scores take one value or too "
                f"many to list: ties go to the smallest position")
    return (f"{node_quoted} picks a position (its token, or its number); its scores take finitely many "
            f"values, distinct ones at least {gap} apart, so no margin is needed: ties go to the smallest "
            f"position, exactly (a tie-break term below the gap)")
