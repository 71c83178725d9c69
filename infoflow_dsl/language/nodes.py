"""The checked program: a typed expression tree with macros inlined and names resolved.

This is what ``check`` hands to every later stage (the reference evaluator, the comparison
tree, the schedule). Each node's ``type`` is one of scalar, vector[n], matrix[m, n],
position, token (a token of a categorical vocabulary) or boolean (a bracket's condition).
Spans point back at the source text and are left out of equality.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args

from .exact import decimal
from .syntax import NO_SPAN, Span

if TYPE_CHECKING:
    from .lookup_table import Table


NodeClass = TypeVar("NodeClass", bound=type)


def remembering(cls: NodeClass) -> NodeClass:
    """A frozen dataclass (decorated below this) that computes its hash once: the compiler keys
    its caches by whole expression trees, and a dataclass's hash walks the tree each time. What
    a node remembers never leaves the process (``__getstate__`` drops it: a string's hash
    differs in the next)."""
    field_hash: Callable[[Any], int] = vars(cls)["__hash__"]

    def cached_hash(self: Any) -> int:
        try:
            return int(self.__dict__["_hash"])
        except KeyError:
            value = field_hash(self)
            object.__setattr__(self, "_hash", value)
            return value

    def state_without_hash(self: Any) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if name not in REMEMBERED}

    cls.__hash__ = cached_hash  # type: ignore[assignment,method-assign]
    cls.__getstate__ = state_without_hash  # type: ignore[attr-defined]
    cls.typed_node = True  # type: ignore[attr-defined]
    return cls


#: what a typed node remembers of itself (never pickled): its hash, its free variables
REMEMBERED = ("_hash", "_free")


def _span_field() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class ValueType:
    """scalar (shape ()), vector (shape (n,)), matrix (shape (m, n)) or position (shape ())."""

    kind: Literal["scalar", "vector", "matrix", "position", "token", "boolean"]
    shape: tuple[int, ...] = ()

    def __str__(self) -> str:
        if self.kind == "vector":
            return f"vector[{self.shape[0]}]"
        if self.kind == "matrix":
            return f"matrix[{self.shape[0]},{self.shape[1]}]"
        return self.kind


SCALAR = ValueType("scalar")
POSITION = ValueType("position")
TOKEN = ValueType("token")  # a token of a categorical vocabulary: compared with == and != only
BOOLEAN = ValueType("boolean")  # a bracket's condition: true or false, never a number


def vector(size: int) -> ValueType:
    return ValueType("vector", (size,))


def matrix(rows: int, columns: int) -> ValueType:
    return ValueType("matrix", (rows, columns))


# ----------------------------------------------------------------------------- positions


@remembering
@dataclass(frozen=True)
class PositionVariable:
    """A position bound by an enclosing reduction (or a per-token target), plus ``offset``:
    ``x(t - 1)`` reads PositionVariable("t", offset=-1)."""

    name: str
    span: Span = _span_field()
    type: ValueType = POSITION
    offset: int = 0

    @property
    def base(self) -> PositionVariable:
        """The variable itself, without its offset."""
        return PositionVariable(self.name, self.span) if self.offset else self


@remembering
@dataclass(frozen=True)
class FixedPosition:
    """A literal position k (1-based)."""

    index: int
    span: Span = _span_field()
    type: ValueType = POSITION


@remembering
@dataclass(frozen=True)
class LastPosition:
    """``T``: the last input position (whatever T the model is built for), plus ``offset``
    (``T - 1`` is LastPosition(offset=-1))."""

    span: Span = _span_field()
    type: ValueType = POSITION
    offset: int = 0


@remembering
@dataclass(frozen=True)
class RunLength:
    """``len`` plus ``offset``: the number of input tokens at run time (1..T) as a position;
    ``x(len)`` is the last token. Only in programs over a token vocabulary."""

    span: Span = _span_field()
    type: ValueType = POSITION
    offset: int = 0


PositionTerm = Union[PositionVariable, FixedPosition, LastPosition, RunLength]
ComparisonOperator = Literal["!=", "<", "<=", ">", ">=", "=="]


@remembering
@dataclass(frozen=True)
class PositionCondition:
    """``left op right`` restricting a reduction's range."""

    left: PositionTerm
    operator: ComparisonOperator
    right: PositionTerm
    span: Span = _span_field()


@remembering
@dataclass(frozen=True)
class ArgPosition:
    """``argmin_<v : conditions> body`` / ``argmax``: the position of the best score.

    Ties go to the smallest position.
    """

    kind: Literal["argmin", "argmax"]
    variable: str
    conditions: tuple[PositionCondition, ...]
    body: Expr
    span: Span = _span_field()
    type: ValueType = POSITION


