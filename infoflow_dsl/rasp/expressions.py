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

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .annotations import Annotations
from .comparisons import Comparison, Predicate, Value
from .evaluation import evaluate, kind
from .origins import Origin, caller_origin

RASPExprT = TypeVar("RASPExprT", bound="RASPExpr")
SOpT = TypeVar("SOpT", bound="SOp")

_ids = itertools.count(1)


E = TypeVar("E", bound="RASPExpr")


class RASPExpr:
    """An expression of a RASP program: its children, its label and its annotations (a
    read-only mapping whose missing keys come from ``DEFAULT_ANNOTATORS``, as Tracr's), and
    ``origin``, where its author's Python built it (:mod:`.origins`: the place refusals name;
    a copy keeps it, and it takes no part in identity or hashing)."""

    class_name = "expr"  # the default name (Tracr's default_name of the class)
    numbered = True  # the default label is class_name_<id>; the input primitives' is class_name alone

    def __init__(self) -> None:
        self.unique_id = next(_ids)
        self._annotations = Annotations(self)
        self.origin: Origin | None = caller_origin()

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return ()

    @property
    def annotations(self) -> Mapping[str, Any]:
        return self._annotations

    @annotations.setter
    def annotations(self, annotations: Mapping[str, Any]) -> None:
        self._annotations = Annotations(self, **annotations)

    @property
    def name(self) -> str:
        """The ``name`` annotation: given by :meth:`named`, else the class's (``map``), as Tracr's."""
        return str(self.annotations["name"])

    @property
    def label(self) -> str:
        """The name given (``reverse``), else the class's name and the id (``map_7``); the
        input primitives' is their name (``tokens``)."""
        name = self.name
        return f"{name}_{self.unique_id}" if self.numbered and name == type(self).class_name else name

    def copy(self: E) -> E:
        """A shallow copy with a new id (and its own annotations)."""
        new = copy.copy(self)
        new.unique_id = next(_ids)
        new._annotations = Annotations(new, **dict(self._annotations))
        return new

    def named(self: E, name: str) -> E:
        """A copy of this expression named ``name`` (Tracr's ``annotate``: the original keeps its name)."""
        return annotate(self, name=name)

    def annotated(self: E, **annotations: Any) -> E:
        """A copy of this expression with ``annotations`` added (replacing those of the same key)."""
        return annotate(self, **annotations)

    def __call__(self, xs: Sequence[Value]) -> Any:
        return evaluate(self, xs)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label})"


def annotate(expr: RASPExprT, **annotations: Any) -> RASPExprT:
    """A new expression: ``expr``'s copy (a new id) with ``annotations`` added to its own."""
    new = expr.copy()
    new.annotations = {**expr.annotations, **annotations}
    return new


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

    class_name = "sop"
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

    class_name = "tokens"
    numbered = False


class IndicesType(SOp):
    """The positions 0, 1, ..., n − 1."""

    class_name = "indices"
    numbered = False


class LengthType(SOp):
    """The sequence's length n, at every position."""

    class_name = "length"
    numbered = False


tokens = TokensType()
indices = IndicesType()
length = LengthType()


class Map(SOp):
    """f applied at every position; ``Map(f, Map(g, x))`` is one Map of f∘g (``simplify``)."""

    class_name = "map"

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

    class_name = "sequence_map"

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

    class_name = "linear_sequence_map"

    def __init__(self, fst: SOp, snd: SOp, fst_fac: float, snd_fac: float) -> None:
        super().__init__(lambda x, y: fst_fac * x + snd_fac * y, fst, snd)
        self.fst_fac, self.snd_fac = fst_fac, snd_fac


class Full(SOp):
    """The value ``fill`` at every position."""

    class_name = "full"

    def __init__(self, fill: Value) -> None:
        super().__init__()
        self.fill = fill


def sop_not(sop: SOp) -> SOp:
    """``not`` at every position (a Map)."""
    return Map(lambda t: not t, sop)


class ConstantSOp(SOp):
    """A fixed sequence of values (of the input's length when ``check_length``)."""

    class_name = "constant_sop"

    def __init__(self, value: Sequence[Value], check_length: bool = True) -> None:
        super().__init__()
        self.value, self.check_length = list(value), check_length


class Selector(RASPExpr):
    """An n × n boolean matrix: row q says which keys query q selects."""

    class_name = "selector"

    def __and__(self, other: Selector) -> Selector:
        return selector_and(self, other)

    def __rand__(self, other: Selector) -> Selector:
        return selector_and(other, self)

    def __or__(self, other: Selector) -> Selector:
        return selector_or(self, other)

    def __ror__(self, other: Selector) -> Selector:
        return selector_or(other, self)

    def __invert__(self) -> Selector:
        return selector_not(self)


class Select(Selector):
    """[predicate(keys_k, queries_q)] at row q, column k."""

    class_name = "select"

    def __init__(self, keys: SOp, queries: SOp, predicate: Comparison | Predicate) -> None:
        super().__init__()
        if not isinstance(keys, SOp) or not isinstance(queries, SOp):
            raise TypeError("Select reads two SOps (keys, queries)")
        if not callable(predicate):
            raise TypeError(f"Select's predicate must be a Comparison or a function of (key, query), got {predicate!r}")
        self.keys, self.queries, self.predicate = keys, queries, predicate
        #: what ``&``, ``|``, ``~`` merged into this Select (:mod:`.selector_logic`), else None
        self.combined: tuple[Any, ...] | None = None

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.keys, self.queries)


