"""Realism passes that keep the certificate: a compiled model made to look trained, its edge
graph carried through (``ifl.disguise(model, ...)``, ``infoflowc disguise MODEL ... -o OUT``).

A compiled model is easy to read: one-hot, axis-aligned residual directions, one unit per
interpolation knot, one head per comparison. Each pass below changes that while computing the
same function, exactly in real arithmetic (in floats: within rounding, measured by ``check``):

- **merge** (other compiled models): their programs in the same model, each in a residual block
  of its own (disjoint from the others'; the rotation then mixes them all), its heads beside
  this layer's heads and its units beside this FFN's, fed by the same input (the same vocabulary,
  or the same d; a T at least the model's). Their outputs are read by nothing, so their circuits
  are active on the task's inputs and never needed by it.
- **distract** (n): n new residual directions ``distractor:i`` that nothing the program needs
  reads; in every layer one more head (random W_Q, W_K, W_V over the input's directions, no
  mask, β = 1) and n more ReLU units in the FFN (random weights over the input's and the
  distractors' directions), all writing random combinations of the distractor directions only.
  They are active on every input and change no output. The graph gains their nodes and edges
  (read off the weights, which hold them exactly), and no ablation ever needs one of them.
- **compress**: the residual below its number of features, each dimension carrying several
  features one after another over the depth, an eraser (two ReLU units) freeing a dimension after
  its feature's last reader, with tight lifetimes (a write nothing reads dropped, the FFN that
  erases a feature handing its dimension to one it writes; the directions merge and distract
  added keep their writes) (``compress``: exact in real arithmetic; not superposition at one
  depth, which no pass over compiled weights can do with a certificate). The graph gains the erasers'
  edges and those of a dimension's successive features (read off the weights).
- **split heads** (k): head h becomes k heads with h's W_Q, W_K, W_V, β and mask (the same
  pattern) and W_O scaled by w_1..w_k > 0, Σ w_i = 1: Σ_i w_i·z W_O = z W_O. Every edge of h
  becomes k edges, one per copy.
- **split neurons** (k): ReLU is positively homogeneous, relu(a·u) = a·relu(u) for a > 0, so a
  unit c·relu(u) becomes k units (c·w_i/a_i)·relu(a_i·u), a_i ∈ [1/2, 2], w_i > 0, Σ w_i = 1
  (every FFN, the embedding's too).
- **shuffle**: the heads of each layer (with their masks) and the units of each FFN in a random
  order; the graph's head nodes renamed by the same permutation.
- **rotate**: a random orthogonal R (D × D, QR of a Gaussian, seeded): every residual writer
  W ↦ W R and every reader W ↦ Rᵀ W (the residual stream becomes h R; the compiled model has no
  LayerNorm, so nothing else changes). The graph keeps its direction names: direction i of the
  disguised model is row i of R, reproducible from the seed stored with it.

The disguised model keeps its program, ε and bound (``check`` measures it against the reference)
and stores its record in the card's ``disguised``: the passes, the seed and the carried graph
(:func:`~.graph.circuit_graph` returns it). Its weights are not its circuit's any more, so the
tools that relower the program (``circuit``'s map, ``check --trace``) refuse it and say so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from ..compiler.compress import COMPRESSED, compress_residual, stage_tensors
from ..transformer.card import BlockCard, Disguised, HeadCard, LayerCard
from ..transformer.model import CompiledTransformer
from .graph import INPUT, CircuitEdge, EdgeGraph, GraphNode, graph_from_weights

Tensor = torch.Tensor

HEAD_TENSORS = ("W_Q", "W_K", "W_V", "W_O", "beta")
DISTRACTOR = "a distractor: nothing the output needs reads it"


@dataclass(frozen=True)
class DisguisePasses:
    """Which passes run (in this order: merge, distract, compress, split heads, split neurons, shuffle,
    rotate) and the seed."""

    merged: tuple[str, ...] = ()
    distract: int = 0
    compress: bool = False
    split_heads: int = 1
    split_neurons: int = 1
    shuffle: bool = False
    rotate: bool = False
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "merged": list(self.merged)}


def _weights(count: int, generator: torch.Generator) -> Tensor:
    """count positive weights summing to 1 (each at least 1/(4·count))."""
    raw = 1.0 + 3.0 * torch.rand(count, generator=generator, dtype=torch.float64)
    return raw / raw.sum()


def _split_weights(groups: int, k: int, generator: torch.Generator) -> Tensor:
    """``groups`` runs of k positive weights, each run summing to 1: (groups·k,)."""
    return torch.cat([_weights(k, generator) for _ in range(groups)] or [torch.ones(0, dtype=torch.float64)])


def _head_map(graph: EdgeGraph, names: dict[str, list[str]]) -> EdgeGraph:
    """The graph with each head node ``a{l}.h{i}`` replaced by the heads ``names[...]`` (every edge
    to or from it copied to each); the nodes' indices read off the new names."""
    def renamed(name: str) -> list[str]:
        return names.get(name, [name])

    nodes: list[GraphNode] = []
    for node in graph.nodes:
        for new in renamed(node.name):
            index = int(new.split(".h")[1]) if node.kind == "head" else node.index
            nodes.append(GraphNode(new, node.kind, node.layer, index, node.computes, node.writes))
    nodes.sort(key=lambda n: (n.order, n.index if n.index is not None else -1))
    edges = [CircuitEdge(s, r, e.channel, e.directions, e.role)
             for e in graph.edges for s in renamed(e.sender) for r in renamed(e.receiver)]
    order = {n.name: i for i, n in enumerate(nodes)}
    edges.sort(key=lambda e: (order[e.receiver], "qkv".find(e.channel), order[e.sender]))
    return EdgeGraph(nodes=tuple(nodes), edges=tuple(edges), layers=graph.layers, eps=graph.eps)


