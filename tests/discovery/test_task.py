"""The task: the patched effect, and the gradients the attribution methods read."""

from __future__ import annotations

import pytest
import torch
from discovery_tasks import NUMERIC, task

from infoflow_dsl.circuits import ABLATIONS

torch.set_num_threads(1)


@pytest.mark.parametrize("name", NUMERIC)
def test_nothing_ablated_moves_nothing_and_a_coefficient_of_one_is_the_ablation(name: str) -> None:
    t = task(name, "mean", "output")
    assert t.effect([]) < 1e-9
    pair = next(iter(t.graph.edges))
    key = (pair.sender, pair.receiver, pair.channel)
    for d in t.data:
        ablated = t.forward.run(d.x, [key], d.stand_ins).y
        one = t.forward.run(d.x, (), d.stand_ins, coefficients={key: torch.ones(())}).y
        assert torch.equal(ablated, one)


@pytest.mark.parametrize("ablation", ABLATIONS)
@pytest.mark.parametrize("name", NUMERIC)
def test_the_gradient_is_the_derivative_of_the_metric(name: str, ablation: str) -> None:
    """∂m_b/∂α_e from the backward pass against a central finite difference of the forward, at
    α = 0.4137 on every edge (where the ReLUs and softmax are smooth almost surely), each edge's change
    the clean run's ô_s − o_s."""
    t = task(name, ablation, "output")
    pairs, h, at = t.pairs, 2e-4, 0.4137  # the MLPs run in float32: a much smaller step is rounding noise
    d = t.data[0]
    clean = t.forward.run(d.x).outputs
    differences = {name: d.stand_ins[name] - out for name, out in clean.items()}
    gradient = next(iter(t.gradients(at)))  # (B, E), the first batch
    for index in range(0, len(pairs), max(1, len(pairs) // 6)):
        def metric(alpha: float, index: int = index) -> torch.Tensor:
            coefficients = {p: torch.tensor(alpha if i == index else at, dtype=torch.float64)
                            for i, p in enumerate(pairs)}
            return t.change(t.forward.run(d.x, (), d.stand_ins, coefficients=coefficients,
                                           differences=differences).y, d)
        numeric = (metric(at + h) - metric(at - h)) / (2 * h)
        assert torch.allclose(gradient[:, index], numeric, atol=1e-2 * (1 + numeric.abs().max()))
