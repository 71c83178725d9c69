"""``infoflowc export`` and ``infoflowc check DIR``: the directory, its report, and bad input (exit 2)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli
from compiled import program
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.training.train import TrainSettings, train

EXAMPLE = str(EXAMPLES_DIR / "min_pairwise.safetensors")


def test_export_writes_a_gpt2_directory_and_check_measures_it_within_eps(tmp_path) -> None:
    out = tmp_path / "mp"
    code, text, err = run_cli(["export", EXAMPLE, "--to", "hf-gpt2", "-o", str(out)])
    assert (code, err) == (0, "")
    assert "exported as hf-gpt2" in text and "LayerNorm        exact (ε_LN = 2^80, gain 2^40)" in text
    assert "(no embedding ReLU block)" in text and "layer None" not in text  # min_pairwise's embedding is linear
    assert f"ifl.export_inputs({str(out)!r}, x) -> inputs_embeds, attention_mask" in text
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "infoflow.json", "model.safetensors"]
    info = json.loads((out / "infoflow.json").read_text())
    assert info["eps"] == 1e-2 and info["a_priori_bound"] <= 1e-2 and info["program"]["name"] == "min_pairwise.iflow"
    assert {h["name"]: (h["layer"], h["slot"]) for h in info["heads"]} == {"c1": (0, 0), "c2": (1, 0)}
    code, text, err = run_cli(["check", str(out), "--samples", "300"])
    assert (code, err) == (0, "")
    assert "verdict          within ε" in text and "a-priori bound 0.0097" in text
    code, _, err = run_cli(["check", str(out), "--trace"])
    assert code == 2 and "--trace" in err


def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path) -> None:
    not_a_model = tmp_path / "x.safetensors"
    not_a_model.write_text("hello")
    code, text, err = run_cli(["export", str(not_a_model), "-o", str(tmp_path / "a")])
    assert code == 2 and text == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["export", EXAMPLE, "--to", "hf-bert", "-o", str(tmp_path / "a")])
    assert code == 2 and "invalid choice: 'hf-bert'" in err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    code, _, err = run_cli(["export", EXAMPLE, "-o", str(taken)])
    assert code == 2 and "not empty" in err and "--force" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken", "x.safetensors"]  # nothing half-written
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
    code, _, err = run_cli(["export", EXAMPLE, "-o", str(taken), "--force"])
    assert (code, err) == (0, "") and (taken / "model.safetensors").exists() and not (taken / "notes.txt").exists()
    code, _, err = run_cli(["check", str(tmp_path)])  # a folder that is no export
    assert code == 2 and "not an infoflow export" in err


def test_a_disk_that_fills_during_the_export_exits_2_with_the_folder_and_leaves_nothing(tmp_path,
                                                                                          monkeypatch) -> None:
    import safetensors.torch
    from safetensors import SafetensorError

    def full_disk(*_: object, **__: object) -> None:  # what safetensors raises when the disk fills
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    out = tmp_path / "out"
    code, text, err = run_cli(["export", EXAMPLE, "-o", str(out)])
    assert (code, text) == (2, "") and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{out}: cannot write model.safetensors" in err and "No space left on device" in err
    assert list(tmp_path.iterdir()) == []
    model = ifl.load(EXAMPLE)
    try:
        ifl.export(model, out)
    except ifl.ExportError as error:  # the API's documented exception
        assert "No space left on device" in str(error)
    else:
        raise AssertionError("the export did not fail")


def test_a_trained_model_exports_and_check_says_measured_only(tmp_path) -> None:
    target = program("d_retrieval", 4)
    settings = TrainSettings(heads=(4,), d_model=16, d_head=4, d_mlp=16, steps=30, batch=64, validation=256)
    result = train(target, settings, quiet=True)
    path = tmp_path / "toy.safetensors"
    ifl.save(result.model, path)
    code, text, err = run_cli(["export", str(path), "-o", str(tmp_path / "toy"), "--dtype", "float64"])
    assert (code, err) == (0, "") and "none (a trained model: measured only)" in text
    exported = ifl.load_exported(tmp_path / "toy")
    x = ifl.sample_inputs(target, 64, seed=1)
    with torch.no_grad():
        assert float((exported(x) - result.model.double()(x)).abs().max()) <= 1e-12
    code, text, err = run_cli(["check", str(tmp_path / "toy"), "--samples", "200"])
    assert (code, err) == (0, "") and "measured only" in text and "NMSE" in text


def test_a_token_model_exports_and_checks_through_the_cli(tmp_path) -> None:
    """A token model's export reads ids: `check DIR` measures it on ids of every length."""
    from programs import TRACR_DIR

    path = tmp_path / "sort.safetensors"
    ifl.save(ifl.compile(ifl.load_program(TRACR_DIR / "sort.iflow"), samples=0), path)
    code, text, err = run_cli(["export", str(path), "-o", str(tmp_path / "out")])
    assert (code, err) == (0, "")
    assert f"ids = ifl.encode(program, tokens); ifl.export_inputs({str(tmp_path / 'out')!r}, ids)" in text
    code, text, err = run_cli(["check", str(tmp_path / "out"), "--samples", "200"])
    assert (code, err) == (0, "") and "exact (every answer right)" in text


