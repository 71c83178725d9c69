"""``ifl.export(..., self_contained=True)``: the masks as penalties in the weights, no mask passed.

Masked models (causal_similarity: key < query; induction: previous token and a range;
min_pairwise: unmasked heads, which read later keys, so ``is_causal: false``; nearest_neighbour:
an embedding ReLU block) loaded with ``AutoModelForCausalLM`` under eager and sdpa attention and
called with ``inputs_embeds`` alone match ``model(x)`` within 1e-12 in float64 and ε of the
reference; the forbidden keys get exactly zero attention; the score bound the penalty comes from
holds on the measured scores; the construction is refused where it cannot be exact.
"""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import run_cli
from exported import float32_export_gap, largest_error, largest_gap, shipped
from programs import EXAMPLES_DIR
from transformers import AutoModelForCausalLM

import infoflow_dsl as ifl
from infoflow_dsl.exporters.directory import ExportError
from infoflow_dsl.exporters.inputs import allowed_keys
from infoflow_dsl.exporters.layout import plan
from infoflow_dsl.exporters.penalty import UNDERFLOW, PenaltyError, score_bound
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.transformer.model import CompiledTransformer

SAMPLES = 500
EXACT = 1e-12
#: float32: |export − model64| at most this many times |model32 − model64| (as test_directory's)
FLOAT32_SLACK = 8.0
MASKED = ["causal_similarity", "induction", "min_pairwise", "nearest_neighbour"]


def hf(directory, implementation: str):
    return AutoModelForCausalLM.from_pretrained(directory, attn_implementation=implementation).eval()


@pytest.mark.parametrize("name", MASKED)
def test_a_self_contained_export_computes_the_model_with_no_mask_under_eager_and_sdpa(name, tmp_path) -> None:
    model = shipped(name)
    ifl.export(model, tmp_path / "out", self_contained=True)
    info = json.loads((tmp_path / "out" / "infoflow.json").read_text())
    penalty = info["self_contained"]
    assert penalty["penalty"] >= 2 * (2 * penalty["score_bound"] + UNDERFLOW[torch.float64])
    x = model_inputs(program_of(model), SAMPLES, seed=5)  # length T: 500 random inputs, then 256 corners
    arguments = ifl.export_inputs(tmp_path / "out", x)
    assert set(arguments) == {"inputs_embeds"}
    with torch.no_grad():
        expected = model(x)
        for implementation in ("eager", "sdpa"):
            y = ifl.export_outputs(tmp_path / "out", hf(tmp_path / "out", implementation)(**arguments))
            assert largest_gap(y, expected) <= EXACT, implementation
    assert largest_error(ifl.load_exported(tmp_path / "out"), model, x) <= model.config["eps"]


def test_is_causal_false_is_written_exactly_when_a_slot_reads_later_keys_and_is_needed(tmp_path) -> None:
    """intrinsic_2's token s reads every t (max_t <x(s), A x(t)>): with the default (causal) GPT-2 the same
    weights are wrong (min_pairwise's are not: min over s ≤ t of a symmetric form, then over t, is its min)."""
    for name, reads_later in [("min_pairwise", True), ("intrinsic_2", True), ("induction", False),
                              ("causal_similarity", False)]:
        ifl.export(shipped(name), tmp_path / name, self_contained=True)
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert ("is_causal" in config) == reads_later and config.get("is_causal", False) is False
    model = shipped("intrinsic_2")
    directory = tmp_path / "intrinsic_2"
    x = model_inputs(program_of(model), 64, seed=3, corners=0)
    with torch.no_grad():
        assert largest_gap(ifl.export_outputs(directory, hf(directory, "sdpa")(**ifl.export_inputs(directory, x))),
                           model(x)) <= EXACT
        config = json.loads((directory / "config.json").read_text())
        del config["is_causal"]
        (directory / "config.json").write_text(json.dumps(config))
        y = ifl.export_outputs(directory, hf(directory, "sdpa")(**ifl.export_inputs(directory, x)))
    assert largest_gap(y, model(x)) > 10 * model.config["eps"]


