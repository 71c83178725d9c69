"""The node baseline against the model's own hooks, and the random baseline's seeding."""

from __future__ import annotations

import math

import pytest
import torch
from discovery_tasks import task

from infoflow_dsl.discovery.baselines import node_patching, node_scores, random_scores

torch.set_num_threads(1)


@pytest.mark.parametrize("name", ["tracr/reverse", "min_pairwise"])
def test_a_nodes_score_is_its_removal_at_its_own_hook(name: str) -> None:
    """Zero ablation of every edge out of a node = zeroing its output at its TransformerLens hook
    in ``model.run`` (an independent path), measured with the same metric."""
    t = task(name, "zero", "kl" if name == "tracr/reverse" else "l2")
    scores = node_scores(t)
    model = t.forward.model
    for node in t.graph.nodes:
        if node.kind not in ("head", "mlp"):
            continue
        hook = f"blocks.{node.layer}.attn.hook_z" if node.kind == "head" else f"blocks.{node.layer}.hook_mlp_out"

        def tap(where: str, value: torch.Tensor, hook: str = hook, index: int | None = node.index) -> torch.Tensor:
            if where != hook:
                return value
            value = value.clone()
            if index is None:
                value.zero_()
            else:
                value[:, :, index] = 0
            return value

        moved = []
        for d in t.data:
            with torch.no_grad():
                y = model.run(d.x, tap).to(torch.float64)
            moved.append(t.change(y, d).abs())
        assert scores[node.name] == pytest.approx(float(torch.cat(moved).mean()), rel=1e-4, abs=1e-6)
    edges = node_patching(t)
    for (sender, receiver, _), value in edges.items():
        assert value == min(scores.get(sender, math.inf), scores.get(receiver, math.inf))


def test_random_scores_are_seeded_and_uniform() -> None:
    t = task("min_pairwise", "zero", "l2")
    first, again, other = random_scores(t, 0), random_scores(t, 0), random_scores(t, 1)
    assert first == again and first != other
    assert all(0.0 <= v < 1.0 for v in first.values())
