"""Readable text for typed expressions (reports, schedules, error messages).

The text is ``.iflow``-like: ``<x(t), A1 @ x(s)>``, ``min_<t2> ...``, ``c1(t1)`` for the result
of comparison node c1 at position t1. It is for people, not for re-parsing.
"""

from __future__ import annotations

from . import typed as ir


def _wrap(text: str, expr: object) -> str:
    atomic = (ir.NumberLiteral, ir.Constant, ir.Token, ir.Component, ir.Inner, ir.Norm, ir.Pointwise, ir.Presence)
    if isinstance(expr, atomic) or hasattr(expr, "label") or not hasattr(expr, "type"):
        return text
    return f"({text})"


def describe_position(position: object) -> str:
    label = ir.position_label(position)
    if label is not None:
        return label
    if isinstance(position, ir.ArgPosition):
        return f"{position.kind}_<{position.variable}{_where(position.conditions)}> {describe(position.body)}"
    return str(getattr(position, "label", position))


def _where(conditions: tuple[ir.PositionCondition, ...]) -> str:
    if not conditions:
        return ""
    parts = [f"{describe_position(c.left)} {c.operator} {describe_position(c.right)}" for c in conditions]
    return " : " + " and ".join(parts)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def describe(expr: object) -> str:
    """The readable text of a typed expression (or of a node-result leaf with a ``label``)."""
    if isinstance(expr, ir.NumberLiteral):
        return _number(expr.value)
    if isinstance(expr, ir.Constant):
        return expr.name
    if isinstance(expr, ir.Token):
        return f"x({describe_position(expr.position)})"
    if isinstance(expr, ir.Component):
        return f"{_wrap(describe(expr.vector), expr.vector)}[{expr.index}]"
    if isinstance(expr, ir.Inner):
        return f"<{describe(expr.left)}, {describe(expr.right)}>"
    if isinstance(expr, ir.Norm):
        return f"||{describe(expr.argument)}||"
    if isinstance(expr, ir.Square):
        return f"{_wrap(describe(expr.argument), expr.argument)}^2"
    if isinstance(expr, ir.Pointwise):
        if expr.function == "abs":
            return f"|{describe(expr.arguments[0])}|"
        return f"{expr.function}({', '.join(describe(a) for a in expr.arguments)})"
    if isinstance(expr, ir.Arithmetic):
        return f"{_wrap(describe(expr.left), expr.left)} {expr.operator} {_wrap(describe(expr.right), expr.right)}"
    if isinstance(expr, ir.Negate):
        return f"-{_wrap(describe(expr.argument), expr.argument)}"
    if isinstance(expr, ir.Divide):
        return f"{_wrap(describe(expr.numerator), expr.numerator)} / {_number(expr.divisor)}"
    if isinstance(expr, ir.MatVec):
        return f"{expr.matrix.name} @ {_wrap(describe(expr.vector), expr.vector)}"
    if isinstance(expr, ir.Reduce):
        head = f"top({expr.rank})" if expr.kind == "top" else expr.kind
        return f"{head}_<{', '.join(expr.variables)}{_where(expr.conditions)}> {describe(expr.body)}"
    if isinstance(expr, ir.PositionVariable | ir.FixedPosition | ir.LastPosition | ir.ArgPosition):
        return describe_position(expr)
    if isinstance(expr, ir.Presence):
        return f"present({expr.index}{_where(expr.conditions)})"
    label = getattr(expr, "label", None)
    if label is not None:
        return str(label)
    raise TypeError(f"cannot describe {type(expr).__name__}")
