"""Stage 1 (load), check: :class:`~infoflow_dsl.language.syntax.SourceProgram` ->
:class:`~infoflow_dsl.language.typed.Program`.

The declarations are checked first (:mod:`.declarations`), the target's macros inlined
(:mod:`.macros`), then the target is typed bottom up, each node by the rule of its AST class
(:data:`TYPING_RULES`): names resolved, types computed and every error docs/language.md lists
caught. All errors found are reported together, each with its span; an expression that
already failed is not reported again by its parents (no cascades).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import Diagnostic, ProgramError
from . import syntax as ast
from . import typed as ir
from .declarations import MAX_LENGTH, RESERVED, Declarations, declare
from .lexicographic import lexicographic
from .macros import inline_macros
from .positions import (
    LENGTH_AXIS,
    TooManyLinkedPositions,
    offset_violation,
    position_value,
    satisfiable,
    smallest_range,
    within_length,
)
from .scope import Failed, Scope
from .tables import check_table_uses
from .token_typing import number_of
from .typing_rules import TYPING_RULES, _condition
from .value_sets import vocabulary_domain


class Checker:
    """Checks one program; ``errors`` collects every diagnostic.

    The typing rules (:data:`TYPING_RULES`) type sub-expressions through :meth:`type_of` and
    leave the checks of position ranges to :meth:`check_range` and :meth:`check_offset`.
    """

    def __init__(self, path: str, source: str, length: int | None, margin: float | None) -> None:
        self.path = path
        self.source = source
        self.length_override = length
        self.margin_override = margin
        self.errors: list[Diagnostic] = []
        self.declared = Declarations()
        self.token_variable: str | None = None

    @property
    def length(self) -> int:
        """T, as declared or overridden."""
        return self.declared.length

    def error(self, span: ast.Span, message: str) -> None:
        self.errors.append(Diagnostic(self.path, span, message))

    def fail(self, span: ast.Span, message: str) -> Failed:
        """Report ``message`` at ``span``; the result is raised to silence the parents."""
        self.error(span, message)
        return Failed()

    # ------------------------------------------------------------------ the program

    def check_program(self, program: ast.SourceProgram) -> ir.Program | None:
        """The typed program, or None when any error was reported."""
        self.declared = declare(program, self.error, self.length_override, self.margin_override)
        declaration = self.declared.target
        if declaration is None:
            return None
        expanded_target = inline_macros(declaration.expression, self.declared.macros, self.error)
        if expanded_target is None:
            return None
        scope, token_conditions = self._target_scope(declaration)
        target = self._type_target(expanded_target, scope) if scope is not None else None
        if target is not None and self.declared.tables and self.declared.vocabulary is not None:
            check_table_uses(target, self.declared.vocabulary, self.length, self.error)
        if target is not None and self.declared.vocabulary is not None:  # a key's tie-break: the order of pairs
            target = lexicographic(target, vocabulary_domain(self.declared.vocabulary, self.length))  # type: ignore[assignment]
        if self.errors or target is None or self.declared.domain is None:
            return None
        kept = tuple(d for d in program.declarations if not isinstance(d, ast.LetDecl | ast.TargetDecl))
        expanded = ast.SourceProgram((*kept, dataclasses.replace(declaration, expression=expanded_target)))
        return ir.Program(
            path=self.path, source=self.source, input_name=self.declared.input_name, dimension=self.declared.dimension,
            domain=self.declared.domain, length=self.length, margin=self.declared.margin, target=target,
            expanded=expanded, token_variable=self.token_variable, token_conditions=token_conditions,
            vocabulary=self.declared.vocabulary,
        )

    def _target_scope(self, target: ast.TargetDecl) -> tuple[Scope | None, tuple[ir.PositionCondition, ...]]:
        """The scope the target expression is typed in: empty for a sequence target; for
        ``target(t : cond) = ...``, t bound and ``cond`` holding (its range must not be empty)."""
        if target.variable is None:
            return Scope(), ()
        binder = target.variable
        if binder.name in self.declared.defined or binder.name in RESERVED:
            self.error(binder.span, f"'{binder.name}' is already a name in the program; choose another "
                                    f"position variable for the per-token target")
            return None, ()
        self.token_variable = binder.name
        scope, _ = Scope().bind([binder.name])
        try:
            conditions = tuple(self.each(*(lambda c=c: _condition(self, c, scope) for c in target.conditions)))
        except Failed:
            return None, ()
        if not self.target_defined_somewhere(target, conditions):
            return None, ()
        return scope.constrained((*conditions, *self.within_length((binder.name,)))), conditions

    def target_defined_somewhere(self, target: ast.TargetDecl, conditions: tuple[ir.PositionCondition, ...]) -> bool:
        """Whether some t in 1..T satisfies the per-token target's conditions (else diagnosed)."""
        assert target.variable is not None
        if self.declared.vocabulary is not None:  # some len in 1..T and t in 1..len
            names = (target.variable.name, LENGTH_AXIS)
            nowhere = satisfiable(names, (*conditions, *within_length(names[:1])), self.length) is None
        else:
            nowhere = smallest_range((target.variable.name,), conditions, self.length).smallest == 0
        if nowhere:
            self.error(target.conditions[0].span, f"the per-token target is defined at no position (T = {self.length})")
            return False
        return True

    def _type_target(self, expr: ast.Expr, scope: Scope) -> ir.Expr | None:
        try:
            target = self.type_of(expr, scope)
        except Failed:
            return None
        if target.type.kind == "position" and self.declared.vocabulary is not None:
            target = ir.PositionNumber(target, target.span)  # type: ignore[arg-type]
        if target.type.kind == "position":
            self.error(expr.span, "the target is a position; write x(...) to retrieve the token there")
            return None
        if target.type.kind == "matrix":
            self.error(expr.span, "the target is a matrix; a target is a scalar or a vector")
            return None
        if target.type.kind in ("token", "boolean") and not isinstance(target, ir.Token):
            what = "a token literal" if target.type.kind == "token" else "a condition"
            self.error(expr.span, f"the target is {what}; a target is a number, a vector, or a token x(...) "
                                  f"of the input (write [condition] for 1 where it holds, 0 elsewhere)")
            return None
        return target

    # ------------------------------------------------------------------ typing

    def type_of(self, expr: ast.Expr, scope: Scope) -> ir.Expr:
        """The typed form of ``expr`` with position variables ``scope`` bound; raises Failed."""
        return TYPING_RULES[type(expr)](self, expr, scope)

    def each(self, *typers: Callable[[], Any]) -> list[Any]:
        """Run every typer (of sibling subexpressions), so that an error in one does not hide
        an error in another; fail afterwards if any of them failed."""
        results: list[Any] = []
        failed = False
        for typer in typers:
            try:
                results.append(typer())
            except Failed:
                failed = True
        if failed:
            raise Failed()
        return results

    def scalar(self, expr: ast.Expr, scope: Scope, role: str) -> ir.Expr:
        """The typed ``expr``, which must be a scalar (``role`` names it in the message)."""
        typed = self.require_number(self.type_of(expr, scope), expr)
        if typed.type.kind != "scalar":
            raise self.fail(expr.span, f"{role} must be a scalar, got a {typed.type}")
        return typed

    def require_number(self, typed: ir.Expr, expr: ast.Expr) -> ir.Expr:
        """``typed`` as a value arithmetic accepts (a scalar or a vector; in a token program a
        position becomes its number); fail for anything else."""
        return number_of(self, typed, expr)

    def within_length(self, names: Sequence[str]) -> tuple[ir.PositionCondition, ...]:
        """v ≤ len for each variable in a token program (none in a program over vectors)."""
        return within_length(names) if self.declared.vocabulary is not None else ()

    # ------------------------------------------------------------------ position ranges

    def check_range(
        self, expr: ast.Reduction, names: tuple[str, ...], conditions: Sequence[ir.PositionCondition],
        enclosing: Sequence[ir.PositionCondition],
    ) -> None:
        """Fail when the reduction over ``names`` can range over no tuple (for some values of
        the outer variables that the ``enclosing`` conditions allow), or, for top(k), over
        fewer than k."""
        try:
            size = smallest_range(names, conditions, self.length, enclosing)
        except TooManyLinkedPositions as error:
            raise self.fail(expr.span, f"the conditions of this {expr.kind} link {error.count} position variables; "
                                       f"the checker decides ranges for fewer (split the reduction)") from None
        where = "".join(f", {k} = {v}" for k, v in size.witness.items())
        if size.smallest == 0:
            raise self.fail(expr.span, f"the range of this {expr.kind} is empty (T = {self.length}{where})")
        if expr.kind == "top" and expr.rank is not None and size.exact and expr.rank > size.smallest:
            raise self.fail(expr.span, f"top({expr.rank}) needs at least {expr.rank} positions, "
                                       f"but the range has {size.smallest} (T = {self.length}{where})")

    def check_offset(self, expr: ast.Binary, position: ir.PositionVariable, scope: Scope) -> None:
        """Fail when ``position`` (a variable plus an offset) can leave 1..T under the scope's conditions."""
        self.check_read(expr, position, scope)

    def check_read(self, expr: ast.Expr, position: ir.PositionTerm, scope: Scope) -> None:
        """Fail when ``position`` can leave 1..T (1..len in a token program, for every len in
        1..T) under the scope's conditions."""
        tokens = self.declared.vocabulary is not None
        variables = (*scope.variables, LENGTH_AXIS) if tokens else scope.variables
        last: ir.PositionTerm = ir.RunLength() if tokens else ir.LastPosition()
        try:
            witness = offset_violation(variables, scope.conditions, position, self.length, last)
        except TooManyLinkedPositions as error:
            raise self.fail(expr.span, f"the conditions around this offset link {error.count} position variables; "
                                       f"the checker decides ranges for fewer") from None
        if witness is not None:
            where = ", ".join(f"{k} = {v}" for k, v in witness.items())  # unique names, as range diagnostics
            value = position_value(position, witness, self.length)
            text = _source_label(position, scope)
            bound = "1..len" if tokens else "1..T"
            fault = f"is outside {bound}" if text == str(value) else f"can be {value}, outside {bound}"
            raise self.fail(expr.span, f"position {text} {fault}; restrict it with a condition "
                                       f"(T = {self.length}, {where})")


