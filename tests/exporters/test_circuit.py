"""The circuit map of an export, read through TransformerLens 4's ``TransformerBridge`` and nnsight.

For every comparison node of min_pairwise and induction, the value at the hook ``infoflow.json``
names equals the reference within the node's bound; the bridge's scores are the compiled β q·k
(GPT-2 and the bridge divide by √head_dim, folded into W_Q); its compatibility mode (which
subtracts the mean over the output logits) leaves the outputs alone (their negated copies make
that mean 0); patching head c1 through nnsight moves min_pairwise's output where the numpy
computation says.
"""

from __future__ import annotations

import json

import pytest
import torch
from exported import assert_comparison_nodes_at_their_hooks, bridge_cache, shipped
from transformer_lens.model_bridge.sources import build_bridge_from_module
from transformers import AutoModelForCausalLM

import infoflow_dsl as ifl
from infoflow_dsl.pipeline.reading import program_of

SAMPLES = 300


def bridged(name: str, directory):
    model = shipped(name)
    ifl.export(model, directory)
    hf = AutoModelForCausalLM.from_pretrained(directory)
    return model, build_bridge_from_module(hf, "GPT2LMHeadModel", hf_config=hf.config)


@pytest.mark.parametrize("name", ["min_pairwise", "induction"])
def test_every_comparison_node_holds_its_value_at_the_hook_infoflow_json_names(name, tmp_path) -> None:
    model, bridge = bridged(name, tmp_path / "out")
    info = json.loads((tmp_path / "out" / "infoflow.json").read_text())
    x = ifl.sample_inputs(program_of(model), SAMPLES, seed=11)
    logits, cache = bridge_cache(bridge, tmp_path / "out", x)
    assert float((ifl.export_outputs(tmp_path / "out", logits) - model(x)).abs().max()) <= 1e-12
    assert_comparison_nodes_at_their_hooks(info, cache, model, x)


def test_the_bridge_scores_are_the_compiled_beta_q_k_through_the_sqrt_d_head_scaling(tmp_path) -> None:
    model, bridge = bridged("min_pairwise", tmp_path / "out")
    head_dim = json.loads((tmp_path / "out" / "infoflow.json").read_text())["layout"]["head_dim"]
    assert bridge.cfg.d_head == head_dim and head_dim > 1
    x = ifl.sample_inputs(program_of(model), 16, seed=3)
    _, cache = bridge_cache(bridge, tmp_path / "out", x)
    with torch.no_grad():
        _, compiled = ifl.hooked(model).run_with_cache(x)
    length = x.shape[1]
    for layer in range(2):
        scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][:, 0, 1:, 1:length + 1]  # tokens and readout
        want = compiled[f"blocks.{layer}.attn.hook_attn_scores"][:, 0]  # β q·k, (B, T'+1, T')
        assert float((scores - want).abs().max()) <= 1e-12 * float(want.abs().max())
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][:, 0, 1:, 1:length + 1]
        # a pattern moves by at most the scores' rounding (|scores| up to 3e5: 2^-50 of them)
        rounding = 2.0**-50 * float(want.abs().max())
        assert float((pattern - compiled[f"blocks.{layer}.attn.hook_pattern"][:, 0]).abs().max()) <= rounding


def test_compatibility_mode_centres_the_logits_and_leaves_the_outputs(tmp_path) -> None:
    model, bridge = bridged("first_three", tmp_path / "out")  # four outputs, not centred themselves
    x = ifl.sample_inputs(program_of(model), 32, seed=4)
    arguments = ifl.export_inputs(tmp_path / "out", x)
    with torch.no_grad():
        y = model(x)
        assert float(y.mean(-1).abs().max()) > 0.1  # a mean over the outputs alone would move them
        bridge.enable_compatibility_mode()
        logits = bridge(arguments["inputs_embeds"], attention_mask=arguments["attention_mask"])
    assert float(logits.mean(-1).abs().max()) <= 1e-12
    # compatibility mode refolds the LayerNorms and re-centres the weights in float64: measured 7e-10
    assert float((ifl.export_outputs(tmp_path / "out", logits) - y).abs().max()) <= 1e-8


def test_nnsight_patching_head_c1_from_a_second_input_moves_the_output_where_numpy_says(tmp_path) -> None:
    from nnsight import NNsight

    model = shipped("min_pairwise")
    ifl.export(model, tmp_path / "out")
    traced = NNsight(AutoModelForCausalLM.from_pretrained(tmp_path / "out", attn_implementation="eager"))
    head = next(h for h in json.loads((tmp_path / "out" / "infoflow.json").read_text())["heads"] if h["name"] == "c1")
    lo, hi = head["module_input_columns"]
    target = program_of(model)
    x1, x2 = ifl.sample_inputs(target, 16, seed=1), ifl.sample_inputs(target, 16, seed=2)
    with torch.no_grad():
        with traced.trace(**ifl.export_inputs(tmp_path / "out", x2)):
            z2 = traced.transformer.h[head["layer"]].attn.c_proj.input[:, :, lo:hi].save()
        with traced.trace(**ifl.export_inputs(tmp_path / "out", x1)):
            traced.transformer.h[head["layer"]].attn.c_proj.input[:, :, lo:hi] = z2
            logits = traced.lm_head.output.save()
    patched = ifl.export_outputs(tmp_path / "out", logits)
    x1n, x2n = x1.numpy(), x2.numpy()
    best = (x2n @ x2n.transpose(0, 2, 1)).argmin(-1)  # s*(t) = argmin_s <x2(t), x2(s)>
    retrieved = x2n[torch.arange(16)[:, None].numpy(), best]  # x2(s*(t))
    predicted = torch.from_numpy((x1n * retrieved).sum(-1).min(-1))
    assert float((patched - predicted).abs().max()) <= model.config["a_priori_bound"]
    assert float((patched - model(x1)).abs().max()) > 10 * model.config["a_priori_bound"]  # it moved
