"""The printers: an AST back to ``.iflow`` source, and a typed expression as text for people.

Both read one precedence table (:data:`PRECEDENCE`): sum < product < unary < power < postfix
< atom, binary operators left-associative, and a reduction loosest of all, since its body
extends as far right as possible.

- The AST printer (:func:`print_expr`, :func:`print_program`) adds parentheses exactly where
  the grammar needs them, so that ``parse(print(ast)) == ast``: around an operand that binds
  more loosely than its context requires, and around an operand that is not the last thing in
  its context and ends with a reduction (whose body would swallow what follows).
- The typed-IR printer (:func:`describe`) writes ``.iflow``-like text for reports, schedules
  and error messages (``<x(t), A1 @ x(s)>``, ``min_<t2> ...``, ``c1(t1)`` for the result of
  comparison node c1 at position t1). It parenthesises every operand looser than a postfix
  form (``(a + b) + c``), so that no reader needs the table; it is not for re-parsing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import syntax as ast
from . import typed as ir
from .exact import decimal
from .functions import POINTWISE

# ----------------------------------------------------------------------------- the precedence table

REDUCTION, SUM, PRODUCT, UNARY, POWER, POSTFIX, ATOM = range(7)

#: How tightly each form binds, by the binary operator or by the node class (the AST's and the
#: typed IR's side by side); a form not listed is an atom.
PRECEDENCE: dict[str | type, int] = {
    "+": SUM, "-": SUM, "*": PRODUCT, "/": PRODUCT, "@": PRODUCT,
    ir.Divide: PRODUCT, ir.MatVec: PRODUCT,
    ast.Negate: UNARY, ir.Negate: UNARY,
    ast.Power: POWER, ir.Square: POWER,
    ast.Index: POSTFIX, ir.Component: POSTFIX,
    ast.Reduction: REDUCTION, ir.Reduce: REDUCTION, ir.ArgPosition: REDUCTION,
}


def precedence(expr: object) -> int:
    """How tightly the outermost form of ``expr`` (an AST or a typed node) binds."""
    if isinstance(expr, ir.PositionNumber) and " " in (ir.position_label(expr.position) or ""):
        return SUM  # len + 1 - t
    key = expr.operator if isinstance(expr, ast.Binary | ir.Arithmetic) else type(expr)
    return PRECEDENCE.get(key, ATOM)


# ----------------------------------------------------------------------------- the AST printer


def _bare_as_last(expr: ast.Expr, minimum: int) -> bool:
    """Whether ``expr`` can stand unparenthesised as the last operand of a context that needs
    ``minimum``: it binds as tightly, or it is a reduction (nothing follows for its body to take)."""
    return isinstance(expr, ast.Reduction) or precedence(expr) >= minimum


def _ends_with_reduction(expr: ast.Expr) -> bool:
    """Whether the text of ``expr`` ends with a bare reduction (``a + min_<t> b``, ``-max_<t> b``),
    whose body would swallow whatever followed it."""
    if isinstance(expr, ast.Reduction):
        return True
    if isinstance(expr, ast.Binary):
        last, minimum = expr.right, precedence(expr) + 1
    elif isinstance(expr, ast.Negate):
        last, minimum = expr.argument, UNARY
    else:
        return False  # atoms end with a bracket or a name; Index and Power with ']' or a number
    return _bare_as_last(last, minimum) and _ends_with_reduction(last)


def _operand(expr: ast.Expr, minimum: int) -> str:
    """``expr`` as an operand that must bind at least as tightly as ``minimum``.

    Operands are never last in their context, so anything ending with a reduction is wrapped
    too: in ``(a + min_<t> b) + c`` the parentheses keep ``c`` out of the reduction's body.
    """
    text = print_expr(expr)
    if precedence(expr) < minimum or _ends_with_reduction(expr):
        return f"({text})"
    return text


def _tail(expr: ast.Expr, minimum: int) -> str:
    """``expr`` as the last operand of its context: it may end with a bare reduction."""
    text = print_expr(expr)
    return text if _bare_as_last(expr, minimum) else f"({text})"


def _position_term(value: ast.PositionTermSyntax) -> str:
    if isinstance(value, ast.PositionOffset):
        return f"{value.base.name} {'-' if value.delta < 0 else '+'} {value.amount.text}"
    return value.name if isinstance(value, ast.Name) else value.text


def _condition(condition: ast.Condition) -> str:
    return f"{_position_term(condition.left)} {condition.operator} {_position_term(condition.right)}"


def _bars_inside(expr: ast.Expr) -> str:
    """The argument of ``|...|`` or ``||...||``: parenthesised when it starts or ends with a bar,
    since ``||a||`` would lex as a norm, not as the absolute value of ``|a|``."""
    text = print_expr(expr)
    return f"({text})" if text.startswith("|") or text.endswith("|") else text


#: How tightly the forms of a bracket's condition bind: or < and < not < a comparison.
PREDICATE_PRECEDENCE: dict[str | type, int] = {"or": 0, "and": 1, ast.Not: 2, ast.Compare: 3}


def _predicate(expr: ast.Expr, minimum: int) -> str:
    """A bracket's condition, parenthesised where it binds more loosely than ``minimum``."""
    key = expr.operator if isinstance(expr, ast.Logical) else type(expr)
    level = PREDICATE_PRECEDENCE.get(key, 3)
    if isinstance(expr, ast.Logical):
        text = f"{_predicate(expr.left, level)} {expr.operator} {_predicate(expr.right, level + 1)}"
    elif isinstance(expr, ast.Not):
        text = f"not {_predicate(expr.argument, level)}"
    elif isinstance(expr, ast.Compare):
        text = f"{print_expr(expr.left)} {expr.operator} {print_expr(expr.right)}"
    else:
        text = print_expr(expr)
    return f"({text})" if level < minimum else text


