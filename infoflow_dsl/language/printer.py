"""The printer: an AST back to ``.iflow`` text, with ``parse(print(ast)) == ast``.

Parentheses are added exactly where the grammar needs them: by operator precedence
(sum < product < unary < power < postfix < atom, binary operators left-associative), and
around an operand that is not the last thing in its context and ends with a reduction, since
a reduction's body extends as far right as possible.
"""

from __future__ import annotations

from . import syntax as ast

SUM, PRODUCT, UNARY, POWER, POSTFIX, ATOM = range(1, 7)
_BINARY_LEVEL = {"+": SUM, "-": SUM, "*": PRODUCT, "/": PRODUCT, "@": PRODUCT}


def _level(expr: ast.Expr) -> int:
    if isinstance(expr, ast.Binary):
        return _BINARY_LEVEL[expr.operator]
    if isinstance(expr, ast.Negate):
        return UNARY
    if isinstance(expr, ast.Power):
        return POWER
    if isinstance(expr, ast.Index):
        return POSTFIX
    return ATOM


def _ends_with_reduction(expr: ast.Expr) -> bool:
    """Whether the text of ``expr`` ends with a bare reduction (``a + min_<t> b``, ``-max_<t> b``),
    whose body would swallow whatever followed it."""
    if isinstance(expr, ast.Reduction):
        return True
    if isinstance(expr, ast.Binary):
        last, minimum = expr.right, _BINARY_LEVEL[expr.operator] + 1
    elif isinstance(expr, ast.Negate):
        last, minimum = expr.argument, UNARY
    else:
        return False  # atoms end with a bracket or a name; Index and Power with ']' or a number
    return _level(last) >= minimum and _ends_with_reduction(last)


def _operand(expr: ast.Expr, minimum: int) -> str:
    """``expr`` as an operand that must bind at least as tightly as ``minimum``.

    Operands are never last in their context, so anything ending with a reduction is wrapped
    too: in ``(a + min_<t> b) + c`` the parentheses keep ``c`` out of the reduction's body.
    """
    text = print_expr(expr)
    if _level(expr) < minimum or _ends_with_reduction(expr):
        return f"({text})"
    return text


def _tail(expr: ast.Expr, minimum: int) -> str:
    """``expr`` as the last operand of its context: it may end with a bare reduction."""
    text = print_expr(expr)
    return f"({text})" if _level(expr) < minimum else text


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


def print_expr(expr: ast.Expr) -> str:
    """The text of one expression."""
    if isinstance(expr, ast.Number):
        return expr.text
    if isinstance(expr, ast.Name):
        return expr.name
    if isinstance(expr, ast.Call):
        return f"{expr.function}({', '.join(print_expr(a) for a in expr.arguments)})"
    if isinstance(expr, ast.Index):
        return f"{_operand(expr.base, POSTFIX)}[{expr.index.text}]"
    if isinstance(expr, ast.InnerProduct):
        return f"<{print_expr(expr.left)}, {print_expr(expr.right)}>"
    if isinstance(expr, ast.Norm):
        return f"||{_bars_inside(expr.argument)}||"
    if isinstance(expr, ast.Abs):
        return f"|{_bars_inside(expr.argument)}|"
    if isinstance(expr, ast.Negate):
        inner = _tail(expr.argument, UNARY)
        return f"- {inner}" if inner.startswith("-") else f"-{inner}"
    if isinstance(expr, ast.Power):
        return f"{_operand(expr.base, POSTFIX)}^{expr.exponent.text}"
    if isinstance(expr, ast.Binary):
        level = _BINARY_LEVEL[expr.operator]
        return f"{_operand(expr.left, level)} {expr.operator} {_tail(expr.right, level + 1)}"
    assert isinstance(expr, ast.Reduction)
    head = f"top({expr.rank})" if expr.kind == "top" else expr.kind
    binders = ", ".join(b.name for b in expr.binders)
    conditions = " and ".join(_condition(c) for c in expr.conditions)
    where = f" : {conditions}" if conditions else ""
    return f"{head}_<{binders}{where}> {print_expr(expr.body)}"


def _space(space: ast.Space) -> str:
    if isinstance(space, ast.ScalarSpace):
        return "R"
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
    assert isinstance(declaration, ast.TargetDecl)
    if declaration.variable is None:
        return f"target {print_expr(declaration.expression)}"
    where = " : " + " and ".join(_condition(c) for c in declaration.conditions) if declaration.conditions else ""
    return f"target({declaration.variable.name}{where}) = {print_expr(declaration.expression)}"


def print_program(program: ast.SourceProgram) -> str:
    """The whole program, one declaration per line."""
    return "".join(print_declaration(d) + "\n" for d in program.declarations)
