"""``ifl.export(model, DIR, to="tl-native")``: TransformerLens 4's own architecture (``boot_native``).

The shipped examples (the three widest on fewer inputs) and a deep- and a gather-route model,
booted with ``TransformerBridge.boot_native`` from ``tl_config.json`` and loaded with
``load_state_dict``, compute ``model(x)`` within 1e-12 in float64 and ε of the reference;
``run_with_cache`` gives, at the hooks ``infoflow.json`` names, every comparison node of
min_pairwise and induction within its bound and the compiled scores β q·k through the
√d_head scaling; a query with no allowed key gets pattern 0 (no sink is needed).
"""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import run_cli
from exported import (
    SHIPPED,
    assert_comparison_nodes_at_their_hooks,
    bridge_cache,
    export_check_inputs,
    float32_export_gap,
    largest_error,
    largest_gap,
    shipped,
    table_model,
)
from programs import EXAMPLES_DIR
from safetensors.torch import load_file
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

import infoflow_dsl as ifl
from infoflow_dsl.exporters.directory import ExportError
from infoflow_dsl.exporters.native import load_tl_native
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.pipeline.reading import program_of

EXACT = 1e-12
FLOAT32_SLACK = 8.0


def native(name: str, directory):
    model = shipped(name)
    ifl.export(model, directory, to="tl-native")
    return model, load_tl_native(directory)


def assert_exact_and_within_eps(model, directory, name: str | None = None) -> None:
    ifl.export(model, directory, to="tl-native")
    exported = ifl.load_exported(directory)
    x = export_check_inputs(model, name)
    with torch.no_grad():
        assert largest_gap(exported(x), model(x)) <= EXACT
    assert largest_error(exported, model, x) <= model.config["eps"]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_example_runs_natively_exactly_and_within_eps(name, tmp_path) -> None:
    assert_exact_and_within_eps(shipped(name), tmp_path / "out", name)


@pytest.mark.parametrize(("name", "route"), [("min_pairwise", "deep"), ("third_largest", "gather")])
def test_deep_and_gather_route_models_run_natively(name, route, tmp_path) -> None:
    assert_exact_and_within_eps(table_model(name, route), tmp_path / "out")


