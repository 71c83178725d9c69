"""Scores of sharp heads: sign·body as Σ q(row)·k(key), with the error the factors bring.

:func:`score` separates a body into products of per-position features (``separate``), each
factor re-quantised (a step table) where its error would spend more than its share of the
budget; :func:`distance_score` writes −|A(s) − B(t)| of finite A, B by cuts, whose factors are
indicators (rounding ~ϱ·T rather than the ϱ·T² of (A − B)²); :func:`gap` is the smallest gap
between distinct values, which sets β and the tie-break.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

from ...language import typed as ir
from ...language.printer import describe
from ..circuit import LinearForm
from . import ffn
from .builder import Feature, constant_feature
from .context import LoweringContext
from .separate import polynomial_terms, separated_terms
from .widths import WidthRatio


class ScoreContext(LoweringContext, Protocol):
    """What a score reads of the lowering: its :class:`~.context.LoweringContext`, and a finite
    expression as the steps [A ≥ v] a distance cuts it into, or as a selector width's ratio."""

    def stepped(self, expr: ir.Expr, row: str) -> Feature:
        """``expr``'s feature, built (where it is a selector width) with each step in a direction of its own."""
        ...

    def ratio(self, expr: ir.Expr, row: str) -> WidthRatio | None:
        """``expr``'s (m = S/c, u = 1/c) where it is a selector width S, else None."""
        ...

#: (query form, key form) pairs of a bilinear score, the stage its factors are ready, its error
Score = tuple[list[tuple[LinearForm, LinearForm]], int, float]
#: a distance score, and the factor its lead over the losers was scaled by (1: none), which the
#: tie-break and the error budget scale by too
DistanceScore = tuple[list[tuple[LinearForm, LinearForm]], int, float, float]


def value_gap(values: frozenset[Fraction] | None) -> float | None:
    """The smallest difference between two distinct values (None: fewer than two, or not finite)."""
    if values is None or len(values) < 2:
        return None
    return float(min(b - a for a, b in itertools.pairwise(sorted(values))))


def signed_sum(parts: list[tuple[Fraction, ir.Expr]]) -> ir.Expr:
    """Σ c·e as one expression (for its value set), each c exactly."""
    total: ir.Expr | None = None
    for coefficient, expr in parts:
        term = expr if coefficient == 1 else ir.Arithmetic(
            "*", ir.NumberLiteral(float(coefficient), exact=coefficient), expr, ir.SCALAR)
        total = term if total is None else ir.Arithmetic("+", total, term, ir.SCALAR)
    return total if total is not None else ir.NumberLiteral(0.0)


def distance_score(lowering: ScoreContext, body: ir.Expr, key: str,
                   row: str, sign: float, budget: float) -> DistanceScore | None:
    """−|A(s) − B(t)| for finite A, B, by cuts: with the sorted union of their values c₀ < … < cₙ,
    |A − B| = Σₖ (cₖ − cₖ₋₁)·|[A ≥ cₖ] − [B ≥ cₖ]|, and |a − b| = a + b − 2ab for indicators, so
    −|A − B| = Σₖ Δₖ·2[A ≥ cₖ][B ≥ cₖ] − (A − c₀) + (a term of t alone, which moves no winner).
    Its factors are indicators: the score's rounding stays ~ϱ·T, not ϱ·T² as with (A − B)².
    Cheaper where they certify within ``budget``, in this order: a selector width over every key
    by its scaled square (:func:`scaled_square`), a count spread into steps by its square
    (:func:`squared_distance`). None where the body is not such an |A − B|."""
    if not (isinstance(body, ir.Pointwise) and body.function == "abs"):
        return None
    terms = polynomial_terms(body.arguments[0], key, row)
    if terms is None:
        return None
    key_part = [(c, k) for c, q, k in terms if k is not None and q is None]
    query_part = [(c, q) for c, q, k in terms if k is None]
    if len(key_part) + len(query_part) != len(terms) or not key_part:
        return None
    if len(key_part) == 1 and key_part[0][0] == 1.0:
        scaled = lowering.builder.tried(lambda: scaled_square(lowering, key_part[0][1], key,
                                                              lambda: _query_side(lowering, query_part, row), budget))
        if scaled is not None:
            return scaled
    keyed = [(float(c), lowering.stepped(k, key)) for c, k in key_part]
    a = ffn.linear(keyed, None)
    a_values = lowering.values(signed_sum([(c, k) for c, k in key_part]))
    if a_values is not None and len(keyed) == 1 and keyed[0][1].values is not None:  # the feature's own, if fewer
        a_values &= frozenset(Fraction(keyed[0][0]) * v for v in keyed[0][1].values)
    b = _query_side(lowering, query_part, row)
    if a_values is None or b is None:
        return None
    a = Feature(a.form, a_values, a.stage, a.error)
    squared = squared_distance(lowering, a, b)
    if squared is not None and squared[2] < budget:  # else by cuts, whose error stays ~ϱ·T (float32, long T)
        return (*squared, 1.0)
    cuts = sorted(a.values | b.values)  # type: ignore[operator]
    score: list[tuple[LinearForm, LinearForm]] = []
    stage, error = max(a.stage, b.stage), 0.0
    for low, high in itertools.pairwise(cuts):
        at_a, at_b = ffn.at_least(lowering.builder, a, high, "A"), ffn.at_least(lowering.builder, b, high, "B")
        spacing = float(high - low)  # key [A ≥ c], query Δ·(2[B ≥ c] − 1)
        score.append((at_b.form.scaled(2.0 * spacing).plus(LinearForm.const(-spacing)), at_a.form))
        stage = max(stage, at_a.stage, at_b.stage)
        error += spacing * (2 * at_b.error + at_a.error + 2 * at_a.error * at_b.error)
    return score, stage, error, 1.0


