"""RASP's expressions, with Tracr's API (``tracr.rasp.rasp``), written from its documented semantics.

A RASP program is a graph of expressions over an input sequence xs:

- **SOps** (sequences of values, one per position): ``tokens`` (xs itself), ``indices``
  (0, 1, ..., n−1), ``length`` (n at every position), ``Map(f, sop)`` (f at each position),
  ``SequenceMap(f, a, b)`` (f(a_i, b_i)), ``LinearSequenceMap(a, b, ca, cb)`` (ca·a_i + cb·b_i),
  ``Full(v)`` (v everywhere), ``ConstantSOp(values)``, ``Aggregate(selector, sop, default)``
  (at each query position the mean of the selected values, the value itself when one is
  selected, ``default`` when none), ``SelectorWidth(selector)`` (how many keys are selected);
- **selectors** (n × n boolean matrices, row q the query, column k the key):
  ``Select(keys, queries, predicate)`` (predicate(key_k, query_q): a :class:`Comparison` or any
  function of two values), ``ConstantSelector(matrix)``, and ``&``, ``|``, ``~`` of selectors.

The operators on SOps build Maps (with a constant) or SequenceMaps (with another SOp), as
Tracr's do: ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``+``, ``-``, ``*``, ``/`` (and their
reflected forms), ``~`` (not), ``&`` (and), ``|`` (or). ``Map(f, Map(g, x))`` is one Map of
f∘g unless ``simplify=False``. Every expression has a ``label`` (``map_7`` by default,
``.named(name)`` to choose it) and an encoding annotation, categorical unless
:func:`numerical` says otherwise. Calling an expression on a list evaluates it
(:func:`~infoflow_dsl.rasp.evaluation.evaluate`).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .evaluation import evaluate

Value = Any
Predicate = Callable[[Value, Value], bool]

_ids = itertools.count(1)


class Encoding(enum.Enum):
    """How an SOp's values are held in the residual stream: one direction per value
    (categorical) or one direction holding the number (numerical)."""

    CATEGORICAL = "categorical"
    NUMERICAL = "numerical"


E = TypeVar("E", bound="RASPExpr")


class RASPExpr:
    """An expression of a RASP program: its children, its label and its annotations."""

    default_name = "expr"
    numbered = True  # the default label is default_name_<id>; the input primitives' is default_name alone

    def __init__(self) -> None:
        self.unique_id = next(_ids)
        self._annotations: dict[str, Any] = {}

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()

    @property
    def annotations(self) -> dict[str, Any]:
        return dict(self._annotations)

    @property
    def name(self) -> str:
        default = f"{self.default_name}_{self.unique_id}" if self.numbered else self.default_name
        return str(self._annotations.get("name", default))

    @property
    def label(self) -> str:
        return self.name

    def named(self: E, name: str) -> E:
        """This expression, labelled ``name`` (the same object, as in Tracr)."""
        self._annotations["name"] = name
        return self

    def annotated(self: E, **annotations: Any) -> E:
        self._annotations.update(annotations)
        return self

    def __call__(self, xs: Sequence[Value]) -> list[Value]:
        return evaluate(self, xs)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label})"


def _operand_map(sop: SOp, other: Any, function: Callable[[Value, Value], Value], reflected: bool = False) -> SOp:
    """``sop ∘ other``: a SequenceMap with another SOp, else a Map with the constant."""
    if isinstance(other, SOp):
        return SequenceMap(function, other, sop) if reflected else SequenceMap(function, sop, other)
    if reflected:
        return Map(lambda x: function(other, x), sop)
    return Map(lambda x: function(x, other), sop)


class SOp(RASPExpr):
    """A sequence of values, one per position. Operators build Maps and SequenceMaps (so ``==``
    is not equality: SOps hash by identity, as expressions of a graph)."""

    __hash__ = RASPExpr.__hash__

    def __eq__(self, other: object) -> SOp:  # type: ignore[override]
        return _operand_map(self, other, lambda x, y: x == y)

    def __ne__(self, other: object) -> SOp:  # type: ignore[override]
        return _operand_map(self, other, lambda x, y: x != y)

    def __lt__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x < y)

    def __le__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x <= y)

    def __gt__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x > y)

    def __ge__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x >= y)

    def __add__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x + y)

    def __radd__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x + y, reflected=True)

    def __sub__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x - y)

    def __rsub__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x - y, reflected=True)

    def __mul__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x * y)

    def __rmul__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x * y, reflected=True)

    def __truediv__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x / y)

    def __rtruediv__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x / y, reflected=True)

    def __invert__(self) -> SOp:
        return Map(lambda x: not x, self)

    def __and__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x and y)

    def __rand__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x and y, reflected=True)

    def __or__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x or y)

    def __ror__(self, other: Any) -> SOp:
        return _operand_map(self, other, lambda x, y: x or y, reflected=True)


class TokensType(SOp):
    """The input sequence itself."""

    default_name = "tokens"
    numbered = False


class IndicesType(SOp):
    """The positions 0, 1, ..., n − 1."""

    default_name = "indices"
    numbered = False


class LengthType(SOp):
    """The sequence's length n, at every position."""

    default_name = "length"
    numbered = False


