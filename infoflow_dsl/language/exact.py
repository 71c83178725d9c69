"""The rational a number of the language stands for.

A program's numbers mean what they say: ``0.3`` is 3/10, not the binary float nearest it, so
``x(t) + 0.3 * (t - 1)`` ties where real arithmetic ties (3 + 0.3·0 = 0 + 0.3·10) and the value
sets of :mod:`.value_sets` hold exact rationals (docs/language.md, "Meaning"). A float that
reaches the language from outside (a vocabulary entry, a constant, a table, a literal Python
wrote: RASP's 1/3) stands for :func:`decimal`'s rational: the simplest fraction of denominator
at most :data:`SIMPLE_DENOMINATOR` that rounds to it (1/3 for 0.3333333333333333, 3/10 for 0.3),
else the shortest decimal that rounds to it (``repr``'s digits: what a user typed, for up to 15
significant digits). Either rounds to the float, so the map is strictly increasing and keeps
every order the floats had; the reference evaluator computes in float64 and decides each
comparison of finite-valued operands on these rationals (:mod:`~infoflow_dsl.oracle.exact`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from functools import lru_cache

#: the largest denominator a float is read as a simple fraction with (1/3, 2/7, 5/12)
SIMPLE_DENOMINATOR = 10**6


@lru_cache(maxsize=65536)
def decimal(value: float) -> Fraction:
    """The rational a float stands for: the simplest fraction with denominator ≤ 10⁶ that rounds
    to ``value`` (0.3333333333333333 → 1/3, 0.3 → 3/10, 2.0 → 2), else the shortest decimal
    that does (0.1234567 → 1234567/10⁷, 1e-14 → 1/10¹⁴). ValueError for a value that is not finite."""
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    simple = Fraction(value).limit_denominator(SIMPLE_DENOMINATOR)
    return simple if float(simple) == value else Fraction(repr(float(value)))


def over_common_denominator(*sets: Iterable[Fraction]) -> tuple[tuple[list[int], ...], int]:
    """For each set given, whole numbers n_i, and one D for all, with value_i = n_i / D (D the lcm
    of every denominator): exact arithmetic on many rationals done on integers, a Fraction made
    once per distinct result."""
    listed = [list(values) for values in sets]
    denominator = math.lcm(*(v.denominator for values in listed for v in values)) if any(listed) else 1
    return tuple([v.numerator * (denominator // v.denominator) for v in values] for values in listed), denominator


def product_numerators(left: Iterable[Fraction], right: Iterable[Fraction]) -> tuple[set[int], int]:
    """{u·v : u ∈ left, v ∈ right} as distinct whole numerators over one denominator: with u = m/D_l
    and v = n/D_r over each set's common denominator, u·v = mn/(D_l·D_r)."""
    ((whole_left,), below_left), ((whole_right,), below_right) = (over_common_denominator(left),
                                                                  over_common_denominator(right))
    return {m * n for m in whole_left for n in whole_right}, below_left * below_right
