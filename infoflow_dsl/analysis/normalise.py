"""Normalising a typed target before the comparison tree is read off it: sums split into the
terms a reduction's variables reach, top(k) rewritten as nested max/min, equalities between
position variables eliminated, ``max |h|`` over a range symmetric in an antisymmetric h's two
variables read as ``max h`` (:mod:`.pair_symmetry`), norms pulled out, and multi-variable
reductions split into the nesting order that keeps every node's order smallest (docs/theory.md §3,
"Comparison tree")."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..language import typed as ir
from ..language.positions import variables_of
from ..language.printer import describe
from ..language.typed import NodeT, free_variables, map_children, rename, sub_nodes
from .pair_symmetry import symmetric_pair_identities
from .summands import summands

SPLITTABLE = ("min", "max", "sum")


def _sum(terms: Sequence[tuple[int, ir.Expr]], value_type: ir.ValueType) -> ir.Expr:
    result: ir.Expr | None = None
    for sign, term in terms:
        if result is None:
            result = term if sign > 0 else ir.Negate(term, value_type, term.span)
        else:
            result = ir.Arithmetic("+" if sign > 0 else "-", result, term, value_type, term.span)
    assert result is not None
    return result


def _hoist(expr: ir.Reduce | ir.ArgPosition) -> ir.Expr:
    """Move the summands that do not depend on the reduction's variables out of it."""
    bound = set(expr.variables) if isinstance(expr, ir.Reduce) else {expr.variable}
    terms = summands(expr.body)
    inside = [(s, t) for s, t in terms if free_variables(t) & bound]
    outside = [(s, t) for s, t in terms if not free_variables(t) & bound]
    if not outside or (isinstance(expr, ir.Reduce) and expr.kind == "sum"):
        return expr
    if not inside:
        if isinstance(expr, ir.ArgPosition):
            return expr
        return _sum(outside, expr.type)  # the reduction of a value independent of it (range non-empty)
    reduced = dataclasses.replace(expr, body=_sum(inside, expr.body.type))
    if isinstance(expr, ir.ArgPosition):
        return reduced
    return _sum([(1, reduced), *outside], expr.type)


def _rewrite_top(expr: ir.Reduce, taken: set[str]) -> ir.Expr:
    """top(k)_<t : C(t)> f(t) as k nested max/min (see the module docstring)."""
    assert expr.rank is not None
    (variable,) = expr.variables
    names = _fresh_names(variable, expr.rank, taken | free_variables(expr.body))
    origin = describe(expr)

    def level(index: int, excluded: tuple[str, ...]) -> ir.Expr:
        name = names[index]
        body = rename(expr.body, variable, name)
        conditions = tuple(rename(c, variable, name) for c in expr.conditions)
        conditions += tuple(
            ir.PositionCondition(ir.PositionVariable(name), "!=", ir.PositionVariable(other), expr.span)
            for other in excluded
        )
        if index + 1 < (expr.rank or 0):
            body = ir.Pointwise("min", (body, level(index + 1, (*excluded, name))), expr.span)
        return ir.Reduce("max", (name,), conditions, body, ir.SCALAR, None, expr.span, origin)

    return level(0, ())


def _fresh_names(variable: str, count: int, taken: set[str]) -> list[str]:
    names: list[str] = []
    for index in range(1, count + 1):
        name = f"{variable}_{index}"
        while name in taken:
            name += "′"
        taken.add(name)
        names.append(name)
    return names


def all_variables(expr: object) -> set[str]:
    """Every position variable named anywhere in ``expr`` (bound or free)."""
    names = {n.name for n in sub_nodes(expr) if isinstance(n, ir.PositionVariable)}
    names |= {v for n in sub_nodes(expr) if isinstance(n, ir.Reduce) for v in n.variables}
    names |= {n.variable for n in sub_nodes(expr) if isinstance(n, ir.ArgPosition)}
    return names | free_variables(expr)


