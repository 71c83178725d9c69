"""What a token program costs beyond the efficient schedule, and why it is exact.

- **Run-time length.** ``len`` comes from uniform attention over the T' tokens reading the
  positional code's [s = 1], which gives 1/T'; reading T' exactly takes one robust ReLU step
  between consecutive values 1/(k+1) and 1/k for each k < T: 2(T − 1) FFN units, the steps'
  gap 1/(k(k+1)) ≥ 1/(T(T−1)) (docs/design.md, "The constructions"). A sum over the whole input is
  len × the mean, so it pays the same decoding (and ~3T units for the product), except a sum
  of a 0/1 body (a count), decoded from its mean and 1/len by 2 units per value (at most 2T).
- **Finite ranks.** A pairwise function of finite-valued features is a sum of as many
  indicator products as one side has values (:mod:`.finite`): its head's key and query
  dimension is that rank, V for a token (independent of T), about T for a count or a position.
- **Exactness.** Every comparison of a bracket has a smallest gap between distinct values
  (:func:`.finite.comparison_gaps`); a comparison step narrower than it is exact, so the
  guarantee holds on every input without a margin.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..language import typed as ir
from ..language.syntax import NO_SPAN, Span
from .comparisons import ComparisonTree
from .finite import comparison_gaps, smallest_gap, value_set
from .growth import TGrowth
from .schedule import Schedule, reads_length

LENGTH_LAW = ("uniform attention over the T' tokens reading [s = 1] gives 1/T'; reading T' exactly takes a "
              "robust ReLU step between 1/(k+1) and 1/k for each k < T: O(T) FFN units, 2(T − 1) (gap "
              "1/(k(k+1)) ≥ 1/(T(T−1)))")


def token_growth(program: ir.Program, schedule: Schedule) -> tuple[TGrowth, ...]:
    """The parts of a token program whose units grow with T: ``len``, whole-input sums, and the
    finite ranks that grow with T (counts, positions)."""
    if not program.over_tokens:
        return ()
    found: list[TGrowth] = []
    length = next((n for n in (program.target, *ir.sub_nodes(program.target)) if reads_length(n)), None)
    if length is not None:
        found.append(TGrowth(function="len", span=getattr(length, "span", NO_SPAN), exponent=1.0, reason=LENGTH_LAW))
    for node in schedule.tree.nodes:
        if node.kind == "sum" and not node.range_follows_query:
            found.append(TGrowth(function=node.quoted, span=node.span, exponent=1.0,
                                 reason=_sum_law(node.body, schedule)))
    for name, text, split in schedule.finite_ranks:
        if split.grows_with_length:
            node = schedule.tree.node(name)
            found.append(TGrowth(function=f"{node.quoted}: {text}", span=node.span, exponent=1.0, reason=(
                f"a pairwise function of finite-valued features, a sum of {split.rank} indicator products at "
                f"T = {program.length} (one per value of a count or a position, about T of them): the head's "
                f"key and query dimension grow linearly with T")))
    return tuple(found)


def _sum_law(body: ir.Expr, schedule: Schedule) -> str:
    """Why a sum over the whole input grows with T: a 0/1 body is decoded from its mean and 1/len
    (no len, no product), any other is len × the mean."""
    values = None if schedule.tree.finite is None else value_set(body, schedule.tree.finite)
    if values is not None and values <= {Fraction(0), Fraction(1)}:
        return ("a count (a sum of a 0/1 body, RASP's SelectorWidth) over the whole input: uniform attention gives its "
                "mean m and 1/len = u, and [count ≥ k] = [m − (k − ½)·u > 0] is a robust ReLU step for each value k "
                "past the least: O(T) FFN units, 2 per value (at most 2T), and no len, no product")
    return "a sum over the whole input is len × the mean that uniform attention gives, so it decodes len: " + LENGTH_LAW


def finite_ranks(schedule: Schedule) -> list[dict[str, Any]]:
    """Each pairwise function of finite-valued features that a score separates into indicator products."""
    return [{"node": name, "function": text, "rank": split.rank, "grows_with_T": split.grows_with_length,
             "law": "about T (the values of a count or a position)" if split.grows_with_length
             else "V (the vocabulary's size, independent of T)"}
            for name, text, split in schedule.finite_ranks]


def _span_json(span: Span | None) -> dict[str, int] | None:
    if span is None:
        return None
    return {"line": span.line, "column": span.column, "end_line": span.end_line, "end_column": span.end_column}


def _fraction_text(value: Fraction | None) -> str | None:
    return None if value is None else str(value)


def exactness(program: ir.Program, tree: ComparisonTree) -> dict[str, Any] | None:
    """The smallest gap of every comparison and of every retrieval's scores (None for a program over vectors)."""
    if not program.over_tokens:
        return None
    comparisons = [{"comparison": pair.text, "span": _span_json(pair.span), "gap": _fraction_text(pair.gap),
                    "gap_value": None if pair.gap is None else float(pair.gap),
                    "values": [pair.left_values, pair.right_values]} for pair in comparison_gaps(program)]
    retrievals = []
    for node in tree.nodes:
        if node.kind in ("argmin", "argmax") and tree.finite is not None:
            scores = value_set(node.body, tree.finite)
            gap = smallest_gap(scores, scores)
            retrievals.append({"node": node.name, "retrieval": node.quoted, "span": _span_json(node.span),
                               "score_gap": _fraction_text(gap),
                               "score_values": None if scores is None else len(scores)})
    return {"comparisons": comparisons, "retrievals": retrievals,
            "exact": all(c["gap"] is not None for c in comparisons)}


