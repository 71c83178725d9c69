"""Rewrites of the typed IR that the token lowering builds from its other rules: each is an
identity of the reference evaluator's meaning, on every input of every length 1..T.

- **top(k) as steps of counts** (:func:`top_as_counts`): over a finite set of values
  v₁ > v₂ > … > v_m of the body e,

      top(k)_<s : C> e(s) = v_m + Σ_{j<m} (v_j − v_{j+1})·[Σ_<s : C> [e(s) ≥ v_j] ≥ k],

  since the k-th largest value (with multiplicity) is v_i exactly when at least k keys reach
  v_j for every j ≥ i and for no j < i: the sum telescopes to v_i − v_m. Each count is a
  selector width, each step an exact comparison of an integer: no error of its own. Over
  several positions (``top(2)_<s, r : s < r> …``) the counts are sums over the tuples, which
  the next rewrite nests.
- **several positions at once** (:func:`nested`): ``kind_<v₁, …, v_k : C> e`` as one-variable
  reductions, v₁ outermost, each variable's range holding the conditions whose last variable
  (in that order) it is. min and max nest in the first order whose every inner range is never
  empty (the language's own range check, :func:`~infoflow_dsl.language.positions.smallest_range`,
  decides it), the range around one narrowed (v ≥ 2, v ≤ len − 1, …) where that makes it so and
  loses no tuple; a sum takes the conditions of an inner range that can be empty into its body
  as brackets (Σ over an empty range is 0, over all of 1..len of [C]·e the same); a mean nests
  only where no condition links two of its variables (then the mean over the tuples is the
  mean of the means). Anything else is refused with what to write instead.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ...errors import NoConstruction
from ...language import typed as ir
from ...language.positions import LENGTH_AXIS, count_tuples, smallest_range, variables_of, within_length
from ...language.syntax import Span


def top_as_counts(expr: ir.Reduce, values: frozenset[Fraction] | None) -> ir.Expr:
    """``top(k)_<s : C> e`` as v_m + Σ_j (v_j − v_{j+1})·[count(e ≥ v_j) ≥ k] (module docstring);
    ``values``: every value e takes at a key."""
    if values is None:
        raise NoConstruction("top(k) over tokens needs a body of finitely many values")
    assert expr.rank is not None
    descending = sorted(values, reverse=True)
    span = expr.span
    total: ir.Expr = _literal(descending[-1], span)
    for value, below in itertools.pairwise(descending):
        reaches = ir.Bracket(ir.Compare(">=", expr.body, _literal(value, span), span), span)
        count = ir.Reduce("sum", expr.variables, expr.conditions, reaches, ir.SCALAR, span=span)
        step = ir.Bracket(ir.Compare(">=", count, ir.NumberLiteral(float(expr.rank), span), span), span)
        total = ir.Arithmetic("+", total, ir.Arithmetic("*", _literal(value - below, span), step,
                                                        ir.SCALAR, span), ir.SCALAR, span)
    return total


def _literal(value: Fraction, span: Span) -> ir.NumberLiteral:
    """A literal holding ``value`` exactly (its float alone may be a different rational)."""
    return ir.NumberLiteral(float(value), span, exact=value)


@dataclass(frozen=True)
class NestedRange:
    """One variable of a nesting: its range's conditions (``kept``) and those its body takes
    as brackets (``moved``, where the range could be empty)."""

    variable: str
    kept: tuple[ir.PositionCondition, ...]
    moved: tuple[ir.PositionCondition, ...]


def nested(expr: ir.Reduce, length: int, row: str | None,
           given: tuple[ir.PositionCondition, ...] = ()) -> ir.Reduce:
    """``kind_<v₁, …, v_k : C> e`` as k nested one-variable reductions (module docstring);
    ``row``: the free variable the reduction is read at (its range may compare with it), under
    the conditions ``given`` (a per-token target's). Of the orders that work, the first whose
    every range compares its variable with one other position only (the one it is read at), as
    the token lowering needs."""
    outside = (*within_length((row,)), *given) if row is not None else ()
    if expr.kind == "mean" and any(len(set(expr.variables) & set(variables_of((c,)))) > 1 for c in expr.conditions):
        raise NoConstruction("a mean over positions its conditions link is not built (write it as a sum "
                             "over the tuples, divided by their count where that count is a constant)")
    orders = [expr.variables] if expr.kind == "mean" else list(itertools.permutations(expr.variables))
    nestings = [n for n in (_nesting(expr, order, outside, length) for order in orders) if n is not None]
    if not nestings:
        raise NoConstruction(f"every nesting of this {expr.kind} has an inner range that can be empty: nest it "
                             f"yourself, with the outer range where the inner one is not")
    readable = [n for n in nestings if _one_row_each(n, row)]
    return _reduction(expr, (readable or nestings)[0])


def _nesting(expr: ir.Reduce, order: Sequence[str], outside: Sequence[ir.PositionCondition],
             length: int) -> list[NestedRange] | None:
    """The ranges over ``order`` (outermost first), each with the conditions whose last variable
    it is. Where an inner range can be empty: a min/max narrows the range around it
    (:func:`_narrowed`), else is None; a sum's inner range keeps v ≤ len only and its body takes
    the other conditions as brackets."""
    ranges: list[NestedRange] = []
    enclosing = list(outside)
    for depth, variable in enumerate(order):
        later = set(order[depth + 1:])
        own = tuple(c for c in expr.conditions if c not in enclosing and not later & set(variables_of((c,)))
                    and (variable in variables_of((c,)) or depth == 0))
        kept = own
        moved: tuple[ir.PositionCondition, ...] = ()
        if depth > 0 and smallest_range((variable,), own, length, enclosing).smallest == 0:
            narrower = (_narrowed(expr, order[depth - 1], variable, outside, enclosing, own, length)
                        if expr.kind != "sum" else None)
            if narrower is not None:  # the outer range where the inner one is not empty, no tuple lost
                ranges[-1] = dataclasses.replace(ranges[-1], kept=(*ranges[-1].kept, narrower))
                enclosing.append(narrower)
            elif expr.kind != "sum":
                return None
            else:
                kept = within_length((variable,))
                moved = tuple(c for c in own if c not in kept)
        ranges.append(NestedRange(variable, kept, moved))
        enclosing.extend(own)
    return ranges


def _narrowed(expr: ir.Reduce, outer: str, inner: str, outside: Sequence[ir.PositionCondition],
              enclosing: Sequence[ir.PositionCondition], conditions: Sequence[ir.PositionCondition],
              length: int) -> ir.PositionCondition | None:
    """A condition on the ``outer`` variable (outer ≥ 2 or 3, outer ≤ len − 1 or len − 2) under
    which the ``inner`` range (its ``conditions``) is never empty, and which no tuple of the whole
    reduction breaks (counted over every row and len,
    :func:`~infoflow_dsl.language.positions.count_tuples`); None if there is none."""
    whole = (*outside, *expr.conditions)
    variables = list(dict.fromkeys([*variables_of(whole), *expr.variables, LENGTH_AXIS]))
    total = count_tuples(variables, whole, length)
    candidates = [ir.PositionCondition(ir.PositionVariable(outer), ">=", ir.FixedPosition(c)) for c in (2, 3)]
    candidates += [ir.PositionCondition(ir.PositionVariable(outer), "<=", ir.RunLength(offset=-c)) for c in (1, 2)]
    return next((c for c in candidates if count_tuples(variables, (*whole, c), length) == total
                 and smallest_range((inner,), conditions, length, (*enclosing, c)).smallest > 0), None)


def _one_row_each(nesting: list[NestedRange], row: str | None) -> bool:
    """Whether each range's conditions name, besides its own variable and len, only the
    position it is read at (the enclosing range's variable; the outermost: ``row``)."""
    reads = [row] + [level.variable for level in nesting[:-1]]
    return all(set(variables_of(level.kept + level.moved)) <= {level.variable, read, LENGTH_AXIS}
               for level, read in zip(nesting, reads, strict=True))


def _reduction(expr: ir.Reduce, nesting: list[NestedRange]) -> ir.Reduce:
    """The nested reductions, innermost built first."""
    body = expr.body
    for level in reversed(nesting):
        body = ir.Reduce(expr.kind, (level.variable,), level.kept, bracketed(body, level.moved), expr.type,
                         span=expr.span)
    assert isinstance(body, ir.Reduce)
    return body


def bracketed(body: ir.Expr, conditions: Sequence[ir.PositionCondition]) -> ir.Expr:
    """[c₁]·…·[c_n]·body: range conditions as brackets of a sum's body (the positions as numbers)."""
    for condition in conditions:
        bracket = ir.Bracket(ir.Compare(condition.operator, ir.PositionNumber(condition.left),
                                        ir.PositionNumber(condition.right), body.span), body.span)
        body = ir.Arithmetic("*", bracket, body, ir.SCALAR, body.span)
    return body

