"""Discovery tasks on the shipped models, built once per test process (small input sets)."""

from __future__ import annotations

from functools import cache

from shipped_models import graph, shipped

from infoflow_dsl.circuits.patching import EdgeForward
from infoflow_dsl.discovery.task import DiscoveryTask
from infoflow_dsl.pipeline.reading import program_of

#: small models of each kind: tokens (one and two layers), numbers over tokens, vectors
SMALL = ["tracr/reverse", "tracr/frac_prevs", "min_pairwise", "prefix_mean"]
#: the numeric ones, where the ``output`` metric is linear in the readout
NUMERIC = ["tracr/frac_prevs", "min_pairwise", "prefix_mean"]


@cache
def task(name: str, ablation: str, metric: str, samples: int = 40) -> DiscoveryTask:
    model = shipped(name)
    return DiscoveryTask(EdgeForward(model, graph(name)), program_of(model), ablation, metric, samples, seed=3)
