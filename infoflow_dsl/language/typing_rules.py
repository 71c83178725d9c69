"""The typing rules of the checker, one per AST expression class (:data:`TYPING_RULES`): each
types a node bottom up through the checker's :meth:`TypingContext.type_of`, resolving names and
catching every error docs/language.md lists, located at the node's span."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from . import syntax as ast
from . import typed as ir
from .declarations import RESERVED
from .functions import CALLABLE
from .macros import POISON
from .scope import Failed, Scope
from .token_typing import (
    TokenTypingContext,
    reads_v3_position,
    run_length,
    type_bracket,
    type_compare,
    type_logical,
    type_not,
    type_string,
    v3_position,
)


class TypingContext(TokenTypingContext, Protocol):
    """What the typing rules read of the checker (``check.Checker``): the v3 rules' context, the
    length T, the per-token target's variable, typing a scalar or a number, and the checks of
    position ranges and offsets."""

    @property
    def length(self) -> int:
        """T, as declared or overridden."""
        ...

    @property
    def token_variable(self) -> str | None:
        """The per-token target's position variable (``target(t) = ...``), else None."""
        ...

    def scalar(self, expr: ast.Expr, scope: Scope, role: str) -> ir.Expr:
        """The typed ``expr``, which must be a scalar (``role`` names it in the message)."""
        ...

    def require_number(self, typed: ir.Expr, expr: ast.Expr) -> ir.Expr:
        """``typed`` as a value arithmetic accepts (in a token program a position becomes its number)."""
        ...

    def within_length(self, names: Sequence[str]) -> tuple[ir.PositionCondition, ...]:
        """v ≤ len for each variable in a token program (none in a program over vectors)."""
        ...

    def check_range(self, expr: ast.Reduction, names: tuple[str, ...], conditions: Sequence[ir.PositionCondition],
                    enclosing: Sequence[ir.PositionCondition]) -> None:
        """Fail when the reduction over ``names`` can range over no tuple (for top(k): fewer than k)."""
        ...

    def check_offset(self, expr: ast.Binary, position: ir.PositionVariable, scope: Scope) -> None:
        """Fail when ``position`` (a variable plus an offset) can leave 1..T under the scope's conditions."""
        ...


def _type_number(checker: TypingContext, expr: ast.Number, scope: Scope) -> ir.Expr:
    return ir.NumberLiteral(expr.value, expr.span)  # exact: the rational its float stands for (language/exact.py)


def _type_name(checker: TypingContext, expr: ast.Name, scope: Scope) -> ir.Expr:
    name, declared = expr.name, checker.declared
    if name == POISON:
        raise Failed()
    if scope.lookup(name) is not None:
        return ir.PositionVariable(scope.lookup(name), expr.span)  # type: ignore[arg-type]
    if name == "T":
        return ir.LastPosition(expr.span)
    if name == "len":
        return run_length(checker, expr.span)
    if name in declared.constants:
        return dataclasses.replace(declared.constants[name], span=expr.span)
    if name == declared.input_name:
        raise checker.fail(expr.span, f"the input '{name}' is a sequence; write {name}(t) for the token at position t")
    if name in CALLABLE:
        raise checker.fail(expr.span, f"'{name}' is a function; call it as {name}(...)")
    if name in declared.binder_names:
        raise checker.fail(expr.span, f"position variable '{name}' is used outside the reduction that binds it")
    if name in declared.defined:  # a constant that failed its own check
        raise Failed()
    raise checker.fail(expr.span, f"unknown name '{name}'")


