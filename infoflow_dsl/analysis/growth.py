"""How an efficient target's parameters grow with T: sums scale what the FFNs must interpolate.

Max-position retrieval, means and exact ReLU steps cost the same at every T. A sum over n
positions does not: ``sum_<s> f(s)`` is T^n times a mean, so

- an interpolated function *inside* its body (a square, product or √ whose error is summed
  T^n times) must be T^n times finer: the wide route's ε^-1/2 units per function become
  (T^n/ε)^1/2, a factor T^(n/2);
- an interpolated function *reading* its value sees an input range T^n times wider: a grid of
  the same spacing needs T^n times more pieces.

For every interpolated function of the target, :func:`t_growth` gives the exponent g of
T^g in its unit count (wide route) with the reason; the largest is the target's. The deep
route pays log(T^(2g)/ε) instead of T^g. Arguments of argmin/argmax are scores whose error
only has to stay under the margin, which β sharpens for free: they are not amplified.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..language import typed as ir
from ..language.functions import POINTWISE
from ..language.printer import describe
from ..language.syntax import NO_SPAN, Span


@dataclass(frozen=True)
class TGrowth:
    """An interpolated function whose units grow as T^exponent (wide route)."""

    function: str
    span: Span
    exponent: float
    reason: str


def _interpolated(node: object) -> bool:
    """Does an FFN interpolate ``node`` (rather than compute it exactly or linearly)?"""
    if isinstance(node, ir.Square | ir.Norm):
        return True
    if isinstance(node, ir.Pointwise):
        return POINTWISE[node.function].interpolations > 0
    if isinstance(node, ir.Inner) or (isinstance(node, ir.Arithmetic) and node.operator == "*"):
        return _reads_tokens(node.left) and _reads_tokens(node.right)
    return False


def _reads_tokens(node: object) -> bool:
    """Does ``node`` depend on the input (rather than being a constant)?"""
    return any(isinstance(n, ir.Token) for n in (node, *ir.sub_nodes(node)))


def range_exponent(node: object) -> int:
    """k such that ``node``'s value range grows as T^k (the variables of the sums it adds up)."""
    if isinstance(node, ir.ArgPosition):
        return 0
    inner = max((range_exponent(child) for child in ir.children(node)), default=0)
    if isinstance(node, ir.Reduce) and node.kind == "sum":
        return inner + len(node.variables)
    return inner


def t_growth(target: object) -> tuple[TGrowth, ...]:
    """Every interpolated function of ``target`` whose units grow with T, outermost first."""
    found: list[TGrowth] = []
    _walk(target, 0, found)
    return tuple(found)


def _walk(node: object, summed: int, found: list[TGrowth]) -> None:
    """``summed``: the variables of the sums enclosing ``node`` (its error is added T^summed times)."""
    if _interpolated(node):
        widened = max((range_exponent(child) for child in ir.children(node)), default=0)
        if summed or widened:
            reasons = []
            if summed:
                reasons.append(f"its error is summed over T^{summed} tuples (×T^{summed / 2:g} units)")
            if widened:
                reasons.append(f"it reads a sum whose range grows as T^{widened} (×T^{widened} units)")
            found.append(TGrowth(function=describe(node), span=getattr(node, "span", NO_SPAN),
                                 exponent=summed / 2 + widened, reason=" and ".join(reasons)))
    if isinstance(node, ir.ArgPosition):
        summed = 0
    if isinstance(node, ir.Reduce) and node.kind == "sum":
        summed += len(node.variables)
    for child in ir.children(node):
        _walk(child, summed, found)
