"""AUROC, node truth, the top k and faithfulness, on cases computed by hand."""

from __future__ import annotations

import pytest
import torch
from discovery_tasks import task

from infoflow_dsl.discovery.scores import auroc, faithfulness, node_truth, node_view, top_k

torch.set_num_threads(1)


def test_auroc_by_hand() -> None:
    scores = {"a": 3.0, "b": 2.0, "c": 1.0, "d": 1.0}
    assert auroc(scores, {"a"}) == 1.0
    assert auroc(scores, {"c"}) == pytest.approx(0.5 / 3)  # beats nobody, ties d
    assert auroc(scores, {"a", "c"}) == pytest.approx((2 + 0.5) / 4)
    assert auroc(scores, set()) is None and auroc(scores, set(scores)) is None


def test_nodes_and_top_k() -> None:
    pairs = {("input", "a0.h0", "q"): 1.0, ("a0.h0", "m0", "in"): 5.0, ("m0", "output", "out"): 5.0}
    assert node_truth({("a0.h0", "m0", "in")}) == {"a0.h0", "m0"}
    assert node_view(pairs, ["a0.h0", "m0", "a0.h1"]) == {"a0.h0": 5.0, "m0": 5.0, "a0.h1": float("-inf")}
    assert top_k(pairs, 2) == [("a0.h0", "m0", "in"), ("m0", "output", "out")]  # a tie: in the given order


def test_faithfulness_is_one_for_the_whole_model_and_certified() -> None:
    t = task("tracr/frac_prevs", "mean", "l2")
    scores = {p: float(i) for i, p in enumerate(t.pairs)}
    points = faithfulness(t, scores, "l2", fractions=(0.4, 1.0))
    assert points[-1].k == len(t.pairs) and points[-1].faithfulness == 1.0 and points[-1].certified
    empty = t.effect(t.pairs, "l2")
    kept = set(top_k(scores, points[0].k))
    moved = t.effect([p for p in t.pairs if p not in kept], "l2")
    assert points[0].faithfulness == pytest.approx(1 - moved / empty)


def test_mibs_areas_are_the_trapezoids_of_the_faithfulness_curve() -> None:
    from infoflow_dsl.discovery.scores import mib_areas

    rising = [{"k": 1, "faithfulness": 0.0}, {"k": 10, "faithfulness": 1.0}]
    assert mib_areas(rising, 10) == pytest.approx((0.9 * 0.5, 0.9 * 0.5))
    perfect = [{"k": k, "faithfulness": 1.0} for k in (5, 1, 2)]  # any order: sorted by size
    assert mib_areas(perfect, 10) == pytest.approx((0.4, 0.0))
    overshoot = [{"k": 2, "faithfulness": 1.5}, {"k": 4, "faithfulness": 0.5}]
    assert mib_areas(overshoot, 4) == pytest.approx((0.5, 0.25))