def print_expr(expr: ast.Expr) -> str:
    """The text of one expression (:data:`PRINT_RULES`, one rule per AST class)."""
    rule = PRINT_RULES.get(type(expr))
    if rule is None:
        raise TypeError(f"the printer has no rule for {type(expr).__name__}")
    return rule(expr)


def _negate(expr: ast.Negate) -> str:
    inner = _tail(expr.argument, UNARY)
    return f"- {inner}" if inner.startswith("-") else f"-{inner}"


def _binary(expr: ast.Binary) -> str:
    level = precedence(expr)
    return f"{_operand(expr.left, level)} {expr.operator} {_tail(expr.right, level + 1)}"


def _source_reduction(expr: ast.Reduction) -> str:
    binders = [b.name for b in expr.binders]
    conditions = [_condition(c) for c in expr.conditions]
    return _reduction(expr.kind, expr.rank, binders, conditions, print_expr(expr.body))


#: The source text of each AST expression class.
PRINT_RULES: dict[type, Callable[[Any], str]] = {
    ast.Number: lambda expr: expr.text,
    ast.String: lambda expr: f'"{expr.text}"',
    ast.Bracket: lambda expr: f"[{_predicate(expr.condition, 0)}]",
    **{predicate: lambda expr: _predicate(expr, 0) for predicate in ast.PREDICATES},
    ast.Name: lambda expr: expr.name,
    ast.Call: lambda expr: f"{expr.function}({', '.join(print_expr(a) for a in expr.arguments)})",
    ast.Index: lambda expr: f"{_operand(expr.base, POSTFIX)}[{expr.index.text}]",
    ast.InnerProduct: lambda expr: f"<{print_expr(expr.left)}, {print_expr(expr.right)}>",
    ast.Norm: lambda expr: f"||{_bars_inside(expr.argument)}||",
    ast.Abs: lambda expr: f"|{_bars_inside(expr.argument)}|",
    ast.Negate: _negate,
    ast.Power: lambda expr: f"{_operand(expr.base, POSTFIX)}^{expr.exponent.text}",
    ast.Binary: _binary,
    ast.Reduction: _source_reduction,
}


