"""The generator behind ``randn(seed)``: specified, so every machine gets the same numbers.

``randn(seed)`` for a constant of shape (m, n) (a vector R^n is shape (n,)) fills the entries
in row-major order with i.i.d. N(0, 1/n) numbers:

1. **SplitMix64** (Steele, Lea, Flood 2014) from state ``seed``: ``state += 0x9E3779B97F4A7C15``;
   ``z = state``; ``z = (z ^ z>>30) * 0xBF58476D1CE4E5B9``; ``z = (z ^ z>>27) * 0x94D049BB133111EB``;
   ``z ^= z>>31`` (all modulo 2^64). A uniform is ``u = (z >> 11) / 2^53`` in [0, 1).
2. **Marsaglia's polar method**: ``a = 2u1 − 1``, ``b = 2u2 − 1``, ``s = a² + b²``; reject unless
   0 < s < 1; then ``a·f`` and ``b·f`` with ``f = sqrt(−2 ln s / s)`` are two standard normals,
   used in that order.
3. Each normal is multiplied by ``1/sqrt(n)``.

Only IEEE-754 basic operations are used (+, −, ×, ÷, sqrt are correctly rounded everywhere):
``ln`` is computed here from ``frexp`` and a fixed atanh series rather than the platform's
libm, whose last bit may differ between machines.
"""

from __future__ import annotations

import math

_MASK = (1 << 64) - 1
_LN2 = 0.6931471805599453


def _natural_log(s: float) -> float:
    """ln(s) for s > 0 with basic IEEE operations only: s = m·2^e, ln m = 2·atanh((m−1)/(m+1))."""
    mantissa, exponent = math.frexp(s)  # s = mantissa · 2^exponent, mantissa in [0.5, 1)
    if mantissa < 0.7071067811865476:
        mantissa *= 2.0
        exponent -= 1
    y = (mantissa - 1.0) / (mantissa + 1.0)  # |y| ≤ 0.1716
    y2 = y * y
    series = 0.0
    for k in range(41, 0, -2):  # fixed order: Σ y^k / k, Horner from the small end
        series = series * y2 + 1.0 / k
    return 2.0 * y * series + exponent * _LN2


class SplitMix64:
    """The SplitMix64 stream of 64-bit integers and uniforms in [0, 1)."""

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def next_int(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def uniform(self) -> float:
        return (self.next_int() >> 11) * (1.0 / 9007199254740992.0)


def standard_normals(seed: int, count: int) -> list[float]:
    """``count`` standard normal numbers from ``seed`` (SplitMix64 + Marsaglia polar)."""
    stream = SplitMix64(seed)
    out: list[float] = []
    while len(out) < count:
        a = 2.0 * stream.uniform() - 1.0
        b = 2.0 * stream.uniform() - 1.0
        s = a * a + b * b
        if not 0.0 < s < 1.0:
            continue
        factor = math.sqrt(-2.0 * _natural_log(s) / s)
        out.extend((a * factor, b * factor))
    return out[:count]


def randn(seed: int, shape: tuple[int, ...]) -> tuple[float, ...]:
    """Entries (row-major) of a constant of ``shape`` with i.i.d. N(0, 1/n), n = shape[-1]."""
    count = math.prod(shape)
    scale = 1.0 / math.sqrt(shape[-1])
    return tuple(v * scale for v in standard_normals(seed, count))
