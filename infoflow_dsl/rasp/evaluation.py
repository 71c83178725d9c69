"""RASP's evaluator, with the semantics of Tracr's ``rasp.evaluate``.

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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .expressions import (
        Aggregate,
        ConstantSelector,
        ConstantSOp,
        Map,
        RASPExpr,
        Select,
        SelectorAnd,
        SequenceMap,
        Value,
    )

Matrix = list[list[bool]]

#: The class names of RASP's expressions, most specific first: what :func:`kind` reads.
KINDS = ("TokensType", "IndicesType", "LengthType", "LinearSequenceMap", "SequenceMap", "Map", "Full", "ConstantSOp",
         "Select", "ConstantSelector", "SelectorOr", "SelectorAnd", "SelectorNot", "Aggregate", "SelectorWidth")


def kind(expr: object) -> str | None:
    """The RASP class of ``expr`` by name, through its bases: an expression of :mod:`.expressions` or,
    duck-typed, of Tracr's ``tracr.rasp.rasp`` (the same class and attribute names)."""
    names = [cls.__name__ for cls in type(expr).__mro__]
    return next((name for name in names if name in KINDS), None)


def evaluate(expr: RASPExpr, xs: Sequence[Value]) -> Any:
    """The value of ``expr`` on the input ``xs``: a list of n values (an SOp) or an n × n
    boolean matrix (a selector)."""
    return _Evaluator(list(xs)).value(expr)


class _Evaluator:
    """One input's values, each expression's computed once (by its unique id)."""

    def __init__(self, xs: list[Value]) -> None:
        self.xs = xs
        self.values: dict[int, Any] = {}

    def value(self, expr: RASPExpr) -> Any:
        if expr.unique_id not in self.values:
            rule = RULES.get(kind(expr) or "")  # by class name: Tracr's own expressions too
            if rule is None:
                raise TypeError(f"cannot evaluate {type(expr).__name__} {expr.label!r}")
            self.values[expr.unique_id] = rule(self, expr)
        return self.values[expr.unique_id]


def _map(evaluator: _Evaluator, expr: Map) -> list[Value]:
    return [None if x is None else expr.f(x) for x in evaluator.value(expr.inner)]


def _sequence_map(evaluator: _Evaluator, expr: SequenceMap) -> list[Value]:
    pairs = zip(evaluator.value(expr.fst), evaluator.value(expr.snd), strict=True)
    return [None if x is None or y is None else expr.f(x, y) for x, y in pairs]


def _constant_sop(evaluator: _Evaluator, expr: ConstantSOp) -> list[Value]:
    if expr.check_length and len(expr.value) != len(evaluator.xs):
        raise ValueError(f"{expr.label}: a constant of length {len(expr.value)} on an input of length "
                         f"{len(evaluator.xs)}")
    return list(expr.value)


def _select(evaluator: _Evaluator, expr: Select) -> Matrix:
    keys, queries = evaluator.value(expr.keys), evaluator.value(expr.queries)
    return [[bool(expr.predicate(key, query)) for key in keys] for query in queries]


def _constant_selector(evaluator: _Evaluator, expr: ConstantSelector) -> Matrix:
    n = len(evaluator.xs)
    if expr.check_length and (len(expr.value) != n or any(len(row) != n for row in expr.value)):
        raise ValueError(f"{expr.label}: a constant selector that is not {n} × {n} on an input of length {n}")
    return [[bool(v) for v in row] for row in expr.value]


def _elementwise(combine: Callable[[bool, bool], bool]) -> Callable[[_Evaluator, SelectorAnd], Matrix]:
    def rule(evaluator: _Evaluator, expr: SelectorAnd) -> Matrix:
        first, second = evaluator.value(expr.fst), evaluator.value(expr.snd)
        return [[combine(a, b) for a, b in zip(r1, r2, strict=True)] for r1, r2 in zip(first, second, strict=True)]

    return rule


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


def _aggregate(evaluator: _Evaluator, expr: Aggregate) -> list[Value]:
    matrix, values = evaluator.value(expr.selector), evaluator.value(expr.sop)
    return [aggregate_row(row, values, expr.default) for row in matrix]


RULES: dict[str, Callable[[_Evaluator, Any], Any]] = {
    "TokensType": lambda evaluator, expr: list(evaluator.xs),
    "IndicesType": lambda evaluator, expr: list(range(len(evaluator.xs))),
    "LengthType": lambda evaluator, expr: [len(evaluator.xs)] * len(evaluator.xs),
    "Map": _map,
    "SequenceMap": _sequence_map,
    "LinearSequenceMap": _sequence_map,
    "Full": lambda evaluator, expr: [expr.fill] * len(evaluator.xs),
    "ConstantSOp": _constant_sop,
    "Select": _select,
    "ConstantSelector": _constant_selector,
    "SelectorOr": _elementwise(lambda a, b: a or b),
    "SelectorAnd": _elementwise(lambda a, b: a and b),
    "SelectorNot": lambda evaluator, expr: [[not v for v in row] for row in evaluator.value(expr.inner)],
    "Aggregate": _aggregate,
    "SelectorWidth": lambda evaluator, expr: [sum(row) for row in evaluator.value(expr.selector)],
}