def _space(space: ast.Space) -> str:
    if isinstance(space, ast.ScalarSpace):
        return "R"
    if isinstance(space, ast.TokenSpace):
        entries = (f'"{e.text}"' if isinstance(e, ast.String) else e.text for e in space.entries)
        return "token {" + ", ".join(entries) + "}"
    if isinstance(space, ast.VectorSpace):
        return f"R^{space.size}"
    return f"R^{{{space.rows} x {space.columns}}}"


def _const_value(value: ast.ConstValue) -> str:
    if isinstance(value, ast.ScalarLiteral):
        return value.value.text
    if isinstance(value, ast.VectorLiteral):
        return "[" + ", ".join(e.text for e in value.entries) + "]"
    if isinstance(value, ast.MatrixLiteral):
        return "[" + ", ".join(_const_value(row) for row in value.rows) + "]"
    return f"randn({value.seed})"


def _table_atom(atom: ast.TableAtom) -> str:
    if isinstance(atom, ast.String):
        return f'"{atom.text}"'
    return atom.text if isinstance(atom, ast.SignedNumber) else atom.name


def _table_entry(entry: ast.TableEntry) -> str:
    """``k: v``, ``(k, j): v`` or ``_: v``."""
    if not entry.keys:
        key = "_"
    elif len(entry.keys) == 1:
        key = _table_atom(entry.keys[0])
    else:
        key = f"({', '.join(_table_atom(k) for k in entry.keys)})"
    return f"{key}: {_table_atom(entry.value)}"


def print_declaration(declaration: ast.Declaration) -> str:
    """The text of one declaration (one line)."""
    if isinstance(declaration, ast.InputDecl):
        domain = declaration.domain
        where = ""
        if isinstance(domain, ast.BoxDomain):
            where = f" in [{domain.low.text}, {domain.high.text}]"
        elif isinstance(domain, ast.BallDomain):
            where = f" in ball({domain.radius.text})"
        return f"input {declaration.name} : {_space(declaration.space)}{where}"
    if isinstance(declaration, ast.LengthDecl):
        return f"length {declaration.name} = {declaration.value}"
    if isinstance(declaration, ast.ConstDecl):
        space = "" if declaration.space is None else f" : {_space(declaration.space)}"
        return f"const {declaration.name}{space} = {_const_value(declaration.value)}"
    if isinstance(declaration, ast.LetDecl):
        parameters = "" if declaration.parameters is None else f"({', '.join(declaration.parameters)})"
        return f"let {declaration.name}{parameters} = {print_expr(declaration.body)}"
    if isinstance(declaration, ast.MarginDecl):
        return f"margin {declaration.value.text}"
    if isinstance(declaration, ast.TableDecl):
        return f"table {declaration.name} = {{{', '.join(_table_entry(e) for e in declaration.entries)}}}"
    assert isinstance(declaration, ast.TargetDecl)
    if declaration.variable is None:
        return f"target {print_expr(declaration.expression)}"
    where = _where([_condition(c) for c in declaration.conditions])
    return f"target({declaration.variable.name}{where}) = {print_expr(declaration.expression)}"


def print_program(program: ast.SourceProgram) -> str:
    """The whole program, one declaration per line."""
    return "".join(print_declaration(d) + "\n" for d in program.declarations)


# ----------------------------------------------------------------------------- the typed-IR printer


def describe(expr: object) -> str:
    """The readable text of a typed expression (or of a node-result leaf with a ``label``)."""
    rule = DESCRIBE_RULES.get(type(expr))
    if rule is not None:
        return rule(expr)
    label = getattr(expr, "label", None)
    if label is not None:
        return str(label)
    raise TypeError(f"cannot describe {type(expr).__name__}")


def _pointwise(expr: ir.Pointwise) -> str:
    return POINTWISE[expr.function].text.format(*(describe(a) for a in expr.arguments))


def _ir_operand(expr: object) -> str:
    """``expr`` as an operand: parenthesised when it binds more loosely than a postfix form."""
    text = describe(expr)
    return f"({text})" if precedence(expr) < POSTFIX else text


