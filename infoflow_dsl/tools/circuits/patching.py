"""The edge-level forward: a compiled model run with any set of edges ablated.

The residual stream a receiver reads is the sum of the outputs of the senders before it
(``graph``). Ablating the edge s → (r, c) replaces, in r's channel-c input only, the output o_s
of s by a stand-in ô_s (ACDC's convention, Conmy et al. 2023):

    input_(r,c) = Σ_(s before r) o_s + Σ_(s→(r,c) ablated) (ô_s − o_s),

where every o_s is computed in the same patched run (a sender downstream of an ablated edge
passes its own change on). The stand-ins are the ablations of the field:

- ``zero``: ô_s = 0;
- ``mean``: ô_s = the mean of o_s over the inputs of the batch (one length), position by
  position: (1, T'+1, D);
- ``resample``: ô_s = o_s on a corrupted input x' paired with each x (the clean run on x').

Each head runs on its own three inputs (a (B, H, N, D) stack per channel), so any edge set costs
one forward. Without ablated edges the patched forward is the model's own forward up to float
rounding (its heads are the same products, summed in another order).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import torch

from ...transformer.model import (
    CompiledTransformer,
    attention_masks,
    attention_pattern,
    embedded,
    masked_scores,
    mlp_block,
)
from . import ABLATIONS
from .graph import INPUT, MLP_CHANNEL, OUTPUT, OUTPUT_CHANNEL, CircuitEdge, EdgeGraph

Tensor = torch.Tensor
EdgeKey = tuple[str, str, str]  # (sender, receiver, channel)


def edge_key(edge: CircuitEdge) -> EdgeKey:
    return (edge.sender, edge.receiver, edge.channel)


@dataclass
class PatchedRun:
    """One patched forward's sender outputs (name -> (B, T'+1, D), float64) and its output."""

    outputs: dict[str, Tensor]
    y: Tensor


class EdgeForward:
    """The edge-level forward of ``model`` over the nodes of ``graph`` (float64, on the CPU)."""

    def __init__(self, model: CompiledTransformer, graph: EdgeGraph) -> None:
        self.model, self.graph = model, graph
        self.blocks = [(b.attn, b.mlp) for b in model.blocks]
        self._cached: dict[tuple[int, str], Tensor] = {}

    def _weights(self, layer: int, name: str) -> Tensor:
        """Block ``layer``'s attention weight ``name`` in float64 (converted once)."""
        if (layer, name) not in self._cached:
            self._cached[layer, name] = getattr(self.blocks[layer][0], name).detach().to(torch.float64)
        return self._cached[layer, name]

    def run(self, x: Tensor, ablated: Collection[EdgeKey] = (),
            replacements: Mapping[str, Tensor] | None = None, *,
            coefficients: Mapping[EdgeKey, Tensor] | None = None,
            differences: Mapping[str, Tensor] | None = None, embedding: Tensor | None = None,
            clean: PatchedRun | None = None) -> PatchedRun:
        """The output with the edges ``ablated`` (keys (sender, receiver, channel)) reading the
        ``replacements`` of their senders (name -> a stand-in broadcasting to (B, T'+1, D)).

        The attribution methods' forms: an edge of ``coefficients`` is ablated by a fraction α
        (a tensor broadcasting to (B, 1, 1), which may require grad: the run is then
        differentiable in it), its receiver reading Σ o_s + α (ô_s − o_s), or α Δ_s where
        ``differences`` fixes Δ_s (the clean run's ô_s − o_s, for an interpolated run);
        ``embedding`` replaces the input's output (B, T'+1, D) (EAP-IG on the inputs).

        ``clean``, this batch's run with nothing ablated, saves the layers before the first one an
        ablated edge enters: they compute what they computed there, so their outputs are taken
        from it (and summed in the same order: the same bits as running them)."""
        replacement = dict(replacements or {})
        changes: dict[tuple[str, str], list[tuple[str, Tensor | float]]] = {}
        for sender, receiver, channel in ablated:
            changes.setdefault((receiver, channel), []).append((sender, 1.0))
        for (sender, receiver, channel), alpha in (coefficients or {}).items():
            changes.setdefault((receiver, channel), []).append((sender, alpha))
        grad = any(isinstance(a, Tensor) and a.requires_grad for a in (coefficients or {}).values()) or (
            embedding is not None and embedding.requires_grad)
        model = self.model
        with torch.set_grad_enabled(grad):
            start = embedded(model, x).to(torch.float64) if embedding is None else embedding  # (B, T'+1, D)
            outputs: dict[str, Tensor] = {INPUT: start}

            def read(receiver: str, channel: str, total: Tensor) -> Tensor:
                for sender, alpha in changes.get((receiver, channel), []):
                    change = differences[sender] if differences is not None else replacement[sender] - outputs[sender]
                    total = total + alpha * change
                return total

            total = outputs[INPUT]
            first = self._first_changed(changes) if clean is not None and embedding is None else 0
            for layer in range(len(self.blocks)):
                heads = [n for n in self.graph.nodes if n.kind == "head" and n.layer == layer]
                if layer < first and clean is not None:  # computed as in the clean run
                    for name in [n.name for n in heads] + [f"m{layer}"] * (f"m{layer}" in self.graph.by_name):
                        outputs[name] = clean.outputs[name]
                        total = total + outputs[name]
                    continue
                if heads:
                    head_outputs = self._heads(layer, [n.name for n in heads], total, read)
                    for node, out in zip(heads, head_outputs, strict=True):
                        outputs[node.name] = out
                        total = total + out
                name = f"m{layer}"
                if name in self.graph.by_name:
                    out = mlp_block(self.blocks[layer][1], read(name, MLP_CHANNEL, total).to(model.dtype))
                    outputs[name] = out.to(torch.float64)
                    total = total + outputs[name]
            final = read(OUTPUT, OUTPUT_CHANNEL, total)
            y = model.readout(final.to(model.dtype)).to(torch.float64)
        return PatchedRun(outputs, y)

    def _first_changed(self, changes: Mapping[tuple[str, str], object]) -> int:
        """The first layer with a receiver whose input changes (the output's: L)."""
        by_name = self.graph.by_name
        layers = (by_name[receiver].layer for receiver, _ in changes)
        return min((0 if layer is None else layer for layer in layers), default=len(self.blocks))

    def _project(self, layer: int, channel: str, names: list[str], total: Tensor,
                 read: Callable[[str, str, Tensor], Tensor], rows: slice) -> Tensor:
        """Every head's ``channel`` projection of its own input at positions ``rows``, (B, H, N, E):
        one product of the common input ``total`` (B, N, D) with all heads' W (H, D, E) side by
        side, and a product of its own input for each head that reads something else (an edge
        into it ablated)."""
        w = self._weights(layer, f"W_{channel.upper()}")  # (H, D, E)
        heads, size, width = w.shape
        common = total[:, rows] @ w.permute(1, 0, 2).reshape(size, heads * width)  # (B, N, H·E)
        projected = common.unflatten(-1, (heads, width)).transpose(1, 2)  # (B, H, N, E)
        own = [read(name, channel, total) for name in names]
        if all(mine is total for mine in own):
            return projected
        return torch.stack([projected[:, i] if mine is total else mine[:, rows] @ w[i] for i, mine in enumerate(own)],
                           dim=1)

    def _heads(self, layer: int, names: list[str], total: Tensor,
               read: Callable[[str, str, Tensor], Tensor]) -> list[Tensor]:
        """Each head's output z_i W_O[i], (B, N, D) each, every head on its own q, k, v inputs."""
        length = total.shape[1] - 1
        q = self._project(layer, "q", names, total, read, slice(None))  # (B, H, N, E)
        k = self._project(layer, "k", names, total, read, slice(length))  # (B, H, T', E)
        v = self._project(layer, "v", names, total, read, slice(length))  # (B, H, T', V)
        beta = self._weights(layer, "beta")  # (H,)
        allowed = attention_masks(self.model, layer, length)  # (H, N, T') or None
        scores, has_key = masked_scores((q * beta[:, None, None]) @ k.transpose(-1, -2), allowed)  # (B, H, N, T')
        z = attention_pattern(scores, has_key) @ v  # (B, H, N, V)
        w_o = self._weights(layer, "W_O")  # (H, V, D)
        return list(torch.einsum("bhnv,hvd->bhnd", z, w_o).unbind(dim=1))


def stand_ins(forward: EdgeForward, x: Tensor, ablation: str, corrupted: Tensor | None = None) -> dict[str, Tensor]:
    """Every sender's stand-in under ``ablation`` for the batch x (one length): zeros, the batch
    mean per position, or its clean output on ``corrupted`` (x' paired row by row with x)."""
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}: one of {', '.join(ABLATIONS)}")
    if ablation == "zero":
        return {n.name: torch.zeros((), dtype=torch.float64) for n in forward.graph.senders()}
    if ablation == "mean":
        clean = forward.run(x).outputs
        return {name: out.mean(dim=0, keepdim=True) for name, out in clean.items()}
    if corrupted is None:
        raise ValueError("resample ablation needs the corrupted inputs")
    return forward.run(corrupted).outputs
