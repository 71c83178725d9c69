"""Exact identities of a min/max over a range that is symmetric in two of its variables.

Let R be the range of ``kind_<..., u, ..., v, ... : C> body``, and σ the swap of u and v. When σ
maps the conditions C onto themselves (no condition, ``u != v``, or any set closed under the
swap), σ maps R onto itself. Let h be antisymmetric under σ: h∘σ = −h (``x(u)[1] - x(v)[1]``,
``f(u, v) - f(v, u)``, a constant times or over such a difference). Then for R non-empty (the
checker proves every range non-empty for the program's T):

1. ``max_R |h| = max_R h``: for each tuple r, |h(r)| = max(h(r), h(σr)) and σr ∈ R, so the two
   sides take their maximum over the same values (and over an empty range both are −inf).
2. ``min_R -|h| = min_R h``: min_R −|h| = −max_R |h| = −max_R h = min_R(−h∘σ) = min_R h.

The range itself is never changed. Not identities, and left alone: ``min_R |h|`` (≥ 0, while
min_R h = −max_R h ≤ 0); any range the swap does not preserve (``u < v``: over the pairs in one
order, max |h| ≠ max h); and dropping ``u != v`` under max h (the diagonal adds only h = 0, which
changes nothing when R has a tuple, but turns an empty range's −inf into 0, as for an input of
one token, or a per-token target's first position under ``u <= t and v <= t``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..language import typed as ir
from ..language.typed import NodeT, free_variables, rename, sub_nodes
from .summands import summands

_HELD = ("\0u", "\0v")  # names no program can bind: the swap's temporaries


def swapped(expr: NodeT, u: str, v: str) -> NodeT:
    """``expr`` with the free position variables u and v exchanged."""
    held = rename(rename(expr, u, _HELD[0]), v, _HELD[1])
    return rename(rename(held, _HELD[0], v), _HELD[1], u)


def _flipped(condition: ir.PositionCondition) -> ir.PositionCondition:
    return ir.PositionCondition(condition.right, ir.FLIPPED[condition.operator], condition.left, condition.span)


def _closed_under_swap(conditions: Sequence[ir.PositionCondition], u: str, v: str) -> bool:
    """Whether the swap maps the set of conditions onto itself (a condition equals its flip)."""
    known = [*conditions, *(_flipped(c) for c in conditions)]
    return all(swapped(c, u, v) in known for c in conditions)


def antisymmetric(expr: ir.Expr, u: str, v: str) -> bool:
    """Whether ``expr`` ∘ swap = −``expr`` can be read off its form: its signed summands, swapped,
    are its summands negated (as a multiset); or a constant times, or over, such an expression."""
    if isinstance(expr, ir.Divide):
        return antisymmetric(expr.numerator, u, v)
    if isinstance(expr, ir.Arithmetic) and expr.operator == "*":
        for factor, other in ((expr.left, expr.right), (expr.right, expr.left)):
            if not free_variables(factor) and not _binds_any(factor) and antisymmetric(other, u, v):
                return True
    terms = summands(expr)
    if len(terms) < 2:
        return False
    wanted = [(-sign, term) for sign, term in terms]
    for sign, term in terms:
        image = (sign, swapped(term, u, v))
        if image not in wanted:
            return False
        wanted.remove(image)
    return True


def _binds_any(expr: object, names: frozenset[str] | None = None) -> bool:
    """Whether a reduction or arg-position inside ``expr`` binds a name (of ``names``, or any)."""
    for node in (expr, *sub_nodes(expr)):
        bound = set(node.variables) if isinstance(node, ir.Reduce) else (
            {node.variable} if isinstance(node, ir.ArgPosition) else set())
        if bound and (names is None or bound & names):
            return True
    return False


def _unsigned(body: ir.Expr, kind: str) -> ir.Expr | None:
    """h when ``body`` is |h| under max, or −|h| under min; else None."""
    if kind == "min" and isinstance(body, ir.Negate):
        body, kind = body.argument, "max"
    if kind == "max" and isinstance(body, ir.Pointwise) and body.function == "abs":
        return body.arguments[0]
    return None


def symmetric_pair_identities(expr: ir.Reduce) -> ir.Reduce:
    """``expr`` rewritten by identity 1 or 2 of the module docstring for the first pair of its
    variables it applies to; ``expr`` itself when none does."""
    if expr.kind not in ("min", "max") or len(expr.variables) < 2:
        return expr
    for i, u in enumerate(expr.variables):
        for v in expr.variables[i + 1:]:
            rewritten = _for_pair(expr, u, v)
            if rewritten is not expr:
                return rewritten
    return expr


def _for_pair(expr: ir.Reduce, u: str, v: str) -> ir.Reduce:
    if _binds_any(expr.body, frozenset((u, v))) or not _closed_under_swap(expr.conditions, u, v):
        return expr
    inner = _unsigned(expr.body, expr.kind)
    if inner is None or not antisymmetric(inner, u, v):
        return expr
    return dataclasses.replace(expr, body=inner, origin=expr.origin or _describe(expr))


def _describe(expr: ir.Reduce) -> str:
    from ..language.printer import describe

    return describe(expr)
