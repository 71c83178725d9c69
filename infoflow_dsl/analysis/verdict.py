"""The verdict's reasons: why a schedule is inefficient, with the node responsible and the law
that applies (docs/theory.md §3, "Verdict"): order ≥ 3, an order-2 score that is not a finite sum of
products of per-token features, a sum whose range follows the query, a head budget below the
intrinsic dimension (HC Thm 2), and top(k)'s one-layer bound (IF Thm 2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..language.syntax import Span
from .comparisons import ComparisonNode, ComparisonTree

if TYPE_CHECKING:
    from .plans import NodePlan


@dataclass(frozen=True)
class Problem:
    """Why a target is inefficient: the node responsible, its span, and the law that applies."""

    kind: str  # order | not-separable | top | heads | sum-range
    message: str
    law: str
    exponent: str
    node: str | None = None
    span: Span | None = None



def problems_of(tree: ComparisonTree, plans: Mapping[str, NodePlan], dimension_at: dict[int, int]) -> list[Problem]:
    problems: list[Problem] = []
    worst = max(tree.nodes, key=lambda n: n.order, default=None)
    if worst is not None and worst.order >= 3:
        problems.append(Problem(
            "order",
            f"{worst.quoted} compares {worst.order} positions jointly (order {worst.order}); max-position "
            f"retrieval keeps only the best position per query, so the {worst.order}-tuples must be "
            f"aggregated and decoded",
            "O(ε^(1 − T₀·d/E)) with T₀ growing with T (IF Thm 3: decoding the joint information of T₀ tokens "
            "from an embedding of dimension E)",
            "T₀·d/E − 1", worst.name, worst.span))
    for node in tree.nodes:
        plan = plans[node.name]
        if plan.failure is not None and node.order == 2 and not problems:
            problems.append(Problem(
                "not-separable",
                f"the score of {node.quoted} is not a finite sum of products of per-token features: "
                f"{plan.failure}",
                "O(ε^(1 − T₀·d/E)) with T₀ growing with T (IF Thm 3)", "T₀·d/E − 1", node.name, node.span))
    problems += [sum_range_problem(node) for node in tree.nodes if node.kind == "sum" and node.range_follows_query]
    return problems


def sum_range_problem(node: ComparisonNode) -> Problem:
    """A sum over a range that moves with the query: uniform attention gives the range's mean, and
    the sum is that mean times the range's size, which the model must decode from its position
    code (units growing with T) or unroll into position slots (the gather route)."""
    return Problem(
        kind="sum-range",
        message=(f"{node.quoted} is a sum whose range depends on the querying position: attention averages "
                 f"over the range, and the sum is that mean times the range's size, which the model would "
                 f"have to decode from its position code; write it as a mean, or compile it with "
                 f"--allow-inefficient (the gather route unrolls it into T position slots, exact up to rounding)"),
        law="O(T): the range's size decoded from the position code, or T unrolled slots",
        exponent="0", node=node.name, span=node.span)


def top_bound(k: int, n: int) -> str:
    return f"Ω(ε^-(T − {k + 1})/({n} + 1)) in one layer (IF Thm 2, per-head dimension n = {n})"


def head_problem(overflow: list[tuple[ComparisonNode, int, int]], budget: tuple[int, ...],
                  needed: dict[int, int], dims: dict[int, int], length: int) -> Problem:
    """The head-count bound at the first layer whose budget is below what the schedule needs."""
    short = [layer for layer in sorted(needed) if needed[layer] > (budget[layer - 1] if layer <= len(budget) else 0)]
    layer = short[0] if short else len(budget)
    s = budget[layer - 1] if layer <= len(budget) else 0
    big_d = needed.get(layer, s + 1)
    n = dims.get(layer, 1)
    k = (length / 4 - s - big_d + 1) / ((n + 1) * s + 1) - 1
    node = overflow[0][0]
    law = (f"Ω(ε^-k), k = (T/4 − s − D + 1)/((n+1)·s + 1) − 1 = {k:.3g} at T = {length} "
           f"(HC Thm 2 with s = {s} heads, D = {big_d}, n = {n}; HC conjectures L·h ≥ D for L layers)")
    return Problem(
        "heads",
        f"the head budget {','.join(map(str, budget))} is too small: layer {layer} must run {big_d} comparisons "
        f"at once (the intrinsic dimension D = {big_d}) and gets {s} heads, so {node.quoted} finds no head "
        f"within {len(budget)} layers",
        law, "(T/4 − s − D + 1)/((n+1)·s + 1) − 1", node.name, node.span)