def _type_call(checker: TypingContext, expr: ast.Call, scope: Scope) -> ir.Expr:
    name = expr.function
    if name == checker.declared.input_name:
        return _token(checker, expr, scope)
    if name in CALLABLE:
        want = CALLABLE[name]
        if len(expr.arguments) != want:
            raise checker.fail(expr.span, f"{name}(...) takes {want} argument{'s' * (want != 1)}, "
                                          f"got {len(expr.arguments)}")
        arguments = tuple(checker.each(
            *(lambda a=a: checker.scalar(a, scope, f"the argument of {name}") for a in expr.arguments)
        ))
        return ir.Pointwise(name, arguments, expr.span)  # type: ignore[arg-type]
    if name in checker.declared.tables:
        return _table_lookup(checker, expr, checker.declared.tables[name], scope)
    if name in checker.declared.constants:
        raise checker.fail(expr.span, f"'{name}' is a constant, not a function")
    if name in checker.declared.defined:  # a table that failed its own check
        raise Failed()
    raise checker.fail(expr.span, f"unknown function '{name}' (the functions are relu, min, max, "
                                  f"the input {checker.declared.input_name}(...), the let macros and the tables)")


def _table_lookup(checker: TypingContext, expr: ast.Call, table: ir.Table, scope: Scope) -> ir.Expr:
    """``f(a)``/``g(a, b)`` of a table: one argument per key part, a categorical token where the
    keys are quoted tokens, else a number (a numeric token, a count, a position, ...)."""
    if checker.declared.vocabulary is None:
        raise checker.fail(expr.span, f"table {table.name} maps finitely many values: tables apply in a program "
                                      f"over tokens (input x : token {{...}}), whose values are finite")
    if len(expr.arguments) != table.arity:
        raise checker.fail(expr.span, f"table {table.name} takes {table.arity} argument{'s' * (table.arity != 1)}, "
                                      f"got {len(expr.arguments)}")

    def argument(node: ast.Expr, tokens: bool) -> ir.Expr:
        if not tokens:
            return checker.scalar(node, scope, f"the argument of table {table.name}")
        typed = checker.type_of(node, scope)
        if typed.type != ir.TOKEN:
            raise checker.fail(node.span, f"table {table.name} is keyed by tokens: its argument must be a "
                                          f"token x(...), got a {typed.type}")
        return typed

    arguments = tuple(checker.each(*(lambda a=a, k=k: argument(a, k)
                                     for a, k in zip(expr.arguments, table.token_columns, strict=True))))
    return ir.TableLookup(table, arguments, expr.span)


def _token(checker: TypingContext, expr: ast.Call, scope: Scope) -> ir.Expr:
    """``x(position)``: the token at a literal position, a position offset, a position variable,
    T or argmin/argmax."""
    input_name, length = checker.declared.input_name, checker.length
    if len(expr.arguments) != 1:
        raise checker.fail(expr.span, f"{input_name}(...) takes one position, got {len(expr.arguments)} arguments")
    argument = expr.arguments[0]
    if reads_v3_position(checker, argument):
        position: ir.Expr = v3_position(checker, argument, scope)
    elif isinstance(argument, ast.Number):
        if not argument.is_whole or not 1 <= int(argument.text) <= length:
            raise checker.fail(argument.span, f"position {argument.text} is outside 1..T (T = {length})")
        position = ir.FixedPosition(int(argument.text), argument.span)
    elif isinstance(argument, ast.Binary) and argument.operator in "+-" and isinstance(argument.right, ast.Number):
        position = _offset_position(checker, argument, scope)
    else:
        position = checker.type_of(argument, scope)
    if position.type.kind != "position":
        raise checker.fail(argument.span, f"{input_name}(...) takes a position (a position variable, "
                                          f"a literal 1..T, T, or argmin/argmax), got a {position.type}")
    vocabulary = checker.declared.vocabulary
    if vocabulary is None:
        return ir.Token(position, ir.vector(checker.declared.dimension), expr.span)  # type: ignore[arg-type]
    if isinstance(position, ir.FixedPosition | ir.LastPosition) and not isinstance(argument, ast.Binary):
        checker.check_read(argument, position, scope)  # a fixed position must exist at every length
    token_type = ir.TOKEN if vocabulary.categorical else ir.SCALAR
    return ir.Token(position, token_type, expr.span)  # type: ignore[arg-type]


