"""The values and predicates of RASP, with Tracr's names (``tracr.rasp.rasp``): the type aliases
of a position's value and a selector's matrix, the Predicate protocol and the Comparison enum
(Tracr's values: ``Comparison.LT.value == "<"``), which raises on a None key or query as Tracr's
does (the evaluator is undefined there).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

#: The value at one position: Tracr's ``None | int | float | str | bool`` (any hashable here).
Value = Any
#: A number an SOp may hold.
NumericValue = int | float
#: A selector's value: row q, column k is whether query q selects key k.
SelectorValue = list[list[bool]]
VT = TypeVar("VT")
T = TypeVar("T")


class Predicate(Protocol):
    """A selector's predicate: whether a key is selected for a query."""

    def __call__(self, key: Value, query: Value) -> bool:
        """Applies the predicate."""


class Comparison(enum.Enum):
    """A selector's predicate of (key, query), with Tracr's names and values."""

    EQ = "=="
    LT = "<"
    LEQ = "<="
    GT = ">"
    GEQ = ">="
    NEQ = "!="
    TRUE = "True"
    FALSE = "False"

    def __call__(self, key: Value, query: Value) -> bool:
        """The comparison of a key with a query; None on either side (a shifted SOp's first
        positions, an Aggregate that selected nothing) raises, as Tracr's does: the evaluator's
        output on that input is undefined."""
        if key is None or query is None:
            raise ValueError(f"{'key' if key is None else 'query'} is None: a Comparison of None is undefined")
        return bool(COMPARISONS[self](key, query))


COMPARISONS: dict[Comparison, Callable[[Value, Value], bool]] = {
    Comparison.EQ: lambda key, query: key == query,
    Comparison.LT: lambda key, query: key < query,
    Comparison.LEQ: lambda key, query: key <= query,
    Comparison.GT: lambda key, query: key > query,
    Comparison.GEQ: lambda key, query: key >= query,
    Comparison.NEQ: lambda key, query: key != query,
    Comparison.TRUE: lambda key, query: True,
    Comparison.FALSE: lambda key, query: False,
}
