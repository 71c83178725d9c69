"""The .iflow abstract syntax tree: what the parser produces, before any checking.

Every node is a frozen dataclass carrying the :class:`Span` of the source text it came
from. Spans are excluded from equality (``compare=False``), so two trees that say the same
thing compare equal whatever their layout: ``parse(print(ast)) == ast`` is the round-trip law
the printer is tested against.

Numbers keep their literal text (``Number.text``), so printing is exact and the checker can
tell ``2`` from ``2.0`` where only a whole number is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Union


@dataclass(frozen=True)
class Span:
    """A source region: 1-based line and column of its first and one-past-last character."""

    line: int
    column: int
    end_line: int
    end_column: int


NO_SPAN = Span(0, 0, 0, 0)

#: How a checking pass reports a fault: the span of the offending text and the message.
Report = Callable[[Span, str], None]


def text_at(source: str, span: Span) -> str:
    """The source text a span covers, its runs of white space (line breaks too) folded to one
    space; empty for :data:`NO_SPAN` or a span outside ``source``."""
    lines = source.split("\n")  # lines as the lexer counts them
    if span == NO_SPAN or not 1 <= span.line <= span.end_line <= len(lines):
        return ""
    if span.line == span.end_line:
        text = lines[span.line - 1][span.column - 1:span.end_column - 1]
    else:
        text = "\n".join([lines[span.line - 1][span.column - 1:], *lines[span.line:span.end_line - 1],
                          lines[span.end_line - 1][:span.end_column - 1]])
    return " ".join(text.split())


def _span_field() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False)


# ----------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Number:
    """A numeric literal, e.g. ``3``, ``0.5``, ``1e-3`` (never negative: see ``Negate``)."""

    text: str
    span: Span = _span_field()

    @property
    def value(self) -> float:
        return float(self.text)

    @property
    def is_whole(self) -> bool:
        return self.text.isdigit()


@dataclass(frozen=True)
class Name:
    """A bare name: a position variable, a constant, a macro parameter or ``T``."""

    name: str
    span: Span = _span_field()


@dataclass(frozen=True)
class Call:
    """``f(a, b, ...)``: the input ``x(pos)``, a built-in (relu, min, max) or a macro."""

    function: str
    arguments: tuple[Expr, ...]
    span: Span = _span_field()


@dataclass(frozen=True)
class Index:
    """``e[i]``: component ``i`` (1-based literal) of a vector."""

    base: Expr
    index: Number
    span: Span = _span_field()


@dataclass(frozen=True)
class InnerProduct:
    """``<a, b>``."""

    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclass(frozen=True)
class Norm:
    """``||a||``: the Euclidean norm."""

    argument: Expr
    span: Span = _span_field()


@dataclass(frozen=True)
class Abs:
    """``|a|``: absolute value of a scalar."""

    argument: Expr
    span: Span = _span_field()


BinaryOperator = Literal["+", "-", "*", "/", "@"]


@dataclass(frozen=True)
class Binary:
    """``a op b`` for op in + - * / @."""

    operator: BinaryOperator
    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclass(frozen=True)
class Negate:
    """``-a``."""

    argument: Expr
    span: Span = _span_field()


@dataclass(frozen=True)
class Power:
    """``a ^ n``; the checker accepts only the literal exponent 2."""

    base: Expr
    exponent: Number
    span: Span = _span_field()


ComparisonOperator = Literal["!=", "<", "<=", ">", ">=", "=="]


@dataclass(frozen=True)
class PositionOffset:
    """``t - 1``, ``s + 2``, ``T - 1`` in a condition: a position variable or ``T`` plus ``delta``
    (a nonzero whole number; ``amount`` keeps the literal's text for the printer).

    Inside ``x(...)`` the same text parses as an ordinary :class:`Binary`; the checker reads
    both as a position offset.
    """

    base: Name
    delta: int
    amount: Number
    span: Span = _span_field()


PositionTermSyntax = Union[Name, Number, PositionOffset]


@dataclass(frozen=True)
class Condition:
    """``left op right`` between position variables, literals, ``T`` and offsets of them."""

    left: PositionTermSyntax
    operator: ComparisonOperator
    right: PositionTermSyntax
    span: Span = _span_field()


@dataclass(frozen=True)
class Binder:
    """A position variable bound by a reduction."""

    name: str
    span: Span = _span_field()


ReductionKind = Literal["min", "max", "sum", "mean", "top", "argmin", "argmax"]


@dataclass(frozen=True)
class Reduction:
    """``kind_<v1, ..., vk : conditions> body``; ``rank`` is k of ``top(k)`` (else None)."""

    kind: ReductionKind
    binders: tuple[Binder, ...]
    conditions: tuple[Condition, ...]
    body: Expr
    rank: int | None = None
    span: Span = _span_field()


@dataclass(frozen=True)
class String:
    """A quoted token literal ``"a"`` of a categorical vocabulary; ``text`` is without the quotes."""

    text: str
    span: Span = _span_field()


@dataclass(frozen=True)
class Compare:
    """``left op right`` inside an Iverson bracket: scalars, tokens, token literals or positions."""

    operator: ComparisonOperator
    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclass(frozen=True)
class Logical:
    """``left and right``, ``left or right`` between conditions of a bracket."""

    operator: Literal["and", "or"]
    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclass(frozen=True)
class Not:
    """``not condition``."""

    argument: Expr
    span: Span = _span_field()


@dataclass(frozen=True)
class Bracket:
    """The Iverson bracket ``[condition]``: 1 where the condition holds, else 0."""

    condition: Expr
    span: Span = _span_field()


Expr = Union[
    Number, Name, Call, Index, InnerProduct, Norm, Abs, Binary, Negate, Power, Reduction,
    String, Bracket, Compare, Logical, Not,
]

#: The AST classes of a bracket's condition (typed to a truth value, never to a number).
PREDICATES: tuple[type, ...] = (Compare, Logical, Not)


# ----------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class SignedNumber:
    """A literal in a declaration, sign included (``-1``, ``0.5``)."""

    text: str
    span: Span = _span_field()

    @property
    def value(self) -> float:
        return float(self.text)


@dataclass(frozen=True)
class ScalarSpace:
    """``R``."""

    span: Span = _span_field()


@dataclass(frozen=True)
class VectorSpace:
    """``R^n``."""

    size: int
    span: Span = _span_field()


@dataclass(frozen=True)
class MatrixSpace:
    """``R^{m x n}``."""

    rows: int
    columns: int
    span: Span = _span_field()


@dataclass(frozen=True)
class TokenSpace:
    """``token {"a", "b"}`` (categorical) or ``token {1, 2, 3}`` (numeric): the vocabulary, in
    its declared order (token ids 0..V−1 follow it)."""

    entries: tuple[String | SignedNumber, ...]
    span: Span = _span_field()


Space = Union[ScalarSpace, VectorSpace, MatrixSpace, TokenSpace]


@dataclass(frozen=True)
class BoxDomain:
    """``in [low, high]``: every coordinate of every token lies in [low, high]."""

    low: SignedNumber
    high: SignedNumber
    span: Span = _span_field()


@dataclass(frozen=True)
class BallDomain:
    """``in ball(r)``: every token has Euclidean norm at most r."""

    radius: SignedNumber
    span: Span = _span_field()


Domain = Union[BoxDomain, BallDomain]


@dataclass(frozen=True)
class ScalarLiteral:
    value: SignedNumber
    span: Span = _span_field()


@dataclass(frozen=True)
class VectorLiteral:
    entries: tuple[SignedNumber, ...]
    span: Span = _span_field()


@dataclass(frozen=True)
class MatrixLiteral:
    rows: tuple[VectorLiteral, ...]
    span: Span = _span_field()


@dataclass(frozen=True)
class RandnLiteral:
    """``randn(seed)``: i.i.d. N(0, 1/n) entries from the generator in ``randomness``."""

    seed: int
    span: Span = _span_field()


ConstValue = Union[ScalarLiteral, VectorLiteral, MatrixLiteral, RandnLiteral]


@dataclass(frozen=True)
class InputDecl:
    name: str
    space: Space
    domain: Domain | None
    span: Span = _span_field()


@dataclass(frozen=True)
class LengthDecl:
    name: str
    value: int
    span: Span = _span_field()


@dataclass(frozen=True)
class ConstDecl:
    name: str
    space: Space | None
    value: ConstValue
    span: Span = _span_field()


@dataclass(frozen=True)
class LetDecl:
    """``let f(a, b) = body``; ``parameters`` is None for ``let c = body`` (no parentheses)."""

    name: str
    parameters: tuple[str, ...] | None
    body: Expr
    span: Span = _span_field()


#: A key or value of a table as written: a quoted name, a number, or ``true``/``false``/``_`` (a Name).
TableAtom = Union[String, SignedNumber, Name]


@dataclass(frozen=True)
class TableEntry:
    """``key: value`` or ``(key1, key2): value`` in a table; ``keys`` is () for the default ``_: value``."""

    keys: tuple[TableAtom, ...]
    value: TableAtom
    span: Span = _span_field()


@dataclass(frozen=True)
class TableDecl:
    """``table f = {k1: v1, (k1, j1): v, _: v0}`` (language v4): a finite function of one or two values."""

    name: str
    entries: tuple[TableEntry, ...]
    span: Span = _span_field()


@dataclass(frozen=True)
class MarginDecl:
    value: SignedNumber
    span: Span = _span_field()


@dataclass(frozen=True)
class TargetDecl:
    """``target expr`` (one value per sequence), or a per-token target ``target(t : cond) = expr``.

    ``variable`` is the per-token target's position variable (None for a sequence target)
    and ``conditions`` restrict the positions where it is defined.
    """

    expression: Expr
    span: Span = _span_field()
    variable: Binder | None = None
    conditions: tuple[Condition, ...] = ()

    @property
    def per_token(self) -> bool:
        return self.variable is not None


Declaration = Union[InputDecl, LengthDecl, ConstDecl, LetDecl, MarginDecl, TargetDecl, TableDecl]


@dataclass(frozen=True)
class SourceProgram:
    """A parsed file: its declarations in source order."""

    declarations: tuple[Declaration, ...]


# ----------------------------------------------------------------------------- traversal


def children(node: object) -> list[object]:
    """The direct AST sub-nodes of ``node`` (fields that are nodes, and nodes inside tuples)."""
    out: list[object] = []
    for name in getattr(node, "__dataclass_fields__", {}):
        if name == "span":
            continue
        value = getattr(node, name)
        items = value if isinstance(value, tuple) else (value,)
        out.extend(item for item in items if hasattr(item, "__dataclass_fields__") and not isinstance(item, Span))
    return out


def walk(node: object):
    """``node`` and every AST node below it, parents first."""
    yield node
    for child in children(node):
        yield from walk(child)
