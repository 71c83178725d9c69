"""Fits of a function on a grid of values, which the translation writes in place of a table:
affine (Σ αᵢ·uᵢ + γ), bilinear (α·u·v + β·u + γ·v + δ), an increasing integer order of an
affine map (compared only), and the snapping of a float to the simple fraction it stands for.
Each is tested exactly, in floats, at every grid point: a fit that misses one is no fit.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, TypeVar

from ..language.exact import decimal
from .literals import number_text, operand

#: the largest denominator of an exact slope :func:`integer_order` scales to whole numbers
ORDER_DENOMINATOR = 10**12


def integer_order(points: list[tuple[float, ...]], values: list[float]) -> list[int] | None:
    """Whole coefficients (αᵢ·L) of an exact affine fit of f, the αᵢ its slopes in the rationals
    the compiler reads (x + i/10 → 10·x + i, x + 10⁻¹⁰·i → 10¹⁰·x + i), when they order the points
    exactly as f does (ties included); else None."""
    table = {tuple(_exact(u) for u in point): _exact(v) for point, v in zip(points, values, strict=True)}
    alphas = _slopes(table)[1]
    if any(a.denominator > ORDER_DENOMINATOR for a in alphas):
        return None
    scale = math.lcm(*(a.denominator for a in alphas))
    whole = [int(a * scale) for a in alphas]
    scaled = {p: sum(w * x for w, x in zip(whole, p, strict=True)) for p in table}
    ordered = all((scaled[p] < scaled[q]) == (table[p] < table[q])
                  and (scaled[p] == scaled[q]) == (table[p] == table[q]) for p in table for q in table)
    return whole if ordered else None


def snapped(value: Any) -> float:
    """A number of RASP's value sets as the compiler computes it: RASP adds and divides floats
    (0.1 + 0.2 − 0.3), the compiler exact rationals; a key is written as the float of the
    simple fraction within 10⁻¹² of the value (0.30000000000000004 → 0.3), so that the two meet."""
    number = float(value)
    simple = float(Fraction(number).limit_denominator(1_000_000))
    return simple if abs(simple - number) <= 1e-12 * max(1.0, abs(number)) else number


def change_between(before: Any, after: Any) -> float:
    """after − before as the compiler reads the two: the difference of the rationals their
    snapped floats stand for (1.9 − 0.9 is 1, where float subtraction gives 0.9999999999999999,
    whose own rational would put values 10⁻¹⁶ apart that float64 cannot tell from equal)."""
    return float(decimal(snapped(after)) - decimal(snapped(before)))


Number = TypeVar("Number", float, Fraction)


def _slopes(table: dict[tuple[Number, ...], Number]) -> tuple[tuple[Number, ...], list[Number]]:
    """The grid's smallest point and f's slope along each coordinate from there (to the next
    value of that coordinate, the others held): an affine f's coefficients."""
    points = list(table)
    origin = tuple(min(u[i] for u in points) for i in range(len(points[0])))
    slopes = []
    for i in range(len(origin)):
        others = sorted({u[i] for u in points} - {origin[i]})
        step = tuple(others[0] if j == i else origin[j] for j in range(len(origin))) if others else origin
        slopes.append((table[step] - table[origin]) / (others[0] - origin[i]) if others else table[origin] * 0)
    return origin, slopes


def affine_fit(points: list[tuple[float, ...]], values: list[float]) -> tuple[list[float], float] | None:
    """(α, γ) with Σᵢ αᵢ·uᵢ + γ = f(u) at every grid point in the rationals the compiler reads
    (each argument and value as :func:`snapped` and :func:`~infoflow_dsl.language.exact.decimal`
    read it: RASP's 1 + 0.30000000000000004 is 13/10), each coefficient a float that reads back as
    itself; else None (the function stays a table)."""
    table = {tuple(_exact(u) for u in point): _exact(v) for point, v in zip(points, values, strict=True)}
    origin, alphas = _slopes(table)
    gamma = table[origin] - sum(a * u for a, u in zip(alphas, origin, strict=True))
    if any(decimal(float(c)) != c for c in (*alphas, gamma)):
        return None
    if all(sum(a * x for a, x in zip(alphas, u, strict=True)) + gamma == v for u, v in table.items()):
        return [float(a) for a in alphas], float(gamma)
    return None


