"""``ifl.export(model, DIR, to="hf-llama")``: a stock ``LlamaForCausalLM`` (RMSNorm, RoPE neutralised).

HF's LlamaRMSNorm computes in float32 whatever the weights' dtype, so a float64 export is exact
only to float32 rounding: every RMSNorm returns its input rounded to float32, bit for bit; the
same weights with a float64 RMSNorm compute ``model(x)`` within 1e-12 (the norm is the only
inexact step), and the stock export is within ε of the reference; the rotary embedding is
cos = 1, sin = 0 at every position; the bridge's hooks hold every comparison node within its bound.
"""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import run_cli
from exported import (
    SHIPPED,
    AsModel,
    assert_comparison_nodes_at_their_hooks,
    bridge_cache,
    export_check_inputs,
    largest_error,
    largest_gap,
    shipped,
    table_model,
)
from programs import EXAMPLES_DIR
from transformer_lens.model_bridge.sources import build_bridge_from_module
from transformers import AutoModelForCausalLM

import infoflow_dsl as ifl
from infoflow_dsl.exporters.directory import ExportError
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.pipeline.reading import program_of

EXACT = 1e-12


def rms_norm_in_float64(self, h: torch.Tensor) -> torch.Tensor:
    """LlamaRMSNorm without its float32 cast: g h / √(mean(h²) + ε) in h's dtype."""
    return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def assert_exact_but_for_the_float32_norm_and_within_eps(model, directory, name: str | None, monkeypatch) -> None:
    """The stock export within ε of the reference; the same weights with a float64 RMSNorm compute
    model(x) within 1e-12 (so the float32 norm is the only inexact step)."""
    ifl.export(model, directory, to="hf-llama")
    x = export_check_inputs(model, name)
    exported = ifl.load_exported(directory)
    assert exported.dtype == torch.float64
    assert largest_error(exported, model, x) <= model.config["eps"]
    from transformers.models.llama import modeling_llama

    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", rms_norm_in_float64)
    with torch.no_grad():
        assert largest_gap(exported(x), model(x)) <= EXACT


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_example_is_exact_but_for_the_float32_norm_and_within_eps(name, tmp_path, monkeypatch) -> None:
    assert_exact_but_for_the_float32_norm_and_within_eps(shipped(name), tmp_path / "out", name, monkeypatch)


@pytest.mark.parametrize(("name", "route"), [("min_pairwise", "deep"), ("third_largest", "gather")])
def test_deep_and_gather_route_models_export_to_llama(name, route, tmp_path, monkeypatch) -> None:
    assert_exact_but_for_the_float32_norm_and_within_eps(table_model(name, route), tmp_path / "out", None, monkeypatch)


def test_a_stock_llama_whose_rmsnorm_rounds_to_float32_and_whose_rope_is_the_identity(tmp_path) -> None:
    model = shipped("nearest_neighbour")  # an embedding ReLU block, masks, K = 4
    ifl.export(model, tmp_path / "out", to="hf-llama")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model_type"] == "llama" and "auto_map" not in config and config["hidden_act"] == "relu"
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "out")  # as is: sdpa
    assert type(hf).__name__ == "LlamaForCausalLM" and hf.dtype == torch.float64
    x = model_inputs(program_of(model), 32, seed=2)
    arguments = ifl.export_inputs(tmp_path / "out", x)
    n = arguments["inputs_embeds"].shape[1]
    cos, sin = hf.model.rotary_emb(arguments["inputs_embeds"], torch.arange(n)[None])
    assert torch.equal(cos, torch.ones_like(cos)) and torch.equal(sin, torch.zeros_like(sin))
    seen = []
    norms = [m for name, m in hf.named_modules() if name.endswith("layernorm") or name == "model.norm"]
    handles = [m.register_forward_hook(lambda _, i, o: seen.append((i[0], o))) for m in norms]
    with torch.no_grad():
        y = ifl.export_outputs(tmp_path / "out", hf(**arguments))
    for handle in handles:
        handle.remove()
    assert len(seen) == 2 * hf.config.num_hidden_layers + 1
    for h, normed in seen:
        assert torch.equal(normed, h.float().double())  # RMSNorm(h) = fl32(h): exact but for float32 rounding
    assert largest_error(ifl.load_exported(tmp_path / "out"), model, x) <= model.config["eps"]
    assert y.shape == (x.shape[0], 4)


def test_eager_attention_with_its_float32_softmax_stays_within_eps(tmp_path) -> None:
    model = shipped("induction")
    ifl.export(model, tmp_path / "out", to="hf-llama")
    eager = AutoModelForCausalLM.from_pretrained(tmp_path / "out", attn_implementation="eager")
    run = AsModel(lambda x: ifl.export_outputs(tmp_path / "out", eager(**ifl.export_inputs(tmp_path / "out", x))))
    assert largest_error(run, model, model_inputs(program_of(model), 300, seed=3)) <= model.config["eps"]


@pytest.mark.parametrize("name", ["min_pairwise", "induction"])
def test_the_bridge_holds_every_comparison_node_at_the_hook_infoflow_json_names(name, tmp_path) -> None:
    model = shipped(name)
    ifl.export(model, tmp_path / "out", to="hf-llama")
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    bridge = build_bridge_from_module(hf, "LlamaForCausalLM", hf_config=hf.config)
    info = json.loads((tmp_path / "out" / "infoflow.json").read_text())
    x = ifl.sample_inputs(program_of(model), 200, seed=11)
    _, cache = bridge_cache(bridge, tmp_path / "out", x)
    run = AsModel(lambda inputs: ifl.export_outputs(tmp_path / "out", bridge(
        ifl.export_inputs(tmp_path / "out", inputs)["inputs_embeds"],
        attention_mask=ifl.export_inputs(tmp_path / "out", inputs)["attention_mask"])))
    assert largest_error(run, model, x) <= model.config["eps"]
    assert_comparison_nodes_at_their_hooks(info, cache, model, x)


def test_the_cli_exports_llama_and_refuses_gpt2_options(tmp_path) -> None:
    example = str(EXAMPLES_DIR / "min_pairwise.safetensors")
    code, text, err = run_cli(["export", example, "--to", "hf-llama", "-o", str(tmp_path / "mp")])
    assert (code, err) == (0, "") and "exported as hf-llama" in text and "exact to float32 rounding" in text
    code, text, err = run_cli(["check", str(tmp_path / "mp"), "--samples", "300"])
    assert (code, err) == (0, "") and "verdict          within ε" in text
    code, text, err = run_cli(["export", example, "--to", "hf-llama", "-o", str(tmp_path / "no"),
                               "--layernorm", "active"])
    assert code == 2 and text == "" and "hf-llama" in err
    with pytest.raises(ExportError, match="--self-contained is for --to hf-gpt2"):
        ifl.export(shipped("min_pairwise"), tmp_path / "no", to="hf-llama", self_contained=True)
    assert not (tmp_path / "no").exists()
