"""A plain PyTorch transformer of a compiled model's shape, written the usual way.

Same layers, heads, d_model, query/key and value widths and FFN widths as the compiled model,
dense weights, every row through every layer, attention by the fused
``torch.nn.functional.scaled_dot_product_attention``. It is the yardstick of the forward
benchmark: what a user would otherwise run for a model of this size.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

import infoflow_dsl as ifl


class PlainBlock(nn.Module):
    """h + attention(h), then + relu(h W_in + b_in) W_out + b_out."""

    def __init__(self, d_model: int, heads: int, width: int, value: int, hidden: int) -> None:
        super().__init__()
        self.heads, self.width, self.value = heads, width, value
        if heads:  # an FFN-only layer has no attention at all
            self.qkv = nn.Linear(d_model, heads * (2 * width + value), bias=False)
            self.out = nn.Linear(heads * value, d_model, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.ReLU(), nn.Linear(hidden, d_model))

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (B, N, D) -> (B, N, D)
        batch, rows, _ = h.shape
        if self.heads:
            q, k, v = self.qkv(h).split([self.heads * self.width] * 2 + [self.heads * self.value], dim=-1)
            q, k = (t.view(batch, rows, self.heads, self.width).transpose(1, 2) for t in (q, k))  # (B, H, N, E)
            v = v.view(batch, rows, self.heads, self.value).transpose(1, 2)  # (B, H, N, V)
            z = functional.scaled_dot_product_attention(q, k, v)  # (B, H, N, V)
            h = h + self.out(z.transpose(1, 2).reshape(batch, rows, -1))
        return h + self.mlp(h)


class PlainTransformer(nn.Module):
    """Embedding, the blocks, a readout of the last row: the compiled model's shape, dense."""

    def __init__(self, model: ifl.CompiledTransformer) -> None:
        super().__init__()
        self.embed = nn.Linear(model.d, model.d_model)
        self.blocks = nn.ModuleList(
            PlainBlock(model.d_model, block.attn.W_Q.shape[0], block.attn.W_Q.shape[2], block.attn.W_V.shape[2],
                       block.mlp.W_in.shape[1]) for block in model.blocks)
        self.unembed = nn.Linear(model.d_model, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B,)
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.unembed(h[:, -1]).squeeze(-1)


def plain_like(model: ifl.CompiledTransformer) -> PlainTransformer:
    """A randomly initialised plain transformer of ``model``'s shape and dtype, frozen."""
    torch.manual_seed(0)
    return PlainTransformer(model).to(model.dtype).requires_grad_(False).eval()