def test_the_directory_is_a_config_boot_native_accepts_and_a_state_dict_it_loads_strictly(tmp_path) -> None:
    """What load_tl_native does, by hand: the two TransformerLens calls, nothing of infoflow's."""
    model = shipped("nearest_neighbour")  # an embedding ReLU block (layer 0), K = 4
    ifl.export(model, tmp_path / "out", to="tl-native")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["infoflow.json", "model.safetensors",
                                                                     "tl_config.json"]
    config = json.loads((tmp_path / "out" / "tl_config.json").read_text())
    assert config["normalization_type"] is None and config["attention_dir"] == "bidirectional"
    bridge = TransformerBridge.boot_native(TransformerBridgeConfig.from_dict({**config, "dtype": torch.float64}),
                                           dtype=torch.float64)
    missing = bridge.load_state_dict(load_file(tmp_path / "out" / "model.safetensors"), strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    x = model_inputs(program_of(model), 64, seed=2)
    arguments = ifl.export_inputs(tmp_path / "out", x)
    assert arguments["inputs_embeds"].shape == (x.shape[0], model.T + 1, config["d_model"])  # no sink
    with torch.no_grad():
        y = ifl.export_outputs(tmp_path / "out", bridge(arguments["inputs_embeds"],
                                                        attention_mask=arguments["attention_mask"]))
    assert largest_gap(y, model(x)) <= EXACT
    info = json.loads((tmp_path / "out" / "infoflow.json").read_text())
    assert info["to"] == "tl-native" and info["layout"]["embedding_layer"] == 0


@pytest.mark.parametrize("name", ["min_pairwise", "induction"])
def test_run_with_cache_holds_every_comparison_node_at_the_hook_infoflow_json_names(name, tmp_path) -> None:
    model, bridge = native(name, tmp_path / "out")
    info = json.loads((tmp_path / "out" / "infoflow.json").read_text())
    x = ifl.sample_inputs(program_of(model), 300, seed=11)
    logits, cache = bridge_cache(bridge, tmp_path / "out", x)
    assert largest_gap(ifl.export_outputs(tmp_path / "out", logits), model(x)) <= EXACT
    assert all(record["first_row"] == 0 for record in info["circuit"])
    assert_comparison_nodes_at_their_hooks(info, cache, model, x, empty_rows=True)


def test_the_scores_are_the_compiled_beta_q_k_through_the_sqrt_d_head_scaling(tmp_path) -> None:
    """TransformerLens 4.3's native bridge fills ``hook_attn_scores`` with the pattern (NativeAttention
    hands it the softmax only: a pitfall, measured here), so the scores are hook_q · hook_k / √d_head."""
    model, bridge = native("min_pairwise", tmp_path / "out")
    d_head = bridge.cfg.d_head
    assert d_head > 1
    x = ifl.sample_inputs(program_of(model), 16, seed=3)
    _, cache = bridge_cache(bridge, tmp_path / "out", x)
    with torch.no_grad():
        _, compiled = ifl.hooked(model).run_with_cache(x)
    length = x.shape[1]
    for layer in range(2):
        p = f"blocks.{layer}.attn."
        assert torch.equal(cache[p + "hook_attn_scores"], cache[p + "hook_pattern"])
        q, k = cache[p + "hook_q"][:, :, 0], cache[p + "hook_k"][:, :length, 0]  # (B, T'+1, d_head), (B, T', d_head)
        scores = q @ k.transpose(-1, -2) / d_head**0.5  # (B, T'+1, T'): keys = the tokens
        want = compiled[p + "hook_attn_scores"][:, 0]  # β q·k
        assert float((scores - want).abs().max()) <= 1e-12 * float(want.abs().max())
        pattern = cache[p + "hook_pattern"][:, 0, :, :length]
        rounding = 2.0**-50 * float(want.abs().max())  # a pattern moves by at most the scores' rounding
        assert float((pattern - compiled[p + "hook_pattern"][:, 0]).abs().max()) <= rounding


def test_a_query_with_no_allowed_key_gets_a_zero_pattern_without_a_sink(tmp_path) -> None:
    """induction's previous-token head: token 1 has no key t − 1."""
    model, bridge = native("induction", tmp_path / "out")
    head = next(h for h in json.loads((tmp_path / "out" / "infoflow.json").read_text())["heads"] if h["name"] == "p1")
    x = model_inputs(program_of(model), 8, seed=4, corners=0)
    _, cache = bridge_cache(bridge, tmp_path / "out", x)
    pattern = cache[head["hook_pattern"]][:, head["slot"]]  # (B, N, N)
    assert float(pattern[:, 0].abs().max()) == 0.0  # token 1 (row 0): every key masked, no NaN
    assert torch.equal(pattern[:, 1:-1].sum(-1), torch.ones(8, model.T - 1, dtype=pattern.dtype))


def test_a_float32_native_export_is_within_the_models_own_rounding(tmp_path) -> None:
    exported, own = float32_export_gap(tmp_path / "out", to="tl-native")
    assert exported <= FLOAT32_SLACK * own


def test_the_cli_exports_natively_check_measures_it_and_gpt2_options_are_refused(tmp_path) -> None:
    example = str(EXAMPLES_DIR / "min_pairwise.safetensors")
    code, text, err = run_cli(["export", example, "--to", "tl-native", "-o", str(tmp_path / "mp")])
    assert (code, err) == (0, "") and "exported as tl-native" in text and "load_tl_native" in text
    code, text, err = run_cli(["check", str(tmp_path / "mp"), "--samples", "300"])
    assert (code, err) == (0, "") and "verdict          within ε" in text
    for option in (["--layernorm", "active"], ["--self-contained"]):
        code, text, err = run_cli(["export", example, "--to", "tl-native", "-o", str(tmp_path / "no"), *option])
        assert code == 2 and text == "" and "tl-native" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()
    with pytest.raises(ExportError, match="--self-contained is for --to hf-gpt2"):
        ifl.export(shipped("min_pairwise"), tmp_path / "no", to="tl-native", self_contained=True)


def test_a_trained_model_exports_natively_and_says_measured_only(tmp_path) -> None:
    from compiled import program

    from infoflow_dsl.training.train import TrainSettings, train

    target = program("d_retrieval", 4)
    settings = TrainSettings(heads=(4,), d_model=16, d_head=4, d_mlp=16, steps=30, batch=64, validation=256)
    trained = train(target, settings, quiet=True).model.double()
    ifl.export(trained, tmp_path / "toy", to="tl-native")
    info = json.loads((tmp_path / "toy" / "infoflow.json").read_text())
    assert info["a_priori_bound"] is None and info["circuit"] is None
    x = ifl.sample_inputs(target, 64, seed=1)
    with torch.no_grad():
        assert largest_gap(ifl.load_exported(tmp_path / "toy")(x), trained(x)) <= EXACT
