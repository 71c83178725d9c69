"""The metrics, each against an independent computation of what its docstring says."""

from __future__ import annotations

import pytest
import torch
from discovery_tasks import task

from infoflow_dsl.circuits.truth import numeric_error
from infoflow_dsl.discovery.metrics import default_metric, metrics_of, per_input
from infoflow_dsl.measure.vectors import answer_margins, wrong_answers

torch.set_num_threads(1)


def _perturbed(y: torch.Tensor) -> torch.Tensor:
    return y + torch.randn(y.shape, generator=torch.Generator().manual_seed(0), dtype=y.dtype) * y.std()


def test_token_metrics() -> None:
    d = task("tracr/reverse", "zero", "kl").data[-1]
    y = _perturbed(d.clean)
    margins = answer_margins(y, d.batch.truth)
    expected = torch.where(margins.isinf(), 0.0, margins).sum(dim=1)  # undefined sites count 0
    assert torch.allclose(per_input("logit-diff", y, d.clean, d.batch), expected)
    wrong, _ = wrong_answers(y, d.batch.truth)
    assert torch.equal(per_input("accuracy", y, d.clean, d.batch), wrong.sum(dim=1).double())
    assert per_input("kl", d.clean, d.clean, d.batch).abs().max() < 1e-12
    p, q = d.clean.softmax(-1), y.softmax(-1)
    kl = (p * (p.log() - q.log())).sum(-1)
    assert torch.allclose(per_input("kl", y, d.clean, d.batch), torch.where(d.batch.truth >= 0, kl, 0.0).sum(1))


def test_numeric_metrics() -> None:
    d = task("min_pairwise", "zero", "l2").data[0]
    y = _perturbed(d.clean)
    assert torch.equal(per_input("output", y, d.clean, d.batch), y)
    assert torch.allclose(per_input("l2", y, d.clean, d.batch), (y - d.clean).abs())
    assert torch.equal(per_input("error", y, d.clean, d.batch), numeric_error(y, d.batch))


def test_defaults_and_unknown() -> None:
    reverse, frac = task("tracr/reverse", "zero", "kl").program, task("tracr/frac_prevs", "zero", "l2").program
    assert (default_metric(reverse, "eap"), default_metric(reverse, "acdc")) == ("logit-diff", "kl")
    assert (default_metric(frac, "eap-ig"), default_metric(frac, "exact")) == ("output", "l2")
    assert "accuracy" in metrics_of(reverse) and "error" in metrics_of(frac)
    d = task("min_pairwise", "zero", "l2").data[0]
    with pytest.raises(ValueError, match="unknown metric"):
        per_input("kl", d.clean, d.clean, d.batch)
