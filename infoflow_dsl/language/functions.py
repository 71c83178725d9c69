"""The table of pointwise functions: one row per function, read by every stage.

A pointwise function maps scalars to a scalar at one position (``relu(a)``, ``|a|``,
``min(a, b)``, ``max(a, b)``, and ``sqrt(a)``, which the comparisons stage introduces for
``min_<t> ||v||``). Each row says, for every stage, what the function is there:

- ``arity`` and ``callable``: the checker accepts ``name(a, ...)`` with that many scalar
  arguments when ``callable`` (``abs`` is written ``|a|``; ``sqrt`` is not in the language);
- ``text``: how the printer shows it (``relu({0})``, ``|{0}|``);
- ``apply``: the exact value, on tensors (the reference evaluator and the circuit map); written
  with tensor methods only, so this table needs no torch;
- ``bounds``: the interval rule, the image of the argument intervals (``ranges``);
- ``interpolations``: how many univariate functions an FFN interpolates to compute it (0: the
  FFN computes it exactly with ReLU units; ``schedule``'s parameter count and cost law);
- ``ffn_stages``: FFN blocks after its arguments' stage before its value exists (``schedule``).

The lowering of each function is a construction registered under the row's name in
``infoflow_dsl.compiler.vectors`` (``@pointwise_construction("relu")``); the completeness test
(tests/test_rules.py) fails naming every stage where a row has no rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: An interval as (low, high).
Bounds = tuple[float, float]


@dataclass(frozen=True)
class PointwiseFunction:
    """One row of the table (see the module docstring for what each field is to each stage)."""

    name: str
    arity: int
    callable: bool
    text: str
    apply: Callable[..., Any]
    bounds: Callable[[Sequence[Bounds]], Bounds]
    interpolations: int
    ffn_stages: int = 1


def _relu_bounds(arguments: Sequence[Bounds]) -> Bounds:
    (low, high), = arguments
    return max(low, 0.0), max(high, 0.0)


def _abs_bounds(arguments: Sequence[Bounds]) -> Bounds:
    (low, high), = arguments
    if low >= 0.0:
        return low, high
    if high <= 0.0:
        return -high, -low
    return 0.0, max(-low, high)


def _sqrt_bounds(arguments: Sequence[Bounds]) -> Bounds:
    (low, high), = arguments
    return math.sqrt(max(low, 0.0)), math.sqrt(max(high, 0.0))


def _min_bounds(arguments: Sequence[Bounds]) -> Bounds:
    return min(a[0] for a in arguments), min(a[1] for a in arguments)


def _max_bounds(arguments: Sequence[Bounds]) -> Bounds:
    return max(a[0] for a in arguments), max(a[1] for a in arguments)


POINTWISE: dict[str, PointwiseFunction] = {
    row.name: row
    for row in (
        PointwiseFunction(name="relu", arity=1, callable=True, text="relu({0})",
                          apply=lambda u: u.clamp_min(0.0), bounds=_relu_bounds, interpolations=0),
        PointwiseFunction(name="abs", arity=1, callable=False, text="|{0}|",
                          apply=lambda u: u.abs(), bounds=_abs_bounds, interpolations=0),
        PointwiseFunction(name="min", arity=2, callable=True, text="min({0}, {1})",
                          apply=lambda a, b: a.minimum(b), bounds=_min_bounds, interpolations=0),
        PointwiseFunction(name="max", arity=2, callable=True, text="max({0}, {1})",
                          apply=lambda a, b: a.maximum(b), bounds=_max_bounds, interpolations=0),
        PointwiseFunction(name="sqrt", arity=1, callable=False, text="sqrt({0})",
                          apply=lambda u: u.clamp_min(0.0).sqrt(), bounds=_sqrt_bounds, interpolations=1),
    )
}

#: The functions a program may call by name, with their arity (the checker's table).
CALLABLE: dict[str, int] = {row.name: row.arity for row in POINTWISE.values() if row.callable}
