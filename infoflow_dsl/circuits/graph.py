"""The edge graph of a compiled model: who writes what each reader reads, at TransformerLens
granularity (``ifl.circuit_graph(model)``, ``infoflowc circuit MODEL --edges``).

**Nodes.** The senders are ``input`` (the embedding: W_E, its ReLU block, the positional code
and the readout token's vector: what ``blocks.0.hook_resid_pre`` holds), every head ``a{l}.h{i}``
(block l, head i; its output z_i W_O[i], from ``blocks.{l}.attn.hook_z[:, :, i]``) and every MLP
``m{l}`` (``blocks.{l}.hook_mlp_out``), on the hooks of ``ifl.hooked(model)`` (TransformerLens
4's names). The receivers are every head's query, key and value inputs (read after the
projection at ``attn.hook_q``/``hook_k``/``hook_v``, head i), every MLP's input
(``hook_resid_mid``) and the output (the last ``hook_resid_post``). The residual stream a
receiver reads is the sum of the outputs of the senders before it (a head of block l: the input,
the heads and MLPs of blocks < l; the MLP of block l: also block l's heads; the output:
everything), so the model is the sum over these edges.

**Edges.** An edge sender → (receiver, channel) exists where the sender writes a residual
direction the receiver reads; it carries those directions (their readable names) and its
``role`` says what the receiver computes with them (the head's retrieval, the FFN block's
function, the output). The graph is derived from the circuit IR (the model's program lowered
again, checked against the weights as ``ifl.circuit`` does): the heads' query, key and value
forms, the FFN units' input forms, the output forms and who writes each direction. Then it is
**checked against the weights** (:func:`weight_edges`): for every (sender, receiver) pair, the
directions with a nonzero column in the sender's output matrix and a nonzero row in the
receiver's input matrix must be exactly the edge's directions. An edge absent from the graph
therefore carries exactly 0 through the weights: no ablation of it can move any output.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import torch

from ..compiler.circuit import ONE, AttentionHead, Circuit, FFNBlock, LinearForm
from ..errors import StoredProgramError
from ..transformer.model import CompiledTransformer

INPUT, OUTPUT = "input", "output"
#: the receiving channels of a head, an MLP and the output
HEAD_CHANNELS = ("q", "k", "v")
#: what a superposed model's added parts are (compile --residual: clean-ups, erasers, storage reads)
SUPERPOSED = "superposition: clean-ups and erasers of the superposed features (compile --residual)"
CHANNEL_NAMES = {"q": "query", "k": "key", "v": "value"}
MLP_CHANNEL, OUTPUT_CHANNEL = "in", "out"


@dataclass(frozen=True)
class GraphNode:
    """A sender or receiver: ``kind`` is input, head, mlp or output; ``layer`` the block
    (0-based) of a head or MLP, ``index`` a head's place in its block; ``computes`` what it
    computes (the circuit's formulas); ``writes`` the residual directions it writes."""

    name: str
    kind: str
    layer: int | None
    index: int | None
    computes: str
    writes: tuple[str, ...]

    @property
    def order(self) -> tuple[int, int]:
        """Where it runs: (-1, 0) the input, (l, 0) block l's heads, (l, 1) its MLP, (L, 0) the
        output. A receiver reads exactly the senders whose order is smaller."""
        if self.kind == INPUT:
            return (-1, 0)
        assert self.layer is not None
        return (self.layer, 1 if self.kind == "mlp" else 0)

    def sender_hook(self) -> str:
        """The hook of ``ifl.hooked(model)`` (TransformerLens 4's names) holding its output: the
        embedding's at the first block's ``hook_resid_pre``; a head's z at ``attn.hook_z``
        (index ``head``: its output is z W_O[head]); an MLP's at ``hook_mlp_out``."""
        if self.kind == INPUT:
            return "blocks.0.hook_resid_pre"
        if self.kind == "head":
            return f"blocks.{self.layer}.attn.hook_z"
        return f"blocks.{self.layer}.hook_mlp_out"

    def receiver_hook(self, channel: str, layers: int) -> str:
        """The hook where its ``channel`` input is read: a head's q, k or v after its projection
        (``attn.hook_q`` ... at index ``head``: the sender's change enters as Δ W_Q[head]); an
        MLP's input at ``hook_resid_mid`` (an edge patched there is taken back at
        ``hook_resid_post``, so that the stream goes on as it was); the output at the last
        block's ``hook_resid_post``."""
        if self.kind == "head":
            return f"blocks.{self.layer}.attn.hook_{channel}"
        if self.kind == "mlp":
            return f"blocks.{self.layer}.hook_resid_mid"
        return f"blocks.{layers - 1}.hook_resid_post"


@dataclass(frozen=True)
class CircuitEdge:
    """sender → receiver's ``channel`` (q, k, v, in or out), carrying ``directions``; ``role``:
    what the receiver computes with them."""

    sender: str
    receiver: str
    channel: str
    directions: tuple[str, ...]
    role: str

    @property
    def name(self) -> str:
        return f"{self.sender}->{self.receiver}<{self.channel}>"


@dataclass(frozen=True)
class EdgeGraph:
    """The nodes and edges of one compiled model (``layers`` blocks, ``eps`` its certified ε)."""

    nodes: tuple[GraphNode, ...]
    edges: tuple[CircuitEdge, ...]
    layers: int
    eps: float
    by_name: dict[str, GraphNode] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {n.name: n for n in self.nodes})

    def senders(self) -> list[GraphNode]:
        return [n for n in self.nodes if n.kind != OUTPUT]

    def receivers(self) -> list[tuple[GraphNode, str]]:
        """(node, channel) of every receiving input, in the order the model computes them."""
        out: list[tuple[GraphNode, str]] = []
        for node in self.nodes:
            if node.kind == "head":
                out.extend((node, c) for c in HEAD_CHANNELS)
            elif node.kind == "mlp":
                out.append((node, MLP_CHANNEL))
            elif node.kind == OUTPUT:
                out.append((node, OUTPUT_CHANNEL))
        return out

    def pairs(self) -> list[tuple[str, str, str]]:
        """Every (sender, receiver, channel) that can carry something (the sender runs before the
        receiver): the candidate edges of a discovery method, the graph's edges among them."""
        return [(s.name, r.name, c) for r, c in self.receivers() for s in self.senders() if s.order < r.order]

    def keys_of(self, names: Collection[str]) -> set[tuple[str, str, str]]:
        """The (sender, receiver, channel) of the edges named ``names`` (a truth's necessary ones)."""
        wanted = set(names)
        return {(e.sender, e.receiver, e.channel) for e in self.edges if e.name in wanted}

    def edge_hooks(self, edge: CircuitEdge) -> dict[str, Any]:
        """The edge on ``ifl.hooked(model)``'s hooks (:meth:`GraphNode.sender_hook`,
        :meth:`GraphNode.receiver_hook`), each with the head index where the hook holds every head."""
        sender, receiver = self.by_name[edge.sender], self.by_name[edge.receiver]
        return {"sender": {"hook": sender.sender_hook(), "head": sender.index},
                "receiver": {"hook": receiver.receiver_hook(edge.channel, self.layers), "head": receiver.index}}

    def to_json(self) -> dict[str, Any]:
        return {
            "eps": self.eps, "layers": self.layers,
            "nodes": [{"name": n.name, "kind": n.kind, "layer": n.layer, "head": n.index, "computes": n.computes,
                       "writes": list(n.writes)} for n in self.nodes],
            "edges": [{"name": e.name, "sender": e.sender, "receiver": e.receiver, "channel": e.channel,
                       "directions": list(e.directions), "role": e.role, "hooks": self.edge_hooks(e)}
                      for e in self.edges],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EdgeGraph:
        """The graph :meth:`to_json` wrote (a disguised model's carried graph)."""
        nodes = tuple(GraphNode(n["name"], n["kind"], n["layer"], n["head"], n["computes"], tuple(n["writes"]))
                      for n in data["nodes"])
        edges = tuple(CircuitEdge(e["sender"], e["receiver"], e["channel"], tuple(e["directions"]), e["role"])
                      for e in data["edges"])
        return cls(nodes=nodes, edges=edges, layers=int(data["layers"]), eps=float(data["eps"]))


# ---------------------------------------------------------------------------- from the circuit IR


def _directions(forms: tuple[LinearForm, ...] | list[LinearForm], constant_on_one: bool) -> set[str]:
    """The directions a reader with these forms reads (a constant rides ``one`` where the
    assembler writes it there: attention's forms; an FFN unit's constant is its bias)."""
    read = {d for form in forms for d, c in form.terms if c != 0.0}
    if constant_on_one and any(form.constant for form in forms):
        read.add(ONE)
    return read


@dataclass(frozen=True)
class _Reader:
    node: GraphNode
    channel: str
    reads: frozenset[str]
    role: str


def _head_node(head: AttentionHead, layer: int, index: int) -> GraphNode:
    return GraphNode(f"a{layer}.h{index}", "head", layer, index, f"{head.name}: {head.formula}", tuple(head.outputs))


def _mlp_node(layer: int, blocks: list[FFNBlock]) -> GraphNode:
    computes = "; ".join(f"{b.name} = {b.formula}" for b in blocks)
    return GraphNode(f"m{layer}", "mlp", layer, None, computes, tuple(b.output for b in blocks))


def _readers(circuit: Circuit, heads: dict[int, list[AttentionHead]], nodes: dict[str, GraphNode]) -> list[_Reader]:
    readers = []
    for layer in range(circuit.layers):
        for index, head in enumerate(heads.get(layer, [])):
            node = nodes[f"a{layer}.h{index}"]
            for channel, forms in zip(HEAD_CHANNELS, (head.query, head.key, head.value), strict=True):
                role = f"{CHANNEL_NAMES[channel]} of {head.name}: {head.formula}"
                readers.append(_Reader(node, channel, frozenset(_directions(forms, True)), role))
        blocks = [b for b in circuit.blocks if b.layer == layer + 1]
        if blocks:
            reads = frozenset(_directions([u.input for b in blocks for u in b.units], False))
            readers.append(_Reader(nodes[f"m{layer}"], MLP_CHANNEL, reads, f"input of {nodes[f'm{layer}'].computes}"))
    output = nodes[OUTPUT]
    readers.append(_Reader(output, OUTPUT_CHANNEL, frozenset(_directions(circuit.output, False)), "the output"))
    return readers


def graph_from_circuit(circuit: Circuit, eps: float) -> EdgeGraph:
    """The edge graph of the model assembled from ``circuit`` (see the module docstring)."""
    heads: dict[int, list[AttentionHead]] = {}
    for head in circuit.heads:  # block l holds schedule layer l + 1's heads, in the circuit's order
        heads.setdefault(head.layer - 1, []).append(head)
    nodes: dict[str, GraphNode] = {}
    written: set[str] = set()
    ordered: list[GraphNode] = []
    for layer in range(circuit.layers):
        for index, head in enumerate(heads.get(layer, [])):
            ordered.append(_head_node(head, layer, index))
        blocks = [b for b in circuit.blocks if b.layer == layer + 1]
        if blocks:
            ordered.append(_mlp_node(layer, blocks))
    for node in ordered:
        written |= set(node.writes)
    # the embedding writes the rest (one writer a direction), but not a token or position column
    # that is 0 at every token and position (a feature constant 0 on the vocabulary, such as [4 < x] for x <= 4)
    silent = {name for name, values in (*circuit.token_columns, *circuit.position_columns) if not any(values)}
    embedded = tuple(d for d in circuit.directions if d not in written and d not in silent)
    first = GraphNode(INPUT, INPUT, None, None, "the embedding (tokens, positions, the readout token)", embedded)
    last = GraphNode(OUTPUT, OUTPUT, circuit.layers, None, "the output", ())
    for node in (first, *ordered, last):
        nodes[node.name] = node
    edges = []
    for reader in _readers(circuit, heads, nodes):
        for sender in (first, *ordered):
            carried = tuple(d for d in sender.writes if d in reader.reads)
            if sender.order < reader.node.order and carried:
                edges.append(CircuitEdge(sender.name, reader.node.name, reader.channel, carried, reader.role))
    return EdgeGraph(nodes=(first, *ordered, last), edges=tuple(edges), layers=circuit.layers, eps=eps)


# ---------------------------------------------------------------------------- from the weights


def _dense(tensor: torch.Tensor) -> torch.Tensor:
    return (tensor.to_dense() if tensor.is_sparse else tensor).detach().to("cpu", torch.float64)


def _columns(matrix: torch.Tensor) -> set[int]:
    """Residual indices with a nonzero entry in a (rows, D) writer matrix."""
    return set(torch.nonzero(matrix.abs().sum(dim=0)).flatten().tolist()) if matrix.numel() else set()


def _rows(matrix: torch.Tensor) -> set[int]:
    """Residual indices with a nonzero entry in a (D, columns) reader matrix."""
    return set(torch.nonzero(matrix.abs().sum(dim=1)).flatten().tolist()) if matrix.numel() else set()


def weight_writes(model: CompiledTransformer, node: GraphNode) -> set[int]:
    """The residual indices a sender's weights write."""
    state = model.state_dict()
    if node.kind == INPUT:
        parts = [state["embed.W_E"], state["embed.W_E2"], state["embed.cls"][None], state["pos_embed.W_pos"]]
        return set().union(*(_columns(_dense(p)) for p in parts))
    if node.kind == "head":
        return _columns(_dense(state[f"blocks.{node.layer}.attn.W_O"])[node.index])
    return _columns(_dense(state[f"blocks.{node.layer}.mlp.W_out"])) | _columns(
        _dense(state[f"blocks.{node.layer}.mlp.b_out"])[None])


def weight_reads(model: CompiledTransformer, node: GraphNode, channel: str) -> set[int]:
    """The residual indices a receiver's weights read through ``channel``."""
    state = model.state_dict()
    if node.kind == "head":
        return _rows(_dense(state[f"blocks.{node.layer}.attn.W_{channel.upper()}"])[node.index])
    if node.kind == "mlp":
        return _rows(_dense(state[f"blocks.{node.layer}.mlp.W_in"]))
    return _rows(_dense(state["unembed.W_U"]))


def weight_edges(model: CompiledTransformer, graph: EdgeGraph) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """Every (sender, receiver, channel) whose weights carry something: the residual directions
    written by the sender's output matrix and read by the receiver's input matrix (nonzero)."""
    labels = model.card.labels
    writes = {n.name: weight_writes(model, n) for n in graph.senders()}
    found = {}
    for receiver, channel in graph.receivers():
        reads = weight_reads(model, receiver, channel)
        for sender in graph.senders():
            carried = sorted(writes[sender.name] & reads)
            if sender.order < receiver.order and carried:
                found[(sender.name, receiver.name, channel)] = tuple(labels[i] for i in carried)
    return found


def graph_from_weights(model: CompiledTransformer, old: EdgeGraph, added: str) -> EdgeGraph:
    """The graph of ``model``, whose weights a pass changed from those ``old`` describes (disguise's
    passes, superposition): the nodes the model now has (the old graph's keep their
    descriptions; a head whose config is marked ``added`` is described by it, an FFN that gained
    units says ``added``) and the edges its weights carry, each with its former role or
    ``added`` (read off the weights, which hold them exactly: no rotation has run yet)."""
    card, layers = model.card, len(model.card.layers)
    labels, known = card.labels, old.by_name
    nodes: list[GraphNode | None] = [known[INPUT]]
    for layer in range(layers):
        heads = card.layers[layer].heads
        nodes.extend(GraphNode(f"a{layer}.h{i}", "head", layer, i, head.added, ()) if head.added is not None
                     else known.get(f"a{layer}.h{i}") for i, head in enumerate(heads))
        if model.blocks[layer].mlp.b_in.shape[0]:
            mlp = known.get(f"m{layer}")
            nodes.append(GraphNode(f"m{layer}", "mlp", layer, None,
                                   added if mlp is None else f"{mlp.computes}; {added}", ()))
    written = [dataclasses.replace(n, writes=tuple(labels[i] for i in sorted(weight_writes(model, n))))
               for n in nodes if n is not None]
    output = dataclasses.replace(known[OUTPUT], layer=layers)  # after every block, a merged one's too
    bare = EdgeGraph(nodes=(*written, output), edges=(), layers=layers, eps=old.eps)
    roles = {(e.sender, e.receiver, e.channel): e.role for e in old.edges}
    edges = tuple(CircuitEdge(*key, directions, roles.get(key, added))
                  for key, directions in weight_edges(model, bare).items())
    return dataclasses.replace(bare, edges=edges)


def check_against_weights(model: CompiledTransformer, graph: EdgeGraph) -> None:
    """StoredProgramError unless the weights carry exactly the graph's edges, each exactly its
    directions: no pair outside the graph carries anything through the weights."""
    derived = {(e.sender, e.receiver, e.channel): tuple(sorted(e.directions, key=model.card.labels.index))
               for e in graph.edges}
    found = weight_edges(model, graph)
    if derived != found:
        extra = sorted(set(found) - set(derived))
        missing = sorted(set(derived) - set(found))
        differ = sorted(k for k in set(found) & set(derived) if found[k] != derived[k])
        raise StoredProgramError(f"the weights and the circuit disagree on the edges (carried by the weights only: "
                                 f"{extra[:3]}; in the circuit only: {missing[:3]}; other directions: {differ[:3]})")


def _misfit(model: CompiledTransformer, graph: EdgeGraph) -> str | None:
    """What in a stored graph does not fit ``model``'s blocks (None: it fits)."""
    layers = model.card.layers
    kinds = [n.kind for n in graph.nodes]
    if graph.layers != len(layers) or kinds.count(INPUT) != 1 or kinds.count(OUTPUT) != 1 or len(
            graph.by_name) != len(graph.nodes):
        return "its layers, input, output or node names"
    for node in graph.nodes:
        if node.kind == "head":
            fits = isinstance(node.layer, int) and 0 <= node.layer < len(layers) and isinstance(node.index, int) \
                and 0 <= node.index < len(layers[node.layer].heads) and node.name == f"a{node.layer}.h{node.index}"
        elif node.kind == "mlp":
            fits = isinstance(node.layer, int) and 0 <= node.layer < len(layers) and node.name == f"m{node.layer}"
        else:
            fits = node.kind in (INPUT, OUTPUT) and node.name == node.kind
        if not fits:
            return f"node {node.name!r}"
    channels = {"head": HEAD_CHANNELS, "mlp": (MLP_CHANNEL,), OUTPUT: (OUTPUT_CHANNEL,)}
    for edge in graph.edges:
        sender, receiver = graph.by_name.get(edge.sender), graph.by_name.get(edge.receiver)
        if sender is None or receiver is None or sender.kind == OUTPUT or edge.channel not in channels.get(
                receiver.kind, ()) or not sender.order < receiver.order:
            return f"edge {edge.name!r}"
    return None


def circuit_graph(model: Any) -> EdgeGraph:
    """The edge graph of a compiled model (or the path of its file), derived from its circuit and
    checked against its weights (:func:`check_against_weights`); a disguised model's is the graph
    carried through its passes, checked the same way unless the residual stream was rotated; a
    model trained with ``--keep-circuit`` carries its init's graph over its own nodes, which no
    weight is exactly 0 outside of: its certificate is measured (``certify``), not read off.

    Args:
        model: a compiled (or disguised) model, or the path of its file.

    Returns:
        The :class:`EdgeGraph`: every edge sender -> receiver with its channel (q, k, v, MLP in, output).

    Raises:
        ModelFileError: a path that is not a model file.
        StoredProgramError: the graph does not match the weights (a file changed after compiling).
    """
    from ..transformer.arguments import model_argument
    from ..verify.sites import checked_lowering

    compiled = model_argument(model, "circuit_graph")
    card = compiled.card
    if card.kept_circuit is not None:  # trained keeping its init's circuit: its graph is certified (certify.py)
        return stored_graph(compiled, card.kept_circuit.graph, "trained model's")
    if card.superposition is not None:  # the plain circuit's graph, read again off the superposed weights
        from ..pipeline.reading import relower

        plain = graph_from_circuit(relower(compiled).circuit, float(card.eps or 0.0))
        graph = graph_from_weights(compiled, plain, SUPERPOSED)
    elif card.disguised is not None:  # the graph carried through the realism passes (``disguise``)
        graph = stored_graph(compiled, card.disguised.graph, "disguised model's")
        if card.disguised.rotate:  # a rotated reader reads every coordinate: zero only up to rounding
            return graph
    else:
        lowering = checked_lowering(compiled)  # a compiled model: its ε stored
        graph = graph_from_circuit(lowering.circuit, float(card.eps or 0.0))
    check_against_weights(compiled, graph)
    return graph


def stored_graph(model: CompiledTransformer, data: Any, whose: str) -> EdgeGraph:
    """A graph stored in ``model``'s config (a disguised model's, a stored truth's), read and
    fitted to its blocks; StoredProgramError when malformed or not fitting."""
    try:
        graph = EdgeGraph.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise StoredProgramError(f"the {whose} stored edge graph is malformed ({error!r})") from None
    misfit = _misfit(model, graph)
    if misfit is not None:
        raise StoredProgramError(f"the {whose} stored edge graph does not fit its blocks ({misfit})")
    return graph