def normalise(expr: ir.Expr, taken: set[str] | None = None) -> ir.Expr:
    """``expr`` rewritten by the exact identities of the module docstring (bottom-up)."""
    taken = all_variables(expr) if taken is None else taken
    expr = map_children(expr, lambda child: normalise(child, taken))
    if isinstance(expr, ir.Reduce) and expr.kind == "top" and len(expr.variables) == 1:
        hoisted = _hoist(expr)  # summands free of the variable leave first, so the nested max/min stay small
        if hoisted is not expr:
            return normalise(hoisted, taken)
        if expr.rank == 1:
            expr = dataclasses.replace(expr, kind="max", rank=None)
        else:
            return normalise(_rewrite_top(expr, taken), taken)
    if isinstance(expr, ir.Reduce):
        eliminated = _eliminate_equalities(expr)
        if eliminated is not expr:
            return normalise(eliminated, taken)
        unsigned = symmetric_pair_identities(expr)  # max |h| = max h over a range symmetric in h's pair
        if unsigned is not expr:
            return normalise(unsigned, taken)
    if isinstance(expr, ir.Reduce | ir.ArgPosition):
        return _pull_out_norm(_hoist(expr))
    return expr


def substitute_position(expr: NodeT, name: str, term: ir.PositionTerm) -> NodeT:
    """``expr`` with the free position variable ``name`` replaced by the position ``term``."""
    if isinstance(expr, ir.PositionVariable):
        return shifted(term, expr.offset) if expr.name == name else expr  # type: ignore[return-value]  # any term
    if isinstance(expr, ir.Reduce) and name in expr.variables:
        return expr
    if isinstance(expr, ir.ArgPosition) and expr.variable == name:
        return expr
    return map_children(expr, lambda child: substitute_position(child, name, term))


def shifted(term: ir.PositionTerm, offset: int) -> ir.PositionTerm:
    """``term + offset`` (a literal stays a literal)."""
    if not offset:
        return term
    if isinstance(term, ir.FixedPosition):
        return dataclasses.replace(term, index=term.index + offset)
    return dataclasses.replace(term, offset=term.offset + offset)


def _eliminate_equalities(expr: ir.Reduce) -> ir.Expr:
    """``kind_<v, ... : v == w> f`` = ``kind_<...> f[v := w]``: a variable pinned by an equality
    ranges over one value (top(k) with k > 1 is left alone: its range would be too small)."""
    if expr.kind == "top" and (expr.rank or 1) > 1:
        return expr
    for condition in expr.conditions:
        if condition.operator != "==":
            continue
        for pinned, other in ((condition.left, condition.right), (condition.right, condition.left)):
            if not (isinstance(pinned, ir.PositionVariable) and pinned.name in expr.variables):
                continue
            if isinstance(other, ir.PositionVariable) and other.name == pinned.name:
                continue
            rest = tuple(substitute_position(c, pinned.name, other) for c in expr.conditions if c is not condition)
            body = substitute_position(expr.body, pinned.name, other)
            variables = tuple(v for v in expr.variables if v != pinned.name)
            if not variables:  # one tuple left (check proved the range non-empty, so ``rest`` holds)
                return body
            return dataclasses.replace(expr, variables=variables, conditions=rest, body=body)
    return expr


def _pull_out_norm(expr: ir.Expr) -> ir.Expr:
    """min/max of a norm -> sqrt of min/max of its square; argmin/argmax of a norm -> of its square."""
    if isinstance(expr, ir.ArgPosition) and isinstance(expr.body, ir.Norm):
        return dataclasses.replace(expr, body=ir.Square(expr.body, expr.body.span))
    if isinstance(expr, ir.Reduce) and expr.kind in ("min", "max") and isinstance(expr.body, ir.Norm):
        squared = dataclasses.replace(expr, body=ir.Square(expr.body, expr.body.span))
        return ir.Pointwise("sqrt", (squared,), expr.span)
    return expr




