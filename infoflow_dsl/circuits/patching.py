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
rounding (its heads are the same products, summed in another order). With ``differentiable``
the forward reads the live weights and records gradients to them (training that keeps a circuit:
``training/circuit_keeping.py``); otherwise the weights are read once, detached.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import torch

from ..transformer.model import (
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
    """One patched forward's sender outputs (name -> (B, T'+1, D), float64), its output, and the
    residual stream entering each layer and the readout (L + 1 of (B, T'+1, D))."""

    outputs: dict[str, Tensor]
    y: Tensor
    residuals: list[Tensor]


def _summed(total: Tensor, outputs: list[Tensor]) -> Tensor:
    """total + o_1 + o_2 + … in that order, on one new tensor (the later ones added in place: the
    same bits as adding one at a time; out of place where autograd records it)."""
    result = total + outputs[0]
    for out in outputs[1:]:
        result = result + out if torch.is_grad_enabled() else result.add_(out)
    return result


class EdgeForward:
    """The edge-level forward of ``model`` over the nodes of ``graph`` (float64, on the CPU)."""

    def __init__(self, model: CompiledTransformer, graph: EdgeGraph, differentiable: bool = False) -> None:
        self.model, self.graph, self.differentiable = model, graph, differentiable
        self.blocks = [(b.attn, b.mlp) for b in model.blocks]
        self._cached: dict[tuple[int, str], Tensor] = {}
        # each layer's senders in the order they are summed: its heads', then its MLP's if any
        self._heads_of = [[n.name for n in graph.nodes if n.kind == "head" and n.layer == layer]
                          for layer in range(len(self.blocks))]
        self._mlp_of = [[f"m{layer}"] if f"m{layer}" in graph.by_name else [] for layer in range(len(self.blocks))]

    def _weights(self, layer: int, name: str) -> Tensor:
        """Block ``layer``'s attention weight ``name`` in float64 (converted once; live, and
        differentiable, with ``differentiable``)."""
        if self.differentiable:
            return getattr(self.blocks[layer][0], name).to(torch.float64)
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
        ablated edge enters: they compute what they computed there, so their outputs and the
        residual stream entering that layer are taken from it (summed there in the same order:
        the same bits as running them)."""
        replacement = dict(replacements or {})
        changes: dict[tuple[str, str], list[tuple[str, Tensor | float]]] = {}
        for sender, receiver, channel in ablated:
            changes.setdefault((receiver, channel), []).append((sender, 1.0))
        for (sender, receiver, channel), alpha in (coefficients or {}).items():
            changes.setdefault((receiver, channel), []).append((sender, alpha))
        grad = self.differentiable and torch.is_grad_enabled()
        grad = grad or any(isinstance(a, Tensor) and a.requires_grad for a in (coefficients or {}).values()) or (
            embedding is not None and embedding.requires_grad)
        model = self.model
        with torch.set_grad_enabled(grad):
            start = embedded(model, x).to(torch.float64) if embedding is None else embedding  # (B, T'+1, D)
            outputs: dict[str, Tensor] = {INPUT: start}

            read = _InputReader(changes, outputs, replacement, differences)

            total, residuals = outputs[INPUT], []
            first = self._first_changed(changes) if clean is not None and embedding is None else 0
            for layer in range(len(self.blocks)):
                heads, mlp = self._heads_of[layer], self._mlp_of[layer]
                if layer < first and clean is not None:  # computed as in the clean run
                    outputs.update({name: clean.outputs[name] for name in heads + mlp})
                    residuals.append(clean.residuals[layer])
                    total = clean.residuals[layer + 1]
                    continue
                residuals.append(total)
                if heads:
                    head_outputs = self._heads(layer, heads, total, read)
                    outputs.update(zip(heads, head_outputs, strict=True))
                    total = _summed(total, head_outputs)
                for name in mlp:
                    out = mlp_block(self.blocks[layer][1], read(name, MLP_CHANNEL, total).to(model.dtype))
                    outputs[name] = out.to(torch.float64)
                    total = _summed(total, [outputs[name]])
            residuals.append(total)
            final = read(OUTPUT, OUTPUT_CHANNEL, total)
            y = model.readout(final.to(model.dtype)).to(torch.float64)
        return PatchedRun(outputs, y, residuals)

    def _first_changed(self, changes: Mapping[tuple[str, str], object]) -> int:
        """The first layer with a receiver whose input changes (the output's: L)."""
        by_name = self.graph.by_name
        layers = (by_name[receiver].layer for receiver, _ in changes)
        return min((0 if layer is None else layer for layer in layers), default=len(self.blocks))

    def _project(self, layer: int, channel: str, names: list[str], total: Tensor,
                 read: Callable[[str, str, Tensor], Tensor], rows: slice) -> Tensor:
        """Every head's ``channel`` projection of its own input at positions ``rows``, (B, H, N, E):
        the heads that read one input (the common ``total`` (B, N, D), or one patched input:
        the same ablated senders) take one product of it with their W (h, D, E) side by side."""
        w = self._weights(layer, f"W_{channel.upper()}")  # (H, D, E)
        own = [read(name, channel, total) for name in names]
        groups: dict[int, list[int]] = {}
        for i, mine in enumerate(own):
            groups.setdefault(id(mine), []).append(i)
        projected: list[Tensor] = []
        for members in groups.values():
            heads = w if len(members) == len(own) else w[members]  # (h, D, E)
            size, width = heads.shape[1:]
            product = own[members[0]][:, rows] @ heads.permute(1, 0, 2).reshape(size, len(members) * width)
            projected.append(product.unflatten(-1, (len(members), width)).transpose(1, 2))  # (B, h, N, E)
        if len(groups) == 1:
            return projected[0]
        order = torch.tensor([i for members in groups.values() for i in members]).argsort()
        return torch.cat(projected, dim=1)[:, order]

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


class _InputReader:
    """A receiver's channel input in one patched run: Σ o_s plus, for each of its ablated edges
    in turn, α (ô_s − o_s) (or α Δ_s with ``differences`` fixed).

    The sum is accumulated in place on one copy of the common input (an α of exactly 1.0 is not
    multiplied: the same bits), and receivers that read the same common input through the same
    ablated senders (the heads of a layer under a circuit's complement, say) share one sum."""

    def __init__(self, changes: Mapping[tuple[str, str], list[tuple[str, Tensor | float]]],
                 outputs: Mapping[str, Tensor], replacement: Mapping[str, Tensor],
                 differences: Mapping[str, Tensor] | None) -> None:
        self.changes, self.outputs, self.replacement, self.differences = changes, outputs, replacement, differences
        self._common: Tensor | None = None  # the common input the shared sums were taken on (kept alive)
        self._shared: dict[tuple[tuple[str, Tensor | float], ...], Tensor] = {}

    def __call__(self, receiver: str, channel: str, total: Tensor) -> Tensor:
        own = tuple(self.changes.get((receiver, channel), ()))
        if not own:
            return total
        shareable = all(isinstance(alpha, float) for _, alpha in own)
        if shareable:
            if self._common is not total:
                self._common, self._shared = total, {}
            if own in self._shared:
                return self._shared[own]
        result = total.clone() if not total.requires_grad else total
        for sender, alpha in own:
            whole = isinstance(alpha, float) and alpha == 1.0
            if whole and self.differences is None and self._is_zero(sender) and not result.requires_grad:
                result.sub_(self.outputs[sender])  # ô_s = 0: the same value as + (0 − o_s), one pass
                continue
            change = self.differences[sender] if self.differences is not None else (
                self.replacement[sender] - self.outputs[sender])
            if whole and not result.requires_grad:
                result.add_(change)
            else:
                result = result + (change if whole else alpha * change)
        if shareable:
            self._shared[own] = result
        return result

    def _is_zero(self, sender: str) -> bool:
        """Whether ``sender``'s stand-in is zero ablation's scalar 0."""
        stand_in = self.replacement[sender]
        return stand_in.dim() == 0 and not stand_in.requires_grad and float(stand_in) == 0.0


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
