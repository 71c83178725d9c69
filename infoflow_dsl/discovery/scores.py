"""A discovery method's scores against the certified truth: AUROC and faithfulness.

- **Edge AUROC** (ACDC, InterpBench, MIB): the probability that a necessary edge (``truth``, the
  same ablation) outscores an unnecessary one, ties counting ½, over every candidate pair (the
  field's definition: the candidates are all the model's edges), and over the graph's edges alone
  (``auroc_graph``: among the edges the weights connect, which ones the output needs). None where
  there is no positive or no negative.
- **Node AUROC**: a head or MLP is necessary when a necessary edge leaves or enters it; a method's
  node score is the largest score of an edge leaving or entering it (``node``'s own node scores).
- **Faithfulness** of the top-k circuit (MIB's, on ACDC's metric): every candidate outside the k
  best-scored ablated, f(k) = 1 − D(k)/D(0), D the distance from the clean output (KL / L2) and
  D(0) the empty circuit's, with whether the top-k circuit keeps the certificate; k on a grid of
  fractions of the candidates. ``certified_k``: the smallest k of the grid that keeps it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..circuits.graph import INPUT, OUTPUT, EdgeGraph
from ..circuits.patching import EdgeKey
from .task import Cost, DiscoveryTask

FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


def auroc(scores: Mapping[Any, float], positives: Collection[Any]) -> float | None:
    """P(score(positive) > score(negative)) + ½ P(tie) over the keys of ``scores``."""
    positive = [v for k, v in scores.items() if k in positives]
    negative = [v for k, v in scores.items() if k not in positives]
    if not positive or not negative:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def node_truth(necessary: Collection[EdgeKey]) -> set[str]:
    return {name for pair in necessary for name in pair[:2] if name not in (INPUT, OUTPUT)}


def node_view(scores: Mapping[EdgeKey, float], nodes: Collection[str]) -> dict[str, float]:
    """A node's score: the largest of the edges leaving or entering it."""
    best = dict.fromkeys(nodes, -math.inf)
    for pair, value in scores.items():
        for name in pair[:2]:
            if name in best:
                best[name] = max(best[name], value)
    return best


@dataclass(frozen=True)
class FaithfulPoint:
    k: int
    faithfulness: float
    certified: bool


def top_k(scores: Mapping[EdgeKey, float], k: int) -> list[EdgeKey]:
    """The k best-scored candidates (ties in the candidates' order)."""
    return [p for _, _, p in sorted((-v, i, p) for i, (p, v) in enumerate(scores.items()))[:k]]


def faithfulness(task: DiscoveryTask, scores: Mapping[EdgeKey, float], distance: str,
                 fractions: tuple[float, ...] = FRACTIONS) -> list[FaithfulPoint]:
    pairs = list(scores)
    empty = task.effect(pairs, distance)
    points = []
    for k in sorted({max(1, round(f * len(pairs))) for f in fractions}):
        kept = set(top_k(scores, k))
        outside = [p for p in pairs if p not in kept]
        moved, within = task.measured(outside, distance)
        points.append(FaithfulPoint(k, 1.0 - moved / empty if empty > 0 else 1.0, within))
    return points


def mib_areas(curve: Sequence[Mapping[str, Any]], candidates: int) -> tuple[float, float]:
    """MIB's circuit-localisation areas (Mueller et al. 2025, the circuit track's
    ``evaluate_area_under_curve``) from a faithfulness curve [{k, faithfulness}] over ``candidates``
    pairs: with x_i = k_i / candidates (the circuit's share of the edges) and f_i its faithfulness
    (1 − its distance from the model / the empty circuit's: MIB's (m(C) − m(∅)) / (m(N) − m(∅))),

        CPR = Σ_i (x_{i+1} − x_i)·(f_i + f_{i+1})/2          (higher is better),
        CMD = Σ_i (x_{i+1} − x_i)·(|1 − f_i| + |1 − f_{i+1}|)/2  (lower is better),

    the trapezoids between the curve's points on a linear axis. MIB's sizes run from 0.1% of the
    edges; these curves from :data:`FRACTIONS`' 1% (one edge at least)."""
    points = sorted((p["k"] / candidates, p["faithfulness"]) for p in curve)
    cpr = cmd = 0.0
    for (x_1, f_1), (x_2, f_2) in itertools.pairwise(points):
        cpr += (x_2 - x_1) * (f_1 + f_2) / 2
        cmd += (x_2 - x_1) * (abs(1 - f_1) + abs(1 - f_2)) / 2
    return cpr, cmd


@dataclass(frozen=True)
class DiscoveryResult:
    """One method under one ablation on one model: its scores and how they fare."""

    method: str
    ablation: str
    metric: str
    scores: dict[EdgeKey, float]
    necessary: frozenset[EdgeKey]
    graph_edges: frozenset[EdgeKey]
    auroc: float | None
    auroc_graph: float | None
    node_auroc: float | None
    faithful: tuple[FaithfulPoint, ...]
    cost: dict[str, Any]
    graph: EdgeGraph

    @property
    def certified_k(self) -> int | None:
        return next((p.k for p in self.faithful if p.certified), None)

    def to_json(self) -> dict[str, Any]:
        name = "{}->{}<{}>".format
        return {"method": self.method, "ablation": self.ablation, "metric": self.metric,
                "auroc": self.auroc, "auroc_graph": self.auroc_graph, "node_auroc": self.node_auroc,
                "candidates": len(self.scores), "necessary": sorted(name(*p) for p in self.necessary),
                "certified_k": self.certified_k,
                "faithfulness": [{"k": p.k, "faithfulness": p.faithfulness, "certified": p.certified}
                                 for p in self.faithful],
                "cost": self.cost, "scores": {name(*p): v for p, v in self.scores.items()}}


def scored(task: DiscoveryTask, method: str, run: Callable[[DiscoveryTask], dict[EdgeKey, float]],
           necessary: Collection[EdgeKey], distance: str, node_scores: Mapping[str, float] | None = None
           ) -> DiscoveryResult:
    """Run ``method`` (``run``) on ``task`` and score it against ``necessary`` (its cost: the
    method's own passes, the faithfulness curve's not counted)."""
    task.cost = Cost()
    scores = run(task)
    cost = task.cost.stop().to_json()
    graph_edges = frozenset((e.sender, e.receiver, e.channel) for e in task.graph.edges)
    nodes = [n.name for n in task.graph.nodes if n.kind in ("head", "mlp")]
    truth = frozenset(necessary)
    return DiscoveryResult(
        method, task.ablation, task.metric, scores, truth, graph_edges, auroc(scores, truth),
        auroc({p: v for p, v in scores.items() if p in graph_edges}, truth),
        auroc(dict(node_scores) if node_scores is not None else node_view(scores, nodes), node_truth(truth)),
        tuple(faithfulness(task, scores, distance)), cost, task.graph)