def _bounds(conditions: Sequence[ir.PositionCondition], variable: str) -> tuple[list, list] | None:
    """Lower and upper bounds (term, strict) that ``conditions`` put on ``variable`` (with 1 ≤ v ≤ T).

    A condition ``v != w`` is exact only where ``w`` is one of v's non-strict bounds: then
    [max(w, …), U] without w is [max(w + 1, …), U], the bound made strict (1 and T count as
    bounds). One ``v != w`` beside the implicit bounds alone removes one point of 1..T, which
    empties the range only at length 1, where the whole reduction is empty and check refuses it.
    Any other ``!=`` (or an equality) cannot be written as bounds: None.
    """
    lower: list[tuple[ir.PositionTerm, bool]] = [(ir.FixedPosition(1), False)]
    upper: list[tuple[ir.PositionTerm, bool]] = [(ir.LastPosition(), False)]
    excluded: list[ir.PositionTerm] = []
    for c in conditions:
        if isinstance(c.left, ir.PositionVariable) and c.left.name == variable:
            operator, other = c.operator, c.right
        else:
            operator, other = ir.FLIPPED[c.operator], c.left
        if isinstance(other, ir.PositionVariable) and other.name == variable:
            continue
        if operator in ("<", "<="):
            upper.append((other, operator == "<"))
        elif operator in (">", ">="):
            lower.append((other, operator == ">"))
        elif operator == "==":
            return None
        else:
            excluded.append(other)
    implicit_only = len(lower) == 1 and len(upper) == 1
    for point in excluded:
        absorbed = False
        for bounds in (lower, upper):
            if (point, False) in bounds:
                bounds[bounds.index((point, False))] = (point, True)
                absorbed = True
        if not absorbed and not (implicit_only and len(excluded) == 1):
            return None
    return lower, upper


def _project(conditions: Sequence[ir.PositionCondition], variable: str) -> list[ir.PositionCondition] | None:
    """Conditions on the other positions equivalent to "some ``variable`` satisfies ``conditions``"
    (Fourier–Motzkin over the integers, ``!=`` as :func:`_bounds` reads it). None when a needed
    condition cannot be written (L < v < U with neither end a literal, a ``!=`` that is no bound)."""
    bounds = _bounds(conditions, variable)
    if bounds is None:
        return None
    out: list[ir.PositionCondition] = []
    for low, low_strict in bounds[0]:
        for high, high_strict in bounds[1]:
            implicit_low = isinstance(low, ir.FixedPosition) and low.index == 1 and not low_strict
            implicit_high = isinstance(high, ir.LastPosition) and not high_strict
            if implicit_low and implicit_high:
                continue
            if low_strict and high_strict:  # L < v < U  <=>  L + 1 < U
                if isinstance(low, ir.FixedPosition):
                    low, low_strict = ir.FixedPosition(low.index + 1), False
                elif isinstance(high, ir.FixedPosition) and high.index > 1:
                    high, high_strict = ir.FixedPosition(high.index - 1), False
                else:
                    return None
            operator: ir.ComparisonOperator = "<" if (low_strict or high_strict) else "<="
            if (implicit_low and operator == "<=") or (implicit_high and operator == "<="):
                continue  # 1 <= U and L <= T always hold
            out.append(ir.PositionCondition(low, operator, high))
    return out


def split_nesting(expr: ir.Reduce, order: Sequence[str]) -> ir.Reduce | None:
    """A multi-variable reduction as nested single-variable ones, outermost ``order[0]``.

    Each condition goes to the innermost reduction whose variable it mentions, and each outer
    level also gets the projection of the inner conditions (``max_<s, t : s < t>`` becomes
    ``max_<s : s < T> max_<t : s < t>``), so no inner range is ever empty. None when that
    projection cannot be written in the condition language.
    """
    position = {name: i for i, name in enumerate(order)}

    def home(condition: ir.PositionCondition) -> int:
        mentioned = [position[v] for v in variables_of([condition]) if v in position]
        return max(mentioned, default=0)

    every = list(expr.conditions)
    for index in range(len(order) - 1, 0, -1):
        projected = _project([c for c in every if order[index] in variables_of([c])], order[index])
        if projected is None:
            return None
        every += [c for c in projected if c not in every]
    body: ir.Expr = expr.body
    origin = expr.origin or describe(expr)
    for index in range(len(order) - 1, -1, -1):
        conditions = tuple(c for c in every if home(c) == index)
        body = ir.Reduce(expr.kind, (order[index],), conditions, body, expr.type, None, expr.span, origin)
    assert isinstance(body, ir.Reduce)
    return body


def splittable(expr: ir.Reduce) -> bool:
    if len(expr.variables) < 2:
        return False
    if expr.kind in SPLITTABLE:
        return True
    if expr.kind == "mean":  # a mean nests only when no condition links two of its variables
        return all(len(set(variables_of([c])) & set(expr.variables)) < 2 for c in expr.conditions)
    return False
