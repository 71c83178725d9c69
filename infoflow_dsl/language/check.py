"""Stage 2, check: :class:`~infoflow_dsl.language.syntax.SourceProgram` ->
:class:`~infoflow_dsl.language.typed.Program`.

Resolves names, inlines ``let`` macros (by substitution at the use site, like a hygienic-free
C macro: the arguments' text replaces the parameters), types every expression and catches
every error LANGUAGE.md lists. All errors found are reported together, each with its span;
an expression that already failed is not reported again by its parents (no cascades).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic, ProgramError
from . import syntax as ast
from . import typed as ir
from .parse import MAX_NESTING
from .positions import TooManyLinkedPositions, offset_violation, smallest_range
from .randomness import randn

#: The largest sequence length accepted (position ranges are counted over 1..T with arrays).
MAX_LENGTH = 1_000_000
#: The most entries a randn(seed) constant may have (the generator is plain Python).
MAX_RANDN_ENTRIES = 1_000_000
#: The most nodes macro expansion may visit while inlining the target's macros.
MAX_EXPANSION = 100_000

BUILTINS = {"relu": 1, "min": 2, "max": 2}
RESERVED = {"T", *BUILTINS, "randn", "ball", "in", "and", "R"}
_POISON = "\x00poisoned"  # the name of a placeholder left where expansion already failed


@dataclass(frozen=True)
class Scope:
    """The position variables bound at a point: (source name, unique name) pairs, outermost first.

    An inner binder may reuse an outer binder's name (lexical shadowing, as in
    ``max_<t> f(t) + max_<t> g(t)``, whose second reduction sits in the first one's body);
    it then gets a unique name with primes (``t′``), so later stages never see two
    variables with one name.
    """

    bindings: tuple[tuple[str, str], ...] = ()
    conditions: tuple[ir.PositionCondition, ...] = ()
    conditions_known: bool = True

    def constrained(self, conditions: Sequence[ir.PositionCondition], known: bool = True) -> Scope:
        """This scope with more conditions holding (a reduction's, or a per-token target's);
        ``known`` is False when some condition failed to check (offsets are then not range-checked)."""
        return Scope(self.bindings, (*self.conditions, *conditions), self.conditions_known and known)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(unique for _, unique in self.bindings)

    def lookup(self, name: str) -> str | None:
        for source, unique in reversed(self.bindings):
            if source == name:
                return unique
        return None

    def bind(self, names: Sequence[str]) -> tuple[Scope, tuple[str, ...]]:
        taken = {unique for _, unique in self.bindings}
        bindings = list(self.bindings)
        uniques: list[str] = []
        for name in names:
            unique = name
            while unique in taken:
                unique += "′"
            taken.add(unique)
            bindings.append((name, unique))
            uniques.append(unique)
        return Scope(tuple(bindings), self.conditions, self.conditions_known), tuple(uniques)


class _Failed(Exception):
    """An expression already diagnosed: its parents stay silent."""


class _TooLarge(Exception):
    """Macro expansion went past MAX_EXPANSION steps or Python's recursion limit."""