def _offset_position(checker: TypingContext, expr: ast.Binary, scope: Scope) -> ir.Expr:
    """``x(t - 1)``, ``x(s + 2)``, ``x(T - 1)``: a position variable or T plus or minus a whole
    number, which must lie in 1..T for every value the enclosing conditions allow."""
    amount = expr.right
    assert isinstance(amount, ast.Number)
    base = checker.type_of(expr.left, scope) if isinstance(expr.left, ast.Name) else None
    if not isinstance(base, ir.PositionVariable | ir.LastPosition) or not amount.is_whole:
        raise checker.fail(expr.span, "a position offset is a position variable or T plus or minus a whole number "
                                      "(t - 1, s + 2, T - 1)")
    offset = int(amount.text) * (-1 if expr.operator == "-" else 1)
    if isinstance(base, ir.LastPosition):
        if checker.declared.vocabulary is not None:
            checker.check_read(expr, ir.LastPosition(expr.span, offset=offset), scope)
        if not 1 <= checker.length + offset <= checker.length:
            raise checker.fail(expr.span, f"position T {expr.operator} {amount.text} is outside 1..T "
                                          f"(T = {checker.length})")
        return ir.LastPosition(expr.span, offset=offset)
    position = ir.PositionVariable(base.name, expr.span, offset=offset)
    if scope.conditions_known:
        checker.check_offset(expr, position, scope)
    return position


def _type_index(checker: TypingContext, expr: ast.Index, scope: Scope) -> ir.Expr:
    base = checker.type_of(expr.base, scope)
    if base.type.kind != "vector":
        raise checker.fail(expr.span, f"indexing needs a vector, got a {base.type}")
    size = base.type.shape[0]
    index = int(expr.index.text) if expr.index.is_whole else 0
    if not 1 <= index <= size:
        raise checker.fail(expr.index.span, f"component index {expr.index.text} is outside 1..{size}")
    return ir.Component(base, index, expr.span)


def _type_inner_product(checker: TypingContext, expr: ast.InnerProduct, scope: Scope) -> ir.Expr:
    left, right = checker.each(lambda: checker.type_of(expr.left, scope), lambda: checker.type_of(expr.right, scope))
    if left.type.kind != "vector" or left.type != right.type:
        raise checker.fail(expr.span, f"the inner product needs two vectors of equal length, "
                                      f"got a {left.type} and a {right.type}")
    return ir.Inner(left, right, expr.span)


def _type_norm(checker: TypingContext, expr: ast.Norm, scope: Scope) -> ir.Expr:
    argument = checker.type_of(expr.argument, scope)
    if argument.type.kind != "vector":
        raise checker.fail(expr.span, f"||·|| needs a vector, got a {argument.type} (for a scalar write |a|)")
    return ir.Norm(argument, expr.span)


def _type_abs(checker: TypingContext, expr: ast.Abs, scope: Scope) -> ir.Expr:
    argument = checker.require_number(checker.type_of(expr.argument, scope), expr.argument)
    if argument.type.kind != "scalar":
        raise checker.fail(expr.span, f"|·| needs a scalar, got a {argument.type} (for a vector write ||v||)")
    return ir.Pointwise("abs", (argument,), expr.span)


def _type_negate(checker: TypingContext, expr: ast.Negate, scope: Scope) -> ir.Expr:
    argument = checker.require_number(checker.type_of(expr.argument, scope), expr.argument)
    return ir.Negate(argument, argument.type, expr.span)


def _type_power(checker: TypingContext, expr: ast.Power, scope: Scope) -> ir.Expr:
    if expr.exponent.value != 2:
        raise checker.fail(expr.exponent.span, f"the only exponent is the literal 2, not {expr.exponent.text}")
    base = checker.require_number(checker.type_of(expr.base, scope), expr.base)
    if base.type.kind != "scalar":
        raise checker.fail(expr.span, f"^2 squares a scalar, got a {base.type} (for a vector write ||v||^2)")
    return ir.Square(base, expr.span)


