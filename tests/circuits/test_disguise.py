"""The realism passes (infoflow_dsl/circuits/disguise.py): each computes the model's function
within rounding, carries the edge graph (checked against the weights exactly where no rotation
mixes the coordinates), keeps the truth of an exact pass, and is deterministic."""

from __future__ import annotations

import re
from functools import cache

import pytest
import torch
from cli_runner import run_cli
from programs import EXAMPLES_DIR
from shipped_models import MEASURED, graph, model_inputs_of, shipped

import infoflow_dsl as ifl
from infoflow_dsl.circuits.disguise import DISTRACTOR, disguise
from infoflow_dsl.circuits.patching import EdgeForward
from infoflow_dsl.circuits.truth import TruthMeasurement
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.transformer.io import model_to_bytes
from infoflow_dsl.transformer.model import CompiledTransformer

PASSES = {
    "distract": {"distract": 3},
    "compress": {"compress": True},
    "split_heads": {"split_heads": 3},
    "split_neurons": {"split_neurons": 3},
    "shuffle": {"shuffle": True},
    "rotate": {"rotate": True},
    "all": {"distract": 2, "compress": True, "split_heads": 2, "split_neurons": 2, "shuffle": True, "rotate": True},
}


@cache
def disguised(name: str, passes: str) -> ifl.CompiledTransformer:
    return disguise(shipped(name), seed=4, **PASSES[passes])


def _inputs(name: str) -> torch.Tensor:
    return model_inputs_of(name, 128, 2, 6)


@pytest.mark.parametrize("passes", PASSES)
@pytest.mark.parametrize("name", MEASURED)
def test_a_pass_computes_the_same_function_and_carries_the_graph(name: str, passes: str) -> None:
    model, changed, x = shipped(name), disguised(name, passes), _inputs(name)
    with torch.no_grad():
        y, moved = model(x).double(), changed(x).double()
    assert bool(((moved - y).abs() <= 1e-5 * (1 + y.abs())).all())  # float32 rounding
    if model.token_output:
        assert torch.equal(moved.argmax(-1), y.argmax(-1))
    carried = ifl.circuit_graph(changed)  # checked against the weights unless rotated
    k, distractors = PASSES[passes].get("split_heads", 1), len(model.config["layers"])
    heads = len([n for n in graph(name).nodes if n.kind == "head"])
    heads += distractors if "distract" in PASSES[passes] else 0
    assert sum(1 for n in carried.nodes if n.kind == "head") == k * heads
    assert len(carried.edges) >= len(graph(name).edges)
    for node in carried.nodes:  # each head node names the head that now sits at its index
        if node.kind == "head":
            assert changed.config["layers"][node.layer]["heads"][node.index]["computes"] in node.computes


@pytest.mark.parametrize("name", MEASURED)
def test_the_rotated_models_edges_and_truth_are_the_plain_models(name: str) -> None:
    plain, rotated = graph(name), ifl.circuit_graph(disguised(name, "rotate"))
    assert rotated == plain
    truths = [TruthMeasurement(EdgeForward(m, plain), program_of(shipped(name)), 100, seed=6).ablation("zero")
              for m in (shipped(name), disguised(name, "rotate"))]
    assert truths[0].necessary == truths[1].necessary


@pytest.mark.parametrize("name", MEASURED)
def test_no_ablation_needs_a_distractor_and_the_certificate_holds(name: str) -> None:
    """Distractors are active (their heads attend, their units fire) but nothing the output needs
    reads them: every edge the distract pass added keeps its distractor role and is never needed."""
    model = disguised(name, "distract")
    edges = ifl.circuit_graph(model)
    added = {e.name for e in edges.edges if e.role == DISTRACTOR}
    assert added and {e.name for e in graph(name).edges} <= {e.name for e in edges.edges}
    measurement = TruthMeasurement(EdgeForward(model, edges), program_of(model), 100, seed=8)
    for ablation in ("zero", "mean", "resample"):
        found = measurement.ablation(ablation)
        assert not added & set(found.necessary) and found.outside_error <= edges.eps


