"""RASP's evaluator, with the semantics of Tracr's ``rasp.evaluate`` (``DefaultRASPEvaluator``).

Each expression is evaluated once per input (a program is a graph: an SOp read twice is
computed once). On an input xs of length n:

- ``tokens`` → xs; ``indices`` → [0, ..., n−1]; ``length`` → [n] * n;
- ``Map(f, a)`` → [f(a_i)]; ``SequenceMap(f, a, b)`` → [f(a_i, b_i)]; a None argument gives
  None without calling f (an Aggregate with no selected key and no default propagates so);
- ``Full(v)`` → [v] * n; ``ConstantSOp(values)`` → values (ValueError when its length is not
  n and it checks lengths);
- ``Select(keys, queries, p)`` → M[q][k] = p(keys_k, queries_q); ``ConstantSelector`` its
  matrix; ``&``, ``|``, ``~`` elementwise;
- ``Aggregate(s, a, default)`` at query q: the selected values v = [a_k : M[q][k]]; ``default``
  if v is empty, v[0] if it has one element, else sum(v)/len(v) (which raises for values that
  do not add, as strings: Tracr's evaluator raises there too);
- ``SelectorWidth(s)`` → [Σ_k M[q][k]].
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .comparisons import Value

Matrix = list[list[bool]]


class EvaluableExpr(Protocol):
    """What the evaluator reads of an expression itself: its ``unique_id`` (the key that computes
    an expression read twice once) and its ``label`` (what a refusal names). An expression of
    :mod:`.expressions` has both, and so has one of Tracr's ``tracr.rasp.rasp``; the rest
    (children, functions, predicates) each ``eval_<kind>`` method reads by the class's own names."""

    @property
    def unique_id(self) -> int: ...
    @property
    def label(self) -> str: ...

#: The class names of RASP's expressions, most specific first: what :func:`kind` reads.
KINDS = ("TokensType", "IndicesType", "LengthType", "LinearSequenceMap", "SequenceMap", "Map", "Full", "ConstantSOp",
         "Select", "ConstantSelector", "SelectorOr", "SelectorAnd", "SelectorNot", "Aggregate", "SelectorWidth")


def kind(expr: object) -> str | None:
    """The RASP class of ``expr`` by name, through its bases: an expression of :mod:`.expressions` or,
    duck-typed, of Tracr's ``tracr.rasp.rasp`` (the same class and attribute names)."""
    names = [cls.__name__ for cls in type(expr).__mro__]
    return next((name for name in names if name in KINDS), None)


def evaluate(expr: EvaluableExpr, xs: Sequence[Value]) -> Any:
    """The value of ``expr`` on the input ``xs``: a list of n values (an SOp) or an n × n
    boolean matrix (a selector)."""
    return DefaultRASPEvaluator().evaluate(expr, xs)


class RASPEvaluator(abc.ABC):
    """What evaluates RASP expressions (Tracr's abstract base)."""

    @abc.abstractmethod
    def evaluate(self, expr: EvaluableExpr, xs: Sequence[Value]) -> Any:
        """The value of ``expr`` on the input ``xs``."""


#: The method of :class:`DefaultRASPEvaluator` for each RASP class (by :func:`kind`).
METHODS = {"TokensType": "eval_tokens", "IndicesType": "eval_indices", "LengthType": "eval_length",
           "Map": "eval_map", "SequenceMap": "eval_sequence_map", "LinearSequenceMap": "eval_sequence_map",
           "Full": "eval_full", "ConstantSOp": "eval_constant_sop", "Select": "eval_select",
           "ConstantSelector": "eval_constant_selector", "SelectorAnd": "eval_selector_and",
           "SelectorOr": "eval_selector_or", "SelectorNot": "eval_selector_not", "Aggregate": "eval_aggregate",
           "SelectorWidth": "eval_selector_width"}


