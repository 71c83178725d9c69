"""Shared helpers of the export tests: shipped examples in float64, exports read back, errors."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.pipeline import program_of
from infoflow_dsl.reference.measure import errors_on
from infoflow_dsl.transformer.model import CompiledTransformer

SHIPPED = sorted(path.stem for path in EXAMPLES_DIR.glob("*.safetensors"))


@cache
def shipped(name: str, dtype: torch.dtype = torch.float64) -> CompiledTransformer:
    """A shipped compiled example, its weights in ``dtype``."""
    model = ifl.load(EXAMPLES_DIR / f"{name}.safetensors", device="cpu")
    return model if model.dtype == dtype else CompiledTransformer(model.config, model.state_dict(), dtype=dtype)


def export_and_load(model: CompiledTransformer, directory: Path) -> torch.nn.Module:
    """``ifl.export`` to ``directory``, read back through AutoModelForCausalLM (an ExportedModel)."""
    ifl.export(model, directory)
    return ifl.load_exported(directory)


def largest_error(model: torch.nn.Module, compiled: CompiledTransformer, x: torch.Tensor) -> float:
    """The largest error against the reference over the inputs the guarantee covers."""
    error, kept = errors_on(model, program_of(compiled), x)
    return float(error[kept].max())


def largest_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| over the defined entries (a per-token target's undefined positions are NaN in both)."""
    assert torch.equal(a.isnan(), b.isnan())
    return float((a - b).abs().nan_to_num().max())