def _empty_layer(layer: int, size: int) -> dict[str, Tensor]:
    """The tensors of a block with no head and no unit over a residual of ``size``."""
    p, zeros = f"blocks.{layer}.", lambda *shape: torch.zeros(shape, dtype=torch.float64)
    return {p + "attn.W_Q": zeros(0, size, 0), p + "attn.W_K": zeros(0, size, 0), p + "attn.W_V": zeros(0, size, 0),
            p + "attn.W_O": zeros(0, 0, size), p + "attn.beta": zeros(0), p + "mlp.W_in": zeros(size, 0),
            p + "mlp.b_in": zeros(0), p + "mlp.W_out": zeros(0, size), p + "mlp.b_out": zeros(size)}


def _placed(heads: Tensor, shape: tuple[int, int], offset: int) -> Tensor:
    """(H, D_x, E_x) heads placed in (H, *shape) zeros, their rows from ``offset`` on."""
    out = heads.new_zeros(heads.shape[0], *shape)
    out[:, offset:offset + heads.shape[1], :heads.shape[2]] = heads
    return out


def _merge_layer(t: dict[str, Tensor], layer: int, theirs: dict[str, Tensor], mine_size: int,
                 their_size: int) -> None:
    """Block ``layer``'s heads and FFN with ``theirs`` (the other program's block ``layer``)."""
    p = f"blocks.{layer}."
    for name in ("attn.W_Q", "attn.W_K", "attn.W_V"):  # (H, D, E): rows by block
        a, b = t[p + name], theirs[p + name]
        width = max(a.shape[2], b.shape[2])
        t[p + name] = torch.cat([_placed(a, (mine_size + their_size, width), 0),
                                 _placed(b, (mine_size + their_size, width), mine_size)])
    a, b = t[p + "attn.W_O"], theirs[p + "attn.W_O"]  # (H, V, D): columns by block
    width = max(a.shape[1], b.shape[1])
    t[p + "attn.W_O"] = torch.cat([_placed(a.transpose(1, 2), (mine_size + their_size, width), 0),
                                   _placed(b.transpose(1, 2), (mine_size + their_size, width), mine_size)
                                   ]).transpose(1, 2).contiguous()
    t[p + "attn.beta"] = torch.cat([t[p + "attn.beta"], theirs[p + "attn.beta"]])
    t[p + "mlp.W_in"] = torch.block_diag(t[p + "mlp.W_in"], theirs[p + "mlp.W_in"])
    t[p + "mlp.b_in"] = torch.cat([t[p + "mlp.b_in"], theirs[p + "mlp.b_in"]])
    t[p + "mlp.W_out"] = torch.block_diag(t[p + "mlp.W_out"], theirs[p + "mlp.W_out"])
    t[p + "mlp.b_out"] = torch.cat([t[p + "mlp.b_out"], theirs[p + "mlp.b_out"]])