def _ir_position(position: object) -> str:
    label = ir.position_label(position)
    if label is not None:
        return label
    if isinstance(position, ir.ArgPosition):
        conditions = _ir_conditions(position.conditions)
        return _reduction(position.kind, None, (position.variable,), conditions, describe(position.body))
    return str(getattr(position, "label", position))


def _ir_conditions(conditions: Sequence[ir.PositionCondition]) -> list[str]:
    return [f"{_ir_position(c.left)} {c.operator} {_ir_position(c.right)}" for c in conditions]


def _ir_condition(expr: object) -> str:
    """A truth value as an operand of and, or, not: parenthesised unless it is a comparison."""
    text = describe(expr)
    return text if isinstance(expr, ir.Compare) else f"({text})"


def _ir_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def _ir_literal(expr: ir.NumberLiteral) -> str:
    """A literal as its decimal, or p / q where its exact value is no float's decimal (1/3)."""
    if expr.exact == decimal(expr.value):
        return _ir_number(expr.value)
    return f"({expr.exact.numerator} / {expr.exact.denominator})"


#: The text of each typed node class.
DESCRIBE_RULES: dict[type, Callable[[Any], str]] = {
    ir.NumberLiteral: lambda e: _ir_literal(e),
    ir.Constant: lambda e: e.name,
    ir.Token: lambda e: f"x({_ir_position(e.position)})",
    ir.Component: lambda e: f"{_ir_operand(e.vector)}[{e.index}]",
    ir.Inner: lambda e: f"<{describe(e.left)}, {describe(e.right)}>",
    ir.Norm: lambda e: f"||{describe(e.argument)}||",
    ir.Square: lambda e: f"{_ir_operand(e.argument)}^2",
    ir.Pointwise: _pointwise,
    ir.Arithmetic: lambda e: f"{_ir_operand(e.left)} {e.operator} {_ir_operand(e.right)}",
    ir.Negate: lambda e: f"-{_ir_operand(e.argument)}",
    ir.Divide: lambda e: f"{_ir_operand(e.numerator)} / {_ir_number(e.divisor)}",
    ir.MatVec: lambda e: f"{e.matrix.name} @ {_ir_operand(e.vector)}",
    ir.Reduce: lambda e: _reduction(e.kind, e.rank, e.variables, _ir_conditions(e.conditions), describe(e.body)),
    ir.PositionVariable: _ir_position,
    ir.FixedPosition: _ir_position,
    ir.LastPosition: _ir_position,
    ir.ArgPosition: _ir_position,
    ir.Presence: lambda e: f"present({e.index}{_where(_ir_conditions(e.conditions))})",
    ir.RunLength: _ir_position,
    ir.ReflectedPosition: _ir_position,
    ir.TokenLiteral: lambda e: f'"{e.name}"',
    ir.PositionNumber: lambda e: _ir_position(e.position),
    ir.Compare: lambda e: f"{describe(e.left)} {e.operator} {describe(e.right)}",
    ir.Logical: lambda e: f"{_ir_condition(e.left)} {e.operator} {_ir_condition(e.right)}",
    ir.Not: lambda e: f"not {_ir_condition(e.argument)}",
    ir.Bracket: lambda e: f"[{describe(e.condition)}]",
    ir.TableLookup: lambda e: f"{e.table.name}({', '.join(describe(a) for a in e.arguments)})",
}


# ----------------------------------------------------------------------------- shared by both printers


def _reduction(kind: str, rank: int | None, variables: Sequence[str], conditions: Sequence[str], body: str) -> str:
    """``kind_<v1, v2 : c1 and c2> body``, with the head ``top(k)`` for top."""
    head = f"top({rank})" if kind == "top" else kind
    return f"{head}_<{', '.join(variables)}{_where(conditions)}> {body}"


def _where(conditions: Sequence[str]) -> str:
    """`` : c1 and c2`` (nothing without conditions)."""
    return " : " + " and ".join(conditions) if conditions else ""
