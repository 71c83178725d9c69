"""``infoflowc check MODEL`` on token models (infoflow_dsl/cli/check.py): exact models
pass (exit 0), wrong ones fail (exit 3) with their failures counted, and the flags that do not
apply are refused (exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli
from handmade_models import TOKEN_SOURCES, token_model, token_program

import infoflow_dsl as ifl
from infoflow_dsl.measure.tokens import measure_tokens
from infoflow_dsl.transformer.card import Measurement


def saved(tmp_path: Path, model: ifl.CompiledTransformer, name: str = "model") -> Path:
    path = tmp_path / f"{name}.safetensors"
    ifl.save(model, path)
    return path


@pytest.mark.parametrize("name", list(TOKEN_SOURCES))
def test_hand_built_token_models_pass(tmp_path: Path, name: str) -> None:
    code, out, err = run_cli(["check", str(saved(tmp_path, token_model(name))), "--samples", "300"])
    assert (code, err) == (0, "")
    program = token_program(name)
    sites, length = measure_tokens(token_model(name), program, 300).sites, program.length
    constant = 3 * (length - 4)  # V = 3: every sequence of lengths 1..4, the constant ones of the longer lengths
    inputs = 300 + 120 + constant
    assert f"evaluated        {inputs} inputs (300 random ids of random lengths 1..{length}, all 120 of lengths " \
           f"1..4" in out
    assert f", {sites} outputs" in out and (f", {constant} constant sequences" in out) == (constant > 0)
    if program.token_output:
        assert f"exact on {inputs} inputs (every one of {sites} outputs the reference's token)" in out
        assert "smallest margin  1 " in out and out.rstrip().endswith("verdict          exact (every answer right)")
    else:
        assert out.rstrip().endswith("verdict          within ε")


def test_a_short_vocabulary_is_checked_on_every_input(tmp_path: Path) -> None:
    """V = 3, T = 4: the 120 sequences of lengths 1..4 are every input there is."""
    _, out, _ = run_cli(["check", str(saved(tmp_path, token_model("numeric"))), "--samples", "10"])
    assert "all 120 of lengths 1..4 (every input)), " in out


def test_a_wrong_token_model_fails_with_its_first_failure(tmp_path: Path) -> None:
    model = token_model("identity", shuffle_output=True)
    code, out, _ = run_cli(["check", str(saved(tmp_path, model)), "--samples", "300"])
    result = measure_tokens(model, token_program("identity"), 300)
    assert code == 3
    assert (f"WRONG at {result.sites} of {result.sites} outputs, on {result.inputs} of {result.inputs} inputs "
            f"(accuracy 0)") in out
    failure = re.search(r"failure +(\S+) at position (\d+): the model answers '(\w)', the reference '(\w)'", out)
    assert failure is not None and failure.group(1) == failure.group(4) and failure.group(2) == "1"
    assert out.rstrip().endswith("verdict          WRONG answers")


def test_a_numeric_model_above_eps_fails_and_above_its_bound_fails_at_any_eps(tmp_path: Path) -> None:
    model = token_model("mean")
    with torch.no_grad():
        model.unembed.b_U += 0.01
    path = saved(tmp_path, model)
    code, out, _ = run_cli(["check", str(path), "--samples", "50"])
    assert code == 3 and "worst error      0.01\n" in out and out.rstrip().endswith("ABOVE ε")
    code, out, _ = run_cli(["check", str(path), "--samples", "50", "--eps", "0.02"])  # within ε, not its bound
    assert code == 3 and "ε = 0.02" in out and out.rstrip().endswith("ABOVE ITS A-PRIORI BOUND (within ε, but not "
                                                                     "what its file certifies)")


def test_adversarial_does_not_apply_to_token_inputs(tmp_path: Path) -> None:
    code, out, err = run_cli(["check", str(saved(tmp_path, token_model("first"))), "--adversarial", "10"])
    assert code == 2 and out == "" and "--adversarial perturbs continuous inputs" in err


def test_the_tail_of_a_compile_measure_save_load_check_run(tmp_path: Path) -> None:
    """What compile does after assembling a token model, then the user's commands: the measured
    error stored in the config (measure_error, as compile_program stores it), the file written
    and loaded back, check and run on it."""
    from infoflow_dsl.measure.measurement import measure_error, measurement_passes

    model, program = token_model("first"), token_program("first")
    model.card = model.card.with_fields(measured_error=Measurement.from_record(measure_error(model, program, 64,
                                                                                            seed=0)))
    assert measurement_passes(model.card.measured_error, 1e-9)
    path = saved(tmp_path, model, "first")
    loaded = ifl.load(path)
    assert loaded.config["measured_error"] == model.config["measured_error"]
    ids = ifl.encode(program, ["b", "c", "a"])
    assert ifl.decode(program, loaded(ids)) == ifl.decode(program, ifl.evaluate(program, ids)) == ["b"]
    assert run_cli(["check", str(path), "--samples", "64"])[0] == 0
    code, out, _ = run_cli(["run", str(path), "b", "c", "a"])
    assert code == 0 and out.splitlines()[-1] == "  agrees with the reference at every output"