class Checker:
    """Checks one program; ``errors`` collects every diagnostic."""

    def __init__(self, path: str, source: str, length: int | None, margin: float | None) -> None:
        self.path = path
        self.source = source
        self.length_override = length
        self.margin_override = margin
        self.errors: list[Diagnostic] = []
        self.constants: dict[str, ir.Constant] = {}
        self.macros: dict[str, ast.LetDecl] = {}
        self.defined_at: dict[str, ast.Span] = {}
        self.input_name = "x"
        self.dimension = 1
        self.length = 1
        self.binder_names: set[str] = set()
        self.token_variable: str | None = None
        self.expansion_steps = 0

    def error(self, span: ast.Span, message: str) -> None:
        self.errors.append(Diagnostic(self.path, span, message))

    def fail(self, span: ast.Span, message: str) -> _Failed:
        self.error(span, message)
        return _Failed()

    # ------------------------------------------------------------------ declarations

    def check_program(self, program: ast.SourceProgram) -> ir.Program | None:
        by_kind: dict[type, list[Any]] = {}
        for declaration in program.declarations:
            by_kind.setdefault(type(declaration), []).append(declaration)
        inputs = self._exactly_one(by_kind.get(ast.InputDecl, []), "input", "input x : R^d")
        targets = self._exactly_one(by_kind.get(ast.TargetDecl, []), "target", "target EXPR")
        lengths = self._at_most_one(by_kind.get(ast.LengthDecl, []), "length")
        margins = self._at_most_one(by_kind.get(ast.MarginDecl, []), "margin")
        domain = self._input(inputs) if inputs else None
        self._length(lengths)
        margin = self._margin(margins)
        for declaration in program.declarations:
            if isinstance(declaration, ast.ConstDecl):
                self._constant(declaration)
            elif isinstance(declaration, ast.LetDecl) and self._define(declaration.name, declaration.span):
                self.macros[declaration.name] = declaration
        self.binder_names = self._all_binders(program)
        if targets is None:
            return None
        try:
            expanded_target = self._expand(targets.expression, ())
        except (_TooLarge, RecursionError):
            self.error(targets.expression.span, f"with its macros inlined, the target is too large "
                                                f"(more than {MAX_EXPANSION} nodes or {MAX_NESTING} levels deep)")
            return None
        if nesting_depth(expanded_target) > MAX_NESTING:
            self.error(targets.expression.span, f"with its macros inlined, the target is nested too deeply "
                                                f"(more than {MAX_NESTING} levels)")
            return None
        scope, token_conditions = self._target_scope(targets)
        target = self._type_target(expanded_target, scope) if scope is not None else None
        if self.errors or target is None or domain is None:
            return None
        kept = tuple(d for d in program.declarations if not isinstance(d, ast.LetDecl | ast.TargetDecl))
        expanded = ast.SourceProgram((*kept, dataclasses.replace(targets, expression=expanded_target)))
        return ir.Program(
            self.path, self.source, self.input_name, self.dimension, domain, self.length, margin, target, expanded,
            self.token_variable, token_conditions,
        )

    def _target_scope(self, target: ast.TargetDecl) -> tuple[Scope | None, tuple[ir.PositionCondition, ...]]:
        """The scope the target expression is typed in: empty for a sequence target; for
        ``target(t : cond) = ...``, t bound and ``cond`` holding (its range must not be empty)."""
        if target.variable is None:
            return Scope(), ()
        binder = target.variable
        if binder.name in self.defined_at or binder.name in RESERVED:
            self.error(binder.span, f"'{binder.name}' is already a name in the program; choose another "
                                    f"position variable for the per-token target")
            return None, ()
        self.token_variable = binder.name
        scope, _ = Scope().bind([binder.name])
        try:
            conditions = tuple(self._each(*(lambda c=c: self._condition(c, scope) for c in target.conditions)))
        except _Failed:
            return None, ()
        if not self._target_defined_somewhere(target, conditions):
            return None, ()
        return scope.constrained(conditions), conditions

    def _target_defined_somewhere(self, target: ast.TargetDecl, conditions: tuple[ir.PositionCondition, ...]) -> bool:
        assert target.variable is not None
        if smallest_range((target.variable.name,), conditions, self.length).smallest == 0:
            self.error(target.conditions[0].span, f"the per-token target is defined at no position (T = {self.length})")
            return False
        return True

    @staticmethod
    def _all_binders(program: ast.SourceProgram) -> set[str]:
        names: set[str] = set()
        for declaration in program.declarations:
            for expression in (getattr(declaration, "expression", None), getattr(declaration, "body", None)):
                if expression is not None:
                    names |= {n.name for n in ast.walk(expression) if isinstance(n, ast.Binder)}
            if isinstance(declaration, ast.TargetDecl) and declaration.variable is not None:
                names.add(declaration.variable.name)
        return names

    def _exactly_one(self, found: list[Any], what: str, form: str) -> Any:
        if not found:
            self.error(ast.Span(1, 1, 1, 2), f"the program has no {what} declaration ({form})")
            return None
        return self._at_most_one(found, what)

    def _at_most_one(self, found: list[Any], what: str) -> Any:
        for extra in found[1:]:
            self.error(extra.span, f"a second {what} declaration (the first is at line {found[0].span.line})")
        return found[0] if found else None

    def _define(self, name: str, span: ast.Span) -> bool:
        if name in RESERVED:
            self.error(span, f"'{name}' is reserved and cannot be defined")
            return False
        if name in self.defined_at:
            self.error(span, f"'{name}' is already defined at line {self.defined_at[name].line}")
            return False
        self.defined_at[name] = span
        return True

    def _input(self, declaration: ast.InputDecl) -> ir.Box | ir.Ball | None:
        self._define(declaration.name, declaration.span)
        self.input_name = declaration.name
        space = declaration.space
        if not isinstance(space, ast.VectorSpace):
            self.error(space.span, "the input's tokens are vectors: write R^d")
            return None
        if space.size < 1:
            self.error(space.span, f"the token dimension d must be at least 1, not {space.size}")
            return None
        self.dimension = space.size
        domain = declaration.domain
        if domain is None:
            return ir.Box(-1.0, 1.0)
        if isinstance(domain, ast.BallDomain):
            if domain.radius.value <= 0:
                self.error(domain.span, f"the domain ball({domain.radius.text}) is empty: the radius must be > 0")
                return None
            return ir.Ball(domain.radius.value)
        if domain.low.value > domain.high.value:
            self.error(domain.span, f"the domain [{domain.low.text}, {domain.high.text}] is empty: a > b")
            return None
        return ir.Box(domain.low.value, domain.high.value)

    def _length(self, declaration: ast.LengthDecl | None) -> None:
        if declaration is not None and declaration.name != "T":
            self.error(declaration.span, f"the length is written 'length T = N', not '{declaration.name}'")
        if self.length_override is not None:
            if self.length_override < 1:
                self.error(ast.Span(1, 1, 1, 2), f"T must be at least 1, not {self.length_override}")
            elif self.length_override > MAX_LENGTH:
                self.error(ast.Span(1, 1, 1, 2), f"T = {self.length_override} is too large (at most {MAX_LENGTH})")
            self.length = min(max(self.length_override, 1), MAX_LENGTH)
        elif declaration is None:
            self.error(ast.Span(1, 1, 1, 2), "the program has no length declaration (length T = N)")
        elif declaration.value < 1:
            self.error(declaration.span, f"T must be at least 1, not {declaration.value}")
        elif declaration.value > MAX_LENGTH:
            self.error(declaration.span, f"T = {declaration.value} is too large (at most {MAX_LENGTH})")
        else:
            self.length = declaration.value

    def _margin(self, declaration: ast.MarginDecl | None) -> float | None:
        if self.margin_override is not None:
            value = self.margin_override
        elif declaration is not None:
            value = declaration.value.value
        else:
            return None
        if value <= 0:
            span = declaration.span if declaration is not None else ast.Span(1, 1, 1, 2)
            self.error(span, f"the margin must be > 0, not {value:g}")
        return value

    def _constant(self, declaration: ast.ConstDecl) -> None:
        if not self._define(declaration.name, declaration.span):
            return
        value = declaration.value
        space = declaration.space
        declared = None if space is None else _space_type(space)
        if isinstance(value, ast.RandnLiteral):
            if declared is None or declared.kind == "scalar":
                self.error(value.span, "randn(seed) needs a declared vector or matrix space, e.g. R^{2 x 4}")
                return
            if 0 in declared.shape:
                self.error(value.span, "a constant needs at least one entry")
                return
            if math.prod(declared.shape) > MAX_RANDN_ENTRIES:
                self.error(value.span, f"randn(seed) fills at most {MAX_RANDN_ENTRIES} entries; "
                                       f"'{declaration.name}' is a {declared}")
                return
            entries, actual = randn(value.seed, declared.shape), declared
        else:
            shaped = _literal_entries(value)
            if shaped is None:
                self.error(value.span, "the rows of a matrix literal must all have the same length")
                return
            entries, actual = shaped
        if declared is not None and declared != actual:
            self.error(value.span, f"the value of '{declaration.name}' is a {actual}, but its space says {declared}")
            return
        if 0 in actual.shape:
            self.error(value.span, "a constant needs at least one entry")
            return
        self.constants[declaration.name] = ir.Constant(declaration.name, entries, actual, declaration.span)

    # ------------------------------------------------------------------ macros

    def _expand(self, expr: ast.Expr, active: tuple[str, ...]) -> ast.Expr:
        """``expr`` with every macro use replaced by its body (arguments substituted)."""
        self.expansion_steps += 1
        if self.expansion_steps > MAX_EXPANSION:  # macros calling macros twice each grow exponentially
            raise _TooLarge()
        if isinstance(expr, ast.Name) and expr.name in self.macros:
            return self._inline(expr.name, (), expr.span, active, called=False)
        if isinstance(expr, ast.Call) and expr.function in self.macros:
            arguments = tuple(self._expand(a, active) for a in expr.arguments)
            return self._inline(expr.function, arguments, expr.span, active, called=True)
        return _map_children(expr, lambda child: self._expand(child, active))

    def _inline(
        self, name: str, arguments: tuple[ast.Expr, ...], span: ast.Span, active: tuple[str, ...], called: bool,
    ) -> ast.Expr:
        macro = self.macros[name]
        poisoned = ast.Name(_POISON, span)
        if name in active:
            chain = " → ".join((*active[active.index(name):], name))
            self.error(span, f"macro '{name}' calls itself ({chain}); macros cannot recurse")
            return poisoned
        parameters = macro.parameters or ()
        if len(arguments) != len(parameters) and (called or parameters):
            self.error(span, f"macro '{name}' takes {len(parameters)} argument{'s' * (len(parameters) != 1)}, "
                             f"got {len(arguments)}")
            return poisoned
        substitution = dict(zip(parameters, arguments, strict=False))
        body = _substitute(macro.body, substitution)
        return self._expand(body, (*active, name))

    # ------------------------------------------------------------------ types

    def _type_target(self, expr: ast.Expr, scope: Scope) -> ir.Expr | None:
        try:
            target = self.type_of(expr, scope)
        except _Failed:
            return None
        if target.type.kind == "position":
            self.error(expr.span, "the target is a position; write x(...) to retrieve the token there")
            return None
        if target.type.kind == "matrix":
            self.error(expr.span, "the target is a matrix; a target is a scalar or a vector")
            return None
        return target

    def type_of(self, expr: ast.Expr, scope: Scope) -> ir.Expr:
        """The typed form of ``expr`` with position variables ``scope`` bound; raises _Failed."""
        method = getattr(self, "_type_" + type(expr).__name__)
        return method(expr, scope)

    def _each(self, *typers: Callable[[], Any]) -> list[Any]:
        """Run every typer (of sibling subexpressions), so that an error in one does not hide
        an error in another; fail afterwards if any of them failed."""
        results: list[Any] = []
        failed = False
        for typer in typers:
            try:
                results.append(typer())
            except _Failed:
                failed = True
        if failed:
            raise _Failed()
        return results

    def _scalar(self, expr: ast.Expr, scope: Scope, role: str) -> ir.Expr:
        typed = self.type_of(expr, scope)
        self._require_number(typed, expr)
        if typed.type.kind != "scalar":
            raise self.fail(expr.span, f"{role} must be a scalar, got a {typed.type}")
        return typed

    def _require_number(self, typed: ir.Expr, expr: ast.Expr) -> None:
        if typed.type.kind == "position":
            raise self.fail(expr.span, "a position is used as a number; positions only index x(...) "
                                       "or appear in conditions")
        if typed.type.kind == "matrix":
            raise self.fail(expr.span, "a matrix can only be used as A @ v")

    def _type_Number(self, expr: ast.Number, scope: Scope) -> ir.Expr:
        return ir.NumberLiteral(expr.value, expr.span)

    def _type_Name(self, expr: ast.Name, scope: Scope) -> ir.Expr:
        name = expr.name
        if name == _POISON:
            raise _Failed()
        if scope.lookup(name) is not None:
            return ir.PositionVariable(scope.lookup(name), expr.span)  # type: ignore[arg-type]
        if name == "T":
            return ir.LastPosition(expr.span)
        if name in self.constants:
            return dataclasses.replace(self.constants[name], span=expr.span)
        if name == self.input_name:
            raise self.fail(expr.span, f"the input '{name}' is a sequence; write {name}(t) for the token at position t")
        if name in BUILTINS:
            raise self.fail(expr.span, f"'{name}' is a function; call it as {name}(...)")
        if name in self.binder_names:
            raise self.fail(expr.span, f"position variable '{name}' is used outside the reduction that binds it")
        if name in self.defined_at:  # a constant that failed its own check
            raise _Failed()
        raise self.fail(expr.span, f"unknown name '{name}'")

    def _type_Call(self, expr: ast.Call, scope: Scope) -> ir.Expr:
        name = expr.function
        if name == self.input_name:
            return self._token(expr, scope)
        if name in BUILTINS:
            want = BUILTINS[name]
            if len(expr.arguments) != want:
                raise self.fail(expr.span, f"{name}(...) takes {want} argument{'s' * (want != 1)}, "
                                           f"got {len(expr.arguments)}")
            arguments = tuple(self._each(
                *(lambda a=a: self._scalar(a, scope, f"the argument of {name}") for a in expr.arguments)
            ))
            return ir.Pointwise(name, arguments, expr.span)  # type: ignore[arg-type]
        if name in self.constants:
            raise self.fail(expr.span, f"'{name}' is a constant, not a function")
        raise self.fail(expr.span, f"unknown function '{name}' (the functions are relu, min, max, "
                                   f"the input {self.input_name}(...) and the let macros)")

    def _token(self, expr: ast.Call, scope: Scope) -> ir.Expr:
        if len(expr.arguments) != 1:
            count = len(expr.arguments)
            raise self.fail(expr.span, f"{self.input_name}(...) takes one position, got {count} arguments")
        argument = expr.arguments[0]
        if isinstance(argument, ast.Number):
            if not argument.is_whole or not 1 <= int(argument.text) <= self.length:
                raise self.fail(argument.span, f"position {argument.text} is outside 1..T (T = {self.length})")
            position: ir.Expr = ir.FixedPosition(int(argument.text), argument.span)
        elif isinstance(argument, ast.Binary) and argument.operator in "+-" and isinstance(argument.right, ast.Number):
            position = self._offset_position(argument, scope)
        else:
            position = self.type_of(argument, scope)
        if position.type.kind != "position":
            raise self.fail(argument.span, f"{self.input_name}(...) takes a position (a position variable, "
                                           f"a literal 1..T, T, or argmin/argmax), got a {position.type}")
        return ir.Token(position, ir.vector(self.dimension), expr.span)  # type: ignore[arg-type]

    def _offset_position(self, expr: ast.Binary, scope: Scope) -> ir.Expr:
        """``x(t - 1)``, ``x(s + 2)``, ``x(T - 1)``: a position variable or T plus or minus a whole
        number, which must lie in 1..T for every value the enclosing conditions allow."""
        amount = expr.right
        assert isinstance(amount, ast.Number)
        base = self.type_of(expr.left, scope) if isinstance(expr.left, ast.Name) else None
        if not isinstance(base, ir.PositionVariable | ir.LastPosition) or not amount.is_whole:
            raise self.fail(expr.span, "a position offset is a position variable or T plus or minus a whole number "
                                       "(t - 1, s + 2, T - 1)")
        offset = int(amount.text) * (-1 if expr.operator == "-" else 1)
        if isinstance(base, ir.LastPosition):
            if not 1 <= self.length + offset <= self.length:
                raise self.fail(expr.span, f"position T {expr.operator} {amount.text} is outside 1..T "
                                           f"(T = {self.length})")
            return ir.LastPosition(expr.span, offset=offset)
        position = ir.PositionVariable(base.name, expr.span, offset=offset)
        if scope.conditions_known:
            self._check_offset(expr, position, scope)
        return position

    def _check_offset(self, expr: ast.Binary, position: ir.PositionVariable, scope: Scope) -> None:
        try:
            witness = offset_violation(scope.variables, scope.conditions, position, self.length)
        except TooManyLinkedPositions as error:
            raise self.fail(expr.span, f"the conditions around this offset link {error.count} position variables; "
                                       f"the checker decides ranges for fewer") from None
        if witness is not None:
            where = ", ".join(f"{k} = {v}" for k, v in witness.items())  # unique names, as range diagnostics
            value = witness[position.name] + position.offset
            text = self._source_name(position.name, scope) + ir.offset_text(position.offset)
            raise self.fail(expr.span, f"position {text} can be {value}, outside 1..T; restrict it with a condition "
                                       f"(T = {self.length}, {where})")

    @staticmethod
    def _source_name(unique: str, scope: Scope) -> str:
        return next((source for source, u in scope.bindings if u == unique), unique)

    def _type_Index(self, expr: ast.Index, scope: Scope) -> ir.Expr:
        base = self.type_of(expr.base, scope)
        if base.type.kind != "vector":
            raise self.fail(expr.span, f"indexing needs a vector, got a {base.type}")
        size = base.type.shape[0]
        index = int(expr.index.text) if expr.index.is_whole else 0
        if not 1 <= index <= size:
            raise self.fail(expr.index.span, f"component index {expr.index.text} is outside 1..{size}")
        return ir.Component(base, index, expr.span)

    def _type_InnerProduct(self, expr: ast.InnerProduct, scope: Scope) -> ir.Expr:
        left, right = self._each(lambda: self.type_of(expr.left, scope), lambda: self.type_of(expr.right, scope))
        if left.type.kind != "vector" or left.type != right.type:
            raise self.fail(expr.span, f"the inner product needs two vectors of equal length, "
                                       f"got a {left.type} and a {right.type}")
        return ir.Inner(left, right, expr.span)

    def _type_Norm(self, expr: ast.Norm, scope: Scope) -> ir.Expr:
        argument = self.type_of(expr.argument, scope)
        if argument.type.kind != "vector":
            raise self.fail(expr.span, f"||·|| needs a vector, got a {argument.type} (for a scalar write |a|)")
        return ir.Norm(argument, expr.span)

    def _type_Abs(self, expr: ast.Abs, scope: Scope) -> ir.Expr:
        argument = self.type_of(expr.argument, scope)
        self._require_number(argument, expr.argument)
        if argument.type.kind != "scalar":
            raise self.fail(expr.span, f"|·| needs a scalar, got a {argument.type} (for a vector write ||v||)")
        return ir.Pointwise("abs", (argument,), expr.span)

    def _type_Negate(self, expr: ast.Negate, scope: Scope) -> ir.Expr:
        argument = self.type_of(expr.argument, scope)
        self._require_number(argument, expr.argument)
        return ir.Negate(argument, argument.type, expr.span)

    def _type_Power(self, expr: ast.Power, scope: Scope) -> ir.Expr:
        if expr.exponent.value != 2:
            raise self.fail(expr.exponent.span, f"the only exponent is the literal 2, not {expr.exponent.text}")
        base = self.type_of(expr.base, scope)
        self._require_number(base, expr.base)
        if base.type.kind != "scalar":
            raise self.fail(expr.span, f"^2 squares a scalar, got a {base.type} (for a vector write ||v||^2)")
        return ir.Square(base, expr.span)

    def _type_Binary(self, expr: ast.Binary, scope: Scope) -> ir.Expr:
        if expr.operator == "/":
            return self._divide(expr, scope)
        left, right = self._each(lambda: self.type_of(expr.left, scope), lambda: self.type_of(expr.right, scope))
        if expr.operator == "@":
            return self._matvec(expr, left, right)
        self._require_number(left, expr.left)
        self._require_number(right, expr.right)
        if expr.operator == "*":
            if left.type.kind == "vector" and right.type.kind == "vector":
                raise self.fail(expr.span, "'*' multiplies by a scalar; for two vectors write <a, b>")
            result = left.type if left.type.kind == "vector" else right.type
            return ir.Arithmetic("*", left, right, result, expr.span)
        if left.type != right.type:
            raise self.fail(expr.span, f"'{expr.operator}' needs operands of the same type, "
                                       f"got a {left.type} and a {right.type}")
        return ir.Arithmetic(expr.operator, left, right, left.type, expr.span)  # type: ignore[arg-type]

    def _divide(self, expr: ast.Binary, scope: Scope) -> ir.Expr:
        def numerator_of() -> ir.Expr:
            typed = self.type_of(expr.left, scope)
            self._require_number(typed, expr.left)
            return typed

        numerator, divisor = self._each(numerator_of, lambda: self._constant_value(expr.right, scope))
        if divisor == 0:
            raise self.fail(expr.right.span, "division by zero")
        return ir.Divide(numerator, divisor, numerator.type, expr.span)

    def _constant_value(self, expr: ast.Expr, scope: Scope) -> float:
        """The value of a scalar expression made of literals and constants; else an error."""
        typed = self.type_of(expr, scope)
        value = _fold(typed)
        if value is None:
            raise self.fail(expr.span, "division is only by a constant (a number or a scalar const)")
        return value

    def _matvec(self, expr: ast.Binary, left: ir.Expr, right: ir.Expr) -> ir.Expr:
        if not isinstance(left, ir.Constant) or left.type.kind != "matrix":
            raise self.fail(expr.left.span, f"the left side of '@' must be a constant matrix, got a {left.type}")
        rows, columns = left.type.shape
        if right.type != ir.vector(columns):
            raise self.fail(expr.span, f"'{left.name}' is a {left.type} and needs a vector[{columns}], "
                                       f"got a {right.type}")
        return ir.MatVec(left, right, ir.vector(rows), expr.span)

    def _type_Reduction(self, expr: ast.Reduction, scope: Scope) -> ir.Expr:
        inner_scope, names = scope.bind(self._binders(expr))
        failed = False
        try:
            conditions = tuple(self._each(*(lambda c=c: self._condition(c, inner_scope) for c in expr.conditions)))
        except _Failed:
            conditions, failed = (), True
        try:
            body = self.type_of(expr.body, inner_scope.constrained(conditions, known=not failed))
        except _Failed:
            failed = True
        if failed:
            raise _Failed()
        self._require_number(body, expr.body)
        self._check_range(expr, names, conditions, scope.conditions)
        if expr.kind in ("argmin", "argmax"):
            if len(names) != 1:
                raise self.fail(expr.span, f"{expr.kind} binds exactly one position variable, got {len(names)}")
            self._require_scalar_body(expr, body)
            return ir.ArgPosition(expr.kind, names[0], conditions, body, expr.span)
        if expr.kind in ("min", "max", "top"):
            self._require_scalar_body(expr, body)
        return ir.Reduce(expr.kind, names, conditions, body, body.type, expr.rank, expr.span)  # type: ignore[arg-type]

    def _require_scalar_body(self, expr: ast.Reduction, body: ir.Expr) -> None:
        if body.type.kind != "scalar":
            raise self.fail(expr.body.span, f"the body of {expr.kind} must be a scalar, got a {body.type}")

    def _binders(self, expr: ast.Reduction) -> tuple[str, ...]:
        """The binders' names (an inner binder may shadow an outer one of the same name)."""
        names: list[str] = []
        for binder in expr.binders:
            clash = None
            if binder.name in names:
                clash = f"position variable '{binder.name}' is bound twice in the same reduction"
            elif binder.name in self.defined_at or binder.name in RESERVED:
                clash = f"'{binder.name}' is already a name in the program; choose another position variable"
            elif binder.name == self.token_variable:
                clash = (f"'{binder.name}' is the per-token target's position variable; a reduction inside "
                         f"the target cannot rebind it (choose another name)")
            if clash:
                raise self.fail(binder.span, clash)
            names.append(binder.name)
        return tuple(names)

    def _condition(self, condition: ast.Condition, scope: Scope) -> ir.PositionCondition:
        left, right = (self._position_term(t, scope) for t in (condition.left, condition.right))
        return ir.PositionCondition(left, condition.operator, right, condition.span)

    def _position_term(self, term: ast.PositionTermSyntax, scope: Scope) -> ir.PositionTerm:
        if isinstance(term, ast.PositionOffset):
            base = self._position_term(term.base, scope)
            if isinstance(base, ir.LastPosition):
                return ir.LastPosition(term.span, offset=term.delta)
            if isinstance(base, ir.PositionVariable):
                return ir.PositionVariable(base.name, term.span, offset=term.delta)
            raise self.fail(term.span, "a condition's offset applies to a position variable or T")
        if isinstance(term, ast.Number):
            return ir.FixedPosition(int(term.text), term.span)
        if term.name == "T":
            return ir.LastPosition(term.span)
        if scope.lookup(term.name) is not None:
            return ir.PositionVariable(scope.lookup(term.name), term.span)  # type: ignore[arg-type]
        if term.name == _POISON:
            raise self.fail(term.span, "a condition compares positions; the macro argument used here is not "
                                       "a position variable, a literal or T")
        raise self.fail(term.span, f"a condition compares positions; '{term.name}' is not a bound position variable")

    def _check_range(
        self, expr: ast.Reduction, names: tuple[str, ...], conditions: Sequence[ir.PositionCondition],
        enclosing: Sequence[ir.PositionCondition] = (),
    ) -> None:
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


