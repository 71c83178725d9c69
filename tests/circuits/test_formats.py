"""The truth stored in the model, exported into infoflow.json on the export's hooks, and as MIB's
circuit JSON; patching an edge through the exported model's TransformerLens 4 hooks and through
nnsight moves its answers as the truth says."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli
from shipped_models import SHIPPED, shipped
from shipped_models import graph as shipped_graph
from transformer_lens.model_bridge.sources import build_bridge_from_module
from transformers import AutoModelForCausalLM

import infoflow_dsl as ifl
from infoflow_dsl.circuits.formats import TRUTH_FIELD, mib_circuit, truth_record, with_truth
from infoflow_dsl.circuits.truth import measured_inputs
from infoflow_dsl.measure.vectors import wrong_answers
from infoflow_dsl.pipeline.reading import program_of

torch.set_num_threads(1)
NAME, SAMPLES = "tracr/reverse", 60


@cache
def truth() -> tuple[ifl.EdgeGraph, dict]:
    return ifl.edge_truth(shipped(NAME), samples=SAMPLES, seed=2)


def _renamed(name: str) -> str:
    """Our edge name in MIB's naming, written out independently of formats.py."""
    sender, rest = name.split("->")
    receiver, channel = rest[:-1].split("<")
    receiver = "logits" if receiver == "output" else receiver
    return f"{sender}->{receiver}" + (f"<{channel}>" if channel in "qkv" else "")


@pytest.mark.parametrize("ablation", ["zero", "mean"])
def test_mib_lists_every_candidate_and_marks_the_necessary_ones(ablation: str) -> None:
    graph, truths = truth()
    mib = mib_circuit(shipped(NAME), graph, truths[ablation])
    assert len(mib["edges"]) == len(graph.pairs())
    assert {n for n, e in mib["edges"].items() if e["in_graph"]} == {_renamed(n) for n in truths[ablation].necessary}
    assert mib["nodes"]["input"]["in_graph"] and mib["nodes"]["logits"]["in_graph"] and mib["cfg"]["n_layers"] == 2
    used = {part for n in truths[ablation].necessary for part in n.split("<")[0].split("->")} - {"output"}
    assert {n for n, kept in mib["nodes"].items() if kept["in_graph"]} == used | {"input", "logits"}


def eap_ig_graph(cfg: dict) -> tuple[set[str], set[str]]:
    """The node and edge names of EAP-IG's ``Graph.from_model(cfg)`` (hannamw/EAP-IG,
    src/eap/graph.py, read there and written out here): n_heads heads in every layer; without
    parallel_attn_mlp, a layer's heads read the residual stream before it (q, k and v each), its
    MLP reads that and the layer's heads, and the logits read everything."""
    assert not cfg["parallel_attn_mlp"]
    nodes, edges, residual = {"input", "logits"}, set(), ["input"]
    for layer in range(cfg["n_layers"]):
        heads = [f"a{layer}.h{head}" for head in range(cfg["n_heads"])]
        edges |= {f"{sender}->{head}<{letter}>" for sender in residual for head in heads for letter in "qkv"}
        residual += heads
        edges |= {f"{sender}->m{layer}" for sender in residual}
        residual.append(f"m{layer}")
        nodes |= {*heads, f"m{layer}"}
    return nodes, edges | {f"{sender}->logits" for sender in residual}


