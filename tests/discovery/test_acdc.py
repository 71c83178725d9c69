"""ACDC on models where its answer is known: an edge that carries nothing (every pair outside
the graph: exactly 0 through the weights) is pruned with a growth of exactly 0; every necessary
edge is kept; the pruned edges ablated together keep the output within the certificate."""

from __future__ import annotations

import pytest
import torch
from discovery_tasks import SMALL, task

from infoflow_dsl.circuits import ABLATIONS
from infoflow_dsl.circuits.truth import outside_pairs
from infoflow_dsl.discovery.acdc import THRESHOLD, acdc

torch.set_num_threads(1)


@pytest.mark.parametrize("ablation", ABLATIONS)
@pytest.mark.parametrize("name", SMALL)
def test_acdc_prunes_what_carries_nothing_and_keeps_what_is_needed(name: str, ablation: str) -> None:
    t = task(name, ablation, "kl" if name == "tracr/reverse" else "l2")
    scores = acdc(t)
    assert set(scores) == set(t.pairs)
    for pair in outside_pairs(t.graph):
        assert scores[pair] == 0.0
    necessary = {(e.sender, e.receiver, e.channel)
                 for e, truth in zip(t.graph.edges, t.measurement.ablation(ablation).edges, strict=True)
                 if truth.necessary}
    pruned = [p for p, v in scores.items() if v <= THRESHOLD]
    assert not necessary & set(pruned)
    assert t.within_certificate(pruned)
