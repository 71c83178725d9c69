"""ACDC (Conmy et al. 2023): greedy pruning of the edges against a threshold τ.

Start from the full model (nothing ablated). Visit the receivers from the output back to the
first layer (the reverse of the order they compute in), and at each receiver its incoming edges,
latest sender first. Ablate the edge on top of those already pruned; if the distance from the
clean output, D = mean_b |m_b(patched) − m_b(clean)| (ACDC's metric: KL on tokens, L2 on
numbers), grows by at most τ, keep it pruned, else restore it. An edge's score is that growth
when it was tried, D(pruned ∪ {e}) − D(pruned), so that a threshold on it is ACDC at that τ
(the field's ROC sweeps τ; scoring by the growth ranks the edges in one run).
One forward an edge.
"""

from __future__ import annotations

from ..circuits.patching import EdgeKey
from .task import DiscoveryTask

THRESHOLD = 1e-9  # τ: prune an edge whose ablation moves the metric by at most this


def acdc(task: DiscoveryTask, threshold: float = THRESHOLD) -> dict[EdgeKey, float]:
    graph = task.graph
    position = {node.name: node.order for node in graph.nodes}
    ordered = sorted(task.pairs, key=lambda p: (position[p[1]], p[2], position[p[0]]), reverse=True)
    pruned: list[EdgeKey] = []
    distance, scores = 0.0, {}
    for pair in ordered:
        trial = task.effect([*pruned, pair])
        scores[pair] = trial - distance
        if trial - distance <= threshold:
            pruned.append(pair)
            distance = trial
    return scores