class DefaultRASPEvaluator(RASPEvaluator):
    """RASP's evaluator (Tracr's semantics), one ``eval_<kind>`` method per class, which a
    subclass may override. Within one call of :meth:`evaluate`, each expression is evaluated
    once (a graph that reads an SOp twice computes it once), by its ``unique_id``."""

    def __init__(self) -> None:
        self._memo: dict[int, Any] | None = None

    def evaluate(self, expr: EvaluableExpr, xs: Sequence[Value]) -> Any:
        outermost = self._memo is None
        if outermost:
            self._memo = {}
        memo = self._memo
        assert memo is not None
        try:
            if expr.unique_id not in memo:
                method = METHODS.get(kind(expr) or "")  # by class name: Tracr's own expressions too
                if method is None:
                    raise NotImplementedError(f"evaluation of {type(expr).__name__} {expr.label!r} is not defined")
                memo[expr.unique_id] = getattr(self, method)(expr, list(xs))
            return memo[expr.unique_id]
        finally:
            if outermost:
                self._memo = None

    def eval_tokens(self, sop: Any, xs: list[Value]) -> list[Value]:
        return list(xs)

    def eval_indices(self, sop: Any, xs: list[Value]) -> list[Value]:
        return list(range(len(xs)))

    def eval_length(self, sop: Any, xs: list[Value]) -> list[Value]:
        return [len(xs)] * len(xs)

    def eval_map(self, sop: Any, xs: list[Value]) -> list[Value]:
        return [None if x is None else sop.f(x) for x in self.evaluate(sop.inner, xs)]

    def eval_sequence_map(self, sop: Any, xs: list[Value]) -> list[Value]:
        pairs = zip(self.evaluate(sop.fst, xs), self.evaluate(sop.snd, xs), strict=True)
        return [None if x is None or y is None else sop.f(x, y) for x, y in pairs]

    def eval_full(self, sop: Any, xs: list[Value]) -> list[Value]:
        return [sop.fill] * len(xs)

    def eval_constant_sop(self, sop: Any, xs: list[Value]) -> list[Value]:
        if sop.check_length and len(sop.value) != len(xs):
            raise ValueError(f"{sop.label}: a constant of length {len(sop.value)} on an input of length {len(xs)}")
        return list(sop.value)

    def eval_selector_width(self, sop: Any, xs: list[Value]) -> list[Value]:
        return [sum(row) for row in self.evaluate(sop.selector, xs)]

    def eval_aggregate(self, sop: Any, xs: list[Value]) -> list[Value]:
        matrix, values = self.evaluate(sop.selector, xs), self.evaluate(sop.sop, xs)
        return [aggregate_row(row, values, sop.default) for row in matrix]

    def eval_select(self, sel: Any, xs: list[Value]) -> Matrix:
        keys, queries = self.evaluate(sel.keys, xs), self.evaluate(sel.queries, xs)
        return [[bool(sel.predicate(key, query)) for key in keys] for query in queries]

    def eval_constant_selector(self, sel: Any, xs: list[Value]) -> Matrix:
        n = len(xs)
        if sel.check_length and (len(sel.value) != n or any(len(row) != n for row in sel.value)):
            raise ValueError(f"{sel.label}: a constant selector that is not {n} × {n} on an input of length {n}")
        return [[bool(v) for v in row] for row in sel.value]

    def eval_selector_and(self, sel: Any, xs: list[Value]) -> Matrix:
        return _elementwise(self.evaluate(sel.fst, xs), self.evaluate(sel.snd, xs), lambda a, b: a and b)

    def eval_selector_or(self, sel: Any, xs: list[Value]) -> Matrix:
        return _elementwise(self.evaluate(sel.fst, xs), self.evaluate(sel.snd, xs), lambda a, b: a or b)

    def eval_selector_not(self, sel: Any, xs: list[Value]) -> Matrix:
        return [[not v for v in row] for row in self.evaluate(sel.inner, xs)]


def _elementwise(first: Matrix, second: Matrix, combine: Callable[[bool, bool], bool]) -> Matrix:
    return [[combine(a, b) for a, b in zip(r1, r2, strict=True)] for r1, r2 in zip(first, second, strict=True)]


def aggregate_row(row: Sequence[bool], values: Sequence[Value], default: Value) -> Value:
    """One query's Aggregate: the default, the one selected value, or the mean of several, which
    only numbers (and booleans) have: several strings raise a ValueError, as Tracr's evaluator does."""
    selected = [v for s, v in zip(row, values, strict=True) if s]
    if not selected:
        return default
    if len(selected) == 1:
        return selected[0]
    if not all(isinstance(v, (int, float, bool)) for v in selected):
        raise ValueError(f"an Aggregate averages numbers only; it selected {selected!r}")
    return sum(selected) / len(selected)
