"""Stage 2 (tree), comparisons: a checked :class:`~infoflow_dsl.language.typed.Program` -> :class:`ComparisonTree`.

docs/theory.md §3. Every reduction over positions is a **comparison node** over one position
variable, given its **context**: the enclosing position variables its body depends on, and
the fixed positions (``x(3)``, ``x(T)``) its body reads. Its **order** is |context| + 1, the
number of positions compared jointly.

Before the tree is built the target is normalised with identities that hold exactly (the
tests check each against the reference evaluator):

- **hoisting**: a summand that does not depend on a reduction's variables leaves it:
  ``max_t (f(t) + c) = max_t f(t) + c`` (also min, top(k), mean, and argmin/argmax, where it
  is dropped). So ``max_<t> f(t) + max_<t> g(t)``, which parses as a nested reduction, becomes
  two independent order-1 nodes, and ``max_<s, t> f(s) + g(t)`` separates.
- **monotone pull-out**: ``min_t ||v(t)|| = sqrt(min_t ||v(t)||^2)`` (also max), and an
  argmin/argmax of a norm is the argmin/argmax of its square: squared norms are polynomials,
  so they can be separated into features where the norm cannot.
- **top(k)** over one variable becomes nested max/min, which softmax attention retrieves:
  ``top(k)_<t> f(t) = max_<t1> min(f(t1), top(k−1)_<t2 : t2 != t1> f(t2))`` with top(1) = max.
  (If t1 holds the k-th largest value, the inner term is the (k−1)-th largest of the rest,
  which is ≥ f(t1); if t1 is above it, the inner term is the k-th largest; if below, min ≤
  f(t1) < the k-th largest.) top(2) thus has order 2; top(k) has order k.
- a k-variable min/max/sum (and a mean whose conditions do not link its variables) is split
  into k nested single-variable nodes, in the nesting order that makes the largest order
  smallest (ties: the source order).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..language import typed as ir
from ..language.positions import count_polynomial, count_tuples, format_polynomial, variables_of
from ..language.printer import describe
from ..language.syntax import NO_SPAN, Span, text_at
from ..language.typed import free_variables, map_children, sub_nodes
from .normalise import normalise, split_nesting, splittable


@dataclass(frozen=True)
class NodeResult:
    """A leaf standing for the value of comparison node ``node`` at its context.

    ``variables`` are the context's position variables (the result differs per value of
    them); ``label`` is how reports write it, e.g. ``c1(t1)``.
    """

    node: str
    variables: tuple[str, ...]
    type: ir.ValueType
    label: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def context_variables(self) -> tuple[str, ...]:
        """The position variables its value depends on (``typed.free_variables`` reads them)."""
        return self.variables


@dataclass(frozen=True)
class ComparisonNode:
    """One reduction over ``variables`` (one, except a joint top(k) or linked mean).

    ``kind``: min, max, sum, mean, top, argmin, argmax. ``body`` has the nodes below
    replaced by :class:`NodeResult` leaves (``children``). ``site`` is where the node runs:
    at every ordinary token (its context has a position variable) or at the readout token.
    ``count`` is the polynomial in T counting the tuples it compares (constant term first).
    """

    name: str
    kind: str
    variables: tuple[str, ...]
    context: tuple[str, ...]
    conditions: tuple[ir.PositionCondition, ...]
    body: ir.Expr
    children: tuple[str, ...]
    origin: str
    span: Span
    rank: int | None
    count: tuple[Fraction, ...]
    count_at_length: int
    at_tokens: bool = False  # a per-token target's node: it runs at every token even without context
    gathered: bool = False  # compile's gather route: every token holds every fixed position's token
    written: str = ""  # the user's own text of the reduction (its span in the source), for messages

    @property
    def quoted(self) -> str:
        """How messages name the node: the user's text, else the typed text (``origin``)."""
        return self.written or self.origin

    @property
    def order(self) -> int:
        return len(self.context) + len(self.variables)

    @property
    def context_variables(self) -> tuple[str, ...]:
        return tuple(c for c in self.context if not _is_fixed_label(c))

    @property
    def fixed_positions(self) -> tuple[str, ...]:
        return tuple(c for c in self.context if _is_fixed_label(c))

    @property
    def site(self) -> str:
        return "token" if self.context_variables or self.at_tokens else "readout"

    @property
    def range_follows_query(self) -> bool:
        """Does a condition tie the node's variables to the querying position (``u <= t``)?"""
        return any(isinstance(term, ir.PositionVariable) and term.name not in self.variables
                   for condition in self.conditions for term in (condition.left, condition.right))

    @property
    def header(self) -> str:
        head = f"top({self.rank})" if self.kind == "top" else self.kind
        conditions = " and ".join(
            f"{describe(c.left)} {c.operator} {describe(c.right)}" for c in self.conditions
        )
        where = f" : {conditions}" if conditions else ""
        return f"{head}_<{', '.join(self.variables)}{where}>"


@dataclass(frozen=True)
class ComparisonTree:
    """The comparison nodes (children before parents) and the target over their results."""

    nodes: tuple[ComparisonNode, ...]
    output: ir.Expr
    length: int
    output_site: str = "readout"  # "token": a per-token target's ``output`` is read at every token
    gathered: bool = False  # built for compile's gather route (``unroll``)
    finite: Any = field(default=None, compare=False, repr=False)  # a token program's finite.FiniteDomain

    @property
    def order(self) -> int:
        """β′: the largest order of any node (0 when the target compares nothing)."""
        return max((n.order for n in self.nodes), default=0)

    @property
    def comparisons(self) -> tuple[Fraction, ...]:
        total: list[Fraction] = []
        for node in self.nodes:
            for k, c in enumerate(node.count):
                total.extend([Fraction(0)] * (k + 1 - len(total)))
                total[k] += c
        return tuple(total) or (Fraction(0),)

    @property
    def comparisons_text(self) -> str:
        return format_polynomial(self.comparisons)

    @property
    def comparisons_at_length(self) -> int:
        return sum(n.count_at_length for n in self.nodes)

    def node(self, name: str) -> ComparisonNode:
        return next(n for n in self.nodes if n.name == name)


