"""A token program's schedule: the layout its exact constructions place, as a :class:`Schedule`.

The token constructions decide how many heads a reduction takes (one per key class, a count and
a mean for a sum, a fetch per read position, one ``len`` head shared by all) and, on the one
stage clock (:mod:`~infoflow_dsl.analysis.stages`), the first layer that can read each head's
inputs. That layout is the model ``compile`` builds, so it is the schedule ``analyze`` reports:
there is no second placement of the same heads to drift from it. What the comparison tree
knows (the order, the finite ranks, the retrieval notes) is kept from the tree's schedule; the
heads, layers, heads per layer, dimension, information sets and verdict are the placed ones.

A program the constructions refuse has no layout: its schedule keeps the tree's heads and
gets one problem, the refusal (verdict ``inefficient``: no route builds it; a token program
has no gather route, so ``--allow-inefficient`` does not change that).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ...analysis.info_sets import information_sets
from ...analysis.schedule import Head, Schedule, comparison_dimension, heads_per_layer
from ...analysis.verdict import Problem
from ..circuit import AttentionHead, Circuit

#: Head kinds that compare nothing: they fetch a fixed or computed position, or count keys.
NOT_COMPARISONS = frozenset({"position", "length"})
NO_CONSTRUCTION_LAW = "no exact construction (the token lowering refuses it)"


def _mask_text(head: AttentionHead) -> str:
    return " and ".join(f"{left} {op} {right}" for left, op, right in head.mask)


def schedule_head(head: AttentionHead) -> Head:
    """The schedule's entry for one placed head: its name, layer, kind and what it computes;
    its query and key features are the forms its score multiplies (none for a uniform head)."""
    scored = any(not form.is_constant for form in (*head.query, *head.key))
    return Head(
        name=head.name, kind=head.kind, site=head.site, layer=head.layer, compares=head.formula,
        query_features=tuple(str(q) for q in head.query) if scored else (),
        key_features=tuple(str(k) for k in head.key) if scored else (),
        mask=_mask_text(head), dimension=max(len(head.key), 1) if scored else 1,
        is_comparison=head.kind not in NOT_COMPARISONS, reads=head.reads or "s", mask_conditions=head.mask,
        position=head.fetches,  # type: ignore[arg-type]
    )


def _budget_problem(per_layer: Sequence[int], budget: Sequence[int]) -> Problem | None:
    """The first layer whose placed heads exceed the budget ``--heads`` asked about."""
    for layer, needed in enumerate(per_layer, start=1):
        allowed = budget[layer - 1] if layer <= len(budget) else 0
        if needed > allowed:
            return Problem(
                kind="heads",
                message=(f"the head budget {','.join(map(str, budget))} is too small: the exact construction runs "
                         f"{needed} heads in layer {layer}, the budget gives {allowed}"),
                law="HC Thm 2's bound applies to fewer heads than the intrinsic dimension",
                exponent="(T/4 − s − D + 1)/((n+1)·s + 1) − 1")
    return None


def token_schedule(tree_schedule: Schedule, circuit: Circuit | None, refusal: str | None,
                   budget: Sequence[int] | None = None) -> Schedule:
    """The schedule of a token program: ``circuit``'s placed heads (None with the constructions'
    ``refusal``), with ``tree_schedule``'s tree, ranks and notes; ``budget`` is ``--heads``."""
    if circuit is None:
        problem = Problem(kind="construction", message=f"the token lowering cannot build it: {refusal}",
                          law=NO_CONSTRUCTION_LAW, exponent="—")
        return dataclasses.replace(tree_schedule, problems=(problem,), budget=tuple(budget) if budget else None)
    heads = tuple(schedule_head(h) for h in circuit.heads)
    layers = circuit.layers
    per_layer = heads_per_layer(heads, layers)
    problems: tuple[Problem, ...] = ()
    if budget is not None:
        over = _budget_problem(per_layer, budget)
        problems = (over,) if over is not None else ()
    return dataclasses.replace(
        tree_schedule, heads=heads, layers=layers, heads_per_layer=per_layer,
        dimension=comparison_dimension(heads, layers), info_sets=information_sets(heads, tree_schedule.tree, layers),
        problems=problems, interpolated_functions=0, budget=tuple(budget) if budget is not None else None)


__all__ = ["token_schedule"]
