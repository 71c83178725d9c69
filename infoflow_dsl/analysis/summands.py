"""A typed expression as a signed sum of terms: what normalisation hoists out of a reduction
(:mod:`.normalise`) and what the pair-symmetry identities compare (:mod:`.pair_symmetry`)."""

from __future__ import annotations

from ..language import typed as ir


def summands(expr: ir.Expr, sign: int = 1) -> list[tuple[int, ir.Expr]]:
    """``expr`` as a signed sum of terms (flattening +, − and unary −): ``a - (b - c)`` is
    [(1, a), (−1, b), (1, c)]."""
    if isinstance(expr, ir.Arithmetic) and expr.operator in "+-":
        right_sign = sign if expr.operator == "+" else -sign
        return summands(expr.left, sign) + summands(expr.right, right_sign)
    if isinstance(expr, ir.Negate):
        return summands(expr.argument, -sign)
    return [(sign, expr)]