def _is_fixed_label(label: str) -> bool:
    return label.startswith(("T", "len")) or label.isdigit()


# ----------------------------------------------------------------------------- traversal


# ----------------------------------------------------------------------------- the tree


#: Nesting orders tried for one reduction: every permutation up to this many, else a few.
MAX_ORDERS = 720


def _nesting_orders(variables: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every permutation of up to 6 variables; beyond that the source order, its reverse and
    each rotation (k! orders would not finish; the choice only affects the largest order)."""
    if math.factorial(len(variables)) <= MAX_ORDERS:
        return list(itertools.permutations(variables))
    rotations = [variables[i:] + variables[:i] for i in range(len(variables))]
    return [*rotations, tuple(reversed(variables))]


class TreeBuilder:
    """Extracts comparison nodes from a normalised target, children first."""

    def __init__(self, length: int, taken: set[str], at_tokens: bool = False, gathered: bool = False,
                 source: str = "") -> None:
        self.length = length
        self.source = source  # the program's text: nodes quote their own span of it
        self.taken = taken
        self.at_tokens = at_tokens
        self.gathered = gathered
        self.nodes: list[ComparisonNode] = []

    def extract(self, expr: ir.Expr, enclosing: tuple[str, ...], conditions: tuple[ir.PositionCondition, ...]
                ) -> ir.Expr:
        """``expr`` with each reduction replaced by a :class:`NodeResult` (making its node)."""
        if isinstance(expr, ir.Reduce) and splittable(expr):
            return self.extract(self.best_nesting(expr, enclosing, conditions), enclosing, conditions)
        if isinstance(expr, ir.Reduce | ir.ArgPosition):
            return self._node(expr, enclosing, conditions)  # type: ignore[return-value]  # a result is a leaf
        return map_children(expr, lambda child: self.extract(child, enclosing, conditions))

    def best_nesting(
        self, expr: ir.Reduce, enclosing: tuple[str, ...], conditions: tuple[ir.PositionCondition, ...],
    ) -> ir.Expr:
        best: tuple[int, ir.Expr] | None = None
        for order in _nesting_orders(expr.variables):
            nested = split_nesting(expr, order)
            if nested is None:
                continue
            candidate = normalise(nested, self.taken)
            trial = TreeBuilder(self.length, self.taken, self.at_tokens, self.gathered, self.source)
            trial.extract(candidate, enclosing, conditions)
            largest = max((n.order for n in trial.nodes), default=0)
            if best is None or largest < best[0]:
                best = (largest, candidate)
        if best is None:  # no nesting can be written: one joint node over all the variables
            return self._node(expr, enclosing, conditions)  # type: ignore[return-value]  # a result is a leaf
        return best[1]

    def _node(
        self, expr: ir.Reduce | ir.ArgPosition, enclosing: tuple[str, ...], outer: tuple[ir.PositionCondition, ...],
    ) -> NodeResult:
        variables = expr.variables if isinstance(expr, ir.Reduce) else (expr.variable,)
        inner_conditions = outer + expr.conditions
        first_child = len(self.nodes)
        body = self.extract(expr.body, enclosing + variables, inner_conditions)
        below = _grandchildren(self.nodes, first_child)
        children = tuple(n.name for n in self.nodes[first_child:] if n.name not in below)
        depends = free_variables(body) | set(variables_of(expr.conditions))
        context_variables = tuple(v for v in enclosing if v in depends)
        fixed = fixed_positions_read(body)
        counted = (*context_variables, *variables)
        relevant = tuple(c for c in inner_conditions if set(variables_of([c])) <= set(counted))
        name = f"c{len(self.nodes) + 1}"
        kind = expr.kind
        node = ComparisonNode(
            name=name, kind=kind, variables=variables, context=(*context_variables, *fixed),
            conditions=expr.conditions, body=body, children=children,
            origin=getattr(expr, "origin", "") or describe(expr),
            span=expr.span,
            rank=expr.rank if isinstance(expr, ir.Reduce) else None,
            count=count_polynomial(counted, relevant), count_at_length=count_tuples(counted, relevant, self.length),
            at_tokens=self.at_tokens, gathered=self.gathered, written=text_at(self.source, expr.span),
        )
        self.nodes.append(node)
        label = f"{name}({', '.join(context_variables)})" if context_variables else name
        return NodeResult(name, context_variables, expr.type, label, expr.span)


def _grandchildren(nodes: list[ComparisonNode], first: int) -> set[str]:
    return {child for node in nodes[first:] for child in node.children}


def fixed_positions_of(body: object) -> tuple[ir.FixedPosition | ir.LastPosition | ir.RunLength, ...]:
    """The fixed positions (k, T ± k) whose tokens ``body`` reads, each once, in order."""
    found: list[ir.FixedPosition | ir.LastPosition | ir.RunLength] = []  # and len ± k (x(len): the same at every token)
    for node in [body, *sub_nodes(body)]:
        if isinstance(node, ir.Token) and isinstance(node.position, ir.FixedPosition | ir.LastPosition | ir.RunLength):
            if node.position not in found:
                found.append(node.position)
    return tuple(found)


def fixed_positions_read(body: object) -> tuple[str, ...]:
    """Labels of the fixed positions whose tokens ``body`` reads (``3``, ``T``), in order."""
    return tuple(ir.position_label(p) for p in fixed_positions_of(body))  # type: ignore[misc]