def test_a_model_whose_stored_program_no_longer_checks_is_refused_as_check_refuses_it(tmp_path) -> None:
    model = ifl.load(EXAMPLE)
    model.card = dataclasses.replace(model.card, program=dataclasses.replace(
        model.card.program, source=model.card.program.source.rstrip() + " +\n"))
    broken = tmp_path / "broken.safetensors"
    ifl.save(model, broken)
    for argv in (["export", str(broken), "-o", str(tmp_path / "out")], ["check", str(broken)]):
        code, text, err = run_cli(argv)
        assert (code, text) == (2, "") and "no longer checks" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.safetensors"]


def test_a_float32_self_contained_export_states_float32s_underflow_constant(tmp_path) -> None:
    code, text, err = run_cli(["export", EXAMPLE, "--self-contained", "--dtype", "float32", "-o", str(tmp_path / "o")])
    assert (code, err) == (0, "")
    assert "≥ 2(2S + 104)" in text and "746" not in text  # exp(−104) underflows float32; 746 is float64's
    info = json.loads((tmp_path / "o" / "infoflow.json").read_text())
    assert info["self_contained"]["underflow"] == 104.0


def test_a_model_with_a_string_bound_is_refused_before_an_export_is_written(tmp_path) -> None:
    """It used to write the directory, then exit 1 (issue 34, point 9)."""
    data = (EXAMPLES_DIR / "min_pairwise.safetensors").read_bytes()
    size = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8:8 + size])["__metadata__"]
    config = json.loads(metadata["infoflow"]) | {"a_priori_bound": "0.0097"}
    import safetensors.torch

    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors.torch.save(safetensors.torch.load(data),
                                            metadata={**metadata, "infoflow": json.dumps(config)}))
    code, text, err = run_cli(["export", str(path), "-o", str(tmp_path / "out")])
    assert (code, text) == (2, "") and "config['a_priori_bound'] must be" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """One export of min_pairwise, copied by each test that changes it."""
    out = tmp_path_factory.mktemp("export") / "out"
    assert run_cli(["export", EXAMPLE, "-o", str(out)])[0] == 0
    return out


@pytest.mark.parametrize("change", ["no input", "T a string", "layout a list", "eps a string", "deep"])
def test_a_hostile_infoflow_json_is_refused_by_check_with_exit_2(change, exported, tmp_path) -> None:
    out = tmp_path / "out"
    shutil.copytree(exported, out)
    info_path = out / "infoflow.json"
    info = json.loads(info_path.read_text())
    if change == "no input":
        del info["input"]
    elif change == "T a string":
        info["input"]["T"] = "32"
    elif change == "layout a list":
        info["layout"] = []
    elif change == "eps a string":
        info["eps"] = "0.01"
    text = json.dumps(info) if change != "deep" else '{"format": "' + info["format"] + '", "x": ' + "[" * 100_000
    info_path.write_text(text)
    code, _, err = run_cli(["check", str(out), "--samples", "10"])
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_export_never_replaces_the_folder_holding_its_model_or_the_current_one(tmp_path, monkeypatch) -> None:
    """``export M -o DIR --force`` deleted M when M was in DIR; ``-o . --force`` left an empty
    ``..XXXX.old`` folder behind (issue 34, point 8)."""
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "m.safetensors"
    model.write_bytes((EXAMPLES_DIR / "min_pairwise.safetensors").read_bytes())
    code, _, err = run_cli(["export", str(model), "-o", str(folder), "--force"])
    assert code == 2 and "holds the model" in err and model.exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run_cli(["export", str(model), "-o", ".", "--force"])
    assert code == 2 and "current folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "models"] and not any(elsewhere.iterdir())
    code, _, err = run_cli(["compile", str(EXAMPLES_DIR / "min_pairwise.iflow"), "-o", "nope/../x.safetensors"])
    assert (code, "does not exist" in err) == (2, True) and not any(elsewhere.iterdir())
