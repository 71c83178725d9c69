"""EAP, EAP-IG and EAP-IG on the inputs on models where their answer is known.

- The readout is linear: with the ``output`` metric the metric is linear in every edge into the
  output, so each method's score of such an edge is exact patching's, exactly (first order is
  exact).
- Integrated gradients are complete: per input, the (signed) scores of every edge sum to the
  metric's change at the end of the path (every edge's coefficient 1), up to the quadrature's
  error.
"""

from __future__ import annotations

import pytest
import torch
from discovery_tasks import NUMERIC, task

from infoflow_dsl.circuits import ABLATIONS
from infoflow_dsl.discovery.attribution import eap, eap_ig, eap_ig_inputs
from infoflow_dsl.discovery.exact import exact_patching

torch.set_num_threads(1)


@pytest.mark.parametrize("ablation", ABLATIONS)
@pytest.mark.parametrize("name", NUMERIC)
def test_every_method_is_exact_on_the_edges_into_the_linear_readout(name: str, ablation: str) -> None:
    t = task(name, ablation, "output")
    exact = exact_patching(t)
    for method in (eap, eap_ig, eap_ig_inputs):
        scores = method(t)
        into_output = [p for p in t.pairs if p[1] == "output"]
        assert into_output
        for pair in into_output:
            assert scores[pair] == pytest.approx(exact[pair], rel=1e-5, abs=1e-6), (method.__name__, pair)


@pytest.mark.parametrize("ablation", ABLATIONS)
@pytest.mark.parametrize("name", ["tracr/frac_prevs", "prefix_mean"])
def test_integrated_gradients_are_complete(name: str, ablation: str) -> None:
    t, steps = task(name, ablation, "output"), 16
    summed = [torch.zeros(()) for _ in t.data]
    for k in range(steps):
        for index, gradient in enumerate(t.gradients((k + 0.5) / steps)):
            summed[index] = summed[index] + gradient.sum(dim=1) / steps
    for total, d in zip(summed, t.data, strict=True):
        clean = t.forward.run(d.x).outputs
        differences = {name: d.stand_ins[name] - out for name, out in clean.items()}
        ones = {p: torch.ones((), dtype=torch.float64) for p in t.pairs}
        end = t.forward.run(d.x, (), d.stand_ins, coefficients=ones, differences=differences).y
        everything = t.change(end, d)
        assert torch.allclose(total, everything, rtol=1e-4, atol=1e-4 * (1 + everything.abs().max()))


def test_eap_sees_nothing_through_a_saturated_attention_pattern() -> None:
    """Tracr's reverse under zero ablation: its hard attention gives the query and key edges a
    zero gradient, although ablating them changes answers (the known failure of attribution
    patching, which integrated gradients repair). The gradient is e^(−βγ)-small, below the
    rounding of the largest score, where EAP scores 0 exactly (on every CPU, whichever way its
    attention kernel rounds it)."""
    t = task("tracr/reverse", "zero", "logit-diff")
    first, integrated, exact = eap(t), eap_ig(t), exact_patching(t)
    pairs = [p for p in t.pairs if p[1] == "a1.h0" and p[2] in "qk" and exact[p] > 0]
    assert pairs and all(first[pair] == 0.0 < integrated[pair] for pair in pairs)
