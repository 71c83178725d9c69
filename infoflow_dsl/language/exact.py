"""The rational a number of the language stands for.

A program's numbers mean what they say: ``0.3`` is 3/10, not the binary float nearest it, so
``x(t) + 0.3 * (t - 1)`` ties where real arithmetic ties (3 + 0.3·0 = 0 + 0.3·10) and the value
sets of :mod:`.value_sets` hold exact rationals (docs/language.md, "Numbers"). A float that
reaches the language from outside (a vocabulary entry, a constant, a table, a literal Python
wrote) stands for the shortest decimal that rounds to it (:func:`decimal`), which is what a user
typed for anything of up to 15 significant digits. The map is strictly increasing, so it keeps
every order the floats had; the reference evaluator computes in float64 and decides each
comparison of finite-valued operands on these rationals (:mod:`~infoflow_dsl.oracle.exact`).
"""

from __future__ import annotations

import math
from fractions import Fraction


def decimal(value: float) -> Fraction:
    """The shortest decimal that rounds to ``value`` (``repr``'s digits), as an exact rational:
    0.3 → 3/10, 1e-14 → 1/10¹⁴, 2.0 → 2. ValueError for a value that is not finite."""
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return Fraction(repr(float(value)))