def residual_writers(layers: int) -> list[str]:
    """Every tensor writing the residual stream (its last dimension D)."""
    return [name for _, _, writers in stage_tensors(layers) for name in writers]


def residual_readers(layers: int) -> list[str]:
    """Every tensor reading the residual stream (its second-to-last dimension D)."""
    return [name for _, readers, _ in stage_tensors(layers) for name in readers]


def relu_blocks(layers: int) -> list[tuple[str, str, str]]:
    """(W_in, b_in, W_out) of every ReLU block: the embedding's and each layer's FFN."""
    blocks = [(f"blocks.{i}.mlp.W_in", f"blocks.{i}.mlp.b_in", f"blocks.{i}.mlp.W_out") for i in range(layers)]
    return [("embed.W_E1", "embed.b_E1", "embed.W_E2"), *blocks]


def _random(generator: torch.Generator, rows: list[int], columns: list[int], shape: tuple[int, int],
            scale: float) -> Tensor:
    """A (shape) matrix, zero but at (rows × columns), there scale·N(0, 1/len(rows))."""
    out = torch.zeros(shape, dtype=torch.float64)
    block = torch.randn(len(rows), len(columns), generator=generator, dtype=torch.float64)
    out[torch.tensor(rows)[:, None], torch.tensor(columns)[None]] = scale * block / max(len(rows), 1) ** 0.5
    return out


