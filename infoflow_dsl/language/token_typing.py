"""The typing rules of language v3: token literals, the Iverson bracket and its conditions,
``len``, positions as numbers and position expressions inside ``x(...)`` (docs/language.md, "Tokens
(v3)").

- A categorical token (``x(t)`` of ``token {"a", "b"}``, or the literal ``"a"``) has type
  token: it is compared with ``==`` and ``!=`` only, with another token of the vocabulary. A
  numeric vocabulary's tokens are numbers (scalars).
- ``[cond]`` is 1 where ``cond`` holds, else 0; ``cond`` compares scalars, tokens or positions
  (a position is compared as its number) and joins comparisons with ``and``, ``or``, ``not``.
  Over a continuous input (``R^d``) the compared values have no gap, so the program must
  declare ``margin δ``.
- In a token program a bound position variable, ``T`` and ``len`` are numbers in arithmetic
  (``t - 1``, ``len + 1 - t``), and ``x(...)`` reads ``v ± c``, ``c - v``, ``len ± c`` and
  ``len + c - v``, each proved to lie in 1..len for every len in 1..T (:mod:`.positions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from . import syntax as ast
from . import typed as ir
from .declarations import Declarations
from .scope import Failed, Scope


class TokenTypingContext(Protocol):
    """What the typing rules of language v3 read of the checker (``check.Checker``): the
    program's declarations, typing a sub-expression, typing siblings together, failing at a
    span, and the check that a read position stays in 1..len."""

    @property
    def declared(self) -> Declarations:
        """The checked declarations: the input's name, its vocabulary, the margin, the tables."""
        ...

    def type_of(self, expr: ast.Expr, scope: Scope) -> ir.Expr:
        """The typed form of ``expr`` with position variables ``scope`` bound; raises Failed."""
        ...

    def each(self, *typers: Callable[[], Any]) -> list[Any]:
        """Every typer's result, each run even where another failed; fails afterwards if any did."""
        ...

    def fail(self, span: ast.Span, message: str) -> Failed:
        """Report ``message`` at ``span``; the result is raised to silence the parents."""
        ...

    def check_read(self, expr: ast.Expr, position: ir.PositionTerm, scope: Scope) -> None:
        """Fail when ``position`` can leave 1..T (1..len in a token program) under the scope's conditions."""
        ...

ORDERING = ("<", "<=", ">", ">=")

#: How ``x(...)`` may read a position in a token program (the message of a refused form).
POSITION_FORMS = "v + c, v - c, c - v, len, len - c or len + c - v (v a position variable, c a whole number)"


def number_of(checker: TokenTypingContext, typed: ir.Expr, expr: ast.Expr) -> ir.Expr:
    """``typed`` as a value arithmetic accepts (a scalar or a vector): in a token program a
    position becomes its number; anything else that is not a number is diagnosed."""
    kind = typed.type.kind
    if kind == "position":
        if checker.declared.vocabulary is not None:
            return ir.PositionNumber(typed, typed.span)  # type: ignore[arg-type]
        raise checker.fail(expr.span, "a position is used as a number; positions only index x(...) "
                                      "or appear in conditions")
    if kind == "matrix":
        raise checker.fail(expr.span, "a matrix can only be used as A @ v")
    if kind == "token":
        vocabulary = checker.declared.vocabulary
        assert vocabulary is not None  # only a categorical vocabulary's tokens have type token
        example = f'[x(t) == "{vocabulary.names[0]}"]'
        raise checker.fail(expr.span, f"a categorical token (one of {vocabulary.describe()}) is not a number: "
                                      f"compare it with == or != inside [...], e.g. {example}")
    if kind == "boolean":
        raise checker.fail(expr.span, "a condition is not a number: write [condition] for 1 where it holds, "
                                      "0 elsewhere")
    return typed


