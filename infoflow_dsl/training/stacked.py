"""Many training runs as one model: R runs' weights stacked, one forward, one AdamW step.

Runs of one shape (the same program, T, widths, layers, steps, batch, distribution) differ in
their seed, their learning rate and their heads per layer. Their weights live side by side in one
leaf θ of shape (R, P): run r's tensors are views of row r, laid out by a :class:`Layout` (the
group's shapes: per layer the most heads of any run). A run with fewer heads in a layer holds its
own heads first and zeros in the padded ones, and a 0/1 mask (R, P) zeroes the padded entries'
gradients; its padded heads' outputs are also multiplied by 0 (``head_mask``). A padded head then
holds W_Q = W_K = W_V = W_O = 0 and β = 0 for ever: AdamW moves an entry by
−lr·(λθ + m̂/(√v̂ + ε)) with θ = m = v = 0, i.e. not at all; so run r computes what its own model
computes.

The forward (:meth:`StackedRuns.forward`) is the compiled family's (``transformer.model``) with a
leading run axis: x (R, B, T', d) (ids (R, B, T') for a token model) -> (R, B, ...), every
product a batched matmul over the runs, attention the fused SDPA over (R·B) sequences. Masked
heads (a model started from ``--init``) are not supported: such runs train alone.

The optimiser (:class:`StackedAdamW`) is torch's AdamW written over θ with one learning rate per
run (lr_r × the schedule's factor): decoupled weight decay θ ← θ(1 − lr·λ), moments
m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², θ ← θ − lr/(1−β₁ᵗ) · m/(√v/√(1−β₂ᵗ) + ε): elementwise,
so row r moves exactly as a run alone would under ``torch.optim.AdamW`` (to float rounding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..errors import TrainError
from ..language import typed as ir
from ..transformer.model import CompiledTransformer
from .train import TrainSettings, build_model, reads_positions

Tensor = torch.Tensor


# ---------------------------------------------------------------------------- the layout


@dataclass(frozen=True)
class Layout:
    """Where each trained tensor lives in a row of θ: names, shapes (the group's) and offsets."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]

    @staticmethod
    def of(shapes: dict[str, tuple[int, ...]]) -> Layout:
        """The tensors in the given order, packed one after another."""
        offsets, at = [], 0
        for shape in shapes.values():
            offsets.append(at)
            at += math.prod(shape)
        return Layout(tuple(shapes), tuple(shapes.values()), tuple(offsets))

    @property
    def size(self) -> int:
        """P: the entries of one run's row."""
        return self.offsets[-1] + math.prod(self.shapes[-1]) if self.names else 0

    def views(self, theta: Tensor) -> dict[str, Tensor]:
        """θ (R, P) as named tensors (R, *shape), views sharing θ's storage (and its gradient).

        One ``split`` rather than a slice per tensor: its backward writes θ's gradient with one
        concatenation, where each slice's backward would fill a zero (R, P) tensor of its own."""
        runs = theta.shape[0]
        parts = theta.split([math.prod(shape) for shape in self.shapes], dim=1)
        return {name: part.view(runs, *shape) for name, shape, part in zip(self.names, self.shapes, parts, strict=True)}


def trained_tensors(model: CompiledTransformer, learn_positions: bool) -> dict[str, Tensor]:
    """A run's trained tensors by name: every parameter, and W_pos when the positions are learned."""
    tensors: dict[str, Tensor] = dict(model.named_parameters())
    if learn_positions:
        tensors["pos_embed.W_pos"] = model.pos_embed.W_pos
    return tensors


def _group_shape(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The elementwise largest of same-rank shapes."""
    return tuple(max(sizes) for sizes in zip(*shapes, strict=True))


def _corner(shape: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(0, s) for s in shape)


def _packed(layout: Layout, own: Sequence[dict[str, Tensor]]) -> tuple[Tensor, Tensor]:
    """(θ, mask), each (R, P): run r's tensors in the leading corner of their slots of row r, 0
    elsewhere; the mask 1 on the entries a run owns, 0 on its padding."""
    like = next(iter(own[0].values()))
    theta = torch.zeros(len(own), layout.size, dtype=like.dtype, device=like.device)
    mask = torch.zeros_like(theta)
    for r, tensors in enumerate(own):
        views, mask_views = layout.views(theta[r:r + 1]), layout.views(mask[r:r + 1])
        for name, tensor in tensors.items():
            views[name][0][_corner(tuple(tensor.shape))] = tensor.detach()
            mask_views[name][0][_corner(tuple(tensor.shape))] = 1.0
    return theta, mask


# ---------------------------------------------------------------------------- the runs


class StackedRuns:
    """R runs of one shape as one model: θ (R, P), its gradient mask and the runs' own models.

    ``models[r]`` is run r's model as :func:`~.train.build_model` makes it alone (its seed's
    initial weights); :meth:`unstack` writes θ's row r back into it."""

    def __init__(self, program: ir.Program, settings: Sequence[TrainSettings]) -> None:
        if not settings:
            raise TrainError("no runs to train")
        if any(s.init is not None for s in settings):
            raise TrainError("runs started from --init train alone (their heads may be masked)")
        self.program = program
        self.learn_positions = reads_positions(program) or program.over_tokens
        self.models = [build_model(program, s)[0] for s in settings]
        own = [trained_tensors(m, self.learn_positions) for m in self.models]
        shapes = {name: _group_shape([tuple(t[name].shape) for t in own]) for name in own[0]}
        self.layout = Layout.of(shapes)
        self.heads = tuple(shapes[f"blocks.{i}.attn.beta"][0] for i in range(len(settings[0].heads)))
        reference = self.models[0]
        self.device = reference.device
        self.dtype = reference.dtype
        self.per_token = reference.per_token
        self.output_shape = reference.output_shape
        self.token_input = reference.token_input
        theta, mask = _packed(self.layout, own)
        self.theta = theta.requires_grad_(True)
        #: 0 on the padded heads' entries, None when no run is padded
        self.mask: Tensor | None = None if bool(mask.all()) else mask
        #: per layer (R, H_l): 1 for a run's own heads, 0 for padded ones (None when none is padded)
        self.head_mask: list[Tensor | None] = [self._head_mask(layer, settings) for layer in range(len(self.heads))]
        positions = reference.pos_embed.W_pos.detach()
        self._fixed_positions = None if self.learn_positions else positions.unsqueeze(0)

    def _head_mask(self, layer: int, settings: Sequence[TrainSettings]) -> Tensor | None:
        counts = [s.heads[layer] for s in settings]
        if all(c == self.heads[layer] for c in counts):
            return None
        return torch.tensor([[1.0 if h < c else 0.0 for h in range(self.heads[layer])] for c in counts],
                            dtype=self.dtype, device=self.device)

    @property
    def runs(self) -> int:
        return self.theta.shape[0]

    def parameters(self, theta: Tensor | None = None) -> dict[str, Tensor]:
        """The named stacked tensors (R, *shape) of θ (the trained one by default)."""
        tensors = self.layout.views(self.theta if theta is None else theta)
        if self._fixed_positions is not None:
            tensors["pos_embed.W_pos"] = self._fixed_positions
        return tensors

    def unstack(self) -> list[CompiledTransformer]:
        """Write θ's rows into the runs' own models (their own shapes) and return them."""
        with torch.no_grad():
            for r, model in enumerate(self.models):
                views = self.layout.views(self.theta[r:r + 1].detach())
                for name, tensor in trained_tensors(model, self.learn_positions).items():
                    tensor.copy_(views[name][0][_corner(tuple(tensor.shape))])
        return self.models

    # ------------------------------------------------------------------ forward

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        """Every run's output: x (R, B, T', d) float (ids (R, B, T') int64) -> (R, B, ...).

        The token rows (R, B, T', D) and the readout row (R, B, 1, D) are kept apart. The keys
        are the token rows alone, so a per-token model never computes the readout row, and a
        layer whose queries are both concatenates them and splits its result. Slicing one stream
        of T'+1 rows instead would make every slice's backward fill a zero tensor of the whole
        stream, which costs more than the step's products at sweep sizes.
        """
        p = self.parameters(theta)
        tokens, cls = self._embed(p, x)  # (R, B, T', D), (R, B, 1, D)
        last = len(self.heads) - 1
        for layer in range(len(self.heads)):
            if self.per_token:  # no key is the readout row: a per-token output never reads it
                tokens = self._layer(p, layer, tokens, tokens)
            elif layer == last:  # the output reads the readout row alone
                cls = self._layer(p, layer, cls, tokens)
            else:
                rows = self._layer(p, layer, torch.cat([tokens, cls], dim=2), tokens)  # (R, B, T'+1, D)
                tokens, cls = rows.split([tokens.shape[2], 1], dim=2)
        return self._readout(p, tokens if self.per_token else cls)

    def _layer(self, p: dict[str, Tensor], layer: int, rows: Tensor, tokens: Tensor) -> Tensor:
        """One block for the query rows ``rows`` (R, B, N, D) over the keys ``tokens`` (R, B, T', D)."""
        if self.heads[layer]:
            rows = rows + self._attention(p, layer, rows, tokens)
        return rows + self._mlp(p, layer, rows)

    def _embed(self, p: dict[str, Tensor], x: Tensor) -> tuple[Tensor, Tensor]:
        """The token rows (R, B, T', D) and the readout row (R, B, 1, D), positions added."""
        runs, batch, length = x.shape[:3]
        if self.token_input:
            h_tok = p["embed.W_E"][torch.arange(runs, device=x.device)[:, None, None], x]  # (R, B, T', D)
        else:
            xe = torch.cat([x, x.new_ones(runs, batch, length, 1)], dim=-1).reshape(runs, batch * length, -1)
            hidden = torch.relu(torch.baddbmm(p["embed.b_E1"][:, None], xe, p["embed.W_E1"]))  # (R, B·T', M0)
            h_tok = torch.baddbmm(xe @ p["embed.W_E"], hidden, p["embed.W_E2"]).view(runs, batch, length, -1)
        positions = p["pos_embed.W_pos"]  # (R or 1, T'+1, D)
        d_model = h_tok.shape[-1]
        h_cls = (p["embed.cls"] + positions[:, length])[:, None, None, :].expand(runs, batch, 1, d_model)
        return h_tok + positions[:, None, :length], h_cls

    def _attention(self, p: dict[str, Tensor], layer: int, queries: Tensor, tokens: Tensor) -> Tensor:
        """Σ_heads softmax(β_h q·k) v W_O of the query rows (R, B, N, D) over the token rows'
        keys (R, B, T', D): (R, B, N, D)."""
        a = f"blocks.{layer}.attn."
        runs, batch, _, d_model = queries.shape
        q = _project(queries, p[a + "W_Q"]) * p[a + "beta"][:, None, :, None, None]  # (R, B, H, N, E) β_h q
        k = _project(tokens, p[a + "W_K"])  # (R, B, H, T', E)
        v = _project(tokens, p[a + "W_V"])  # (R, B, H, T', V)
        z = nn.functional.scaled_dot_product_attention(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), scale=1.0)
        z = z.view(runs, batch, *z.shape[1:])  # (R, B, H, N, V)
        mask = self.head_mask[layer]
        if mask is not None:
            z = z * mask[:, None, :, None, None]
        heads, n, width = z.shape[2:]
        flat = z.transpose(2, 3).reshape(runs, batch * n, heads * width)  # (R, B·N, H·V)
        return (flat @ p[a + "W_O"].reshape(runs, heads * width, d_model)).view(runs, batch, n, d_model)

    def _mlp(self, p: dict[str, Tensor], layer: int, h: Tensor) -> Tensor:
        """relu(h W_in + b_in) W_out + b_out, (R, B, N, D) -> (R, B, N, D)."""
        m = f"blocks.{layer}.mlp."
        runs, batch, rows, d_model = h.shape
        hidden = torch.relu(torch.baddbmm(p[m + "b_in"][:, None], h.reshape(runs, batch * rows, d_model),
                                          p[m + "W_in"]))  # (R, B·N, M)
        return torch.baddbmm(p[m + "b_out"][:, None], hidden, p[m + "W_out"]).view(runs, batch, rows, d_model)

    def _readout(self, p: dict[str, Tensor], rows: Tensor) -> Tensor:
        """W_U h + b_U on the output rows: the token rows (R, B, T', D) of a per-token model, else
        the readout row (R, B, 1, D)."""
        runs, batch = rows.shape[:2]
        y = torch.baddbmm(p["unembed.b_U"][:, None], rows.reshape(runs, -1, rows.shape[-1]), p["unembed.W_U"])
        y = y.view(runs, batch, -1, y.shape[-1]) if self.per_token else y.view(runs, batch, y.shape[-1])
        return y.squeeze(-1) if not self.output_shape else y


