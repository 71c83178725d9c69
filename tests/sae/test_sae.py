"""infoflowc sae: a sparsify SAE on a superposed model's residual, scored against the dictionary."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition.dictionary import features
from infoflow_dsl.sae.score import Truth, score, shared_directions
from infoflow_dsl.sae.train import choose_hook, hook_rows, model_inputs, residual_hooks, truth_at

torch.set_num_threads(1)

TOKENS = ", ".join(f'"{chr(97 + i)}"' for i in range(8))
REVERSE = f"input x : token {{{TOKENS}}}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n"
HOOK = "blocks.1.hook_resid_mid"
HIST = f"input x : token {{{TOKENS}}}\nlength T = 4\ntarget(t) = sum_<s> [x(s) == x(t)]\n"
PACKED_HOOK = "blocks.0.hook_resid_mid"


@lru_cache(maxsize=1)
def _model() -> ifl.CompiledTransformer:
    return ifl.compile(ifl.parse_program(REVERSE, "reverse8.iflow"), samples=0, residual=17)


@lru_cache(maxsize=1)
def _packed() -> ifl.CompiledTransformer:
    """hist over 8 tokens at T = 4 in d_model = 9: 18 features, packed numbers sharing directions."""
    return ifl.compile(ifl.parse_program(HIST, "hist8.iflow"), samples=0, residual=9)


def test_features_sharing_a_direction_are_grouped_and_distinct_ones_are_not() -> None:
    u = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.6, 0.8], [0.0, 1.0, 1e-12]],
                     dtype=torch.float64)
    truth = Truth(("a", "b", "c", "d", "e"), u / u.norm(dim=1, keepdim=True), torch.zeros(1, 5, dtype=torch.bool))
    assert shared_directions(truth) == [("a", "c"), ("b", "e")]
    assert shared_directions(Truth(("a", "b"), u[:2], truth.active[:, :2])) == []


def test_without_a_hook_the_hook_with_the_largest_feature_ratio_is_chosen() -> None:
    model = _packed()
    choice = choose_hook(model)
    assert set(choice["hooks"]) == set(residual_hooks(model.n_layers))
    assert choice["hook"] == PACKED_HOOK and choice["features"] == 18 and choice["d_model"] == 9
    assert choice["ratio"] == 2.0 == max(choice["hooks"].values()) and choice["shared"] == 17
    assert "18 features in d_model = 9" in choice["reason"]
    # a tie goes to the earliest hook: the reverse's alive set is the same from blocks.0.hook_resid_mid on
    ratios = choose_hook(_model())["hooks"]
    assert choose_hook(_model())["hook"] == next(h for h, r in ratios.items() if r == max(ratios.values()))


def test_the_command_names_the_chosen_hook_and_the_features_sharing_a_direction(tmp_path: Path) -> None:
    path = tmp_path / "hist8.safetensors"
    ifl.save(_packed(), path)
    code, out, err = run_cli(["sae", str(path), "--steps", "5"])
    assert code == 0, err
    assert f"hook {PACKED_HOOK} (no --hook): the most superposition: 18 features in d_model = 9" in out
    assert f"at {PACKED_HOOK}: 18 true features" in out
    assert "note: 17 of the 18 true features share a direction" in out and "upper bound" in out
    assert "  h1:uniform[2], x=b" in out.splitlines()
    code, out, err = run_cli(["sae", str(path), "--hook", PACKED_HOOK, "--steps", "5", "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["hook_choice"] is None and result["hook"] == PACKED_HOOK
    assert len(result["shared_directions"]) == 8 and ["h1:uniform[3]", "x=c"] in result["shared_directions"]
    assert "upper bound" in result["shared_note"]
    assert result["baselines"]["residual_basis"]["recovered"] == 1.0  # the saturation the note explains


def test_the_true_dictionary_scores_perfectly_and_a_shuffled_one_does_not() -> None:
    model = _model()
    activations = hook_rows(model, HOOK, model_inputs(model, random=64))
    truth = truth_at(model, HOOK, activations)
    alive = [f["name"] for f in features(model) if HOOK in f["hooks"] and any(f["hooks"][HOOK]["direction"])]
    assert list(truth.names) == alive and truth.directions.shape == (len(alive), model.d_model)
    perfect = score(truth, truth.directions, truth.active)
    assert perfect["mean_max_cosine"] > 1 - 1e-12 and perfect["recovered"] == 1.0 and perfect["mean_f1"] == 1.0
    swapped = Truth(truth.names, truth.directions, ~truth.active)
    assert score(swapped, truth.directions, truth.active)["mean_f1"] < 1.0


def test_the_command_prints_the_sae_and_the_baselines_as_json(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    ifl.save(_model(), path)
    code, out, err = run_cli(["sae", str(path), "--hook", HOOK, "--steps", "20", "--architecture", "groupmax",
                              "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["superposed"] and result["features_alive"] > result["d_model"]
    for row in [result["sae"], *result["baselines"].values()]:
        assert 0.0 <= row["recovered"] <= 1.0 and -1.0 <= row["mean_max_cosine"] <= 1.0 and row["mean_f1"] >= 0.0
    assert result["baselines"]["residual_basis"]["latents"] == result["d_model"]
    assert result["shared_directions"] == [] and "shared_note" not in result
    code, out, _ = run_cli(["sae", str(path), "--hook", HOOK, "--steps", "5"])
    assert code == 0 and "note:" not in out and "no --hook" not in out
    code, _, err = run_cli(["sae", str(path), "--hook", "blocks.9.hook_resid_mid"])
    assert code == 2 and "no residual hook" in err