def _exact(value: Any) -> Fraction:
    """A RASP number as the compiler reads what the translation writes for it."""
    return decimal(snapped(value))


def affine_sum(affine: tuple[list[float], float], terms: list[str]) -> str:
    """``(a - 2 * b + 1)``: the affine function written out."""
    return linear_text(list(zip(affine[0], terms, strict=True)), affine[1])


def linear_text(terms: list[tuple[float, str]], constant: float) -> str:
    """Σ cᵢ·termᵢ + constant as ``(a - 2 * b + 1)`` (zero terms left out)."""
    parts: list[str] = []
    for c, term in terms:
        if c == 0:
            continue
        factor = term if abs(c) == 1 else f"{number_text(abs(c))} * {term}"
        parts.append((f"{'-' if c < 0 else '+'} " if parts else "-" if c < 0 else "") + factor)
    if not parts:
        return operand(constant)
    tail = "" if constant == 0 else f" {'+' if constant > 0 else '-'} {number_text(abs(constant))}"
    return f"({' '.join(parts)}{tail})"


#: (α, β, γ, δ) of f(u, v) = α·u·v + β·u + γ·v + δ.
Bilinear = tuple[float, float, float, float]


def bilinear_fit(points: list[tuple[float, ...]], values: list[float]) -> Bilinear | None:
    """(α, β, γ, δ), simple fractions, with α·u·v + β·u + γ·v + δ = f(u, v) at every point of a
    grid of two arguments, to within RASP's own float rounding (10⁻¹² relative: RASP's m·(i + 1)
    and m·i + m differ in the last bit; the model computes the exact value), α ≠ 0, or None.
    The coefficients come from the grid's least corner
    (u₀, v₀) and the next value of each coordinate (u₁, v₁): α = (f₁₁ − f₁₀ − f₀₁ + f₀₀) /
    ((u₁ − u₀)(v₁ − v₀)), then β, γ, δ from the three corners; every other point checks them
    (a product u·v, a mean times the length: one product, where a table has |U|·|V| entries)."""
    table = dict(zip(points, values, strict=True))
    if len(points) < 4 or len(points[0]) != 2:
        return None
    us, vs = sorted({p[0] for p in points}), sorted({p[1] for p in points})
    if len(us) < 2 or len(vs) < 2:
        return None
    (u0, u1), (v0, v1) = us[:2], vs[:2]
    f00, f01, f10, f11 = (table.get(p) for p in ((u0, v0), (u0, v1), (u1, v0), (u1, v1)))
    if None in (f00, f01, f10, f11):
        return None
    alpha = (f11 - f10 - f01 + f00) / ((u1 - u0) * (v1 - v0))  # type: ignore[operator]
    beta = (f10 - f00) / (u1 - u0) - alpha * v0  # type: ignore[operator]
    gamma = (f01 - f00) / (v1 - v0) - alpha * u0  # type: ignore[operator]
    delta = f00 - alpha * u0 * v0 - beta * u0 - gamma * v0  # type: ignore[operator]
    fitted = (_simple(alpha), _simple(beta), _simple(gamma), _simple(delta))
    if fitted[0] == 0 or not all(abs(bilinear_value(fitted, u, v) - f) <= 1e-12 * max(1.0, abs(f))
                                 for (u, v), f in table.items()):
        return None
    return fitted


def bilinear_value(fit: Bilinear, u: float, v: float) -> float:
    alpha, beta, gamma, delta = fit
    return alpha * u * v + beta * u + gamma * v + delta


def _simple(value: float) -> float:
    """A coefficient as the float of its simple fraction (1.0000000000000002 → 1)."""
    return float(Fraction(value).limit_denominator(1000)) if abs(value) < 1e6 else value


def bilinear_text(fit: Bilinear, u: str, v: str) -> str:
    """``(α * u * v + β * u + γ * v + δ)`` written out (zero terms left out)."""
    alpha, beta, gamma, delta = fit
    return linear_text([(alpha, f"{u} * {v}"), (beta, u), (gamma, v)], delta)


def cut_between(low: float, high: float) -> str:
    """The shortest decimal in the middle half of (low, high)."""
    middle, quarter = (low + high) / 2, (high - low) / 4
    for digits in range(0, 18):
        candidate = round(middle, digits)
        if abs(candidate - middle) <= quarter:
            return number_text(candidate)
    return number_text(middle)