def read_as_eap_ig(circuit: dict) -> tuple[set[str], dict[str, float]]:
    """What EAP-IG's ``Graph.from_json`` does with the file, step for step (KeyError or TypeError
    where it would fail): the nodes and the edges (with their scores) it puts in the graph."""
    assert all(k in circuit for k in ("cfg", "nodes", "edges"))
    known_nodes, known_edges = eap_ig_graph(circuit["cfg"])
    nodes = set()
    for name, node in circuit["nodes"].items():
        if name == "logits":
            continue
        if name not in known_nodes:
            raise KeyError(name)
        if node["in_graph"]:  # a bool here: TypeError 'bool' object is not subscriptable
            nodes.add(name)
        assert isinstance(node["in_graph"], bool)
    edges = {}
    for name, info in circuit["edges"].items():
        if name not in known_edges:
            raise KeyError(name)
        assert isinstance(info["in_graph"], bool) and isinstance(info["score"], float)
        if info["in_graph"]:
            edges[name] = info["score"]
    return nodes, edges


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_models_circuit_loads_as_eap_ig_reads_it_and_keeps_every_edge(name: str) -> None:
    """Seen: from_json failed on all 29 shipped models (TypeError: 'bool' object is not
    subscriptable, nodes written as booleans). A truth that needs every edge: all of them load."""
    from infoflow_dsl.circuits.truth import AblationTruth, EdgeTruth

    graph = shipped_graph(name)
    every = tuple(EdgeTruth(f"{s}->{r}<{c}>", True, 1.0) for s, r, c in graph.pairs())
    circuit = json.loads(json.dumps(mib_circuit(shipped(name), graph, AblationTruth("zero", 1, every, 0.0))))
    nodes, edges = read_as_eap_ig(circuit)
    assert set(edges) == {_renamed(e.edge) for e in every} and all(score == 1.0 for score in edges.values())
    assert nodes == {n.name for n in graph.nodes} - {"output"}
    heads = [len(layer["heads"]) for layer in shipped(name).config["layers"]]
    assert circuit["cfg"]["n_heads"] == max(heads) and circuit["cfg"]["n_layers"] == len(heads)


def test_the_cli_stores_the_truth_and_prints_mib(tmp_path: Path) -> None:
    model_file, out = str(Path(__file__).parents[2] / "compiled_examples" / f"{NAME}.safetensors"), tmp_path / "m.st"
    code, text, err = run_cli(["circuit", model_file, "--truth", "--ablation", "mean", "--samples", "20", "--mib"])
    assert code == 0, err
    assert json.loads(text)["cfg"]["ablation"] == "mean"
    code, _, err = run_cli(["circuit", model_file, "--truth", "--samples", "20", "-o", str(out)])
    assert code == 0, err
    stored = ifl.load(out)
    assert set(stored.config[TRUTH_FIELD]["ablations"]) == {"zero", "mean", "resample"}
    x = ifl.encode(program_of(stored), ["a", "b", "c"])
    assert torch.equal(stored(x), shipped(NAME)(x))
    for argv, message in ((["--mib"], "--mib goes with --truth"), (["--truth", "--mib"], "give one --ablation"),
                          (["-o", str(out)], "-o goes with --truth")):
        code, _, err = run_cli(["circuit", model_file, "--edges", *argv])
        assert code == 2 and message in err


@cache
def exported(directory: str) -> tuple[dict, torch.nn.Module]:
    graph, truths = truth()
    model = with_truth(shipped(NAME), truth_record(graph, truths, SAMPLES, 2, None))
    ifl.export(model, directory)
    info = json.loads((Path(directory) / "infoflow.json").read_text(encoding="utf-8"))
    hf = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager")
    return info, hf


def _bridge(hf: torch.nn.Module) -> torch.nn.Module:
    return build_bridge_from_module(hf, "GPT2LMHeadModel", hf_config=hf.config)


def _answers_wrong(directory: str, bridge: torch.nn.Module, x: torch.Tensor, hooks: list) -> torch.Tensor:
    """Per input, whether the bridged export answers some position wrong with ``hooks`` on."""
    arguments = ifl.export_inputs(directory, x)
    with torch.no_grad():
        logits = bridge.run_with_hooks(arguments["inputs_embeds"], attention_mask=arguments["attention_mask"],
                                       fwd_hooks=hooks)
    y = ifl.export_outputs(directory, logits)
    reference = ifl.evaluate(program_of(shipped(NAME)), x)
    wrong, _ = wrong_answers(y, reference)
    return wrong.reshape(wrong.shape[0], -1).any(dim=1)