tokens = TokensType()
indices = IndicesType()
length = LengthType()


class Map(SOp):
    """f applied at every position; ``Map(f, Map(g, x))`` is one Map of f∘g (``simplify``)."""

    default_name = "map"

    def __init__(self, f: Callable[[Value], Value], inner: SOp, simplify: bool = True) -> None:
        super().__init__()
        if not isinstance(inner, SOp):
            raise TypeError(f"Map reads an SOp, got {type(inner).__name__}")
        if simplify and isinstance(inner, Map):
            first, outer = inner.f, f
            self.f: Callable[[Value], Value] = lambda x: outer(first(x))
            self.inner: SOp = inner.inner
        else:
            self.f, self.inner = f, inner

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.inner,)


class SequenceMap(SOp):
    """f(a_i, b_i) at every position i."""

    default_name = "sequence_map"

    def __init__(self, f: Callable[[Value, Value], Value], fst: SOp, snd: SOp) -> None:
        super().__init__()
        if not isinstance(fst, SOp) or not isinstance(snd, SOp):
            raise TypeError("SequenceMap reads two SOps")
        self.f, self.fst, self.snd = f, fst, snd

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.fst, self.snd)


class LinearSequenceMap(SequenceMap):
    """fst_fac·a_i + snd_fac·b_i."""

    default_name = "linear_sequence_map"

    def __init__(self, fst: SOp, snd: SOp, fst_fac: float, snd_fac: float) -> None:
        super().__init__(lambda x, y: fst_fac * x + snd_fac * y, fst, snd)
        self.fst_fac, self.snd_fac = fst_fac, snd_fac


class Full(SOp):
    """The value ``fill`` at every position."""

    default_name = "full"

    def __init__(self, fill: Value) -> None:
        super().__init__()
        self.fill = fill


class ConstantSOp(SOp):
    """A fixed sequence of values (of the input's length when ``check_length``)."""

    default_name = "constant_sop"

    def __init__(self, value: Sequence[Value], check_length: bool = True) -> None:
        super().__init__()
        self.value, self.check_length = list(value), check_length


class Comparison(enum.Enum):
    """A selector's predicate of (key, query), as Tracr names them."""

    EQ = "EQ"
    LT = "LT"
    LEQ = "LEQ"
    GT = "GT"
    GEQ = "GEQ"
    NEQ = "NEQ"
    TRUE = "TRUE"
    FALSE = "FALSE"

    def __call__(self, key: Value, query: Value) -> bool:
        """The comparison of a key with a query; None on either side (a shifted SOp's first
        positions, an Aggregate that selected nothing) raises, as Tracr's does: the evaluator's
        output on that input is undefined."""
        if key is None or query is None:
            raise ValueError(f"{'key' if key is None else 'query'} is None: a Comparison of None is undefined")
        return bool(COMPARISONS[self](key, query))


