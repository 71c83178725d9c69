"""The value set of every SOp of a RASP program, inferred as Tracr's basis inference does: from
the vocabulary and the longest length, each node's set from its children's, before anything is
compiled.

- ``tokens``: the vocabulary; ``indices``: {0, ..., N−1}; ``length``: {1, ..., N} (N =
  ``max_seq_len``);
- ``Map(f, a)``: {f(v) : v ∈ V(a)}; ``SequenceMap(f, a, b)``: {f(u, v) : u ∈ V(a), v ∈ V(b)}
  (every pair, as Tracr: the two SOps' correlation is not tracked); ``Full(v)``: {v};
  ``ConstantSOp``: its values;
- ``Aggregate(s, a, default)``: a numerical one, every mean of 1 to N values of V(a) (repeats
  allowed: the sums of n values, level by level, each divided by n) and the default; a
  categorical one, V(a) and the default (Tracr compiles a categorical Aggregate only where it
  selects one value);
- ``SelectorWidth``: {0, ..., N}.

A function that raises on a value of its argument's set is a :class:`ValueSetError` naming the
node and the value. A set past MAX_VALUES is one too: the table that would hold it is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from .encodings import is_numerical
from .evaluation import kind
from .expressions import RASPExpr, SOp
from .literals import is_number

#: The kinds of selectors (no value set).
SELECTORS = frozenset({"Select", "ConstantSelector", "SelectorOr", "SelectorAnd", "SelectorNot"})

MAX_VALUES = 100_000
#: The most pairs of values a SequenceMap's function is applied to.
MAX_PAIRS = 4_000_000

ValueSet = frozenset[Any]


class ValueSetError(ValueError):
    """A node whose value set cannot be inferred: its function raised on a value, or the set is
    too large; ``node`` is that node (None where unknown)."""

    def __init__(self, message: str, node: object | None = None) -> None:
        super().__init__(message)
        self.node = node


def value_sets(program: SOp, vocabulary: Iterable[Hashable], max_seq_len: int) -> dict[int, ValueSet]:
    """Every SOp's value set under ``program``, by ``unique_id`` (selectors have none)."""
    if not isinstance(max_seq_len, int) or max_seq_len < 1:
        raise ValueError(f"max_seq_len must be a whole number ≥ 1, got {max_seq_len!r}")
    inference = ValueSetInference(frozenset(vocabulary), max_seq_len)
    inference.visit(program)
    return {sop: found for sop, found in inference.sets.items() if found is not None}  # strict: none is unknown


class TooManyValues(ValueSetError):
    """A set past MAX_VALUES."""


class ValueSetInference:
    """Value sets, each node's once, children first. ``strict``: a set past MAX_VALUES raises
    :class:`TooManyValues`; else it is unknown (None), and so is every set inferred from it: the
    translation asks for a set only where it writes a table of it."""

    def __init__(self, vocabulary: ValueSet, max_seq_len: int, strict: bool = True) -> None:
        self.vocabulary, self.length, self.strict = vocabulary, max_seq_len, strict
        self.sets: dict[int, ValueSet | None] = {}
        #: SOps whose whole numbers may arrive as n or as n.0 (a mean: one selected value is
        #: returned as it is, an average of several is a float), and the Maps of those
        self.mixed: set[int] = set()

    def visit(self, expr: RASPExpr) -> None:
        if self.sets.get(expr.unique_id, None) is not None:
            return  # an unknown set is inferred again: a child's may have been given since (a merged mean's)
        for child in expr.children:
            self.visit(child)
        if kind(expr) not in SELECTORS:
            try:
                found = self.infer(expr)
                if found is not None and len(found) > MAX_VALUES:
                    raise TooManyValues(f"{_named(expr)} takes more than {MAX_VALUES:,} values", expr)
            except TooManyValues:
                if self.strict:
                    raise
                found = None
            self.sets[expr.unique_id] = found

    def of(self, sop: SOp) -> ValueSet:
        found = self.sets[sop.unique_id]
        if found is None:
            raise TooManyValues(f"{_named(sop)} takes more than {MAX_VALUES:,} values", sop)
        return found

    def infer(self, expr: Any) -> ValueSet | None:  # an SOp of any kind (its fields by kind(expr))
        n, node = self.length, kind(expr)
        if node == "LinearSequenceMap":
            node = "SequenceMap"
        if node == "TokensType":
            return self.vocabulary
        if node == "IndicesType":
            return frozenset(range(n))
        if node == "LengthType":
            return frozenset(range(1, n + 1))
        if node == "Map":
            mixed = self._mixed(expr, expr.inner)
            return _applied(expr, expr.f, ((v,) for v in self.of(expr.inner) if v is not None), mixed)
        if node == "SequenceMap":
            if len(self.of(expr.fst)) * len(self.of(expr.snd)) > MAX_PAIRS:
                raise TooManyValues(f"{_named(expr)} takes more than {MAX_VALUES:,} values", expr)
            mixed = self._mixed(expr, expr.fst, expr.snd)
            pairs = ((u, v) for u in self.of(expr.fst) for v in self.of(expr.snd) if u is not None and v is not None)
            return _applied(expr, expr.f, pairs, mixed)
        if node == "Full":
            return frozenset({expr.fill})
        if node == "ConstantSOp":
            return frozenset(expr.value)
        if node == "Aggregate":
            values = self.of(expr.sop) - {None}
            # a categorical Aggregate of numbers averages them too where it selects several
            # (Tracr's inference leaves those means out: its compiled model has no output there)
            averaged = is_numerical(expr) or (bool(values) and all(is_number(v) for v in values)
                                              and not selects_one(expr.selector, n))
            means = mean_values(values, n, expr) if averaged else values
            if averaged:
                self.mixed.add(expr.unique_id)
            return means | {expr.default}
        if node == "SelectorWidth":
            return frozenset(range(n + 1))
        raise ValueSetError(f"{_named(expr)}: no value set for a {type(expr).__name__}", expr)


    def _mixed(self, expr: SOp, *arguments: SOp) -> tuple[bool, ...]:
        """Which of ``expr``'s arguments are mixed (then so is ``expr``)."""
        mixed = tuple(argument.unique_id in self.mixed for argument in arguments)
        if any(mixed):
            self.mixed.add(expr.unique_id)
        return mixed