def test_the_exported_edges_name_hooks_the_bridge_has_and_patching_moves_as_the_truth_says(tmp_path) -> None:
    directory = str(tmp_path / "out")
    info, hf = exported(directory)
    graph, truths = truth()
    assert info["circuit_truth"]["ablations"]["mean"]["necessary"] == list(truths["mean"].necessary)
    bridge = _bridge(hf)
    x = ifl.encode(program_of(shipped(NAME)), ["a", "b", "c"])
    arguments = ifl.export_inputs(directory, x)
    with torch.no_grad():
        _, activations = bridge.run_with_cache(arguments["inputs_embeds"], attention_mask=arguments["attention_mask"])
    for edge in info["circuit_edges"]:
        assert edge["sender"]["hook"] in activations and edge["receiver"]["hook"] in activations, edge
    # a head with one edge out of it: patching its z at its slot is ablating that edge alone
    senders = [e.sender for e in graph.edges if graph.by_name[e.sender].kind == "head"]
    single = [e for e in graph.edges if senders.count(e.sender) == 1]
    assert len(single) == 2  # a0.h0 -> m0 and a1.h0 -> output
    where = {e["edge"]: e["sender"] for e in info["circuit_edges"]}
    for ablation in ("zero", "mean"):
        needed = set(truths[ablation].necessary)
        for edge in single:
            hook = where[edge.name]
            moved = False
            for x in measured_inputs(program_of(shipped(NAME)), samples=SAMPLES, seed=2):
                def patch(z: torch.Tensor, hook: object, slot: int = hook["slot"], mean: bool = ablation == "mean"
                          ) -> torch.Tensor:
                    z = z.clone()  # (B, N, H, d_head)
                    z[:, :, slot] = z[:, :, slot].mean(dim=0, keepdim=True) if mean else 0.0
                    return z
                moved |= bool(_answers_wrong(directory, bridge, x, [(hook["hook"], patch)]).any())
            assert moved == (edge.name in needed), (ablation, edge.name)


def test_nnsight_patches_a_necessary_edge_at_the_module_infoflow_json_names(tmp_path) -> None:
    from nnsight import NNsight

    directory = str(tmp_path / "out")
    info, hf = exported(directory)
    _, truths = truth()
    name = "a1.h0->output<out>"
    witness = next(e.witness for e in truths["zero"].edges if e.edge == name)
    sender = next(e["sender"] for e in info["circuit_edges"] if e["edge"] == name)
    lo, hi = sender["module_input_columns"]
    layer = int(sender["module"].split(".")[2])
    traced = NNsight(hf)
    x = ifl.encode(program_of(shipped(NAME)), witness)
    with torch.no_grad(), traced.trace(**ifl.export_inputs(directory, x)):
        traced.transformer.h[layer].attn.c_proj.input[:, :, lo:hi] = 0.0
        logits = traced.lm_head.output.save()
    y = ifl.export_outputs(directory, logits)
    wrong, _ = wrong_answers(y, ifl.evaluate(program_of(shipped(NAME)), x))
    assert bool(wrong.any())