COMPARISONS: dict[Comparison, Predicate] = {
    Comparison.EQ: lambda key, query: key == query,
    Comparison.LT: lambda key, query: key < query,
    Comparison.LEQ: lambda key, query: key <= query,
    Comparison.GT: lambda key, query: key > query,
    Comparison.GEQ: lambda key, query: key >= query,
    Comparison.NEQ: lambda key, query: key != query,
    Comparison.TRUE: lambda key, query: True,
    Comparison.FALSE: lambda key, query: False,
}


class Selector(RASPExpr):
    """An n × n boolean matrix: row q says which keys query q selects."""

    default_name = "selector"

    def __and__(self, other: Selector) -> Selector:
        return SelectorAnd(self, other)

    def __or__(self, other: Selector) -> Selector:
        return SelectorOr(self, other)

    def __invert__(self) -> Selector:
        return SelectorNot(self)


class Select(Selector):
    """[predicate(keys_k, queries_q)] at row q, column k."""

    default_name = "select"

    def __init__(self, keys: SOp, queries: SOp, predicate: Comparison | Predicate) -> None:
        super().__init__()
        if not isinstance(keys, SOp) or not isinstance(queries, SOp):
            raise TypeError("Select reads two SOps (keys, queries)")
        if not callable(predicate):
            raise TypeError(f"Select's predicate must be a Comparison or a function of (key, query), got {predicate!r}")
        self.keys, self.queries, self.predicate = keys, queries, predicate

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.keys, self.queries)


class ConstantSelector(Selector):
    """A fixed matrix (of the input's length when ``check_length``)."""

    default_name = "constant_selector"

    def __init__(self, value: Sequence[Sequence[bool]], check_length: bool = True) -> None:
        super().__init__()
        self.value, self.check_length = [list(row) for row in value], check_length


class SelectorAnd(Selector):
    default_name = "selector_and"

    def __init__(self, fst: Selector, snd: Selector) -> None:
        super().__init__()
        self.fst, self.snd = fst, snd

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.fst, self.snd)


class SelectorOr(SelectorAnd):
    default_name = "selector_or"


class SelectorNot(Selector):
    default_name = "selector_not"

    def __init__(self, inner: Selector) -> None:
        super().__init__()
        self.inner = inner

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.inner,)


class Aggregate(SOp):
    """At each query: the mean of the values its selector selects (the value itself when one is
    selected), ``default`` when none is."""

    default_name = "aggregate"

    def __init__(self, selector: Selector, sop: SOp, default: Value = None) -> None:
        super().__init__()
        if not isinstance(selector, Selector) or not isinstance(sop, SOp):
            raise TypeError("Aggregate reads a selector and an SOp")
        self.selector, self.sop, self.default = selector, sop, default

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.selector, self.sop)


class SelectorWidth(SOp):
    """How many keys each query selects."""

    default_name = "selector_width"

    def __init__(self, selector: Selector) -> None:
        super().__init__()
        if not isinstance(selector, Selector):
            raise TypeError("SelectorWidth reads a selector")
        self.selector = selector

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.selector,)


def numerical(sop: SOp) -> SOp:
    """``sop``, annotated numerical (one direction holding its number)."""
    return sop.annotated(encoding=Encoding.NUMERICAL)


def categorical(sop: SOp) -> SOp:
    """``sop``, annotated categorical (one direction per value; the default)."""
    return sop.annotated(encoding=Encoding.CATEGORICAL)


def get_encoding(sop: RASPExpr) -> Encoding:
    """The SOp's encoding; an annotation of Tracr's own Encoding enum is read by its value."""
    encoding = sop.annotations.get("encoding", Encoding.CATEGORICAL)
    return Encoding(getattr(encoding, "value", encoding))


def is_numerical(sop: RASPExpr) -> bool:
    return get_encoding(sop) is Encoding.NUMERICAL


def is_categorical(sop: RASPExpr) -> bool:
    return get_encoding(sop) is Encoding.CATEGORICAL


