"""Exact edge patching, the reference method: edge AUROC 1.0 against the truth of every
ablation, on the measured shipped models (the issue's acceptance; the whole plain tier is in
BENCHMARKS.md "Circuit discovery")."""

from __future__ import annotations

import pytest
import torch
from discovery_tasks import task
from shipped_models import MEASURED, shipped

from infoflow_dsl.circuits import ABLATIONS
from infoflow_dsl.discovery import discover as discovery
from infoflow_dsl.discovery.exact import exact_patching

torch.set_num_threads(1)


@pytest.mark.parametrize("ablation", ABLATIONS)
@pytest.mark.parametrize("name", MEASURED)
def test_exact_patching_ranks_every_necessary_edge_first(name: str, ablation: str) -> None:
    result = discovery.discover(shipped(name), "exact", ablation, samples=60, seed=1)
    assert result.necessary, "every measured model needs some edge"
    assert result.auroc == 1.0
    assert result.auroc_graph in (1.0, None)  # None: every edge of the graph is necessary


def test_a_score_is_the_metric_change_of_the_edge_alone() -> None:
    t = task("min_pairwise", "resample", "l2")
    scores = exact_patching(t)
    pair = max(scores, key=scores.__getitem__)
    expected = [(t.forward.run(d.x, [pair], d.stand_ins).y - d.clean).abs() for d in t.data]
    assert scores[pair] == pytest.approx(float(torch.cat(expected).mean()))