def _query_side(lowering: ScoreContext, query_part: list[tuple[Fraction, ir.Expr | None]],
                row: str) -> Feature | None:
    """B(t) = −Σ (the query's terms of A − B), with its exact values (None where not finite)."""
    offset = Fraction(-sum(c for c, q in query_part if q is None))
    b = ffn.linear([(-float(c), lowering.feature(q, row)) for c, q in query_part if q is not None], None, float(offset))
    b_values = lowering.values(signed_sum([(-c, q) for c, q in query_part if q is not None]))
    if b_values is None:
        return None
    return Feature(b.form, frozenset(v + offset for v in b_values), b.stage, b.error)


def scaled_square(lowering: ScoreContext, expr: ir.Expr, key: str, query: Callable[[], Feature | None],
                  budget: float) -> DistanceScore:
    """u·(2A·B − A²) for a selector width A = m/u over every key (:class:`.widths.WidthRatio`: u = 1/n
    at every key of a sequence, so multiplying by it moves no winner), B = ``query()``.

    With A's values v₀ < … < vₙ (whole numbers), A² on them is the hinge interpolation
    v₀² + (v₀ + v₁)(A − v₀) + Σ_{k=1}^{n−1} cₖ·relu(A − vₖ), cₖ = v_{k+1} − v_{k−1}, and
    u·relu(A − vₖ) = relu(m − vₖ·u), so u·A² = (v₀ + v₁)·m + Σₖ cₖ·relu(m − vₖ·u) + (terms of u
    alone, the same at every key: dropped). The score (2B − v₀ − v₁)·m − Σₖ cₖ·relu(m − vₖ·u) has the
    winners of −|A − B|; where 2A·B − A² leads by 1 it leads by u ≥ 1/T, so the tie-break and the
    budget scale by 1/T (the fourth element). Cost: n − 1 units into one direction (2 weights in,
    1 out) and two score dimensions, where A's steps cost 2 units a value and S itself is never
    decoded. Error: the hinges pass Σₖ cₖ·(e_m + vₖ·e_u) on (relu is 1-Lipschitz), the query's
    2·e_B meets |m| ≤ 1 (a width's mean: S ≤ c), and the products round by 4ϱ·(max|q| + Σₖ cₖ).
    Raises NoConstruction where it does not apply or does not certify (within ``builder.tried``)."""
    ratio = lowering.ratio(expr, key)
    b = query() if ratio is not None and ratio.shared else None
    if ratio is None or b is None or b.values is None or not all(
            v.denominator == 1 for v in (*ratio.values, *b.values)) or len(ratio.values) < 2:
        raise lowering.refuse(expr, "not a width over every key scored against whole numbers")
    v, m, u = ratio.values, ratio.mean, ratio.reciprocal
    hinges = [(float(v[k + 1] - v[k - 1]), Feature(m.form.plus(u.form, -float(v[k])), None, max(m.stage, u.stage),
                                                   m.error + float(v[k]) * u.error), 2.0)
              for k in range(1, len(v) - 1)]
    square = ffn.hinge_sum(lowering.builder, hinges, f"u·({describe(expr)})² past its linear part, by hinges")
    q_max = max(abs(2 * float(w) - float(v[0] + v[1])) for w in b.values)
    spread = sum(c for c, _, _ in hinges)
    error = (q_max * m.error + 2 * b.error * (1 + m.error) + square.error
             + 4 * lowering.builder.unit_roundoff * (q_max + spread))
    scale = 1.0 / lowering.builder.length
    if error >= budget * scale:
        raise lowering.refuse(expr, f"its scaled square is within {error:.3g}, not {budget * scale:.3g}")
    score = [(b.form.scaled(2.0).plus(LinearForm.const(-float(v[0] + v[1]))), m.form)]
    if hinges:
        score.append((LinearForm.const(-1.0), square.form))
    return score, max(b.stage, square.stage, m.stage), error, scale


