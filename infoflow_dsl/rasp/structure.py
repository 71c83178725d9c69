"""A function of two numbers written by its structure, not as a table of every pair: Tracr
builds such a SequenceMap as an MLP of |A|·|B| hidden units (two prefix fractions at N = 30:
279 × 279 = 77,841), where the function is often

- ``max(u, v)`` or ``min(u, v)``: the language's own, one exact unit pair;
- **of one combination** g(u − v) or g(u + v) (``a > b`` is [u − v > 0], ``round(a − b, 1)``,
  ``int(2·(a + b))``): the combination's value, then g by a few steps on it;
- **separable** g(u) + h(v) (``(a > 0.5) + 2·(b > 0.5)``): two functions of one number, added.

Each is checked at every pair of the grid (to RASP's float rounding, 10⁻¹² relative) before it
is used; a one-number function is written as steps ``g₀ + Σ Δₖ·[w >= cₖ]`` (cₖ mid-gap) when it
changes at most MAX_CHANGES times, else as a table when it has at most MAX_TABLE keys.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from .fits import change_between, cut_between, linear_text, snapped
from .literals import number_text, table_value
from .translator import MAX_TABLE, Translator

#: The most value changes a one-number function is written with as steps.
MAX_CHANGES = 256
#: A grid's pairs of values, ((u, v) → f(u, v)), numbers.
Grid = dict[tuple[float, float], float]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


def structured(tr: Translator, label: str, numbers: list[Callable[[str], str]], grid: Grid
               ) -> Callable[[str], str] | None:
    """f(u, v) at a position as max/min, g(u ± v) or g(u) + h(v), or None where none fits."""
    u, v = numbers
    for name, pick in (("max", max), ("min", min)):
        if all(_close(f, pick(a, b)) for (a, b), f in grid.items()):
            return _extreme(name, u, v)
    for sign in (-1.0, 1.0):
        combined = _of_combination(grid, sign)
        if combined is not None:
            return _one_number(tr, label, _combination(u, v, "-" if sign < 0 else "+"), combined)
    return _separable(tr, label, u, v, grid)


def _extreme(name: str, u: Callable[[str], str], v: Callable[[str], str]) -> Callable[[str], str]:
    return lambda p: f"{name}({u(p)}, {v(p)})"


def _combination(u: Callable[[str], str], v: Callable[[str], str], sign: str) -> Callable[[str], str]:
    return lambda p: f"({u(p)} {sign} {v(p)})"


def _of_combination(grid: Grid, sign: float) -> list[tuple[float, float]] | None:
    """[(w, g(w))] for f(u, v) = g(u + sign·v), or None where two pairs of one w disagree."""
    found: dict[float, tuple[float, float]] = {}  # by w to 10 decimals (RASP's float noise is ~10⁻¹⁶): (w, g)
    for (a, b), f in grid.items():
        w = a + sign * b
        seen = found.setdefault(round(w, 10), (w, f))
        if not _close(seen[1], f):
            return None
    return sorted((snapped(w), g) for w, g in found.values())


def _separable(tr: Translator, label: str, u: Callable[[str], str], v: Callable[[str], str], grid: Grid
               ) -> Callable[[str], str] | None:
    """g(u) + h(v) with g(u) = f(u, v₀) − f(u₀, v₀), h(v) = f(u₀, v), where every pair agrees."""
    us, vs = sorted({a for a, _ in grid}), sorted({b for _, b in grid})
    u0, v0 = us[0], vs[0]
    if any(not _close(f, grid[a, v0] + grid[u0, b] - grid[u0, v0]) for (a, b), f in grid.items()):
        return None
    first = _one_number(tr, f"{label}_first", u, [(a, grid[a, v0] - grid[u0, v0]) for a in us])
    second = _one_number(tr, f"{label}_second", v, [(b, grid[u0, b]) for b in vs])
    if first is None or second is None:
        return None
    return lambda p: f"({first(p)} + {second(p)})"


def _one_number(tr: Translator, label: str, number: Callable[[str], str], points: list[tuple[float, float]]
                ) -> Callable[[str], str] | None:
    """g of one number as steps g₀ + Σ Δₖ·[w >= cₖ] (at most MAX_CHANGES), else a table of its
    values (at most MAX_TABLE keys), else None."""
    ordered = sorted(points)
    changes = [(cut_between(snapped(a), snapped(b)), change_between(g0, g1))
               for (a, g0), (b, g1) in itertools.pairwise(ordered) if not _close(g0, g1)]
    if len(changes) <= MAX_CHANGES:
        start = snapped(ordered[0][1])
        return lambda p: linear_text([(change, f"[{number(p)} >= {operand_text(cut)}]") for cut, change in changes],
                                     start)
    if len(ordered) > MAX_TABLE:
        return None
    name = tr.table(f"{label}_table", {(number_text(w),): table_value(g, label) for w, g in ordered}, "0")
    return lambda p: f"{name}({number(p)})"


def operand_text(cut: str) -> str:
    return f"({cut})" if cut.startswith("-") else cut


def as_grid(grid: dict[tuple[tuple[str, Any], ...], Any]) -> Grid | None:
    """A two-argument grid of numbers (keys' values and entries), or None if any is not one."""
    found: Grid = {}
    for keys, f in grid.items():
        if len(keys) != 2 or f is None or any(v is None for _, v in keys):
            return None
        (_, a), (_, b) = keys
        found[float(a), float(b)] = float(f)
    return found

