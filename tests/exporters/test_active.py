"""``--layernorm active``: the standard ε_LN = 1e-5 and gain 1, a ±C pair, C chosen from ε.

Within ε of the reference at ε = 1e-2 in float64 and float32 (here 10,000 inputs for
min_pairwise and induction in float32, 500 to 2,000 otherwise: the HF forward is dense, and
bench/bench_export.py runs all eight at 10,000), the LayerNorm's own departure from the model
within the share the bound gave it; at C/10 that promise breaks on some input (the bound is not
vacuous).
"""

from __future__ import annotations

import json

import pytest
import torch
from exported import largest_gap, shipped

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import errors_on, model_inputs
from infoflow_dsl.pipeline.reading import program_of

#: random inputs (then 256 corners) per (program, dtype)
INPUTS = {("min_pairwise", torch.float32): 10_000, ("induction", torch.float32): 10_000,
          ("min_pairwise", torch.float64): 2_000, ("induction", torch.float64): 2_000}
OTHERWISE = 500
PROGRAMS = ["min_pairwise", "induction", "d_retrieval", "intrinsic_3"]


def active_export(model, directory, constant=None):
    ifl.export(model, directory, layernorm="active", ln_constant=constant)
    return ifl.load_exported(directory), json.loads((directory / "infoflow.json").read_text())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_active_layernorm_is_within_eps_and_within_its_share(name, dtype, tmp_path) -> None:
    model = shipped(name, dtype)
    exported, info = active_export(model, tmp_path / "out")
    ln = info["layernorm"]
    assert exported.hf.config.layer_norm_epsilon == 1e-5 and ln["gain"] == 1.0
    gains = [p.detach() for n, p in exported.hf.named_parameters() if n.endswith(("ln_1.weight", "ln_f.weight"))]
    assert all(torch.equal(g, torch.ones_like(g)) for g in gains)
    assert info["a_priori_bound"] == pytest.approx(model.config["a_priori_bound"] + ln["share"])
    assert info["a_priori_bound"] <= model.config["eps"] * (1 + 1e-12)
    target = program_of(model)
    x = model_inputs(target, INPUTS.get((name, dtype), OTHERWISE), seed=31)
    error, kept = errors_on(exported, target, x)
    assert float(error[kept].max()) <= model.config["eps"]
    with torch.no_grad():
        moved = largest_gap(exported(x[-500:]).double(), model(x[-500:].to(dtype)).double())  # corners among them
    assert moved <= ln["share"]


def test_a_tenth_of_the_constant_breaks_the_layernorms_promise(tmp_path) -> None:
    model = shipped("min_pairwise")
    _, info = active_export(model, tmp_path / "chosen")
    weak, _ = active_export(model, tmp_path / "weak", info["layernorm"]["constant"] / 10)
    target = program_of(model)
    x = model_inputs(target, 500, seed=32)
    with torch.no_grad():
        assert largest_gap(weak(x), model(x)) > info["layernorm"]["share"]
    error, kept = errors_on(weak, target, x)
    assert float(error[kept].max()) > model.config["eps"]  # and, for min_pairwise, ε itself
