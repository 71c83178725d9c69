"""Exact edge activation patching, the reference method: one forward an edge.

score(e) = mean_b |m_b(x with e ablated) − m_b(x)|, each candidate edge ablated alone under the
task's ablation. It measures what the truth measures (the output's change when the edge alone is
ablated), with the task's metric in place of the certificate's verdict.
"""

from __future__ import annotations

from ..circuits.patching import EdgeKey
from .task import DiscoveryTask


def exact_patching(task: DiscoveryTask) -> dict[EdgeKey, float]:
    return {pair: task.effect([pair]) for pair in task.pairs}
