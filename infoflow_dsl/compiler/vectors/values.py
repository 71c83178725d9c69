"""The expression walker: a typed expression at a site -> its components as quantities.

Each typed-IR node class has one rule in :data:`RULES`. Linear nodes (constants, sums,
negation, division by a constant, constant matrices) fold into the forms, exactly; products,
squares, norms and pointwise functions become FFN constructions (``squares``, ``ffn``); a
comparison node's result, a fetched token or a presence guard is what its head wrote.
Reductions and positions have no rule: the comparison tree has replaced every reduction by a
:class:`~infoflow_dsl.analysis.comparisons.NodeResult`, and positions are read only inside
tokens and conditions.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ...analysis.comparisons import NodeResult
from ...analysis.schedule import fetched_position
from ...errors import CompileError
from ...language import typed as ir
from ...language.printer import describe
from ...language.typed import free_variables, rename
from .builder import CircuitBuilder
from .ffn import absolute, maximum, minimum, relu, square_root
from .quantity import Quantity, constant, linear
from .squares import product, square

Rule = Callable[[CircuitBuilder, Any, str], list[Quantity]]


def values(builder: CircuitBuilder, expr: object, site: str) -> list[Quantity]:
    """The components of ``expr`` at ``site`` (every position variable is the site's own token),
    each lowered once per site: the cache key names every free variable alike, so a value two
    comparisons need (x(s)[1]² as one's query feature, x(t)[1]² as another's key feature) is
    one FFN block."""
    key = (canonical(expr), site)
    if key not in builder.cache:
        rule = RULES.get(type(expr))
        if rule is None:
            raise CompileError(f"cannot lower {describe(expr)}")
        builder.cache[key] = rule(builder, expr, site)
    return builder.cache[key]


SITE_VARIABLE = "@"  # how the cache names the site's own position, whatever the variable's name


@lru_cache(maxsize=1 << 16)
def canonical(expr: object) -> object:
    """``expr`` with every free position variable named :data:`SITE_VARIABLE`.

    Cached by the expression's value (typed nodes are frozen, hashable): the walker asks for
    every node of a subtree as it descends, and hashing a tree costs far less than renaming
    it (ineff_top4's gather route at T = 40, which analyze builds to count its parameters:
    28 s → 17 s)."""
    for name in sorted(free_variables(expr)):
        expr = rename(expr, name, SITE_VARIABLE)
    return expr


def scalar(builder: CircuitBuilder, expr: object, site: str) -> Quantity:
    (value,) = values(builder, expr, site)
    return value


def squared_norm(builder: CircuitBuilder, vector: object, site: str) -> Quantity:
    """‖v‖² = Σ_i v_i², a square per component."""
    return linear([(1.0, square(builder, q)) for q in values(builder, vector, site)])


def _token(builder: CircuitBuilder, expr: ir.Token, site: str) -> list[Quantity]:
    position = expr.position
    if isinstance(position, NodeResult):  # x(argmin ...): the token retrieval's result
        return builder.results[position.node]
    if isinstance(position, ir.PositionVariable) and not position.offset:
        return builder.own_token()
    fetched = fetched_position(position)
    return builder.fetched[(fetched, "token" if isinstance(position, ir.PositionVariable) else site)]


def _inner(builder: CircuitBuilder, expr: ir.Inner, site: str) -> list[Quantity]:
    left, right = values(builder, expr.left, site), values(builder, expr.right, site)
    return [linear([(1.0, product(builder, a, b)) for a, b in zip(left, right, strict=True)])]


def _arithmetic(builder: CircuitBuilder, expr: ir.Arithmetic, site: str) -> list[Quantity]:
    left, right = values(builder, expr.left, site), values(builder, expr.right, site)
    if expr.operator == "*":
        if len(left) == 1:
            return [product(builder, left[0], q) for q in right]
        return [product(builder, q, right[0]) for q in left]
    sign = 1.0 if expr.operator == "+" else -1.0
    return [linear([(1.0, a), (sign, b)]) for a, b in zip(left, right, strict=True)]


def _matrix_vector(builder: CircuitBuilder, expr: ir.MatVec, site: str) -> list[Quantity]:
    rows, columns = expr.matrix.type.shape
    vector = values(builder, expr.vector, site)
    return [linear([(expr.matrix.values[r * columns + c], vector[c]) for c in range(columns)]) for r in range(rows)]


def _square(builder: CircuitBuilder, expr: ir.Square, site: str) -> list[Quantity]:
    if isinstance(expr.argument, ir.Norm):  # ‖v‖² needs no square root
        return [squared_norm(builder, expr.argument.argument, site)]
    return [square(builder, scalar(builder, expr.argument, site))]


#: The construction of each pointwise function, by name.
POINTWISE: dict[str, Callable[..., Quantity]] = {
    "relu": relu, "abs": absolute, "sqrt": square_root, "min": minimum, "max": maximum,
}


def _pointwise(builder: CircuitBuilder, expr: ir.Pointwise, site: str) -> list[Quantity]:
    arguments = [scalar(builder, a, site) for a in expr.arguments]
    return [POINTWISE[expr.function](builder, *arguments)]


#: One rule per typed-IR node class that can stand in a lowered expression.
RULES: dict[type, Rule] = {
    ir.NumberLiteral: lambda builder, expr, site: [constant(expr.value)],
    ir.Constant: lambda builder, expr, site: [constant(v) for v in expr.values],
    NodeResult: lambda builder, expr, site: builder.results[expr.node],
    ir.Token: _token,
    ir.Component: lambda builder, expr, site: [values(builder, expr.vector, site)[expr.index - 1]],
    ir.Inner: _inner,
    ir.Arithmetic: _arithmetic,
    ir.Negate: lambda builder, expr, site: [linear([(-1.0, q)]) for q in values(builder, expr.argument, site)],
    ir.Divide: lambda builder, expr, site: [linear([(1.0 / expr.divisor, q)])
                                            for q in values(builder, expr.numerator, site)],
    ir.MatVec: _matrix_vector,
    ir.Square: _square,
    ir.Norm: lambda builder, expr, site: [square_root(builder, squared_norm(builder, expr.argument, site))],
    ir.Pointwise: _pointwise,
    ir.Presence: lambda builder, expr, site: builder.fetched[(expr, site)],
}