# ----------------------------------------------------------------------------- helpers


def nesting_depth(expr: ast.Expr) -> int:
    """How many AST nodes deep ``expr`` nests (a leaf is 1); iterative, for any depth."""
    deepest = 0
    stack = [(expr, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.children(node))
    return deepest


def _space_type(space: ast.Space) -> ir.ValueType:
    if isinstance(space, ast.ScalarSpace):
        return ir.SCALAR
    if isinstance(space, ast.VectorSpace):
        return ir.vector(space.size)
    return ir.matrix(space.rows, space.columns)


def _literal_entries(value: ast.ConstValue) -> tuple[tuple[float, ...], ir.ValueType] | None:
    if isinstance(value, ast.ScalarLiteral):
        return (value.value.value,), ir.SCALAR
    if isinstance(value, ast.VectorLiteral):
        return tuple(e.value for e in value.entries), ir.vector(len(value.entries))
    assert isinstance(value, ast.MatrixLiteral)
    widths = {len(row.entries) for row in value.rows}
    if len(widths) != 1:
        return None
    entries = tuple(e.value for row in value.rows for e in row.entries)
    return entries, ir.matrix(len(value.rows), widths.pop())


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


def _map_children(node: Any, function: Any) -> Any:
    """A copy of ``node`` with ``function`` applied to each AST child (expressions only)."""
    changes = {}
    for name in node.__dataclass_fields__:
        value = getattr(node, name)
        if isinstance(value, tuple):
            changes[name] = tuple(function(v) if _is_expr(v) else v for v in value)
        elif _is_expr(value):
            changes[name] = function(value)
    return dataclasses.replace(node, **changes) if changes else node


def _is_expr(value: Any) -> bool:
    return isinstance(value, ast.Expr.__args__)  # type: ignore[attr-defined]


def _substitute(expr: ast.Expr, substitution: dict[str, ast.Expr]) -> ast.Expr:
    """``expr`` with every parameter name replaced by its argument (conditions included)."""
    if isinstance(expr, ast.Name) and expr.name in substitution:
        return substitution[expr.name]
    if isinstance(expr, ast.Reduction):
        conditions = tuple(_substitute_condition(c, substitution) for c in expr.conditions)
        expr = dataclasses.replace(expr, conditions=conditions)
    return _map_children(expr, lambda child: _substitute(child, substitution))


def _substitute_condition(condition: ast.Condition, substitution: dict[str, ast.Expr]) -> ast.Condition:
    def term(value: ast.PositionTermSyntax) -> ast.PositionTermSyntax:
        if isinstance(value, ast.PositionOffset):
            base = term(value.base)
            if isinstance(base, ast.Name):
                return dataclasses.replace(value, base=base)
            return ast.Name(_POISON, value.span)
        replacement = substitution.get(value.name) if isinstance(value, ast.Name) else None
        if isinstance(replacement, ast.Name | ast.Number):
            return replacement
        if replacement is not None:
            return ast.Name(_POISON, value.span)
        return value

    return dataclasses.replace(condition, left=term(condition.left), right=term(condition.right))


def check(
    program: ast.SourceProgram, path: str = "<string>", source: str = "",
    length: int | None = None, margin: float | None = None,
) -> ir.Program:
    """Check ``program``; ``length``/``margin`` override its declarations. Raises ProgramError."""
    checker = Checker(path, source, length, margin)
    result = checker.check_program(program)
    if checker.errors or result is None:
        raise ProgramError(checker.errors, source)
    return result