class _Disguiser:
    """The tensors (dense, float64), the card and the graph of one model, changed pass by pass."""

    def __init__(self, model: CompiledTransformer, graph: EdgeGraph, seed: int) -> None:
        self.tensors = {name: (t.to_dense() if t.is_sparse else t).detach().to("cpu", torch.float64).clone()
                        for name, t in model.state_dict().items()}
        self.card = model.card
        self.graph = graph
        self.generator = torch.Generator().manual_seed(seed)
        self.layers = len(self.card.layers)
        self.unread: set[str] = set()  # directions merge and distract add for nothing to read

    # ------------------------------------------------------------------ merged programs

    def merge(self, other: CompiledTransformer, name: str) -> None:
        """Program ``other`` in the same model: its residual block after this one's (the two
        disjoint), its heads after this layer's heads, its units after this FFN's; its output read
        by nothing (the unembedding reads this program's block only)."""
        theirs = {n: (t.to_dense() if t.is_sparse else t).detach().to("cpu", torch.float64)
                  for n, t in other.state_dict().items()}
        mine_size, their_size = len(self.card.labels), other.d_model
        theirs_described = other.card.layers
        layers = max(self.layers, len(theirs_described))
        for layer in range(self.layers, layers):
            self.tensors |= _empty_layer(layer, mine_size)
        self.card = dataclasses.replace(self.card, layers=(
            *self.card.layers, *(LayerCard(heads=(), mlp=()) for _ in range(self.layers, layers))))
        self.layers = layers
        t = self.tensors
        t["embed.W_E"] = torch.cat([t["embed.W_E"], theirs["embed.W_E"]], dim=-1)
        t["embed.W_E1"] = torch.cat([t["embed.W_E1"], theirs["embed.W_E1"]], dim=1)
        t["embed.b_E1"] = torch.cat([t["embed.b_E1"], theirs["embed.b_E1"]])
        t["embed.W_E2"] = torch.block_diag(t["embed.W_E2"], theirs["embed.W_E2"])
        t["embed.cls"] = torch.cat([t["embed.cls"], theirs["embed.cls"]])
        rows = t["pos_embed.W_pos"].shape[0]
        t["pos_embed.W_pos"] = torch.cat([t["pos_embed.W_pos"], theirs["pos_embed.W_pos"][:rows]], dim=-1)
        for layer in range(layers):
            other_layer = _empty_layer(layer, their_size) if layer >= len(theirs_described) else {
                k: v for k, v in theirs.items() if k.startswith(f"blocks.{layer}.")}
            _merge_layer(self.tensors, layer, other_layer, mine_size, their_size)
            if layer < len(theirs_described):
                described, mine = theirs_described[layer], self.card.layers[layer]
                self.card = self.card.with_layer(layer, heads=(*mine.heads, *(dataclasses.replace(
                    head, name=f"{name}:{head.name}", added=f"merged {name}: {head.computes or ''}")
                    for head in described.heads)), mlp=(*mine.blocks, *(
                        dataclasses.replace(block, name=f"{name}:{block.name}") for block in described.blocks)))
        w_u = t["unembed.W_U"]  # (D, K): the other block's rows 0, so its output is read by nothing
        t["unembed.W_U"] = torch.cat([w_u, w_u.new_zeros(their_size, w_u.shape[1])])
        added = [f"{name}:{label}" for label in other.card.labels]
        self.card = dataclasses.replace(self.card, residual_labels=(*self.card.labels, *added),
                                        d_model=mine_size + their_size)
        self.unread |= set(added)
        self.graph = self._graph_from_weights(f"merged program {name}: nothing the output needs reads it")

    # ------------------------------------------------------------------ distractors

    def distract(self, n: int) -> None:
        """n distractor directions, a distractor head per layer and n distractor units per FFN."""
        labels = list(self.card.labels)
        size = len(labels)
        reads = [labels.index(d) for d in self.graph.by_name[INPUT].writes]
        writes = list(range(size, size + n))
        for name in residual_writers(self.layers):  # (..., D) -> (..., D + n), the new columns 0
            t = self.tensors[name]
            self.tensors[name] = torch.cat([t, t.new_zeros(*t.shape[:-1], n)], dim=-1)
        for name in residual_readers(self.layers):  # (..., D, E) -> (..., D + n, E), the new rows 0
            t = self.tensors[name]
            self.tensors[name] = torch.cat([t, t.new_zeros(*t.shape[:-2], n, t.shape[-1])], dim=-2)
        for layer in range(self.layers):
            self._distractor_head(layer, reads, writes)
            self._distractor_units(layer, n, reads + writes, writes)
        added = [f"distractor:{i + 1}" for i in range(n)]
        self.card = dataclasses.replace(self.card, residual_labels=(*labels, *added), d_model=size + n)
        self.unread |= set(added)
        self.graph = self._graph_from_weights(DISTRACTOR)

    def _distractor_head(self, layer: int, reads: list[int], writes: list[int]) -> None:
        p = f"blocks.{layer}.attn."
        size = self.tensors["unembed.W_U"].shape[0]
        width_e, width_v = max(self.tensors[p + "W_Q"].shape[-1], 2), max(self.tensors[p + "W_V"].shape[-1], 2)
        widths = (("W_Q", width_e, -1), ("W_K", width_e, -1), ("W_V", width_v, -1), ("W_O", width_v, -2))
        for name, width, axis in widths:
            t = self.tensors[p + name]
            pad = list(t.shape)
            pad[axis] = width - t.shape[axis]
            self.tensors[p + name] = torch.cat([t, t.new_zeros(pad)], dim=axis)  # zero columns change nothing
        q, k = (_random(self.generator, reads, list(range(width_e)), (size, width_e), 1.0) for _ in range(2))
        v = _random(self.generator, reads, list(range(width_v)), (size, width_v), 1.0)
        o = _random(self.generator, list(range(width_v)), writes, (width_v, size), 1.0)
        for name, new in (("W_Q", q), ("W_K", k), ("W_V", v), ("W_O", o)):
            self.tensors[p + name] = torch.cat([self.tensors[p + name], new[None]])
        self.tensors[p + "beta"] = torch.cat([self.tensors[p + "beta"], torch.ones(1, dtype=torch.float64)])
        distractor = HeadCard(name=f"distractor:{layer}", kind="distractor", site="token", mask=(), beta=1.0,
                              computes=DISTRACTOR, error=0.0, outputs=(), added=DISTRACTOR)
        self.card = self.card.with_layer(layer, heads=(*self.card.layers[layer].heads, distractor))

    def _distractor_units(self, layer: int, n: int, reads: list[int], writes: list[int]) -> None:
        p = f"blocks.{layer}.mlp."
        size = self.tensors["unembed.W_U"].shape[0]
        w_in = _random(self.generator, reads, list(range(n)), (size, n), 1.0)
        b_in = 0.1 * torch.randn(n, generator=self.generator, dtype=torch.float64)
        w_out = _random(self.generator, list(range(n)), writes, (n, size), 1.0)
        self.tensors[p + "W_in"] = torch.cat([self.tensors[p + "W_in"], w_in], dim=1)
        self.tensors[p + "b_in"] = torch.cat([self.tensors[p + "b_in"], b_in])
        self.tensors[p + "W_out"] = torch.cat([self.tensors[p + "W_out"], w_out])
        self.card = self.card.with_blocks(layer, BlockCard(name=f"distractor:{layer}", computes=DISTRACTOR, units=n,
                                                           error=0.0, output="distractor:1"))

    def _graph_from_weights(self, added: str) -> EdgeGraph:
        """The graph after a pass that added parts (:func:`~.graph.graph_from_weights`)."""
        model = CompiledTransformer(self.card, self.tensors, device="cpu", dtype=torch.float64)
        return graph_from_weights(model, self.graph, added)

    # ------------------------------------------------------------------ compression

    def compress(self) -> dict[str, int]:
        """The residual below its number of features (``compress``, tight lifetimes; what merge and
        distract added keeps its writes, so those passes stay as built); what it saved."""
        keep = frozenset(i for i, label in enumerate(self.card.labels) if label in self.unread)
        plan, self.card = compress_residual(self.tensors, self.card, keep)
        saved = plan.to_json()
        self.graph = self._graph_from_weights(COMPRESSED)
        return saved

    # ------------------------------------------------------------------ heads and units

    def _reorder_heads(self, layer: int, sources: list[int], scales: Tensor) -> None:
        """Layer ``layer``'s heads become the heads ``sources`` (repeats allowed), W_O scaled."""
        p = f"blocks.{layer}.attn."
        for name in HEAD_TENSORS:
            self.tensors[p + name] = self.tensors[p + name][sources].clone()
        self.tensors[p + "W_O"] *= scales[:, None, None]
        heads = self.card.layers[layer].heads
        self.card = self.card.with_layer(layer, heads=tuple(heads[i] for i in sources))

    def split_heads(self, k: int) -> None:
        names: dict[str, list[str]] = {}
        for layer in range(self.layers):
            count = len(self.card.layers[layer].heads)
            scales = _split_weights(count, k, self.generator)
            self._reorder_heads(layer, [h for h in range(count) for _ in range(k)], scales)
            for h in range(count):
                names[f"a{layer}.h{h}"] = [f"a{layer}.h{h * k + i}" for i in range(k)]
        self.graph = _head_map(self.graph, names)

    def shuffle_heads(self) -> None:
        names: dict[str, list[str]] = {}
        for layer in range(self.layers):
            count = len(self.card.layers[layer].heads)
            order = torch.randperm(count, generator=self.generator).tolist()  # new head j is old head order[j]
            self._reorder_heads(layer, order, torch.ones(count, dtype=torch.float64))
            for new, old in enumerate(order):
                names[f"a{layer}.h{old}"] = [f"a{layer}.h{new}"]
        self.graph = _head_map(self.graph, names)

    def split_neurons(self, k: int) -> None:
        for w_in, b_in, w_out in relu_blocks(self.layers):
            units = self.tensors[b_in].shape[0]
            a = 0.5 * 4.0 ** torch.rand(units * k, generator=self.generator, dtype=torch.float64)  # in [1/2, 2]
            w = _split_weights(units, k, self.generator)
            source = torch.arange(units).repeat_interleave(k)
            self.tensors[w_in] = self.tensors[w_in][:, source] * a
            self.tensors[b_in] = self.tensors[b_in][source] * a
            self.tensors[w_out] = self.tensors[w_out][source] * (w / a)[:, None]

    def shuffle_neurons(self) -> None:
        for w_in, b_in, w_out in relu_blocks(self.layers):
            order = torch.randperm(self.tensors[b_in].shape[0], generator=self.generator)
            self.tensors[w_in] = self.tensors[w_in][:, order]
            self.tensors[b_in] = self.tensors[b_in][order]
            self.tensors[w_out] = self.tensors[w_out][order]

    def rotate(self) -> Tensor:
        """Rotate the residual stream by a random orthogonal R; returns R (D, D)."""
        return rotate_residual(self.tensors, self.layers, self.generator)


