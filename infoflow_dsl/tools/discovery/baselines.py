"""The baselines: node-level patching and random scores.

- ``node``: each head and MLP ablated whole (every edge out of it, one forward a node); its score
  s(n) = mean_b |Δm_b|. An edge scores min(s(sender), s(receiver)) (the input and the output
  count as +∞): a node method's edges are those between nodes it keeps.
- ``random``: uniform scores from a seeded generator (AUROC 0.5 in expectation).
"""

from __future__ import annotations

import math

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
    values = torch.rand(len(task.pairs), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return {pair: float(v) for pair, v in zip(task.pairs, values, strict=True)}
