"""Comparisons of a key with a small tie-break term, as the order of pairs (the stable-sort idiom).

A key ``x(t) + c·(t − 1)`` compares like the pair (x(t), t) where c·(T − 1) is below the
tokens' smallest gap, whatever c is (0.3 at T = 4, 1e-14 at any T): for sides L = a + m and
R = b + n whose major parts a, b take values whose distinct ones are at least g apart, and whose
minor parts differ by less, max |m − n| < g,

    [L < R] = [a < b] + [a = b]·[m < n]        [L = R] = [a = b]·[m = n]

(a < b gives b − a ≥ g > m − n; a = b leaves m < n; a > b neither), and likewise ≤, >, ≥, ≠.
:func:`lexicographic` rewrites each such comparison of a token program that way (the checker's
last step, so the reference evaluator, the analysis and the compiler read one program): each
side's additive terms (``+``, ``−``, negation) are split by their spans, the smallest into the
minor part, as many as the condition allows, and the minor comparison is split again. A minor
comparison affine in positions, c·(s − 1) < c·(t − 1), is the comparison of the positions
themselves (s < t for c > 0): a mask, not a number 1e-14 wide. The condition is checked on
exact value sets (:mod:`.value_sets`); a comparison it does not hold for is left as written,
and its gap is the compiler's to certify.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from . import typed as ir
from .typed import map_children
from .value_sets import FiniteDomain, value_set


@dataclass(frozen=True)
class SignedTerm:
    """One additive term of a side: ``sign``·``expr``, and its exact values."""

    sign: int
    expr: ir.Expr
    values: frozenset[Fraction]

    @property
    def span(self) -> Fraction:
        return max(self.values) - min(self.values)


def lexicographic(expr: object, domain: FiniteDomain) -> object:
    """``expr`` with every comparison of a key and a small tie-break term written as the order of
    pairs (module docstring), innermost first."""
    rewritten = map_children(expr, lambda child: lexicographic(child, domain))
    if isinstance(rewritten, ir.Compare) and rewritten.left.type != ir.TOKEN:
        return _split(rewritten, domain)
    return rewritten


def _split(compare: ir.Compare, domain: FiniteDomain) -> ir.Expr:
    left, right = _terms(compare.left, domain), _terms(compare.right, domain)
    if left is None or right is None or len(left) + len(right) < 3:
        return compare
    for size in range(len(left) + len(right) - 1, 0, -1):
        parts = _parts(left, right, size)
        if parts is not None and _separated(*parts):
            (major_l, minor_l), (major_r, minor_r) = parts
            return _pair_order(compare, _sum(major_l), _sum(major_r), _sum(minor_l), _sum(minor_r), domain)
    return compare


def _terms(side: ir.Expr, domain: FiniteDomain, sign: int = 1) -> list[SignedTerm] | None:
    """The side's additive terms with their exact values (None where one is not finite)."""
    if isinstance(side, ir.Arithmetic) and side.operator in "+-":
        left, right = _terms(side.left, domain, sign), _terms(side.right, domain,
                                                               sign if side.operator == "+" else -sign)
        return None if left is None or right is None else left + right
    if isinstance(side, ir.Negate):
        return _terms(side.argument, domain, -sign)
    values = value_set(side, domain)
    return None if values is None or not values else [SignedTerm(sign, side, values)]


Parts = tuple[list[SignedTerm], list[SignedTerm]]


def _parts(left: list[SignedTerm], right: list[SignedTerm], size: int) -> tuple[Parts, Parts] | None:
    """The ``size`` terms of smallest span (over both sides; constants stay major) as the minor
    parts, the rest as the major ones; None where a side would be left without a major term."""
    ranked = sorted([(t.span, 0, i) for i, t in enumerate(left) if t.span] +
                    [(t.span, 1, i) for i, t in enumerate(right) if t.span])
    if size > len(ranked):
        return None
    minor = {(side, i) for _, side, i in ranked[:size]}
    split = []
    for side, terms in enumerate((left, right)):
        major = [t for i, t in enumerate(terms) if (side, i) not in minor]
        split.append((major, [t for i, t in enumerate(terms) if (side, i) in minor]))
    if not any(minor for _, minor in split) or not all(major for major, _ in split):
        return None
    return split[0], split[1]


def _values(terms: list[SignedTerm]) -> frozenset[Fraction]:
    """Every value Σ sign·term can take, terms independent (a superset of the joint values)."""
    total = frozenset({Fraction(0)})
    for term in terms:
        total = frozenset(a + term.sign * v for a in total for v in term.values)
    return total