def _project(h: Tensor, w: Tensor) -> Tensor:
    """Every run's heads at once: h (R, B, N, D), w (R, H, D, E) -> (R, B, H, N, E), one batched
    product (R, B·N, D) @ (R, D, H·E)."""
    runs, batch, rows, d_model = h.shape
    heads, width = w.shape[1], w.shape[3]
    flat = h.reshape(runs, batch * rows, d_model) @ w.permute(0, 2, 1, 3).reshape(runs, d_model, heads * width)
    return flat.view(runs, batch, rows, heads, width).transpose(2, 3)


# ---------------------------------------------------------------------------- the optimiser


class StackedAdamW:
    """torch's AdamW (β = (0.9, 0.999), ε = 1e-8, decoupled weight decay) over θ (R, P), one peak
    learning rate per run; :meth:`step` takes the gradient and the schedule's factor."""

    def __init__(self, theta: Tensor, lrs: Sequence[float], weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.theta = theta
        self.lrs = torch.tensor(lrs, dtype=theta.dtype, device=theta.device)[:, None]  # (R, 1)
        self.weight_decay, self.betas, self.eps = weight_decay, betas, eps
        self.exp_avg = torch.zeros_like(theta)
        self.exp_avg_sq = torch.zeros_like(theta)
        self.steps = 0

    @torch.no_grad()
    def step(self, grad: Tensor, factor: float) -> None:
        """One AdamW step at learning rates lr_r · factor."""
        self.steps += 1
        beta1, beta2 = self.betas
        lr = self.lrs * factor  # (R, 1)
        self.theta.mul_(1.0 - lr * self.weight_decay)
        self.exp_avg.lerp_(grad, 1.0 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        correction1 = 1.0 - beta1 ** self.steps
        correction2 = math.sqrt(1.0 - beta2 ** self.steps)
        denominator = (self.exp_avg_sq.sqrt() / correction2).add_(self.eps)
        self.theta.sub_(self.exp_avg / denominator * (lr / correction1))