def _type_binary(checker: TypingContext, expr: ast.Binary, scope: Scope) -> ir.Expr:
    if expr.operator == "/":
        return _divide(checker, expr, scope)
    left, right = checker.each(lambda: checker.type_of(expr.left, scope), lambda: checker.type_of(expr.right, scope))
    if expr.operator == "@":
        return _matvec(checker, expr, left, right)
    left = checker.require_number(left, expr.left)
    right = checker.require_number(right, expr.right)
    if expr.operator == "*":
        if left.type.kind == "vector" and right.type.kind == "vector":
            raise checker.fail(expr.span, "'*' multiplies by a scalar; for two vectors write <a, b>")
        result = left.type if left.type.kind == "vector" else right.type
        return ir.Arithmetic("*", left, right, result, expr.span)
    if left.type != right.type:
        raise checker.fail(expr.span, f"'{expr.operator}' needs operands of the same type, "
                                      f"got a {left.type} and a {right.type}")
    return ir.Arithmetic(expr.operator, left, right, left.type, expr.span)


def _divide(checker: TypingContext, expr: ast.Binary, scope: Scope) -> ir.Expr:
    """``a / c``: ``c`` must fold to a nonzero constant."""

    def numerator_of() -> ir.Expr:
        return checker.require_number(checker.type_of(expr.left, scope), expr.left)

    numerator, divisor = checker.each(numerator_of, lambda: _constant_value(checker, expr.right, scope))
    if divisor == 0:
        raise checker.fail(expr.right.span, "division by zero")
    return ir.Divide(numerator, divisor, numerator.type, expr.span)


def _constant_value(checker: TypingContext, expr: ast.Expr, scope: Scope) -> float:
    """The value of a scalar expression made of literals and constants; else an error."""
    value = _fold(checker.type_of(expr, scope))
    if value is None:
        raise checker.fail(expr.span, "division is only by a constant (a number or a scalar const)")
    return value


def _fold(expr: ir.Expr) -> float | None:
    """The value of a constant scalar expression, or None if it depends on the input."""
    if isinstance(expr, ir.NumberLiteral):
        return expr.value
    if isinstance(expr, ir.Constant) and expr.type.kind == "scalar":
        return expr.values[0]
    if isinstance(expr, ir.Negate):
        inner = _fold(expr.argument)
        return None if inner is None else -inner
    if isinstance(expr, ir.Divide):
        inner = _fold(expr.numerator)
        return None if inner is None else inner / expr.divisor
    if isinstance(expr, ir.Arithmetic) and expr.type.kind == "scalar":
        left, right = _fold(expr.left), _fold(expr.right)
        if left is None or right is None:
            return None
        return {"+": left + right, "-": left - right, "*": left * right}[expr.operator]
    return None