def test_a_stored_truth_whose_graph_does_not_fit_is_refused_by_export(tmp_path: Path) -> None:
    graph, truths = truth()
    record = truth_record(graph, truths, SAMPLES, 2, None)
    record["graph"] = {**record["graph"], "layers": 5}
    with pytest.raises(ifl.ExportError, match="the truth's stored edge graph does not fit"):
        ifl.export(with_truth(shipped(NAME), record), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_tl_native_export_has_every_hook_its_edges_name(tmp_path: Path) -> None:
    from infoflow_dsl.exporters.native import load_tl_native

    graph, truths = truth()
    ifl.export(with_truth(shipped(NAME), truth_record(graph, truths, SAMPLES, 2, None)), tmp_path / "out",
               to="tl-native")
    info = json.loads((tmp_path / "out" / "infoflow.json").read_text(encoding="utf-8"))
    bridge = load_tl_native(tmp_path / "out")
    arguments = ifl.export_inputs(tmp_path / "out", ifl.encode(program_of(shipped(NAME)), ["a", "b"]))
    with torch.no_grad():
        _, activations = bridge.run_with_cache(arguments["inputs_embeds"], attention_mask=arguments["attention_mask"])
    assert len(info["circuit_edges"]) == len(graph.edges)
    for edge in info["circuit_edges"]:
        assert edge["sender"]["hook"] in activations and edge["receiver"]["hook"] in activations, edge


def _edge_patches(bridge: torch.nn.Module, cache: dict, edge: dict, ablation: str) -> list:
    """Hooks that ablate one exported edge alone on a tl-native model (no norm: every hook linear
    in the residual): the sender's output o_s read off the clean cache (a head's: its z at its slot
    through its columns of W_O), Δ = stand-in − o_s, added where the receiver reads it: a head's
    channel after its projection (Δ W at its slot), an MLP's input (its block's resid_mid, taken
    back at resid_post so that the stream goes on as it was), the output (the last resid_post)."""
    sender, receiver = edge["sender"], edge["receiver"]
    output = cache[sender["hook"]]
    if "slot" in sender:  # a head: z (B, N, H, d_head), its columns of W_O's input (all heads' z side by side)
        block = bridge.blocks[int(sender["hook"].split(".")[1])]
        lo, hi = sender["module_input_columns"]
        z = output.flatten(start_dim=2)[..., lo:hi]  # (B, N, its width)
        output = z @ block.attn.o.weight[:, lo:hi].T.to(z.dtype)
    change = (output.mean(dim=0, keepdim=True) if ablation == "mean" else 0.0) - output  # (B, N, width)
    layer = int(receiver["hook"].split(".")[1])
    if "slot" in receiver:
        channel = receiver["hook"].rsplit("_", 1)[1]
        weight = getattr(bridge.blocks[layer].attn, channel).weight  # (H·d_head, width)
        d_head = weight.shape[0] // bridge.cfg.n_heads
        rows = weight[receiver["slot"] * d_head:(receiver["slot"] + 1) * d_head].to(change.dtype)

        def into_head(value: torch.Tensor, hook: object, slot: int = receiver["slot"]) -> torch.Tensor:
            value = value.clone()
            value[:, :, slot] += change @ rows.T
            return value
        return [(receiver["hook"], into_head)]
    if receiver["hook"].endswith("hook_resid_mid"):
        return [(receiver["hook"], lambda value, hook: value + change),
                (f"blocks.{layer}.hook_resid_post", lambda value, hook: value - change)]
    return [(receiver["hook"], lambda value, hook: value + change)]


def test_ablating_each_edge_through_a_tl_native_exports_hooks_moves_answers_as_the_truth_says(tmp_path) -> None:
    """Every edge of reverse, alone, zero- and mean-ablated through the exported model's own hooks
    (``circuit_edges``): some answer goes wrong on the truth's inputs exactly when the truth
    marks the edge necessary."""
    from infoflow_dsl.exporters.native import load_tl_native

    graph, truths = truth()
    directory = tmp_path / "out"
    ifl.export(with_truth(shipped(NAME), truth_record(graph, truths, SAMPLES, 2, None)), directory, to="tl-native")
    info = json.loads((directory / "infoflow.json").read_text(encoding="utf-8"))
    bridge = load_tl_native(directory)
    program = program_of(shipped(NAME))
    batches = []
    for x in measured_inputs(program, samples=SAMPLES, seed=2):
        arguments = ifl.export_inputs(directory, x)
        with torch.no_grad():
            _, cache = bridge.run_with_cache(arguments["inputs_embeds"], attention_mask=arguments["attention_mask"])
        batches.append((x, arguments, cache))
    for ablation in ("zero", "mean"):
        needed = set(truths[ablation].necessary)
        for edge in info["circuit_edges"]:
            moved = False
            for x, arguments, cache in batches:
                with torch.no_grad():
                    logits = bridge.run_with_hooks(arguments["inputs_embeds"],
                                                   attention_mask=arguments["attention_mask"],
                                                   fwd_hooks=_edge_patches(bridge, cache, edge, ablation))
                wrong, _ = wrong_answers(ifl.export_outputs(directory, logits), ifl.evaluate(program, x))
                moved |= bool(wrong.any())
            assert moved == (edge["edge"] in needed), (ablation, edge["edge"])
