"""Macros: every use of a ``let`` macro replaced by its body, the arguments substituted.

Substitution is textual, without hygiene (as a C macro): every use of a parameter's name in
the body, conditions included, is replaced by the argument's AST, also under a binder of the
same name (``let f(t) = max_<t> x(t)[1]`` makes ``f(1)`` read ``max_<t> x(1)[1]``), and a
binder of the body captures the names it binds in the argument (``let f(a) = max_<t> a``
makes ``f(x(t)[1])`` read the macro's ``t``). Expansion runs on the AST, before any typing:
a macro's body is typed at each use, with the position variables bound there.

A use that cannot be expanded (a recursive macro, a wrong number of arguments) is diagnosed
and replaced by the :data:`POISON` name, which the checker types as an already reported error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from . import syntax as ast
from .parse import MAX_NESTING

#: The most nodes macro expansion may visit while inlining the target's macros.
MAX_EXPANSION = 100_000
#: The name of a placeholder left where expansion already failed (no source name can be it).
POISON = "\x00poisoned"


class _TooLarge(Exception):
    """Macro expansion went past MAX_EXPANSION steps."""


def inline_macros(expr: ast.Expr, macros: Mapping[str, ast.LetDecl], error: ast.Report) -> ast.Expr | None:
    """``expr`` with its macros inlined; None (diagnosed at ``expr``) when the result would have
    more than MAX_EXPANSION nodes or nest deeper than MAX_NESTING levels."""
    expander = _Expander(macros, error)
    try:
        expanded = expander.expand(expr, ())
    except (_TooLarge, RecursionError):
        error(expr.span, f"with its macros inlined, the target is too large "
                         f"(more than {MAX_EXPANSION} nodes or {MAX_NESTING} levels deep)")
        return None
    if nesting_depth(expanded) > MAX_NESTING:
        error(expr.span, f"with its macros inlined, the target is nested too deeply (more than {MAX_NESTING} levels)")
        return None
    return expanded


class _Expander:
    """Inlines the uses of ``macros``, counting the nodes it visits (macros calling macros twice
    each grow exponentially: 2^k nodes for k levels)."""

    def __init__(self, macros: Mapping[str, ast.LetDecl], error: ast.Report) -> None:
        self.macros = macros
        self.error = error
        self.steps = 0

    def expand(self, expr: ast.Expr, active: tuple[str, ...]) -> ast.Expr:
        """``expr`` with every macro use replaced by its body; ``active`` are the macros being
        inlined around it, outermost first (a use of one of them is a recursion)."""
        self.steps += 1
        if self.steps > MAX_EXPANSION:
            raise _TooLarge()
        if isinstance(expr, ast.Name) and expr.name in self.macros:
            return self._inline(expr.name, (), expr.span, active, called=False)
        if isinstance(expr, ast.Call) and expr.function in self.macros:
            arguments = tuple(self.expand(a, active) for a in expr.arguments)
            return self._inline(expr.function, arguments, expr.span, active, called=True)
        return map_children(expr, lambda child: self.expand(child, active))

    def _inline(
        self, name: str, arguments: tuple[ast.Expr, ...], span: ast.Span, active: tuple[str, ...], called: bool,
    ) -> ast.Expr:
        """The body of macro ``name`` with ``arguments`` substituted and expanded in turn; a bare
        ``c`` (``called`` False) uses a macro without parameters."""
        macro = self.macros[name]
        poisoned = ast.Name(POISON, span)
        if name in active:
            chain = " → ".join((*active[active.index(name):], name))
            self.error(span, f"macro '{name}' calls itself ({chain}); macros cannot recurse")
            return poisoned
        parameters = macro.parameters or ()
        if len(arguments) != len(parameters) and (called or parameters):
            self.error(span, f"macro '{name}' takes {len(parameters)} argument{'s' * (len(parameters) != 1)}, "
                             f"got {len(arguments)}")
            return poisoned
        body = substitute(macro.body, dict(zip(parameters, arguments, strict=False)))
        return self.expand(body, (*active, name))


def substitute(expr: ast.Expr, substitution: Mapping[str, ast.Expr]) -> ast.Expr:
    """``expr`` with every name in ``substitution`` replaced by its expression (conditions included)."""
    if isinstance(expr, ast.Name) and expr.name in substitution:
        return substitution[expr.name]
    if isinstance(expr, ast.Reduction):
        conditions = tuple(substitute_condition(c, substitution) for c in expr.conditions)
        expr = dataclasses.replace(expr, conditions=conditions)
    return map_children(expr, lambda child: substitute(child, substitution))


def substitute_condition(condition: ast.Condition, substitution: Mapping[str, ast.Expr]) -> ast.Condition:
    """``condition`` with its names substituted. A condition compares positions, so a name may
    only become a name or a literal (and the base of an offset only a name); any other
    replacement becomes the :data:`POISON` name, which the checker reports there."""

    def term(value: ast.PositionTermSyntax) -> ast.PositionTermSyntax:
        if isinstance(value, ast.PositionOffset):
            base = term(value.base)
            if isinstance(base, ast.Name):
                return dataclasses.replace(value, base=base)
            return ast.Name(POISON, value.span)
        replacement = substitution.get(value.name) if isinstance(value, ast.Name) else None
        if isinstance(replacement, ast.Name | ast.Number):
            return replacement
        if replacement is not None:
            return ast.Name(POISON, value.span)
        return value

    return dataclasses.replace(condition, left=term(condition.left), right=term(condition.right))


def map_children(node: Any, function: Callable[[ast.Expr], ast.Expr]) -> Any:
    """A copy of ``node`` with ``function`` applied to each child expression (fields and tuple
    items that are expressions; conditions and binders are left as they are)."""
    changes: dict[str, object] = {}
    for name in node.__dataclass_fields__:
        value = getattr(node, name)
        if isinstance(value, tuple):
            changes[name] = tuple(function(v) if _is_expr(v) else v for v in value)
        elif _is_expr(value):
            changes[name] = function(value)
    return dataclasses.replace(node, **changes) if changes else node


def _is_expr(value: object) -> bool:
    return isinstance(value, ast.Expr.__args__)  # type: ignore[attr-defined]


def nesting_depth(expr: ast.Expr) -> int:
    """How many AST nodes deep ``expr`` nests (a leaf is 1); iterative, for any depth."""
    deepest = 0
    stack: list[tuple[object, int]] = [(expr, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.children(node))
    return deepest