def type_string(checker: TokenTypingContext, expr: ast.String, scope: Scope) -> ir.Expr:
    """``"a"``: a token of the categorical vocabulary."""
    vocabulary = checker.declared.vocabulary
    if vocabulary is None:
        raise checker.fail(expr.span, f'the token literal "{expr.text}" needs a token input '
                                      f'(input {checker.declared.input_name} : token {{"{expr.text}", ...}})')
    if not vocabulary.categorical:
        raise checker.fail(expr.span, f'"{expr.text}" is a quoted token, but the vocabulary {vocabulary.describe()} '
                                      f"is numeric: write its tokens as numbers")
    if expr.text not in vocabulary.names:
        raise checker.fail(expr.span, f'"{expr.text}" is not in the vocabulary {vocabulary.describe()}')
    return ir.TokenLiteral(vocabulary.names.index(expr.text), expr.text, expr.span)


def type_bracket(checker: TokenTypingContext, expr: ast.Bracket, scope: Scope) -> ir.Expr:
    """``[cond]``: 1 where ``cond`` holds, else 0; over a continuous input it needs a margin."""
    condition = checker.type_of(expr.condition, scope)
    if condition.type.kind != "boolean":
        raise checker.fail(expr.condition.span, "a bracket holds a condition such as a < b or x(t) == \"a\"")
    reads_input = any(isinstance(n, ir.Token) for n in ir.sub_nodes(condition))
    if checker.declared.vocabulary is None and reads_input and checker.declared.margin is None:
        raise checker.fail(expr.span, "this bracket compares continuous values (the input is R^d), which can lie "
                                      "arbitrarily close: declare `margin δ` (the guarantee then holds on inputs "
                                      "whose compared values are equal or at least δ apart)")
    return ir.Bracket(condition, expr.span)


def type_compare(checker: TokenTypingContext, expr: ast.Compare, scope: Scope) -> ir.Expr:
    """``a op b``: two scalars (positions as their numbers), or two tokens with == or !=."""
    left, right = checker.each(lambda: checker.type_of(expr.left, scope), lambda: checker.type_of(expr.right, scope))
    sides = [left, right]
    tokens = [side.type.kind == "token" for side in sides]
    if any(tokens):
        if not all(tokens):
            other = expr.right if tokens[0] else expr.left
            raise checker.fail(expr.span, f"a categorical token is compared with a {_kind(sides[tokens.index(False)])} "
                                          f"({ast_text(other)}): compare it with a token such as "
                                          f"\"{checker.declared.vocabulary.names[0]}\" or x(s)")  # type: ignore[union-attr]
        if expr.operator in ORDERING:
            raise checker.fail(expr.span, f"'{expr.operator}' orders numbers, but the vocabulary "
                                          f"{checker.declared.vocabulary.describe()} is categorical: "  # type: ignore[union-attr]
                                          f"its tokens are compared with == and != only")
        return ir.Compare(expr.operator, left, right, expr.span)
    converted = [_position_as_number(checker, side) for side in sides]
    for typed, source in zip(converted, (expr.left, expr.right), strict=True):
        number_of(checker, typed, source)
        if typed.type.kind != "scalar":
            raise checker.fail(source.span, f"'{expr.operator}' compares scalars or tokens, got a {typed.type}")
    return ir.Compare(expr.operator, converted[0], converted[1], expr.span)


def _position_as_number(checker: TokenTypingContext, typed: ir.Expr) -> ir.Expr:
    """A compared position is compared as its number (in any program)."""
    return ir.PositionNumber(typed, typed.span) if typed.type.kind == "position" else typed  # type: ignore[arg-type]


def _kind(typed: ir.Expr) -> str:
    return "number" if typed.type.kind == "scalar" else str(typed.type)


def ast_text(expr: ast.Expr) -> str:
    from .printer import print_expr

    return print_expr(expr)


def type_logical(checker: TokenTypingContext, expr: ast.Logical, scope: Scope) -> ir.Expr:
    left, right = checker.each(lambda: _condition(checker, expr.left, scope),
                               lambda: _condition(checker, expr.right, scope))
    return ir.Logical(expr.operator, left, right, expr.span)


def type_not(checker: TokenTypingContext, expr: ast.Not, scope: Scope) -> ir.Expr:
    return ir.Not(_condition(checker, expr.argument, scope), expr.span)