class ConstantSelector(Selector):
    """A fixed matrix (of the input's length when ``check_length``)."""

    class_name = "constant_selector"

    def __init__(self, value: Sequence[Sequence[bool]], check_length: bool = True) -> None:
        super().__init__()
        self.value, self.check_length = [list(row) for row in value], check_length


class SelectorPair(Selector):
    """Two selectors combined position by position (:class:`SelectorAnd`, :class:`SelectorOr`)."""

    def __init__(self, fst: Selector, snd: Selector) -> None:
        super().__init__()
        self.fst, self.snd = fst, snd

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.fst, self.snd)


class SelectorAnd(SelectorPair):
    """Selected where both select."""

    class_name = "selector_and"


class SelectorOr(SelectorPair):
    """Selected where either selects."""

    class_name = "selector_or"


class SelectorNot(Selector):
    class_name = "selector_not"

    def __init__(self, inner: Selector) -> None:
        super().__init__()
        self.inner = inner

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.inner,)


# ----------------------------------------------------------------------------- selector logic
# ``&``, ``|`` and ``~`` of selectors, as Tracr builds them (``selector_and``, ``selector_or``,
# ``selector_not``): where both sides are Selects that read the same keys and the same queries, the
# result is one Select whose predicate combines theirs, combine(p₁(k, q), p₂(k, q)); otherwise a
# SelectorAnd / SelectorOr / SelectorNot node. A side whose keys (queries) are a Full(v) matches any
# keys (queries) of the other: its predicate is read with v in their place. simplify=False always
# builds the node. Evaluation gives the same matrix either way. A Select built so keeps what it
# was built from in ``combined`` (("and", fst, snd), ("or", fst, snd), ("not", inner)): the
# translation writes it as its parts' conditions joined, not as a table of an opaque predicate.


def selector_not(inner: Selector, simplify: bool = True) -> Selector:
    """``~inner``: a Select of the negated predicate where ``inner`` is a Select."""
    if simplify and kind(inner) == "Select":
        select: Any = inner
        negated = Select(select.keys, select.queries, lambda k, q, p=select.predicate: not p(k, q))
        negated.combined = ("not", inner)
        return negated
    return SelectorNot(inner)


def selector_and(fst: Selector, snd: Selector, simplify: bool = True) -> Selector:
    """``fst & snd``: one Select where both read the same keys and queries (:func:`merged`)."""
    joined = merged(fst, snd, "and") if simplify else None
    return joined if joined is not None else SelectorAnd(fst, snd)


def selector_or(fst: Selector, snd: Selector, simplify: bool = True) -> Selector:
    """``fst | snd``: one Select where both read the same keys and queries (:func:`merged`)."""
    joined = merged(fst, snd, "or") if simplify else None
    return joined if joined is not None else SelectorOr(fst, snd)


def _pinned(predicate: Predicate, key: Any, query: Any) -> Callable[[Any, Any], bool]:
    """``predicate`` with its key (and/or query) fixed where given as a ``Full``'s fill."""
    def pinned(k: Any, q: Any) -> bool:
        return predicate(key.fill if key is not None else k, query.fill if query is not None else q)

    return pinned


#: How ``merged`` combines two predicates' answers.
COMBINE: dict[str, Callable[[bool, bool], bool]] = {"and": lambda a, b: a and b, "or": lambda a, b: a or b}


def merged(fst: Selector, snd: Selector, how: str) -> Select | None:
    """The Select equal to ``fst`` ``how`` (and/or) ``snd`` when both are Selects whose keys are one SOp
    (or one side's a ``Full``) and whose queries are one SOp (likewise); else None."""
    if kind(fst) != "Select" or kind(snd) != "Select":
        return None
    a: Any = fst
    b: Any = snd
    keys = _common(a.keys, b.keys)
    queries = _common(a.queries, b.queries)
    if keys is None or queries is None:
        return None
    first = _pinned(a.predicate, a.keys if _is_full(a.keys) else None, a.queries if _is_full(a.queries) else None)
    second = _pinned(b.predicate, b.keys if _is_full(b.keys) else None, b.queries if _is_full(b.queries) else None)
    combine = COMBINE[how]
    select = Select(keys, queries, lambda k, q: combine(first(k, q), second(k, q)))
    select.combined = (how, fst, snd)
    return select


def _is_full(sop: SOp) -> bool:
    return kind(sop) == "Full"


def _common(first: SOp, second: SOp) -> SOp | None:
    """The SOp both sides may read: the same one, or the other side's where one is a ``Full``."""
    if first is second:
        return first
    if _is_full(second):
        return first
    if _is_full(first):
        return second
    return None


class Aggregate(SOp):
    """At each query: the mean of the values its selector selects (the value itself when one is
    selected), ``default`` when none is."""

    class_name = "aggregate"

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

    class_name = "selector_width"

    def __init__(self, selector: Selector) -> None:
        super().__init__()
        if not isinstance(selector, Selector):
            raise TypeError("SelectorWidth reads a selector")
        self.selector = selector

    @property
    def children(self) -> tuple[RASPExpr, ...]:
        return (self.selector,)
