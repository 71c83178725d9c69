"""The edge graph (infoflow_dsl/tools/circuits/graph.py): derived from the circuit, equal to what
the weights connect on every shipped model, refused where the weights say otherwise, and the
certificate in its exact form: ablating every pair outside the graph moves no output bit."""

from __future__ import annotations

import json

import pytest
import torch
from cli_runner import run_cli
from programs import EXAMPLES_DIR
from shipped_models import MEASURED, SHIPPED, graph, model_inputs_of, shipped

import infoflow_dsl as ifl
from infoflow_dsl.errors import StoredProgramError
from infoflow_dsl.tools.circuits.graph import check_against_weights, weight_edges
from infoflow_dsl.tools.circuits.patching import EdgeForward
from infoflow_dsl.tools.circuits.truth import outside_pairs


@pytest.mark.parametrize("name", SHIPPED)
def test_the_graph_is_what_the_weights_connect(name: str) -> None:
    model, edges = shipped(name), graph(name)
    found = weight_edges(model, edges)  # read off the nonzero rows and columns of the weights alone
    assert {(e.sender, e.receiver, e.channel) for e in edges.edges} == set(found)
    assert all(set(found[(e.sender, e.receiver, e.channel)]) == set(e.directions) for e in edges.edges)
    senders = {e.sender for e in edges.edges}
    assert "input" in senders and any(e.receiver == "output" for e in edges.edges)
    config_heads = [len(layer["heads"]) for layer in model.config["layers"]]
    assert [sum(1 for n in edges.nodes if n.kind == "head" and n.layer == layer) for layer in range(
        len(config_heads))] == config_heads


def test_an_edge_the_weights_carry_but_the_circuit_does_not_is_refused() -> None:
    model, edges = shipped("tracr/reverse"), graph("tracr/reverse")
    labels = model.config["residual_labels"]
    sender, receiver, channel = next(p for p in outside_pairs(edges) if edges.by_name[p[1]].kind == "head")
    tampered = ifl.load(EXAMPLES_DIR / "tracr/reverse.safetensors")
    node = edges.by_name[receiver]
    matrix = getattr(tampered.blocks[node.layer].attn, f"W_{channel.upper()}")
    with torch.no_grad():
        matrix[node.index, labels.index(edges.by_name[sender].writes[0]), 0] = 1e-30  # a tiny weight is an edge
    with pytest.raises(StoredProgramError, match=f"carried by the weights only: \\[\\('{sender}', '{receiver}', "
                                                 f"'{channel}'\\)\\]"):
        check_against_weights(tampered, edges)
    check_against_weights(model, edges)


def _inputs(name: str, count: int = 64) -> torch.Tensor:
    return model_inputs_of(name, count, 3, 5)


@pytest.mark.parametrize("ablation", ["zero", "garbage"])
@pytest.mark.parametrize("name", MEASURED)
def test_ablating_every_pair_outside_the_graph_changes_no_bit(name: str, ablation: str) -> None:
    """Whatever replaces a sender's output in a receiver that reads none of its directions, the
    receiver's products read it through weights that are exactly 0: the same bits."""
    edges = graph(name)
    forward, x = EdgeForward(shipped(name), edges), _inputs(name)
    outside = outside_pairs(edges)
    assert outside  # every model has senders some reader ignores
    clean = forward.run(x)
    labels = shipped(name).config["residual_labels"]
    generator = torch.Generator().manual_seed(5)

    def stand_in(writes: tuple[str, ...]) -> torch.Tensor:  # any output the sender could write: on its directions
        written = torch.zeros(len(labels), dtype=torch.float64)
        written[[labels.index(d) for d in writes]] = 1.0
        if ablation == "zero":
            return torch.zeros(())
        return 1e3 * torch.randn(x.shape[0], x.shape[1] + 1, len(labels), generator=generator,
                                 dtype=torch.float64) * written

    stand = {n.name: stand_in(n.writes) for n in edges.senders()}
    assert torch.equal(forward.run(x, outside, stand).y, clean.y)


def test_the_cli_prints_the_graph_and_its_json() -> None:
    path = str(EXAMPLES_DIR / "tracr/reverse.safetensors")
    code, out, err = run_cli(["circuit", path, "--edges"])
    assert code == 0 and err == "", err
    assert all(e.name in out for e in graph("tracr/reverse").edges)
    code, out, _ = run_cli(["circuit", path, "--edges", "--json"])
    data = json.loads(out)
    assert code == 0 and [e["name"] for e in data["edges"]] == [e.name for e in graph("tracr/reverse").edges]
    hooks = data["edges"][0]["hooks"]
    assert hooks["receiver"]["hook"].startswith("blocks.") and "truth" not in data


@pytest.mark.parametrize("argv", [["--edges", "--ablation", "nope"], ["--edges", "--samples", "-1"]])
def test_bad_edge_flags_exit_2(argv: list[str]) -> None:
    code, _, err = run_cli(["circuit", str(EXAMPLES_DIR / "tracr/reverse.safetensors"), *argv])
    assert code == 2 and "Traceback" not in err and "--" in err
