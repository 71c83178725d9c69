"""The baselines: node-level patching and random scores.

- ``node``: each head and MLP ablated whole (every edge out of it, one forward a node); its score
  s(n) = mean_b |Δm_b|. An edge scores min(s(sender), s(receiver)) (the input and the output
  count as +∞): a node method's edges are those between nodes it keeps.
- ``random``: uniform scores, seeded by the model's graph (its nodes' formulas and its candidates)
  and the ablation, so that two models do not get the same draw in the same order (one seed for
  every model tied the baseline to the candidates' order: AUROC 0.32 on the plain tier; one a
  candidate list still to the programs sharing a shape: 0.43); AUROC 0.5 in expectation.
"""

from __future__ import annotations

import math
import zlib

import torch

from ..circuits.patching import EdgeKey
from .task import DiscoveryTask


def node_scores(task: DiscoveryTask) -> dict[str, float]:
    pairs = task.pairs
    return {node.name: task.effect([p for p in pairs if p[0] == node.name])
            for node in task.graph.nodes if node.kind in ("head", "mlp")}


def node_patching(task: DiscoveryTask) -> dict[EdgeKey, float]:
    score = node_scores(task)
    return {pair: min(score.get(pair[0], math.inf), score.get(pair[1], math.inf)) for pair in task.pairs}


def random_scores(task: DiscoveryTask, seed: int = 0) -> dict[EdgeKey, float]:
    model = [node.computes for node in task.graph.nodes]
    drawn = zlib.crc32(repr((model, task.pairs, task.ablation, seed)).encode("utf-8"))
    values = torch.rand(len(task.pairs), generator=torch.Generator().manual_seed(drawn), dtype=torch.float64)
    return {pair: float(v) for pair, v in zip(task.pairs, values, strict=True)}
