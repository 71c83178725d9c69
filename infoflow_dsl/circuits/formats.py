"""The truth in the forms the field reads: stored in the model, exported, and as MIB's circuit.

- **Stored** (``infoflowc circuit MODEL --truth -o OUT``, :func:`with_truth`): the graph, each
  ablation's truth and what it was measured on go into the model's config as ``circuit_truth``;
  ``export`` copies it into ``infoflow.json`` with the edges mapped onto the exported model's
  hooks (:func:`exported_edges`).
- **MIB's circuit JSON** (``--mib``, :func:`mib_circuit`): the format of the EAP-IG code behind
  MIB's circuit-localization track, as its ``Graph.to_json`` writes it and ``Graph.from_json``
  reads it: ``{"cfg": {n_layers, n_heads, d_model, parallel_attn_mlp, ...}, "nodes": {name:
  {"in_graph": bool}}, "edges": {name: {"score": float, "in_graph": bool}}}`` (a node is a dict:
  from_json reads ``node["in_graph"]``, and never sets ``logits``, always in the graph). Nodes
  ``input``, ``a{l}.h{i}``, ``m{l}``, ``logits``; an edge into a head is named with its channel
  (``a0.h0->a1.h0<q>``), any other without one (``a0.h0->m0``, ``m1->logits``). Every candidate
  pair is listed; ``in_graph`` marks the edges the ablation needs and ``score`` is the largest
  departure measured when the edge alone is ablated (0 outside the graph).

  EAP-IG's graph has ``n_heads`` heads in every layer; a compiled model's layers may have
  fewer. ``n_heads`` is the largest count, so the graph from_json builds also has the heads
  a layer lacks (``a{l}.h{i}`` for i at or above that layer's count) and their edges: nothing
  here names them, and from_json leaves them as it makes them, outside the circuit with score
  0, which is what they are (a head that is not there reads and writes nothing; the GPT-2
  export pads such slots with zero heads). A metric that counts the graph's edges (MIB's
  circuit size) counts them among the edges left out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ..transformer.card import CircuitTruth
from ..transformer.model import CompiledTransformer
from .graph import INPUT, OUTPUT, EdgeGraph
from .truth import AblationTruth

TRUTH_FIELD = "circuit_truth"


def truth_record(graph: EdgeGraph, truths: dict[str, AblationTruth], samples: int, seed: int,
                 length: int | None) -> dict[str, Any]:
    return {"graph": graph.to_json(), "ablations": {a: t.to_json() for a, t in truths.items()},
            "measured": {"samples": samples, "seed": seed, "length": length}}


def with_truth(model: CompiledTransformer, record: dict[str, Any]) -> CompiledTransformer:
    """A copy of ``model`` whose card holds ``record`` (:func:`truth_record`) as circuit_truth."""
    tensors = {name: t.to_dense() if t.is_sparse or t.layout != torch.strided else t
               for name, t in model.state_dict().items()}
    card = dataclasses.replace(model.card, circuit_truth=CircuitTruth.from_json(record, (TRUTH_FIELD,)))
    return CompiledTransformer(card, tensors, device=model.device, dtype=model.dtype)


def _mib_node(name: str) -> str:
    return "logits" if name == OUTPUT else name


def mib_edge_name(sender: str, receiver: str, channel: str) -> str:
    suffix = f"<{channel}>" if channel in ("q", "k", "v") else ""
    return f"{_mib_node(sender)}->{_mib_node(receiver)}{suffix}"


def mib_circuit(model: CompiledTransformer, graph: EdgeGraph, truth: AblationTruth) -> dict[str, Any]:
    """The truth of one ablation as MIB's circuit JSON (see the module docstring)."""
    departure = {e.edge: e.departure for e in truth.edges}
    needed = set(truth.necessary)
    edges = {}
    for sender, receiver, channel in graph.pairs():
        ours = f"{sender}->{receiver}<{channel}>"
        edges[mib_edge_name(sender, receiver, channel)] = {"score": departure.get(ours, 0.0),
                                                           "in_graph": ours in needed}
    used = {name for e in truth.edges if e.necessary for name in e.edge.split("<")[0].split("->")}
    nodes = {_mib_node(n.name): {"in_graph": n.kind in (INPUT, OUTPUT) or n.name in used} for n in graph.nodes}
    heads = model.card.heads_per_layer
    cfg = {"n_layers": graph.layers, "n_heads": max([0, *heads]), "d_model": model.d_model,
           "parallel_attn_mlp": False, "ablation": truth.ablation}
    return {"cfg": cfg, "nodes": nodes, "edges": edges}


def exported_edges(graph: EdgeGraph, heads: list[dict[str, Any]], layer_of_compiled: list[int],
                   n_layers: int) -> list[dict[str, Any]]:
    """The graph's edges on an exported model's hooks, as TransformerLens 4's bridge names them
    (``infoflow.json``'s ``heads`` and ``layout.layer_of_compiled``): a head's output at its
    block's ``hook_z`` (at its slot; o = z W_O, so patching z there patches the head's output),
    an MLP's at its block's ``hook_mlp_out``, the embedding at the first compiled block's
    ``hook_resid_pre`` (the export's inputs arrive as ``inputs_embeds``); a head's channel input
    at its block's ``attn.hook_q`` / ``hook_k`` / ``hook_v`` (the head's slot, after the
    projection: the sender's change times that head's W), an MLP's at its block's
    ``hook_resid_mid``, the output at the last block's ``hook_resid_post``. nnsight reads a head's
    output at ``module`` (its input columns ``module_input_columns``)."""
    slot = {(h["compiled_layer"], h["compiled_index"]): h for h in heads}

    def sender(name: str) -> dict[str, Any]:
        node = graph.by_name[name]
        if node.kind == INPUT:
            return {"hook": f"blocks.{layer_of_compiled[0]}.hook_resid_pre"}
        if node.kind == "head":
            head = slot[(node.layer, node.index)]
            return {"hook": head["hook_z"], "slot": head["slot"], "module": head["module"],
                    "module_input_columns": head["module_input_columns"]}
        return {"hook": f"blocks.{layer_of_compiled[int(node.layer or 0)]}.hook_mlp_out"}

    def receiver(name: str, channel: str) -> dict[str, Any]:
        node = graph.by_name[name]
        if node.kind == OUTPUT:
            return {"hook": f"blocks.{n_layers - 1}.hook_resid_post"}
        if node.kind == "head":
            head = slot[(node.layer, node.index)]
            return {"hook": f"blocks.{head['layer']}.attn.hook_{channel}", "slot": head["slot"]}
        return {"hook": f"blocks.{layer_of_compiled[int(node.layer or 0)]}.hook_resid_mid"}

    return [{"edge": e.name, "sender": sender(e.sender), "receiver": receiver(e.receiver, e.channel)}
            for e in graph.edges]
