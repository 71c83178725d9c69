"""Compile's gather route for inefficient targets: unroll comparisons into position slots.

InfoFlow's dividing line (docs/theory.md §1, §3): a comparison of order ≥ 3, or an order-2 score
that is not a sum of products of per-token features, cannot be done by max-position retrieval
at a size independent of T. With ``--allow-inefficient`` compile pays for it in T instead:

- **Unrolling.** A reduction ``min_<b : C> body(b)`` whose variable b makes a comparison
  inefficient becomes an explicit minimum over the T slots b = 1..T:
  ``min(body(1), ..., body(T))``. Each slot reads ``x(j)``, a fixed position that every token
  gathers by an exact position head (mask key == j, weight exactly 1): the "position-slotted
  values" of the issue, one head per slot. Conditions of b on literals and T select the slots
  statically; a condition linking b to an enclosing variable a (``b != a``, ``b < a``) becomes a
  guard ``present(j : j != a)``, a head with mask key == j and key != query whose value is the
  constant 1, so it is 1 exactly where slot j is in range at the reading token, else 0. A min
  then takes body(j) + M·(1 − present), a max body(j) − M·(1 − present), with M above the
  body's whole range (interval arithmetic over the domain), so excluded slots never win; a sum
  takes present·body(j) = relu(body + M·present − M) − relu(−body + M·present − M), exact for
  |body| ≤ M. The explicit min/max over slots is a balanced tree of exact ReLU min/max units:
  ⌈log₂ T⌉ FFN layers.
- **Which variable.** For a node of order ≥ 3 (context {…, a, b} with b bound innermost) b is
  unrolled: the node becomes T order-2 retrievals, one per slot, each with the slot's token as
  a query feature (``min_<t3> ||x(t1) + x(j) + x(t3)||`` separates in t3). For an order-2 node
  whose score does not separate, its own variable is unrolled: the FFNs evaluate the score on
  the gathered copies. Repeated until every node compiles; a target whose unrolling would pass
  ``MAX_SLOTS`` copies, an argmin/argmax that would need unrolling, or a mean whose range links
  to an enclosing variable is refused with the reason.

**Cost law.** Each unrolled variable multiplies the body by T: k unrolled variables give
O(T^k · F · ε^-1/2) parameters (F the univariate functions of one copy; ε^-1 where a norm can
reach 0) plus O(T^k) ReLU units and O(k·log T) layers for the slot trees. For triangle_center
(order 3) k = 1: every token t1 runs T retrievals, min over t3 of ‖x(t1) + x(j) + x(t3)‖² for
each gathered x(j), so the size grows like T, not T² (every pair at a token) or T³ (every
triple at the readout). top(3) is the same with k = 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..language import typed as ir
from ..language.positions import COMPARE, variables_of
from ..language.typed import map_children
from .comparisons import ComparisonNode, TreeBuilder
from .features import NotSeparable, separate
from .normalise import all_variables, normalise, splittable, substitute_position
from .ranges import value_ranges

#: The most slot copies one target may unroll into (T^k for k unrolled variables).
MAX_SLOTS = 4096


class UnrollError(Exception):
    """The gather route cannot compile this target (the message says which node and why)."""


@dataclasses.dataclass(frozen=True)
class GatheredTarget:
    """The rewritten target and what was unrolled (variable names, outermost first)."""

    target: ir.Expr
    unrolled: tuple[str, ...]


def gather(program: ir.Program) -> GatheredTarget:
    """Rewrite ``program``'s target until every comparison node is order ≤ 2 in its position
    variables and separable (see the module docstring). Raises :class:`UnrollError`."""
    taken = all_variables(program.target)
    target = normalise(program.target, taken)
    unrolled: list[str] = []
    enclosing, conditions = _outer(program)
    while True:
        splitter = TreeBuilder(program.length, taken, program.per_token, gathered=True, source=program.source)
        target = _split_all(target, splitter, enclosing, conditions)
        builder = TreeBuilder(program.length, taken, program.per_token, gathered=True, source=program.source)
        builder.extract(target, enclosing, conditions)
        variable = next((v for v in map(_to_unroll, builder.nodes) if v is not None), None)
        if variable is None:
            return GatheredTarget(target, tuple(unrolled))
        unrolled.append(variable)
        if program.length ** len(unrolled) > MAX_SLOTS:
            raise UnrollError(f"unrolling {', '.join(unrolled)} would make {program.length}^{len(unrolled)} copies "
                              f"(more than {MAX_SLOTS}); lower T")
        target = normalise(_replace_binding(target, variable, program), taken)


def _outer(program: ir.Program) -> tuple[tuple[str, ...], tuple[ir.PositionCondition, ...]]:
    if program.per_token:
        return program.output_scope, program.token_conditions
    return (), ()


def _to_unroll(node: ComparisonNode) -> str | None:
    """The variable to unroll for this node, or None when the node compiles as it is."""
    if len(node.variables) != 1:
        raise UnrollError(f"{node.quoted} compares {len(node.variables)} positions jointly and cannot be split")
    if len(node.context_variables) >= 2:
        return node.context_variables[-1]  # bound innermost: its reduction encloses this node most closely
    if node.kind == "sum" and node.range_follows_query:
        if node.body.type.shape:
            raise UnrollError(f"{node.quoted}: a vector sum whose range depends on the querying position cannot be "
                              f"unrolled; sum each component")
        return node.variables[0]  # T guarded slots: Σ_j present(j)·body(j), exact
    try:
        separate(node.body, node.variables[0], gathered=True)
    except NotSeparable:
        if node.kind in ("argmin", "argmax"):
            raise UnrollError(f"{node.quoted}: a token retrieval whose score does not separate cannot be unrolled "
                              f"(it would need the argmax of the slots)") from None
        return node.variables[0]
    return None


def _split_all(expr: ir.Expr, builder: TreeBuilder, enclosing: tuple[str, ...],
               conditions: tuple[ir.PositionCondition, ...]) -> ir.Expr:
    """``expr`` with every multi-variable reduction nested as the comparison tree nests it."""
    if isinstance(expr, ir.Reduce) and splittable(expr):
        nested = builder.best_nesting(expr, enclosing, conditions)
        if isinstance(nested, ir.Reduce):
            expr = nested
    if isinstance(expr, ir.Reduce | ir.ArgPosition):
        variables = expr.variables if isinstance(expr, ir.Reduce) else (expr.variable,)
        body = _split_all(expr.body, builder, enclosing + variables, conditions + expr.conditions)
        return dataclasses.replace(expr, body=body)
    return map_children(expr, lambda child: _split_all(child, builder, enclosing, conditions))


def _replace_binding(expr: ir.Expr, variable: str, program: ir.Program) -> ir.Expr:
    """``expr`` with the reduction that binds ``variable`` unrolled into slots."""
    if isinstance(expr, ir.ArgPosition) and expr.variable == variable:
        raise UnrollError(f"{variable} is the position of a token retrieval; unrolling it is not supported")
    if isinstance(expr, ir.Reduce) and variable in expr.variables:
        return unroll(expr, program)
    return map_children(expr, lambda child: _replace_binding(child, variable, program))


def unroll(reduction: ir.Reduce, program: ir.Program) -> ir.Expr:
    """``kind_<v : C> body`` as an explicit combination of body(1), ..., body(T) (module docstring)."""
    (variable,) = reduction.variables
    static = [c for c in reduction.conditions if set(variables_of([c])) <= {variable}]
    linking = [c for c in reduction.conditions if not set(variables_of([c])) <= {variable}]
    if reduction.kind == "mean" and linking:
        raise UnrollError(f"{variable}: a mean whose range depends on an enclosing position cannot be unrolled")
    slots: list[tuple[ir.Expr, ir.Expr | None]] = []
    for j in range(1, program.length + 1):
        if not all(_holds(c, variable, j, program.length) for c in static):
            continue
        body = _fold_presences(substitute_position(reduction.body, variable, ir.FixedPosition(j)), program.length)
        guards = tuple(substitute_position(c, variable, ir.FixedPosition(j)) for c in linking)
        slots.append((body, ir.Presence(j, guards, reduction.span) if guards else None))  # type: ignore[arg-type]
    if not slots:
        raise UnrollError(f"{variable}: the range has no position at T = {program.length}")
    if reduction.kind in ("min", "max"):
        reach = _reach(reduction.body, program)
        sign = 1.0 if reduction.kind == "min" else -1.0
        terms = [_penalised(body, guard, sign * reach) for body, guard in slots]
        return _balanced(reduction.kind, terms)
    terms = [body if guard is None else _gated(body, guard, _reach(reduction.body, program)) for body, guard in slots]
    total = _sum(terms, reduction.type)
    if reduction.kind == "mean":
        return ir.Divide(total, float(len(slots)), reduction.type, reduction.span)
    if reduction.kind != "sum":
        raise UnrollError(f"{reduction.kind} over {variable} cannot be unrolled")
    return total


def _holds(condition: ir.PositionCondition, variable: str, j: int, length: int) -> bool:
    """Whether a condition on ``variable`` alone (and literals, T) holds at ``variable`` = j."""
    def value(term: ir.PositionTerm) -> int:
        if isinstance(term, ir.PositionVariable):
            assert term.name == variable
            return j + term.offset
        if isinstance(term, ir.LastPosition):
            return length + term.offset
        return term.index  # type: ignore[union-attr]

    return bool(COMPARE[condition.operator](value(condition.left), value(condition.right)))


def _fold_presences(expr: object, length: int) -> object:
    """A guard whose conditions no longer name a variable (a later unrolling fixed them) is 1 or 0."""
    if isinstance(expr, ir.Presence) and not variables_of(expr.conditions):
        return ir.NumberLiteral(1.0 if all(_holds(c, "", 0, length) for c in expr.conditions) else 0.0)
    return map_children(expr, lambda child: _fold_presences(child, length))


def _reach(body: ir.Expr, program: ir.Program) -> float:
    """M > the width of the body's range (and ≥ its magnitude): an excluded slot's penalty."""
    (interval,) = value_ranges(body, program)[:1]
    return (interval.high - interval.low) + max(abs(interval.low), abs(interval.high)) + 1.0


def _penalised(body: ir.Expr, guard: ir.Expr | None, penalty: float) -> ir.Expr:
    """body + penalty·(1 − guard): unchanged where the slot is present."""
    if guard is None:
        return body
    absent = ir.Arithmetic("-", ir.NumberLiteral(1.0), guard, ir.SCALAR)
    return ir.Arithmetic("+", body, ir.Arithmetic("*", ir.NumberLiteral(penalty), absent, ir.SCALAR), ir.SCALAR)


def _gated(body: ir.Expr, guard: ir.Expr, reach: float) -> ir.Expr:
    """guard·body for guard ∈ {0, 1} and |body| ≤ reach: relu(b + M·g − M) − relu(−b + M·g − M)."""
    shift = ir.Arithmetic("-", ir.Arithmetic("*", ir.NumberLiteral(reach), guard, ir.SCALAR),
                          ir.NumberLiteral(reach), ir.SCALAR)
    up = ir.Pointwise("relu", (ir.Arithmetic("+", body, shift, ir.SCALAR),))
    down = ir.Pointwise("relu", (ir.Arithmetic("+", ir.Negate(body, ir.SCALAR), shift, ir.SCALAR),))
    return ir.Arithmetic("-", up, down, ir.SCALAR)


def _balanced(kind: str, terms: Sequence[ir.Expr]) -> ir.Expr:
    """min/max of the terms as a balanced tree of pairwise min/max: depth ⌈log₂ n⌉."""
    level = list(terms)
    while len(level) > 1:
        paired = [ir.Pointwise(kind, (level[i], level[i + 1])) for i in range(0, len(level) - 1, 2)]  # type: ignore[arg-type]
        level = paired + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def _sum(terms: Sequence[ir.Expr], value_type: ir.ValueType) -> ir.Expr:
    total = terms[0]
    for term in terms[1:]:
        total = ir.Arithmetic("+", total, term, value_type)
    return total