def _separated(left: Parts, right: Parts) -> bool:
    """max |m − n| over the minor parts' values below the majors' smallest nonzero gap."""
    majors = sorted(_values(left[0]) | _values(right[0]))
    minor_l, minor_r = _values(left[1]), _values(right[1])
    gap = min((b - a for a, b in itertools.pairwise(majors)), default=None)
    reach = max(max(minor_l) - min(minor_r), max(minor_r) - min(minor_l))
    return gap is not None and reach < gap


def _sum(terms: list[SignedTerm]) -> ir.Expr:
    """Σ sign·term as one expression (0 for no term)."""
    total: ir.Expr | None = None
    for term in terms:
        if total is None:
            total = term.expr if term.sign > 0 else ir.Negate(term.expr, ir.SCALAR, term.expr.span)
        else:
            total = ir.Arithmetic("+" if term.sign > 0 else "-", total, term.expr, ir.SCALAR, term.expr.span)
    return total if total is not None else ir.NumberLiteral(0.0)


def _pair_order(compare: ir.Compare, a: ir.Expr, b: ir.Expr, m: ir.Expr, n: ir.Expr,
                domain: FiniteDomain) -> ir.Expr:
    """[a + m op b + n] as the pair order: (a, m) op (b, n)."""
    span, op = compare.span, compare.operator
    minor = _split(_positions_compared(ir.Compare(op, m, n, span)), domain)
    equal = ir.Compare("==", a, b, span)
    if op == "==":
        return ir.Logical("and", equal, minor, span)
    if op == "!=":
        return ir.Logical("or", ir.Compare("!=", a, b, span), minor, span)
    strict = ir.Compare("<" if op in ("<", "<=") else ">", a, b, span)
    return ir.Logical("or", strict, ir.Logical("and", equal, minor, span), span)


# ----------------------------------------------------------------------------- affine in positions


def _affine(expr: ir.Expr) -> dict[object, Fraction] | None:
    """``expr`` as Σ c·(position number) + c₀ (key None: the constant), or None."""
    if isinstance(expr, ir.NumberLiteral):
        return {None: expr.exact}
    if isinstance(expr, ir.PositionNumber):
        return {expr.position: Fraction(1)}
    if isinstance(expr, ir.Negate):
        inner = _affine(expr.argument)
        return None if inner is None else {k: -c for k, c in inner.items()}
    if isinstance(expr, ir.Divide):
        inner = _affine(expr.numerator)
        divisor = ir.NumberLiteral(expr.divisor).exact
        return None if inner is None else {k: c / divisor for k, c in inner.items()}
    if isinstance(expr, ir.Arithmetic):
        left, right = _affine(expr.left), _affine(expr.right)
        if left is None or right is None:
            return None
        if expr.operator == "*":
            scale, other = (left[None], right) if set(left) == {None} else (
                (right[None], left) if set(right) == {None} else (None, None))
            return None if scale is None or other is None else {k: scale * c for k, c in other.items()}
        sign = 1 if expr.operator == "+" else -1
        total = dict(left)
        for k, c in right.items():
            total[k] = total.get(k, Fraction(0)) + sign * c
        return total
    return None


def _positions_compared(compare: ir.Compare) -> ir.Compare:
    """c·(p − q) + d op 0 as p op q + k (k = −d/c whole, op flipped for c < 0) where the
    difference of the sides is affine in two positions p, q with opposite coefficients, q a
    position variable (so the compiler reads it as a mask); else ``compare`` as it is."""
    left, right = _affine(compare.left), _affine(compare.right)
    if left is None or right is None:
        return compare
    difference = dict(left)
    for k, c in right.items():
        difference[k] = difference.get(k, Fraction(0)) - c
    constant = difference.pop(None, Fraction(0))
    positions = [(p, c) for p, c in difference.items() if c != 0]
    if len(positions) != 2 or positions[0][1] != -positions[1][1]:
        return compare
    (p, c), (q, _) = positions
    shift = -constant / c
    if shift.denominator != 1 or not isinstance(q, ir.PositionVariable):
        return compare
    op = compare.operator if c > 0 else ir.FLIPPED[compare.operator]
    moved = ir.PositionVariable(q.name, q.span, q.type, q.offset + int(shift))
    return ir.Compare(op, ir.PositionNumber(p, compare.span), ir.PositionNumber(moved, compare.span),  # type: ignore[arg-type]
                      compare.span)