def squared_distance(lowering: ScoreContext, a: Feature, b: Feature) -> Score | None:
    """−(A − B)² + B² = 2A·B − A² where A's steps [A ≥ vₖ] are built already (a count spread
    into its steps, :meth:`~.lower.TokenLowering.stepped`): then A = v₀ + Σₖ (vₖ − vₖ₋₁)·[A ≥ vₖ]
    and A² = v₀² + Σₖ (vₖ² − vₖ₋₁²)·[A ≥ vₖ] are both linear in the steps (they are nested), so
    the key reads them and the query reads B itself: no step of B, two score dimensions. The
    same winners as −|A − B|; for whole-numbered A and B its gap is at least |A − B|'s (1), the
    tie-break's unit. None where A's steps are not all built, or a value is not whole."""
    assert a.values is not None and b.values is not None
    if not all(v.denominator == 1 for v in a.values | b.values):
        return None
    ordered = sorted(a.values)
    steps = [ffn.known_step(lowering.builder, a, v) for v in ordered[1:]]
    if any(step is None for step in steps):
        return None
    square = LinearForm.const(float(ordered[0] ** 2))
    error = 0.0
    for step, (low, high) in zip(steps, itertools.pairwise(ordered), strict=True):
        assert step is not None
        square = square.plus(step.form, float(high * high - low * low))
        error += float(high * high - low * low) * step.error
    products = 2 * (b.magnitude + b.error) * (a.magnitude + a.error) + float(max(v * v for v in a.values))
    error += 2 * (b.magnitude * a.error + a.magnitude * b.error + a.error * b.error)
    error += 4 * lowering.builder.unit_roundoff * products  # the score's own rounding
    score = [(b.form.scaled(2.0), a.form), (LinearForm.const(-1.0), square)]
    return score, max(a.stage, b.stage, *(step.stage for step in steps if step is not None)), error


def score_terms(lowering: ScoreContext, body: ir.Expr, key: str, row: str, sign: float,
           budget: float) -> Score:
    """sign·body as Σ q(row)·k(key) (terms not reading the key dropped: they move no winner);
    the stage all factors are ready and the score's error. A factor whose error would spend
    more than its share of ``budget`` is re-quantised first (a table resets it to rounding)."""
    terms = separated_terms(body, key, row, lowering.domain)
    if terms is None:
        raise lowering.refuse(body, "the score is not a sum of products of per-position features")
    one = constant_feature(Fraction(1))
    factors = [(c, lowering.feature(q, row) if q is not None else one, lowering.feature(k, key))
               for c, q, k in terms if k is not None]
    share = budget / (2 * max(len(factors), 1))

    def exact_enough(f: Feature, other: Feature, coefficient: float) -> Feature:
        if abs(coefficient) * f.error * (other.magnitude + other.error) < share:
            return f
        return ffn.requantised(lowering.builder, f, describe(body))

    score, stage, error = [], 0, 0.0
    for coefficient, q, k in factors:
        q, k = exact_enough(q, k, float(coefficient)), exact_enough(k, q, float(coefficient))
        score.append((q.form.scaled(sign * coefficient), k.form))
        stage = max(stage, q.stage, k.stage)
        error += abs(coefficient) * (q.error * k.magnitude + k.error * q.magnitude + q.error * k.error)
    return score, stage, error