@remembering
@dataclass(frozen=True)
class ReflectedPosition:
    """``len + offset − mirrored`` (``from_length``), or ``offset − mirrored``: a position read
    backwards, e.g. ``x(len + 1 − t)``, the mirror of t. ``mirrored`` is a position (a variable)."""

    mirrored: PositionTerm
    offset: int
    from_length: bool = True
    span: Span = _span_field()
    type: ValueType = POSITION


Position = Union[PositionVariable, FixedPosition, LastPosition, ArgPosition, RunLength, ReflectedPosition]


# ----------------------------------------------------------------------------- values


@remembering
@dataclass(frozen=True)
class NumberLiteral:
    """A numeric literal: ``value`` its float64, ``exact`` the rational it stands for (0.3 is 3/10,
    0.3333333333333333 is 1/3: :func:`.exact.decimal`) unless a stage that derived the value
    exactly gives it (a value of a finite set). Equality compares the exact value."""

    value: float
    span: Span = _span_field()
    type: ValueType = SCALAR
    exact: Fraction = None  # type: ignore[assignment]  # None: the rational ``value`` stands for

    def __post_init__(self) -> None:
        object.__setattr__(self, "exact", decimal(self.value) if self.exact is None else Fraction(self.exact))


@remembering
@dataclass(frozen=True)
class Constant:
    """A named constant; ``values`` is its entries in row-major order."""

    name: str
    values: tuple[float, ...]
    type: ValueType
    span: Span = _span_field()


@remembering
@dataclass(frozen=True)
class Token:
    """``x(position)``: the input token at a position (vector[d])."""

    position: Position
    type: ValueType
    span: Span = _span_field()


@remembering
@dataclass(frozen=True)
class Component:
    """``v[index]`` with a 1-based index."""

    vector: Expr
    index: int
    span: Span = _span_field()
    type: ValueType = SCALAR


@remembering
@dataclass(frozen=True)
class Inner:
    """``<a, b>``."""

    left: Expr
    right: Expr
    span: Span = _span_field()
    type: ValueType = SCALAR


@remembering
@dataclass(frozen=True)
class Norm:
    """``||a||``."""

    argument: Expr
    span: Span = _span_field()
    type: ValueType = SCALAR


@remembering
@dataclass(frozen=True)
class Square:
    """``a ^ 2`` for a scalar a."""

    argument: Expr
    span: Span = _span_field()
    type: ValueType = SCALAR


@remembering
@dataclass(frozen=True)
class Pointwise:
    """``relu(a)``, ``|a|``, ``min(a, b)``, ``max(a, b)`` on scalars.

    ``sqrt`` is not in the language: the comparisons stage introduces it when it rewrites
    ``min_<t> ||v||`` as ``sqrt(min_<t> ||v||^2)``.
    """

    function: Literal["relu", "abs", "min", "max", "sqrt"]
    arguments: tuple[Expr, ...]
    span: Span = _span_field()
    type: ValueType = SCALAR


@remembering
@dataclass(frozen=True)
class Arithmetic:
    """``a + b``, ``a - b`` (equal types) and ``a * b`` (a scalar times a scalar or a vector)."""

    operator: Literal["+", "-", "*"]
    left: Expr
    right: Expr
    type: ValueType
    span: Span = _span_field()


@remembering
@dataclass(frozen=True)
class Negate:
    argument: Expr
    type: ValueType
    span: Span = _span_field()


@remembering
@dataclass(frozen=True)
class Divide:
    """``a / c`` with c a nonzero constant (folded to ``divisor``)."""

    numerator: Expr
    divisor: float
    type: ValueType
    span: Span = _span_field()


@remembering
@dataclass(frozen=True)
class MatVec:
    """``A @ v`` with A a constant matrix."""

    matrix: Constant
    vector: Expr
    type: ValueType
    span: Span = _span_field()


@remembering
@dataclass(frozen=True)
class Reduce:
    """``kind_<variables : conditions> body`` over all tuples of positions in 1..T.

    ``kind`` is min, max, sum, mean or top (``rank`` = k: the k-th largest value).
    ``origin`` names the source construct when a later stage rewrote it (top(k) -> max/min).
    """

    kind: Literal["min", "max", "sum", "mean", "top"]
    variables: tuple[str, ...]
    conditions: tuple[PositionCondition, ...]
    body: Expr
    type: ValueType
    rank: int | None = None
    span: Span = _span_field()
    origin: str = field(default="", compare=False, repr=False)


