"""infoflowc sae: a sparsify SAE on a superposed model's residual, scored against the dictionary."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition.dictionary import features
from infoflow_dsl.sae.score import Truth, score
from infoflow_dsl.sae.train import hook_rows, model_inputs, truth_at

torch.set_num_threads(1)

TOKENS = ", ".join(f'"{chr(97 + i)}"' for i in range(8))
REVERSE = f"input x : token {{{TOKENS}}}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n"
HOOK = "blocks.1.hook_resid_mid"


@lru_cache(maxsize=1)
def _model() -> ifl.CompiledTransformer:
    return ifl.compile(ifl.parse_program(REVERSE, "reverse8.iflow"), samples=0, residual=17)


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
    code, _, err = run_cli(["sae", str(path), "--hook", "blocks.9.hook_resid_mid"])
    assert code == 2 and "no residual hook" in err