def _source_label(position: ir.PositionTerm, scope: Scope) -> str:
    """How the source writes ``position`` (``t - 1``, ``len + 1 - t``, ``T``)."""
    if isinstance(position, ir.PositionVariable):
        return scope.source_name(position.name) + ir.offset_text(position.offset)
    if isinstance(position, ir.ReflectedPosition) and isinstance(position.mirrored, ir.PositionVariable):
        mirrored = ir.PositionVariable(scope.source_name(position.mirrored.name))
        return ir.position_label(ir.ReflectedPosition(mirrored, position.offset, position.from_length)) or ""
    return ir.position_label(position) or ""


def validate_overrides(length: int | None, margin: float | None) -> None:
    """Raise ValueError naming the argument when an override cannot be a declaration's value."""
    if length is not None and not (isinstance(length, int) and 1 <= length <= MAX_LENGTH):
        raise ValueError(f"length={length!r}: T must be an integer in 1..{MAX_LENGTH:,}")
    if margin is not None and not (isinstance(margin, float | int) and math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin={margin!r}: the margin must be a positive number")


def check(
    program: ast.SourceProgram, path: str = "<string>", source: str = "",
    length: int | None = None, margin: float | None = None,
) -> ir.Program:
    """Check ``program``; ``length``/``margin`` override its declarations. Raises ProgramError for a
    fault of the program, ValueError for an override out of range (it is the caller's argument,
    not a place in the file: 1 ≤ length ≤ MAX_LENGTH, margin > 0)."""
    validate_overrides(length, margin)
    checker = Checker(path, source, length, margin)
    result = checker.check_program(program)
    if checker.errors or result is None:
        raise ProgramError(checker.errors, source)
    return result