def _matvec(checker: TypingContext, expr: ast.Binary, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    if not isinstance(left, ir.Constant) or left.type.kind != "matrix":
        raise checker.fail(expr.left.span, f"the left side of '@' must be a constant matrix, got a {left.type}")
    rows, columns = left.type.shape
    if right.type != ir.vector(columns):
        raise checker.fail(expr.span, f"'{left.name}' is a {left.type} and needs a vector[{columns}], "
                                      f"got a {right.type}")
    return ir.MatVec(left, right, ir.vector(rows), expr.span)


def _type_reduction(checker: TypingContext, expr: ast.Reduction, scope: Scope) -> ir.Expr:
    inner_scope, names = scope.bind(_binders(checker, expr))
    failed = False
    try:
        conditions = tuple(checker.each(*(lambda c=c: _condition(checker, c, inner_scope) for c in expr.conditions)))
    except Failed:
        conditions, failed = (), True
    bounded = (*conditions, *checker.within_length(names))  # in a token program every v <= len
    try:
        body = checker.type_of(expr.body, inner_scope.constrained(bounded, known=not failed))
    except Failed:
        failed = True
    if failed:
        raise Failed()
    body = checker.require_number(body, expr.body)
    checker.check_range(expr, names, bounded, scope.conditions)
    if expr.kind in ("argmin", "argmax"):
        if len(names) != 1:
            raise checker.fail(expr.span, f"{expr.kind} binds exactly one position variable, got {len(names)}")
        _require_scalar_body(checker, expr, body)
        return ir.ArgPosition(expr.kind, names[0], conditions, body, expr.span)
    if expr.kind in ("min", "max", "top"):
        _require_scalar_body(checker, expr, body)
    if expr.kind == "top" and expr.rank == 1:  # the largest value, with multiplicity or not: max
        return ir.Reduce("max", names, conditions, body, body.type, None, expr.span)
    return ir.Reduce(expr.kind, names, conditions, body, body.type, expr.rank, expr.span)  # type: ignore[arg-type]


def _require_scalar_body(checker: TypingContext, expr: ast.Reduction, body: ir.Expr) -> None:
    if body.type.kind != "scalar":
        raise checker.fail(expr.body.span, f"the body of {expr.kind} must be a scalar, got a {body.type}")


def _binders(checker: TypingContext, expr: ast.Reduction) -> tuple[str, ...]:
    """The binders' names (an inner binder may shadow an outer one of the same name)."""
    names: list[str] = []
    for binder in expr.binders:
        clash = None
        if binder.name in names:
            clash = f"position variable '{binder.name}' is bound twice in the same reduction"
        elif binder.name in checker.declared.defined or binder.name in RESERVED:
            clash = f"'{binder.name}' is already a name in the program; choose another position variable"
        elif binder.name == checker.token_variable:
            clash = (f"'{binder.name}' is the per-token target's position variable; a reduction inside "
                     f"the target cannot rebind it (choose another name)")
        if clash:
            raise checker.fail(binder.span, clash)
        names.append(binder.name)
    return tuple(names)


def _condition(checker: TypingContext, condition: ast.Condition, scope: Scope) -> ir.PositionCondition:
    left, right = (_position_term(checker, t, scope) for t in (condition.left, condition.right))
    return ir.PositionCondition(left, condition.operator, right, condition.span)


def _position_term(checker: TypingContext, term: ast.PositionTermSyntax, scope: Scope) -> ir.PositionTerm:
    if isinstance(term, ast.PositionOffset):
        base = _position_term(checker, term.base, scope)
        if isinstance(base, ir.LastPosition):
            return ir.LastPosition(term.span, offset=term.delta)
        if isinstance(base, ir.PositionVariable):
            return ir.PositionVariable(base.name, term.span, offset=term.delta)
        if isinstance(base, ir.RunLength):
            return ir.RunLength(term.span, offset=term.delta)
        raise checker.fail(term.span, "a condition's offset applies to a position variable or T")
    if isinstance(term, ast.Number):
        return ir.FixedPosition(int(term.text), term.span)
    if term.name == "T":
        return ir.LastPosition(term.span)
    if term.name == "len" and scope.lookup(term.name) is None:
        return run_length(checker, term.span)
    if scope.lookup(term.name) is not None:
        return ir.PositionVariable(scope.lookup(term.name), term.span)  # type: ignore[arg-type]
    if term.name == POISON:
        raise checker.fail(term.span, "a condition compares positions; the macro argument used here is not "
                                      "a position variable, a literal or T")
    raise checker.fail(term.span, f"a condition compares positions; '{term.name}' is not a bound position variable")


#: The typing rule of each AST expression class: (checker, node, scope) -> typed node.
TYPING_RULES: dict[type, Callable[[TypingContext, Any, Scope], ir.Expr]] = {
    ast.Number: _type_number,
    ast.Name: _type_name,
    ast.Call: _type_call,
    ast.Index: _type_index,
    ast.InnerProduct: _type_inner_product,
    ast.Norm: _type_norm,
    ast.Abs: _type_abs,
    ast.Negate: _type_negate,
    ast.Power: _type_power,
    ast.Binary: _type_binary,
    ast.Reduction: _type_reduction,
    ast.String: type_string,
    ast.Bracket: type_bracket,
    ast.Compare: type_compare,
    ast.Logical: type_logical,
    ast.Not: type_not,
}