def rotate_residual(tensors: dict[str, Tensor], layers: int, generator: torch.Generator) -> Tensor:
    """Rotate the residual stream of ``tensors`` (float64, by name) by a random orthogonal R (the QR
    of a Gaussian, Haar-distributed), in place: every writer W ↦ W R, every reader W ↦ Rᵀ W (exact:
    the model has no LayerNorm). Returns R (D, D)."""
    size = tensors["unembed.W_U"].shape[0]
    gaussian = torch.randn(size, size, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    rotation = q * torch.sign(torch.diagonal(r))  # Haar-distributed: the signs fixed
    for name in residual_writers(layers):  # (..., D) -> (..., D) R
        tensors[name] = tensors[name] @ rotation
    for name in residual_readers(layers):  # (..., D, E) -> Rᵀ (..., D, E)
        tensors[name] = rotation.T @ tensors[name]
    return rotation


def _mergeable(model: CompiledTransformer, other: CompiledTransformer) -> str:
    """The other program's name, once it can share ``model``'s input: the same vocabulary (or the
    same d), a T at least as long, compiled and not disguised. ValueError otherwise."""
    name = (other.card.program_name or "merged").rsplit("/", 1)[-1].removesuffix(".iflow")
    if other.card.disguised is not None or other.card.residual_labels is None:
        raise ValueError(f"merge {name}: only a compiled model, not disguised, can be merged")
    same_input = (model.vocabulary is None and other.vocabulary is None and model.d == other.d) or (
        model.vocabulary is not None and other.vocabulary is not None
        and model.vocabulary.names == other.vocabulary.names)
    if not same_input:
        raise ValueError(f"merge {name}: its input is not the model's (the same vocabulary, or the same d, is needed)")
    if other.T < model.T:
        raise ValueError(f"merge {name}: compiled for T = {other.T}, shorter than the model's {model.T}")
    return name


def disguise(model: Any, *, merge: Any = (), distract: int = 0, compress: bool = False, split_heads: int = 1,
             split_neurons: int = 1, shuffle: bool = False, rotate: bool = False,
             seed: int = 0) -> CompiledTransformer:
    """The model (or its file) with the realism passes (see the module docstring), its edge graph
    carried in its card's ``disguised``; the same dtype as the model. ``merge``: compiled models
    (or their files) whose programs join this one.

    Args:
        model: a compiled model, or the path of its file.
        merge: further compiled models (or files) whose programs join this one.
        distract: distractor units added per layer.
        compress: share residual dimensions over the depth (a feature erased after its last read).
        split_heads: copies each head is split into.
        split_neurons: copies each hidden unit is split into.
        shuffle: permute heads and units.
        rotate: rotate the residual stream by a random orthogonal matrix.
        seed: the seed of every random choice.

    Returns:
        The disguised :class:`CompiledTransformer` (same function, same dtype), its edge graph in
        card's ``disguised``.

    Raises:
        UsageError: a bad option, or models that cannot be merged.
        ModelFileError: a path that is not a model file.
    """
    from ..transformer.arguments import model_argument
    from .graph import circuit_graph

    compiled = model_argument(model, "disguise")
    if compiled.card.disguised is not None:
        raise ValueError("the model is disguised already: disguise the compiled model, with every pass at once")
    for name, count, least in (("distract", distract, 0), ("split_heads", split_heads, 1),
                               ("split_neurons", split_neurons, 1)):
        if isinstance(count, bool) or not isinstance(count, int) or count < least:
            raise ValueError(f"{name} must be a whole number ≥ {least}, got {count!r}")
    others = [model_argument(other, "disguise") for other in merge]
    names = [_mergeable(compiled, other) for other in others]
    passes = DisguisePasses(tuple(names), distract, bool(compress), split_heads, split_neurons, shuffle, rotate, seed)
    work = _Disguiser(compiled, circuit_graph(compiled), seed)
    for other, name in zip(others, names, strict=True):
        work.merge(other, name)
    if distract:
        work.distract(distract)
    compression = work.compress() if compress else None
    if split_heads > 1:
        work.split_heads(split_heads)
    if split_neurons > 1:
        work.split_neurons(split_neurons)
    if shuffle:
        work.shuffle_heads()
        work.shuffle_neurons()
    if rotate:
        work.rotate()
    record = Disguised.from_json({**passes.to_json(), "graph": work.graph.to_json(),
                                  **({} if compression is None else {"compression": compression})}, ("disguised",))
    card = dataclasses.replace(work.card, disguised=record)
    return CompiledTransformer(card, work.tensors, device="cpu", dtype=compiled.dtype)