def test_the_same_seed_gives_the_same_bytes_and_a_disguise_is_not_disguised_again() -> None:
    again = disguise(shipped("tracr/sort"), seed=4, **PASSES["all"])
    assert model_to_bytes(again) == model_to_bytes(disguised("tracr/sort", "all"))
    assert model_to_bytes(disguise(shipped("tracr/sort"), seed=5, **PASSES["all"])) != model_to_bytes(again)
    with pytest.raises(ValueError, match="disguised already"):
        disguise(again, rotate=True)
    with pytest.raises(ValueError, match="split_neurons must be a whole number"):
        disguise(shipped("tracr/sort"), split_neurons=0)


def test_the_cli_writes_a_disguised_model_that_checks_and_keeps_its_graph(tmp_path) -> None:
    out = tmp_path / "sort.safetensors"
    source = str(EXAMPLES_DIR / "tracr/sort.safetensors")
    code, text, err = run_cli(["disguise", source, "--distract", "2", "--split-heads", "--split-neurons", "2",
                               "--shuffle", "--rotate", "-o", str(out)])
    assert code == 0 and err == "" and "moved by at most" in text, err
    code, _, err = run_cli(["check", str(out), "--samples", "200"])
    assert code == 0, err
    code, text, _ = run_cli(["circuit", str(out), "--edges"])
    assert code == 0 and re.search(r"a3\.h\d->output<out>", text)  # a copy of the last head, shuffled
    code, _, err = run_cli(["circuit", str(out)])
    assert code == 2 and "disguised model" in err and "Traceback" not in err
    code, _, err = run_cli(["disguise", str(out), "--rotate", "-o", str(tmp_path / "again.safetensors")])
    assert code == 2 and "disguised already" in err
    code, _, err = run_cli(["disguise", source, "--split-neurons", "0", "-o", str(tmp_path / "x.safetensors")])
    assert code == 2 and "--split-neurons" in err
    assert not (tmp_path / "again.safetensors").exists() and not (tmp_path / "x.safetensors").exists()


def test_merged_programs_run_beside_the_task_and_are_never_needed() -> None:
    """hist and length (the same vocabulary) join reverse: reverse's output is the same bits, the
    merged programs' heads are in the model and compute on its inputs, and no ablation of an edge
    they added is ever needed."""
    task, others = shipped("tracr/reverse"), [shipped("tracr/hist"), shipped("tracr/length")]
    merged = disguise(task, merge=others, seed=1)
    x = model_inputs_of("tracr/reverse", 200, 9, 8)
    with torch.no_grad():
        assert torch.equal(merged(x), task(x))
    assert [len(layer["heads"]) for layer in merged.config["layers"]] == [
        sum(len(m.config["layers"][i]["heads"]) if i < len(m.config["layers"]) else 0 for m in (task, *others))
        for i in range(len(merged.config["layers"]))]
    edges = ifl.circuit_graph(merged)  # checked against the weights: no rotation
    added = {e.name for e in edges.edges if e.role.startswith("merged program")}
    assert added and {e.name for e in graph("tracr/reverse").edges} <= {e.name for e in edges.edges}
    measurement = TruthMeasurement(EdgeForward(merged, edges), program_of(merged), 100, seed=3)
    for ablation in ("zero", "mean", "resample"):
        found = measurement.ablation(ablation)
        assert not added & set(found.necessary) and found.outside_error == 0.0


