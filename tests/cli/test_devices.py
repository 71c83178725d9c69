"""The ``--device`` flag: resolved as compile resolves it, a model moved there as a copy (the
caller's stays), a bad name a UsageError."""

from __future__ import annotations

import pytest
import torch
from shipped_models import shipped

from infoflow_dsl.cli.common import model_on, resolved_device
from infoflow_dsl.errors import UsageError
from infoflow_dsl.pipeline.devices import on_device


def test_the_default_is_cuda_where_present_and_a_bad_name_is_a_usage_error() -> None:
    assert resolved_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolved_device("cpu") == torch.device("cpu")
    for bad in ("tpu", "cuda:99", ""):
        with pytest.raises(UsageError, match=f"--device {bad}"):
            resolved_device(bad)


def test_a_model_is_moved_as_a_copy_and_left_alone_where_it_is(device: str) -> None:
    model = shipped("min_pairwise")
    assert on_device(model, None) is model and on_device(model, "cpu") is model
    moved = model_on(model, device)
    assert moved.device.type == device and model.device.type == "cpu"
    assert (moved is model) == (device == "cpu")
    x = torch.rand(4, model.T, model.d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(moved(x).cpu(), model(x), rtol=1e-5, atol=1e-6)
