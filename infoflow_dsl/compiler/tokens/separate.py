"""Separating a reduction's body into products of per-position features, and its key classes.

A head at query row t over keys s computes Σₖ aₖ(t)·bₖ(s) (a score, or, averaged, a mean), so
a body B(s, t) must be written that way:

- **Polynomial separation** (:func:`polynomial_terms`): sums, differences, products, squares and
  divisions by constants of parts that read one position each expand into such terms
  ((rank(s) − (t − 1))² = rank(s)² − 2·rank(s)·(t − 1) + (t − 1)²); cheapest where it applies.
- **Finite separation** (``analysis.finite.finite_split``): any function of two positions'
  finite-valued features is Σ_v [a = v]·B(v, ·) over the values of the side with fewer
  ([x(r) < x(s)] = Σ_v [x(s) = v]·[x(r) < v]): rank V for a token, about T for a count.
- **Key classes** (:func:`key_classes`): comparisons of the two positions inside the body
  (``r < s``) are constant on each class of keys {s − t < k}, {s − t = k}, … between the
  offsets they name, so the body is split per class, and each class is a structural mask.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from ...analysis.finite import FiniteDomain, finite_split, indicator_terms
from ...language import typed as ir
from ...language.exact import decimal
from ...language.typed import map_children
from ...transformer.masks import MASK_OPS, Condition, mask_side

#: (coefficient, factor read at the query, factor read at the key); None is the factor 1. The
#: coefficient is exact (a divisor 3 gives 1/3, not its float): expressions rebuilt from terms
#: (``scores.signed_sum``) keep the value sets of the body they came from.
Term = tuple[Fraction, ir.Expr | None, ir.Expr | None]
ONE = Fraction(1)

TRUE = ir.Compare("==", ir.NumberLiteral(0.0), ir.NumberLiteral(0.0))
FALSE = ir.Compare("!=", ir.NumberLiteral(0.0), ir.NumberLiteral(0.0))


def _reads(expr: object, variable: str) -> bool:
    return variable in ir.free_variables(expr)


def _times(left: ir.Expr | None, right: ir.Expr | None) -> ir.Expr | None:
    if left is None:
        return right
    if right is None:
        return left
    if left == right:
        return ir.Square(left)
    return ir.Arithmetic("*", left, right, ir.SCALAR)


def polynomial_terms(expr: ir.Expr, key: str, query: str) -> list[Term] | None:
    """``expr`` as Σ c·a(query)·b(key), or None where it does not expand."""
    reads_key, reads_query = _reads(expr, key), _reads(expr, query)
    if not reads_key:
        return [(ONE, expr if reads_query or not _is_one(expr) else None, None)]
    if not reads_query:
        return [(ONE, None, expr)]
    if isinstance(expr, ir.Arithmetic) and expr.operator in "+-":
        left, right = polynomial_terms(expr.left, key, query), polynomial_terms(expr.right, key, query)
        if left is None or right is None:
            return None
        sign = ONE if expr.operator == "+" else -ONE
        return left + [(sign * c, a, b) for c, a, b in right]
    if isinstance(expr, ir.Negate):
        inner = polynomial_terms(expr.argument, key, query)
        return None if inner is None else [(-c, a, b) for c, a, b in inner]
    if isinstance(expr, ir.Divide):
        inner = polynomial_terms(expr.numerator, key, query)
        return None if inner is None else [(c / decimal(expr.divisor), a, b) for c, a, b in inner]
    if isinstance(expr, ir.Arithmetic | ir.Square):
        left_expr, right_expr = (expr.left, expr.right) if isinstance(expr, ir.Arithmetic) else (expr.argument,) * 2
        left, right = polynomial_terms(left_expr, key, query), polynomial_terms(right_expr, key, query)
        if left is None or right is None:
            return None
        return [(c1 * c2, _times(a1, a2), _times(b1, b2)) for c1, a1, b1 in left for c2, a2, b2 in right]
    return None


def _is_one(expr: ir.Expr) -> bool:
    return isinstance(expr, ir.NumberLiteral) and expr.value == 1.0


def separated_terms(expr: ir.Expr, key: str, query: str, domain: FiniteDomain) -> list[Term] | None:
    """Polynomial separation, else the finite one (None: neither applies)."""
    terms = polynomial_terms(expr, key, query)
    if terms is not None:
        return terms

    def sources(node: object) -> set[str]:
        return ir.free_variables(node) & {key, query}

    split = finite_split(expr, domain, sources, prefer=query)
    if split is None:
        return None
    out: list[Term] = []
    for bracket, function in indicator_terms(expr, split, domain):
        if _reads(function, split.source):
            return None  # the indicator side's leaves do not carry all of its dependence
        if split.source == key:
            out.append((ONE, function, bracket))  # type: ignore[arg-type]
        else:
            out.append((ONE, bracket, function))  # type: ignore[arg-type]
    return out


def _atoms_of(condition: object) -> list[tuple[object, object]] | None:
    """The (leaf, literal) pairs of a conjunction of ``leaf == literal`` (None: another shape)."""
    if isinstance(condition, ir.Logical) and condition.operator == "and":
        left, right = _atoms_of(condition.left), _atoms_of(condition.right)
        return None if left is None or right is None else left + right
    literal_types = ir.TokenLiteral | ir.NumberLiteral
    if isinstance(condition, ir.Compare) and condition.operator == "==":
        if isinstance(condition.right, literal_types):
            return [(condition.left, condition.right)]
        if isinstance(condition.left, literal_types):
            return [(condition.right, condition.left)]
    return None


def exclusive_indicators(factors: list[ir.Expr | None]) -> bool:
    """Whether the factors are brackets [leaves = v] of one finite split (the same leaves, distinct
    values): at most one is 1 at any row, so a sum of gates by them has one gate open."""
    seen: set[tuple[object, ...]] = set()
    leaves: list[object] | None = None
    for factor in factors:
        atoms = _atoms_of(factor.condition) if isinstance(factor, ir.Bracket) else None
        if atoms is None:
            return False
        these = [leaf for leaf, _ in atoms]
        if leaves is not None and these != leaves:
            return False
        leaves = these
        values = tuple(value for _, value in atoms)
        if values in seen:
            return False
        seen.add(values)
    return len(factors) > 1


# ----------------------------------------------------------------------------- key classes


@dataclass(frozen=True)
class KeyClass:
    """Keys s with s − t in ``low``..``high`` (None: unbounded), and the body on them."""

    low: int | None
    high: int | None
    body: ir.Expr

    def mask(self) -> tuple[Condition, ...]:
        if self.low is not None and self.low == self.high:
            return (("key", "==", mask_side("query", self.low)),)
        conditions: list[Condition] = []
        if self.low is not None:
            conditions.append(("key", ">=", mask_side("query", self.low)))
        if self.high is not None:
            conditions.append(("key", "<=", mask_side("query", self.high)))
        return tuple(conditions)


def _difference(compare: ir.Compare, key: str, query: str) -> tuple[str, int] | None:
    """(op, k) with the atom ⇔ (s − t) op k, for a comparison of the two positions; else None."""
    left, right = compare.left, compare.right
    if not (isinstance(left, ir.PositionNumber) and isinstance(right, ir.PositionNumber)):
        return None
    a, b = left.position, right.position
    if not (isinstance(a, ir.PositionVariable) and isinstance(b, ir.PositionVariable)):
        return None
    if a.name == key and b.name == query:  # s + i op t + j  <=>  s − t op j − i
        return compare.operator, b.offset - a.offset
    if a.name == query and b.name == key:  # t + i op s + j  <=>  s − t flipped(op) i − j
        return ir.FLIPPED[compare.operator], a.offset - b.offset
    return None


def _atoms(expr: object, key: str, query: str) -> Iterator[ir.Compare]:
    for node in (expr, *ir.sub_nodes(expr)):
        if isinstance(node, ir.Compare) and _difference(node, key, query) is not None:
            yield node


def _holds(op: str, value: int, k: int) -> bool:
    return bool(MASK_OPS[op](value, k))


def _decide(expr: object, key: str, query: str, difference: int) -> object:
    """``expr`` with each position atom replaced by its truth value at s − t = ``difference``."""
    if isinstance(expr, ir.Compare):
        atom = _difference(expr, key, query)
        if atom is not None:
            return TRUE if _holds(atom[0], difference, atom[1]) else FALSE
    return map_children(expr, lambda child: _decide(child, key, query, difference))


def key_classes(body: ir.Expr, key: str, query: str) -> list[KeyClass]:
    """The classes of s − t on which every comparison of s with t in ``body`` is constant."""
    atoms = list(_atoms(body, key, query))
    if not atoms:
        return [KeyClass(None, None, body)]
    cuts = sorted({_difference(a, key, query)[1] for a in atoms})  # type: ignore[index]
    classes: list[KeyClass] = []
    bounds: list[tuple[int | None, int | None, int]] = [(None, cuts[0] - 1, cuts[0] - 1)]
    for k, following in zip(cuts, [*cuts[1:], None], strict=True):
        bounds.append((k, k, k))
        if following is None:
            bounds.append((k + 1, None, k + 1))
        elif following > k + 1:
            bounds.append((k + 1, following - 1, k + 1))
    for low, high, sample in bounds:
        classes.append(KeyClass(low, high, _decide(body, key, query, sample)))  # type: ignore[arg-type]
    return classes


def renamed(expr: ir.Expr, old: str, new: str, offset: int = 0) -> ir.Expr:
    """``expr`` with free variable ``old`` read as ``new + offset`` (``typed.rename``)."""
    return ir.rename(expr, old, new, offset)
