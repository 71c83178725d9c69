"""Which edges each ablation needs (infoflow_dsl/circuits/truth.py): the certificate holds,
each necessary edge's witness leaves the certificate when replayed alone, and an edge whose
directions never vary at a length is never needed by mean or resample ablation (read off the
clean activations, not the truth's own code)."""

from __future__ import annotations

import json
from functools import cache

import pytest
import torch
from cli_runner import run_cli
from programs import EXAMPLES_DIR
from shipped_models import MEASURED, graph, shipped

import infoflow_dsl as ifl
from infoflow_dsl.circuits import ABLATIONS
from infoflow_dsl.circuits.patching import EdgeForward, edge_key, stand_ins
from infoflow_dsl.circuits.truth import AblationTruth, TruthMeasurement, measured_inputs
from infoflow_dsl.oracle.tokens import encode
from infoflow_dsl.pipeline.reading import program_of

SAMPLES = 300


@cache
def measurement(name: str) -> TruthMeasurement:
    return TruthMeasurement(EdgeForward(shipped(name), graph(name)), program_of(shipped(name)), SAMPLES, seed=1)


@cache
def truth(name: str, ablation: str) -> AblationTruth:
    return measurement(name).ablation(ablation)


@pytest.mark.parametrize("ablation", ABLATIONS)
@pytest.mark.parametrize("name", MEASURED)
def test_the_certificate_holds_and_every_edge_has_a_verdict(name: str, ablation: str) -> None:
    found = truth(name, ablation)
    assert found.outside_error <= graph(name).eps
    assert [e.edge for e in found.edges] == [e.name for e in graph(name).edges]
    assert all((e.witness is not None) == e.necessary for e in found.edges)
    assert all((e.corrupted is not None) == (e.necessary and ablation == "resample") for e in found.edges)
    program = program_of(shipped(name))
    if program.over_tokens:  # every sequence up to length 4 is among the inputs
        size = program.token_vocabulary.size
        assert found.inputs >= sum(size**n for n in range(1, min(4, program.length) + 1)) + SAMPLES


@pytest.mark.parametrize("name", [n for n in MEASURED if n.startswith("tracr/")])
def test_a_zero_ablation_witness_leaves_the_certificate_alone(name: str) -> None:
    model, program, edges = shipped(name), program_of(shipped(name)), graph(name)
    forward = EdgeForward(model, edges)
    keys = {e.name: edge_key(e) for e in edges.edges}
    for found in truth(name, "zero").edges:
        if not found.necessary:
            continue
        ids = encode(program, found.witness)  # (1, T')
        y = forward.run(ids, [keys[found.edge]], stand_ins(forward, ids, "zero")).y
        reference = ifl.evaluate(program, ids)
        answer = y.argmax(dim=-1) if program.token_output else y
        assert not torch.equal(answer, reference) if program.token_output else bool(
            ((y - reference).abs() > edges.eps).any()), found.edge


@pytest.mark.parametrize("name", MEASURED)
def test_an_edge_whose_directions_never_vary_at_a_length_is_not_needed_by_mean_or_resample(name: str) -> None:
    model, edges, program = shipped(name), graph(name), program_of(shipped(name))
    labels = model.config["residual_labels"]
    forward = EdgeForward(model, edges)
    varying = set()
    for x in measured_inputs(program, SAMPLES, seed=1):
        outputs = forward.run(x if program.over_tokens else x.to(model.dtype)).outputs
        for e in edges.edges:
            carried = outputs[e.sender][..., [labels.index(d) for d in e.directions]]  # (N, T'+1, k)
            if not torch.equal(carried, carried[:1].expand_as(carried)):
                varying.add(e.name)
    constant = {e.name for e in edges.edges} - varying
    for ablation in ("mean", "resample"):
        assert not constant & set(truth(name, ablation).necessary), ablation
    assert {e.edge for e in truth(name, "resample").edges if e.necessary} <= varying


