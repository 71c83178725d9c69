"""The edge graph (infoflow_dsl/circuits/graph.py): derived from the circuit, equal to what
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
from infoflow_dsl.circuits.graph import check_against_weights, weight_edges
from infoflow_dsl.circuits.patching import EdgeForward
from infoflow_dsl.circuits.truth import outside_pairs
from infoflow_dsl.errors import StoredProgramError
from infoflow_dsl.transformer.model import CompiledTransformer


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


def _hooked_patches(model: ifl.CompiledTransformer, cache: dict, hooks: dict, change_of) -> list:
    """Hooks of ``ifl.hooked(model)`` that ablate one edge, read off its ``edge_hooks``: the
    sender's output from the clean cache (a head's: z at its index times its W_O), its change Δ,
    added where the receiver reads it (a head's channel after its projection; an MLP's input at
    hook_resid_mid, taken back at hook_resid_post; the output at the last hook_resid_post)."""
    sender, receiver = hooks["sender"], hooks["receiver"]
    output = cache[sender["hook"]].double()
    if sender["head"] is not None:  # z (B, N, H, V) at its index, through W_O[head] (V, D)
        layer = int(sender["hook"].split(".")[1])
        output = output[:, :, sender["head"]] @ model.blocks[layer].attn.W_O[sender["head"]].double()
    change = change_of(output)  # (B, N, D)
    layer = int(receiver["hook"].split(".")[1])
    if receiver["head"] is not None:
        channel = receiver["hook"].rsplit("_", 1)[1]
        weight = getattr(model.blocks[layer].attn, f"W_{channel.upper()}")[receiver["head"]].double()  # (D, E)

        def into_head(value: torch.Tensor, hook: object, head: int = receiver["head"]) -> torch.Tensor:
            value = value.clone()
            rows = value.shape[1]  # keys and values: the T' tokens only
            value[:, :, head] += (change[:, :rows] @ weight).to(value.dtype)
            return value
        return [(receiver["hook"], into_head)]
    if receiver["hook"].endswith("hook_resid_mid"):
        return [(receiver["hook"], lambda value, hook: value + change.to(value.dtype)),
                (f"blocks.{layer}.hook_resid_post", lambda value, hook: value - change.to(value.dtype))]
    return [(receiver["hook"], lambda value, hook: value + change.to(value.dtype))]


@pytest.mark.parametrize("name", ["tracr/reverse", "min_pairwise", "tracr/sort"])
def test_an_edge_ablated_through_the_hooks_it_names_is_the_edge_level_forwards(name: str) -> None:
    """Every edge, zero- and mean-ablated at the ``ifl.hooked`` hooks its JSON names, gives the
    output of the edge-level forward (``patching``) with that edge alone ablated, in float64 (an
    ablated edge can leave a sharp head near a tie, where float32's rounding of the two ways to
    the same product moves the output by 1e-3)."""
    model, edges = shipped(name), graph(name)
    model = CompiledTransformer(model.config, model.state_dict(), dtype=torch.float64)
    x = model_inputs_of(name, 64, seed=4)
    x = x if x.dtype == torch.int64 else x.double()
    forward = EdgeForward(model, edges)
    hooked = ifl.hooked(model)
    with torch.no_grad():
        _, cache = hooked.run_with_cache(x)
    clean = forward.run(x).outputs
    for ablation, change_of in (("zero", lambda o: -o), ("mean", lambda o: o.mean(dim=0, keepdim=True) - o)):
        stand_ins = {name: (0.0 * out if ablation == "zero" else out.mean(dim=0, keepdim=True))
                     for name, out in clean.items()}
        for edge in edges.edges:
            patches = _hooked_patches(model, cache, edges.edge_hooks(edge), change_of)
            with torch.no_grad():
                through_hooks = hooked.run_with_hooks(x, fwd_hooks=patches).double()
            expected = forward.run(x, [(edge.sender, edge.receiver, edge.channel)], stand_ins).y
            scale = 1.0 + float(expected.abs().nan_to_num().max())
            assert float((through_hooks - expected).abs().nan_to_num().max()) <= 1e-9 * scale, (ablation, edge.name)