@remembering
@dataclass(frozen=True)
class Presence:
    """1 where position ``index`` satisfies ``conditions`` relative to the token that reads it,
    0 elsewhere (the conditions compare FixedPosition(index) with that token's variable).

    Not in the language: compile's gather route (``unroll``) writes it to guard one unrolled
    slot of a reduction whose condition links the slot to the reading token (``t2 != t1``).
    """

    index: int
    conditions: tuple[PositionCondition, ...]
    span: Span = _span_field()
    type: ValueType = SCALAR


@remembering
@dataclass(frozen=True)
class TokenLiteral:
    """``"a"``: token ``index`` (0-based, in the vocabulary's order) of a categorical vocabulary."""

    index: int
    name: str
    span: Span = _span_field()
    type: ValueType = TOKEN


@remembering
@dataclass(frozen=True)
class PositionNumber:
    """A position used as a number: its 1-based value (``t - 1``, ``len + 1 - t``, ``T``)."""

    position: Position
    span: Span = _span_field()
    type: ValueType = SCALAR


#: a op b  ⇔  b FLIPPED[op] a
FLIPPED: dict[ComparisonOperator, ComparisonOperator] = {
    "<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!=",
}


@remembering
@dataclass(frozen=True)
class Compare:
    """``left op right`` of two scalars or two tokens of one vocabulary (a truth value)."""

    operator: ComparisonOperator
    left: Expr
    right: Expr
    span: Span = _span_field()
    type: ValueType = BOOLEAN


@remembering
@dataclass(frozen=True)
class Logical:
    """``left and right`` / ``left or right`` of two truth values."""

    operator: Literal["and", "or"]
    left: Expr
    right: Expr
    span: Span = _span_field()
    type: ValueType = BOOLEAN


@remembering
@dataclass(frozen=True)
class Not:
    """``not argument`` of a truth value."""

    argument: Expr
    span: Span = _span_field()
    type: ValueType = BOOLEAN


@remembering
@dataclass(frozen=True)
class Bracket:
    """The Iverson bracket ``[condition]``: 1 where the condition holds, else 0."""

    condition: Expr
    span: Span = _span_field()
    type: ValueType = SCALAR


@remembering
@dataclass(frozen=True)
class TableLookup:
    """``f(a)`` or ``g(a, b)``: a table (language v4, :class:`~.lookup_table.Table`) at its arguments'
    values, exact: a number."""

    table: Table
    arguments: tuple[Expr, ...]
    span: Span = _span_field()
    type: ValueType = SCALAR


Expr = Union[
    NumberLiteral, Constant, Token, Component, Inner, Norm, Square, Pointwise, Arithmetic, Negate, Divide,
    MatVec, Reduce, PositionVariable, FixedPosition, LastPosition, ArgPosition, Presence,
    RunLength, ReflectedPosition, TokenLiteral, PositionNumber, Compare, Logical, Not, Bracket, TableLookup,
]

#: The node classes of the typed IR, by role: positions (what ``x(...)`` and conditions read),
#: values, and the values only compile's gather route writes (the reference never sees them).
POSITION_NODES: tuple[type, ...] = (PositionVariable, FixedPosition, LastPosition, ArgPosition, RunLength,
                                    ReflectedPosition)
VALUE_NODES: tuple[type, ...] = tuple(node for node in get_args(Expr) if node not in POSITION_NODES)
COMPILE_ONLY_NODES: tuple[type, ...] = (Presence,)
#: The classes of language v3 (token vocabularies, brackets, positions as numbers) and v4 (tables), which the
#: lowering does not build yet: ``compile`` refuses a program that holds one, with the reason.
V3_NODES: tuple[type, ...] = (RunLength, ReflectedPosition, TokenLiteral, PositionNumber, Compare, Logical, Not,
                              Bracket, TableLookup)


# ----------------------------------------------------------------------------- traversal


def offset_text(offset: int) -> str:
    """`` - 1``, `` + 2`` or nothing: how an offset is written after its base."""
    return "" if offset == 0 else f" {'-' if offset < 0 else '+'} {abs(offset)}"


def position_label(position: object) -> str | None:
    """``t`` for a variable, ``3`` for a literal, ``T`` for the last position, ``t - 1`` /
    ``T - 1`` for offsets, ``len`` / ``len - 1`` for the run-time length, ``len + 1 - t`` for a
    reflected position; None otherwise."""
    if isinstance(position, PositionVariable):
        return position.name + offset_text(position.offset)
    if isinstance(position, FixedPosition):
        return str(position.index)
    if isinstance(position, LastPosition):
        return "T" + offset_text(position.offset)
    if isinstance(position, RunLength):
        return "len" + offset_text(position.offset)
    if isinstance(position, ReflectedPosition):
        mirrored = position_label(position.mirrored)
        if position.from_length:
            return f"len{offset_text(position.offset)} - {mirrored}"
        return f"{position.offset} - {mirrored}"
    return None