def test_the_forbidden_keys_get_exactly_zero_attention_and_the_plain_export_needs_its_mask(tmp_path) -> None:
    model = shipped("induction")
    ifl.export(model, tmp_path / "sc", self_contained=True)
    ifl.export(model, tmp_path / "plain")
    info = json.loads((tmp_path / "sc" / "infoflow.json").read_text())
    io = ifl.load_exported(tmp_path / "sc").io
    allowed = allowed_keys(io.slot_masks, model.T)  # (H, N, N)
    x = model_inputs(program_of(model), 32, seed=4, corners=0)
    with torch.no_grad():
        out = hf(tmp_path / "sc", "eager")(**ifl.export_inputs(tmp_path / "sc", x), output_attentions=True)
        plain = hf(tmp_path / "plain", "eager")(inputs_embeds=ifl.export_inputs(tmp_path / "plain", x)["inputs_embeds"])
    for head in info["heads"]:
        pattern = out.attentions[head["layer"]][:, head["slot"]]  # (B, N, N)
        assert float(pattern[:, ~allowed[head["slot"]]].abs().max()) == 0.0
    # the export without penalties, called without its mask, is a different function
    assert largest_gap(ifl.export_outputs(tmp_path / "plain", plain), model(x)) > 10 * model.config["eps"]


@pytest.mark.parametrize("name", ["induction", "min_pairwise"])
def test_the_score_bound_holds_on_the_measured_scores(name) -> None:
    model = shipped(name)
    bound, norm = score_bound(model)
    x = model_inputs(program_of(model), 300, seed=6)
    with torch.no_grad():
        _, cache = ifl.hooked(model).run_with_cache(x)
        stream = model.residual_stream(x)
    scores = max(float(cache[f"blocks.{layer}.attn.hook_attn_scores"].nan_to_num(0, 0, 0).abs().max())
                 for layer in range(len(model.blocks)))
    assert 0 < scores <= bound
    assert max(float(h.abs().sum(-1).max()) for h in stream) <= norm


def test_a_float32_self_contained_export_is_within_the_models_own_rounding(tmp_path) -> None:
    exported, own = float32_export_gap(tmp_path / "out", self_contained=True)
    assert exported <= FLOAT32_SLACK * own


def test_the_active_layernorm_and_the_penalties_together_stay_within_eps(tmp_path) -> None:
    model = shipped("induction")
    ifl.export(model, tmp_path / "out", self_contained=True, layernorm="active")
    x = model_inputs(program_of(model), 500, seed=8)
    assert largest_error(ifl.load_exported(tmp_path / "out"), model, x) <= model.config["eps"]


def test_other_lengths_and_inexact_penalties_are_refused_with_the_reason(tmp_path) -> None:
    model = shipped("causal_similarity")
    ifl.export(model, tmp_path / "out", self_contained=True)
    short = model_inputs(program_of(model), 4, seed=1, corners=0)[:, :5]
    with pytest.raises(ValueError, match="exactly T = 32 tokens"):
        ifl.export_inputs(tmp_path / "out", short)
    state = dict(model.state_dict())
    state["embed.W_E"] = state["embed.W_E"] * 1e6  # a residual of ‖h‖₁ ~ 1e7: the penalty's rounding is too large
    loud = CompiledTransformer(model.config, state, dtype=torch.float32)
    with pytest.raises(PenaltyError, match="more than their own rounding"):
        plan(loud, self_contained=True, dtype=torch.float32)
    with pytest.raises(ExportError, match="do not compute the program"):  # export refuses such weights first
        ifl.export(loud, tmp_path / "loud", self_contained=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing half-written


def test_the_cli_flag_prints_the_penalty_and_check_measures_it(tmp_path) -> None:
    out = tmp_path / "ind"
    code, text, err = run_cli(["export", str(EXAMPLES_DIR / "induction.safetensors"), "-o", str(out),
                               "--self-contained"])
    assert (code, err) == (0, "")
    assert "penalties in the weights" in text and "-> inputs_embeds\n" in text
    code, text, err = run_cli(["check", str(out), "--samples", "300"])
    assert (code, err) == (0, "") and "verdict          within ε" in text