def _condition(checker: TokenTypingContext, expr: ast.Expr, scope: Scope) -> ir.Expr:
    typed = checker.type_of(expr, scope)
    if typed.type.kind != "boolean":
        raise checker.fail(expr.span, f"'and', 'or' and 'not' join conditions, got a {typed.type}")
    return typed


# ----------------------------------------------------------------------------- len and positions


def run_length(checker: TokenTypingContext, span: ast.Span, offset: int = 0) -> ir.RunLength:
    """``len`` (plus an offset): only where the input is a token sequence, which may be shorter than T."""
    if checker.declared.vocabulary is None:
        raise checker.fail(span, "len is the run-time length of a token input; this program's input is a "
                                 "sequence of vectors (R^d), which the model reads at its full length T only "
                                 "(it has no way to tell a shorter input from a longer one), so write T")
    return ir.RunLength(span, offset=offset)


def _linear_form(expr: ast.Expr) -> dict[str, int] | None:
    """``expr`` as integer coefficients of names (``""`` the constant), for sums and differences
    of names and whole numbers; None for anything else."""
    if isinstance(expr, ast.Number):
        return {"": int(expr.text)} if expr.is_whole else None
    if isinstance(expr, ast.Name):
        return {expr.name: 1}
    if isinstance(expr, ast.Negate):
        inner = _linear_form(expr.argument)
        return None if inner is None else {k: -v for k, v in inner.items()}
    if isinstance(expr, ast.Binary) and expr.operator in "+-":
        left, right = _linear_form(expr.left), _linear_form(expr.right)
        if left is None or right is None:
            return None
        sign = 1 if expr.operator == "+" else -1
        out = dict(left)
        for key, value in right.items():
            out[key] = out.get(key, 0) + sign * value
        return {k: v for k, v in out.items() if v or k == ""}
    return None


def reads_v3_position(checker: TokenTypingContext, argument: ast.Expr) -> bool:
    """Whether ``x(argument)`` is a v3 position expression: it reads ``len``, or (in a token
    program) a sum of a variable and whole numbers not written ``v ± c`` (``len + 1 - t``,
    ``3 - t``, ``1 + t``); literals, names and v1/v2's ``v ± c`` and ``T ± c`` keep their rules."""
    form = _linear_form(argument)
    if form is None or checker.declared.vocabulary is None:
        return form is not None and "len" in form
    v2_offset = isinstance(argument, ast.Binary) and isinstance(argument.left, ast.Name) and \
        isinstance(argument.right, ast.Number)
    return "len" in form or not (isinstance(argument, ast.Number | ast.Name) or v2_offset or "T" in form)


def v3_position(checker: TokenTypingContext, argument: ast.Expr, scope: Scope) -> ir.Expr:
    """``x(len - 1)``, ``x(len + 1 - t)``, ``x(3 - t)``: a position the enclosing conditions keep in 1..len."""
    form = _linear_form(argument)
    assert form is not None
    constant = form.pop("", 0)
    length = form.pop("len", 0)
    if length:
        run_length(checker, argument.span)  # diagnosed where the input is not a token sequence
    variables = [(name, c) for name, c in form.items()]
    if length not in (0, 1) or len(variables) > 1 or any(c not in (1, -1) for _, c in variables) or \
            (length and variables and variables[0][1] != -1) or (not length and not variables):
        raise checker.fail(argument.span, f"a position inside x(...) is {POSITION_FORMS}")
    if not variables:
        position: ir.Expr = ir.RunLength(argument.span, offset=constant)
    else:
        base = checker.type_of(ast.Name(variables[0][0], argument.span), scope)
        if not isinstance(base, ir.PositionVariable):
            raise checker.fail(argument.span, f"a position inside x(...) is {POSITION_FORMS}; "
                                              f"'{variables[0][0]}' is not a position variable")
        if variables[0][1] == 1:
            position = ir.PositionVariable(base.name, argument.span, offset=constant)
        else:
            position = ir.ReflectedPosition(base, constant, bool(length), argument.span)
    checker.check_read(argument, position, scope)  # type: ignore[arg-type]
    return position
