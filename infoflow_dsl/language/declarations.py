"""Declarations: the input, the length, the margin, the constants and the names a program defines.

``declare`` checks every declaration (tables: :mod:`.tables`) but their expressions (the target's, which ``check``
types, and the macros' bodies, typed where they are inlined) and collects what the typing
needs: the input's name, dimension and domain, T, the margin δ, the constants' values and the
macros. The ``length``/``margin`` given on the command line replace the declared ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import syntax as ast
from . import typed as ir
from .functions import CALLABLE
from .randomness import randn
from .tables import check_table

#: The largest sequence length accepted (position ranges are counted over 1..T with arrays).
MAX_LENGTH = 1_000_000
#: The most entries a randn(seed) constant may have (the generator is plain Python).
MAX_RANDN_ENTRIES = 1_000_000

#: The built-in pointwise functions and their numbers of arguments.
#: Names no declaration or binder may take.
RESERVED = {"T", *CALLABLE, "randn", "ball", "in", "and", "R", "len", "or", "not", "token"}

#: Where a fault that belongs to no line is reported (a missing declaration, a bad override).
FILE_START = ast.Span(1, 1, 1, 2)


@dataclass(frozen=True)
class Declarations:
    """What a program's declarations say, checked.

    ``defined`` maps every declared name (input, constants, macros) to its declaration's span,
    also for a constant that failed its check; ``binder_names`` are the names bound as position
    variables anywhere in the program (a per-token target's included). ``domain`` is None
    when the input failed its check; ``length`` is 1 when T did.
    """

    input_name: str = "x"
    dimension: int = 1
    domain: ir.Box | ir.Ball | None = None
    length: int = 1
    margin: float | None = None
    constants: Mapping[str, ir.Constant] = field(default_factory=dict)
    macros: Mapping[str, ast.LetDecl] = field(default_factory=dict)
    tables: Mapping[str, ir.Table] = field(default_factory=dict)
    defined: Mapping[str, ast.Span] = field(default_factory=dict)
    binder_names: frozenset[str] = frozenset()
    target: ast.TargetDecl | None = None
    vocabulary: ir.Vocabulary | None = None


def declare(program: ast.SourceProgram, error: ast.Report, length: int | None, margin: float | None) -> Declarations:
    """The checked declarations of ``program``; every fault goes to ``error``, in source order
    within each kind (exactly one input and target, at most one length and margin, then the
    input, T, δ, and the constants and macros)."""
    by_kind: dict[type, list[Any]] = {}
    for declaration in program.declarations:
        by_kind.setdefault(type(declaration), []).append(declaration)
    inputs = _exactly_one(by_kind.get(ast.InputDecl, []), "input", "input x : R^d", error)
    target = _exactly_one(by_kind.get(ast.TargetDecl, []), "target", "target EXPR", error)
    lengths = _at_most_one(by_kind.get(ast.LengthDecl, []), "length", error)
    margins = _at_most_one(by_kind.get(ast.MarginDecl, []), "margin", error)
    names = _Names(error)
    input_name, dimension, domain = _input(inputs, names, error) if inputs else ("x", 1, None)
    vocabulary = None
    if inputs and isinstance(inputs.space, ast.TokenSpace):
        vocabulary = vocabulary_of(inputs.space, error)
        domain = None if vocabulary is None else token_domain(vocabulary)
    constants: dict[str, ir.Constant] = {}
    macros: dict[str, ast.LetDecl] = {}
    tables: dict[str, ir.Table] = {}
    checked_length = _length(lengths, length, error)
    checked_margin = _margin(margins, margin, error)
    for declaration in program.declarations:
        if isinstance(declaration, ast.ConstDecl) and names.define(declaration.name, declaration.span):
            constant = _constant(declaration, error)
            if constant is not None:
                constants[declaration.name] = constant
        elif isinstance(declaration, ast.LetDecl) and names.define(declaration.name, declaration.span):
            macros[declaration.name] = declaration
        elif isinstance(declaration, ast.TableDecl) and names.define(declaration.name, declaration.span):
            table = check_table(declaration, vocabulary, error)
            if table is not None:
                tables[declaration.name] = table
    return Declarations(
        input_name=input_name, dimension=dimension, domain=domain, length=checked_length, margin=checked_margin,
        constants=constants, macros=macros, tables=tables, defined=names.defined, binder_names=_binder_names(program),
        target=target, vocabulary=vocabulary,
    )


class _Names:
    """The names declared so far, each with its declaration's span."""

    def __init__(self, error: ast.Report) -> None:
        self.error = error
        self.defined: dict[str, ast.Span] = {}

    def define(self, name: str, span: ast.Span) -> bool:
        """Declare ``name``; False (diagnosed) when it is reserved or already declared."""
        if name in RESERVED:
            self.error(span, f"'{name}' is reserved and cannot be defined")
            return False
        if name in self.defined:
            self.error(span, f"'{name}' is already defined at line {self.defined[name].line}")
            return False
        self.defined[name] = span
        return True


def _exactly_one(found: list[Any], what: str, form: str, error: ast.Report) -> Any:
    if not found:
        error(FILE_START, f"the program has no {what} declaration ({form})")
        return None
    return _at_most_one(found, what, error)


def _at_most_one(found: list[Any], what: str, error: ast.Report) -> Any:
    for extra in found[1:]:
        error(extra.span, f"a second {what} declaration (the first is at line {found[0].span.line})")
    return found[0] if found else None


def _binder_names(program: ast.SourceProgram) -> frozenset[str]:
    names: set[str] = set()
    for declaration in program.declarations:
        for expression in (getattr(declaration, "expression", None), getattr(declaration, "body", None)):
            if expression is not None:
                names |= {n.name for n in ast.walk(expression) if isinstance(n, ast.Binder)}
        if isinstance(declaration, ast.TargetDecl) and declaration.variable is not None:
            names.add(declaration.variable.name)
    return frozenset(names)


def _input(declaration: ast.InputDecl, names: _Names, error: ast.Report) -> tuple[str, int, ir.Box | ir.Ball | None]:
    """The input's name, dimension d (1 when it fails) and domain (default [-1, 1])."""
    names.define(declaration.name, declaration.span)
    space = declaration.space
    if isinstance(space, ast.TokenSpace):
        if declaration.domain is not None:
            error(declaration.domain.span, "a token input has no domain: its tokens are the vocabulary's")
        return declaration.name, 1, ir.Box(0.0, 0.0)  # replaced by the vocabulary's range in ``declare``
    if not isinstance(space, ast.VectorSpace):
        error(space.span, "the input's tokens are vectors: write R^d")
        return declaration.name, 1, None
    if space.size < 1:
        error(space.span, f"the token dimension d must be at least 1, not {space.size}")
        return declaration.name, 1, None
    return declaration.name, space.size, _domain(declaration.domain, error)


def vocabulary_of(space: ast.TokenSpace, error: ast.Report) -> ir.Vocabulary | None:
    """The vocabulary of ``token {...}``: at least one entry, all quoted names or all numbers,
    no entry twice (numbers by value: 1 and 1.0 are one token); None when it fails."""
    if not space.entries:
        error(space.span, 'the vocabulary is empty: list its tokens, e.g. token {"a", "b"} or token {1, 2, 3}')
        return None
    quoted = [isinstance(e, ast.String) for e in space.entries]
    if any(quoted) and not all(quoted):
        odd = space.entries[quoted.index(not quoted[0])]
        error(odd.span, "a vocabulary is all quoted names (categorical) or all numbers (numeric), not both")
        return None
    keys = [e.text if isinstance(e, ast.String) else e.value for e in space.entries]
    failed = False
    for index, key in enumerate(keys):
        if key in keys[:index]:
            first = space.entries[keys.index(key)]
            written = f'"{first.text}"' if quoted[0] else first.text
            error(space.entries[index].span,
                  f"token {written} is already in the vocabulary (column {first.span.column})")
            failed = True
    if failed:
        return None
    names = tuple(e.text for e in space.entries)
    return ir.Vocabulary(names, None if quoted[0] else tuple(float(k) for k in keys))


def token_domain(vocabulary: ir.Vocabulary) -> ir.Box:
    """The range of a token's value: its numbers (numeric), its ids 0..V−1 (categorical)."""
    values = vocabulary.values if vocabulary.values is not None else (0.0, float(vocabulary.size - 1))
    return ir.Box(min(values), max(values))


def _domain(domain: ast.Domain | None, error: ast.Report) -> ir.Box | ir.Ball | None:
    if domain is None:
        return ir.Box(-1.0, 1.0)
    if isinstance(domain, ast.BallDomain):
        if domain.radius.value <= 0:
            error(domain.span, f"the domain ball({domain.radius.text}) is empty: the radius must be > 0")
            return None
        return ir.Ball(domain.radius.value)
    if domain.low.value > domain.high.value:
        error(domain.span, f"the domain [{domain.low.text}, {domain.high.text}] is empty: a > b")
        return None
    return ir.Box(domain.low.value, domain.high.value)


def _length(declaration: ast.LengthDecl | None, override: int | None, error: ast.Report) -> int:
    """T: the override when given (``check`` has validated it), else the declared one (1 when it fails)."""
    if declaration is not None and declaration.name != "T":
        error(declaration.span, f"the length is written 'length T = N', not '{declaration.name}'")
    if override is not None:
        return override
    if declaration is None:
        error(FILE_START, "the program has no length declaration (length T = N)")
    elif declaration.value < 1:
        error(declaration.span, f"T must be at least 1, not {declaration.value}")
    elif declaration.value > MAX_LENGTH:
        error(declaration.span, f"T = {declaration.value} is too large (at most {MAX_LENGTH})")
    else:
        return declaration.value
    return 1


def _margin(declaration: ast.MarginDecl | None, override: float | None, error: ast.Report) -> float | None:
    """δ: the override when given, else the declared one; None without either."""
    if override is not None:
        return override
    if declaration is None:
        return None
    value = declaration.value.value
    if value <= 0:
        error(declaration.span, f"the margin must be > 0, not {value:g}")
    return value


def _constant(declaration: ast.ConstDecl, error: ast.Report) -> ir.Constant | None:
    """The constant's entries (row-major) and type; its value must have the declared space's shape."""
    value = declaration.value
    if isinstance(declaration.space, ast.TokenSpace):
        error(declaration.space.span, "a vocabulary token {...} is an input's space; a constant's is R, R^n or "
                                      "R^{m x n}")
        return None
    declared = None if declaration.space is None else space_type(declaration.space)
    if isinstance(value, ast.RandnLiteral):
        if declared is None or declared.kind == "scalar":
            error(value.span, "randn(seed) needs a declared vector or matrix space, e.g. R^{2 x 4}")
            return None
        if 0 in declared.shape:
            error(value.span, "a constant needs at least one entry")
            return None
        if math.prod(declared.shape) > MAX_RANDN_ENTRIES:
            error(value.span, f"randn(seed) fills at most {MAX_RANDN_ENTRIES} entries; "
                              f"'{declaration.name}' is a {declared}")
            return None
        entries, actual = randn(value.seed, declared.shape), declared
    else:
        shaped = literal_entries(value)
        if shaped is None:
            error(value.span, "the rows of a matrix literal must all have the same length")
            return None
        entries, actual = shaped
    if declared is not None and declared != actual:
        error(value.span, f"the value of '{declaration.name}' is a {actual}, but its space says {declared}")
        return None
    if 0 in actual.shape:
        error(value.span, "a constant needs at least one entry")
        return None
    return ir.Constant(declaration.name, entries, actual, declaration.span)


def space_type(space: ast.Space) -> ir.ValueType:
    """The type of a declared space: R, R^n, R^{m x n}."""
    if isinstance(space, ast.ScalarSpace):
        return ir.SCALAR
    if isinstance(space, ast.VectorSpace):
        return ir.vector(space.size)
    if isinstance(space, ast.MatrixSpace):
        return ir.matrix(space.rows, space.columns)
    raise TypeError(f"a token space declares an input, not a value type: {space!r}")


def literal_entries(value: ast.ConstValue) -> tuple[tuple[float, ...], ir.ValueType] | None:
    """A literal's entries (row-major) and type; None for a matrix with rows of unequal lengths."""
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