def selects_one(selector: Any, length: int) -> bool:
    """Whether ``selector`` selects at most one key per query at every length up to ``length``:
    its keys are the indices, compared by EQ with any query, or by a predicate function of two
    indices that holds for at most one key per query (shift_by's ``q == k + offset``)."""
    if kind(selector) != "Select" or kind(selector.keys) != "IndicesType":
        return False
    name = getattr(selector.predicate, "name", None)
    if name == "EQ":
        return True
    if name is not None or kind(selector.queries) != "IndicesType":
        return False
    try:
        return all(sum(bool(selector.predicate(k, q)) for k in range(length)) <= 1 for q in range(length))
    except Exception:  # the user's predicate: what it raises, the translation reports
        return False


def _twins(argument: tuple[Any, ...], mixed: tuple[bool, ...]) -> list[tuple[Any, ...]]:
    """The arguments equal to ``argument`` but for a whole number's type, in the places whose set
    may hold several: 2 and 2.0, and for 0 and 1 also False and True (a mean of booleans returns
    one selected value as it is, an average of several as a float, and its default)."""
    twins = []
    for place, (value, may_mix) in enumerate(zip(argument, mixed, strict=True)):
        if not (may_mix and is_number(value) and float(value).is_integer()):
            continue
        forms = [int(value), float(value)] + ([bool(value)] if value in (0, 1) else [])
        for twin in forms:
            if type(twin) is not type(value):
                twins.append((*argument[:place], twin, *argument[place + 1:]))
    return twins


def _applied(expr: SOp, function: Callable[..., Any], arguments: Iterable[tuple[Any, ...]],
             mixed: tuple[bool, ...]) -> ValueSet:
    """{f(a) : a ∈ arguments}. A value set holds a number once, so where ``f`` tells 2 from 2.0
    (``f"{x}"``), its value would depend on how many positions a mean averaged: refused."""
    found = set()
    for argument in arguments:
        try:
            value = function(*argument)
            for twin in _twins(argument, mixed):
                if function(*twin) != value:
                    raise ValueSetError(
                        f"{_named(expr)}: its function gives {value!r} on {_shown(argument)!r} and "
                        f"{function(*twin)!r} on {_shown(twin)!r}, two forms of one value that RASP's Aggregate "
                        "returns alike (one selected value as it is, an average of several as a float, its "
                        "default); infoflow's values are numbers, so the two are one value", expr)
            found.add(value)
        except ValueSetError:
            raise
        except Exception as error:  # the user's function: whatever it raises is reported with its value
            raise ValueSetError(f"{_named(expr)}: its function raises {type(error).__name__} on "
                                f"{_shown(argument)!r} ({error})", expr) from None
    return frozenset(found)


def _shown(argument: tuple[Any, ...]) -> Any:
    return argument[0] if len(argument) == 1 else argument


def mean_values(values: ValueSet, length: int, expr: SOp) -> ValueSet:
    """Every mean of 1..``length`` values of ``values`` (repeats allowed): a value itself (one
    selected, as the evaluator returns it), then the sums of n ≥ 2 values, level by level,
    divided by n. Exact for integers and booleans; for other floats the evaluator's sum in
    position order may differ from these in the last bit."""
    try:
        sums: set[Any] = set(values)
        means = set(values)
        for count in range(2, length + 1):
            sums = {s + v for s in sums for v in values}
            means |= {s / count for s in sums}
            if len(sums) > MAX_VALUES:
                raise TooManyValues(f"{_named(expr)}: its means over up to {length} positions take more than "
                                    f"{MAX_VALUES:,} values", expr)
    except TypeError as error:
        raise ValueSetError(f"{_named(expr)}: a numerical Aggregate of values that do not average ({error})",
                            expr) from None
    return frozenset(means)


def _named(expr: RASPExpr) -> str:
    return f"{type(expr).__name__} {expr.label!r}"