def test_the_cli_prints_the_truth_with_witnesses() -> None:
    path = str(EXAMPLES_DIR / "tracr/reverse.safetensors")
    code, out, err = run_cli(["circuit", path, "--truth", "--ablation", "zero", "--samples", "50", "--json"])
    assert code == 0 and err == "", err
    data = json.loads(out)
    assert list(data["truth"]) == ["zero"]
    needed = data["truth"]["zero"]["necessary"]
    assert needed and all("witness" in e for e in data["truth"]["zero"]["edges"] if e["edge"] in needed)
    code, out, _ = run_cli(["circuit", path, "--truth", "--samples", "50"])
    assert code == 0 and "zero" in out and "resample" in out and "outside the graph" in out


def test_a_vector_models_truth_reads_inputs_of_the_length_asked() -> None:
    program = program_of(shipped("min_pairwise"))
    (x,) = measured_inputs(program, 20, seed=0, length=5)
    assert x.shape[1] == 5 and x.shape[0] > 20  # the random inputs, then the corners
    path = str(EXAMPLES_DIR / "min_pairwise.safetensors")
    code, out, err = run_cli(["circuit", path, "--truth", "--ablation", "zero", "--length", "5", "--samples", "30"])
    assert code == 0 and "zero:" in out, err
    longest = shipped("min_pairwise").T
    for argv, message in ((["--length", str(longest + 1)], f"--length must be in 1..{longest}"),
                          (["--length", "0"], f"--length must be in 1..{longest}"),
                          (["--samples", "0"], "--samples must be at least 1 for a model over vectors")):
        code, _, err = run_cli(["circuit", path, "--truth", *argv])
        assert code == 2 and message in err
    code, _, err = run_cli(["circuit", str(EXAMPLES_DIR / "tracr/sort.safetensors"), "--truth", "--length", "3"])
    assert code == 2 and "a model over vectors" in err


@pytest.mark.parametrize("name", ["tracr/reverse", "min_pairwise"])
def test_the_certificate_fails_for_a_graph_without_a_needed_edge(name: str) -> None:
    """The certificate can fail: a graph that leaves out the edge into the output is not the
    model's circuit, and ablating everything outside it breaks the output (a token output: 1,
    as check counts a wrong answer; a number: more than ε)."""
    import dataclasses

    edges = graph(name)
    cut = dataclasses.replace(edges, edges=tuple(e for e in edges.edges if e.receiver != "output"))
    measurement = TruthMeasurement(EdgeForward(shipped(name), cut), program_of(shipped(name)), 50, seed=4)
    error = measurement.certificate("zero")
    assert error == 1.0 if shipped(name).token_output else error > edges.eps


@pytest.mark.parametrize("name", ["tracr/reverse", "min_pairwise"])
def test_the_truth_on_the_device_is_the_cpus(name: str, device: str) -> None:
    """``edge_truth(device=...)`` (``circuit --truth --device``): the same verdicts and witnesses,
    the departures and the certificate to float rounding."""
    on_cpu = ifl.edge_truth(shipped(name), samples=40, seed=1, device="cpu")[1]
    graph_found, on_device = ifl.edge_truth(shipped(name), samples=40, seed=1, device=device)
    assert shipped(name).device.type == "cpu"  # the caller's model stays where it was
    assert graph_found.to_json() == graph(name).to_json()
    for ablation, truth_there in on_device.items():
        here = on_cpu[ablation]
        assert truth_there.necessary == here.necessary and truth_there.inputs == here.inputs
        assert truth_there.outside_error == pytest.approx(here.outside_error, rel=1e-6, abs=1e-12)
        for a, b in zip(truth_there.edges, here.edges, strict=True):
            assert (a.witness, a.corrupted) == (b.witness, b.corrupted)
            assert a.departure == pytest.approx(b.departure, rel=1e-6, abs=1e-12)
    path = str(EXAMPLES_DIR / f"{name}.safetensors")
    code, out, err = run_cli(["circuit", path, "--truth", "--ablation", "zero", "--samples", "40", "--seed", "1",
                              "--json", "--device", device])
    assert code == 0, err
    assert json.loads(out)["truth"]["zero"]["necessary"] == list(on_cpu["zero"].necessary)