@pytest.mark.parametrize("rotate", [False, True])
def test_a_deeper_program_merged_in_adds_layers_the_output_follows(rotate: bool) -> None:
    """length (one layer) with reverse (two) merged in: the model has two layers, the graph too,
    and its output node comes after both."""
    task = shipped("tracr/length")
    merged = disguise(task, merge=[shipped("tracr/reverse")], rotate=rotate, seed=2)
    edges = ifl.circuit_graph(merged)
    assert len(merged.config["layers"]) == edges.layers == 2 and edges.by_name["output"].layer == 2
    x = model_inputs_of("tracr/length", 100, 5, 8)
    with torch.no_grad():
        assert torch.equal(merged(x).argmax(-1), task(x).argmax(-1)) if task.token_output else bool(
            ((merged(x).double() - task(x).double()).abs() <= 1e-5).all())


def test_a_program_of_another_input_is_not_merged(tmp_path) -> None:
    with pytest.raises(ValueError, match="merge sort: its input is not the model's"):
        disguise(shipped("tracr/reverse"), merge=[shipped("tracr/sort")])
    with pytest.raises(ValueError, match="only a compiled model, not disguised"):
        disguise(shipped("tracr/reverse"), merge=[disguised("tracr/reverse", "rotate")])
    code, _, err = run_cli(["disguise", str(EXAMPLES_DIR / "tracr/reverse.safetensors"), "--merge",
                            str(EXAMPLES_DIR / "tracr/sort.safetensors"), "-o", str(tmp_path / "m.safetensors")])
    assert code == 2 and "its input is not the model's" in err and not (tmp_path / "m.safetensors").exists()
    code, _, err = run_cli(["disguise", str(EXAMPLES_DIR / "tracr/reverse.safetensors"), "--merge",
                              str(EXAMPLES_DIR / "tracr/hist.safetensors"), "-o", str(tmp_path / "m.safetensors")])
    assert code == 0 and (tmp_path / "m.safetensors").exists(), err


HOSTILE_GRAPHS = {
    "a head's layer": lambda g: g["nodes"][1].__setitem__("layer", 9),
    "a head's index": lambda g: g["nodes"][1].__setitem__("head", 7),
    "an edge's sender": lambda g: g["edges"][0].__setitem__("sender", "zz"),
    "a node's kind": lambda g: g["nodes"][1].__setitem__("kind", "weird"),
    "the nodes": lambda g: g.__setitem__("nodes", 3),
    "an edge's channel": lambda g: g["edges"][0].__setitem__("channel", "x"),
    "a node twice": lambda g: g["nodes"].insert(1, g["nodes"][1]),
    "an edge backwards": lambda g: g["edges"][0].update(sender=g["edges"][0]["receiver"], receiver="input"),
}


@pytest.mark.parametrize("change", HOSTILE_GRAPHS)
def test_a_stored_graph_that_does_not_fit_the_model_is_exit_2(change: str, tmp_path) -> None:
    """A disguised model's file is user input: its carried graph is checked against its blocks."""
    disguised = disguise(shipped("tracr/reverse"), rotate=True)
    config = disguised.config
    HOSTILE_GRAPHS[change](config["disguised"]["graph"])  # the graph is the circuits' to check, not the card's
    changed = CompiledTransformer(config, disguised.state_dict(), dtype=disguised.dtype)
    path = tmp_path / "hostile.safetensors"
    ifl.save(changed, path)
    for argv in (["--edges"], ["--truth", "--samples", "5"]):
        code, _, err = run_cli(["circuit", str(path), *argv])
        assert code == 2 and "stored edge graph" in err and "Traceback" not in err, (change, err)


def test_a_disguised_model_exports_to_gpt2_and_checks_exact(tmp_path) -> None:
    """A disguise is a stock transformer too: exported (no circuit map: its graph is in its
    config) and checked against its program through the Hugging Face model."""
    model = tmp_path / "sort.safetensors"
    ifl.save(disguised("tracr/sort", "all"), model)
    code, _, err = run_cli(["export", str(model), "--to", "hf-gpt2", "-o", str(tmp_path / "gpt2")])
    assert code == 0, err
    code, out, err = run_cli(["check", str(tmp_path / "gpt2"), "--samples", "100"])
    assert code == 0 and "every answer right" in out, err
