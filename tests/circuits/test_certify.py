"""certify: a model trained keeping its circuit is measured on its own weights; one whose
circuit moved outside its graph, or whose function broke, is refused (exit 3 from train)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.circuits.certify import CertificationError, certify, require_certified
from infoflow_dsl.circuits.graph import circuit_graph
from infoflow_dsl.circuits.statistics import _matrices
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.training.circuit_keeping import KeepSettings, train_keeping_circuit
from infoflow_dsl.training.settings import TrainSettings

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
SHIFT = ROOT / "compiled_examples" / "tracr" / "shift_by_2"
SETTINGS = TrainSettings(heads=(2,), d_model=12, d_head=4, d_mlp=4, steps=12, batch=32, lr=1e-5)
SAMPLES = 200


@pytest.fixture(scope="module")
def trained() -> ifl.CompiledTransformer:
    init = ifl.load(SHIFT.with_suffix(".safetensors"), device="cpu")
    return train_keeping_circuit(program_of(init), SETTINGS, init, KeepSettings(noise=1e-3)).model


def test_a_model_trained_keeping_its_circuit_is_certified_on_its_own_weights(trained) -> None:
    certification = require_certified(trained, samples=SAMPLES)
    assert certification.function_holds and certification.function["accuracy"] == 1.0
    assert all(error == 0.0 for error in certification.certificate.values())
    graph = circuit_graph(trained)
    init_graph = circuit_graph(ifl.load(SHIFT.with_suffix(".safetensors"), device="cpu"))
    assert graph.edges == init_graph.edges and "a0.h1" in graph.by_name and "m0" in graph.by_name
    edges = {e.name for e in graph.edges}
    for truth in certification.truths.values():
        assert len(truth.edges) == len(graph.pairs())  # every pair was a candidate
        assert set(truth.necessary) <= edges and truth.necessary
    entries = torch.cat([m.flatten() for m in _matrices(trained)])
    assert int((entries == 0).sum()) == 0  # no compiled zero kept


def _heads_swapped(model: ifl.CompiledTransformer) -> ifl.CompiledTransformer:
    """The same function with layer 0's two heads in the other order: the circuit's head now
    sits at a0.h1, which the carried graph says is outside the circuit."""
    tensors = {n: t.detach().clone() for n, t in model.state_dict().items()}
    for name in ("W_Q", "W_K", "W_V", "W_O", "beta"):
        tensors[f"blocks.0.attn.{name}"] = tensors[f"blocks.0.attn.{name}"].flip(0).contiguous()
    config = {**model.config, "layers": [{**model.config["layers"][0],
                                          "heads": model.config["layers"][0]["heads"][::-1]}]}
    return ifl.CompiledTransformer(config, tensors, device="cpu", dtype=torch.float32)


def test_a_model_whose_circuit_left_its_graph_is_refused(trained) -> None:
    moved = _heads_swapped(trained)
    certification = certify(moved, samples=SAMPLES)
    assert certification.function_holds  # it computes the function ...
    assert not certification.holds  # ... but not through its graph
    assert any("a0.h1" in name for names in certification.outside_necessary.values() for name in names)
    assert certification.certificate["zero"] == 1.0
    with pytest.raises(CertificationError, match="outside the graph"):
        require_certified(moved, samples=SAMPLES)


def test_train_keep_circuit_writes_a_certified_model_and_refuses_a_broken_one(tmp_path) -> None:
    out = tmp_path / "kept.safetensors"
    common = [str(SHIFT.with_suffix(".iflow")), "--heads", "2", "--d-model", "12", "--d-head", "4", "--d-mlp", "4",
              "--batch", "32", "--samples", str(SAMPLES), "--init", str(SHIFT.with_suffix(".safetensors")),
              "--keep-circuit"]
    code, stdout, err = run_cli(["train", *common, "--steps", "8", "--noise", "1e-3", "-o", str(out)])
    assert code == 0, err
    assert "certified; wrote" in stdout
    stored = ifl.load(out, device="cpu").config["kept_circuit"]
    assert stored["certified"]["holds"] and stored["graph"]["edges"]
    code, stdout, err = run_cli(["circuit", str(out), "--edges"])  # its carried graph, read as a compiled one's
    assert code == 0 and "measured on the trained weights" in stdout and "a0.h0->output<out>" in stdout, err
    code, _, err = run_cli(["circuit", str(out)])  # no circuit map: its weights are not its circuit's
    assert code == 2 and "trained model" in err
    broken = tmp_path / "broken.safetensors"
    code, stdout, err = run_cli(["train", *common, "--steps", "1", "--noise", "3", "-o", str(broken)])
    assert code == 3 and "refused" in err and not broken.exists()
    code, _, err = run_cli(["train", *common[:-3], "--keep-circuit", "--steps", "1", "-o", str(broken)])
    assert code == 2 and "--init" in err and not broken.exists()


def test_a_disguised_model_trained_keeping_its_circuit_is_certified() -> None:
    init = ifl.disguise(ifl.load(SHIFT.with_suffix(".safetensors"), device="cpu"), split_heads=2, shuffle=True,
                        rotate=True, seed=1)
    settings = TrainSettings(heads=(3,), d_model=12, d_head=4, d_mlp=4, steps=5, batch=32, lr=1e-5)
    kept = train_keeping_circuit(program_of(init), settings, init, KeepSettings(noise=1e-5))
    assert kept.graph.edges == circuit_graph(init).edges and len(kept.graph.edges) == 4  # each head split in two
    certification = require_certified(kept.model, samples=SAMPLES)
    assert all(set(t.necessary) <= {e.name for e in kept.graph.edges} for t in certification.truths.values())
