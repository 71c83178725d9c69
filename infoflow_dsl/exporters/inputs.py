"""An exported model's inputs and outputs: x -> (inputs_embeds, attention_mask), logits -> y.

For x (B, T', d) the exported GPT-2 reads N = T' + 2 positions: the sink (position 0,
inputs_embeds 0), the tokens t = 1..T' ([x(t); 1] W_x) and the readout token (T' + 1, cls_x);
GPT-2 adds its position embedding itself. The attention mask is additive, (B, n_head, N, N):
0 where slot j's query p may see key p', the dtype's most negative number elsewhere, with

    token keys p' = 1..T'   allowed by the slot's structural mask at query t = p (1-based, as
                            the compiled model's masks read positions), last = T'
    the sink p' = 0         allowed exactly for the query rows with no allowed token key (and
                            the sink's own row): their attention is all on the sink, value 0
    the readout p' = T'+1   never a key.

The output: y = logits[:, T'+1, :K] (readout models; (B,) for a scalar target) or
logits[:, 1:T'+1, :K] (per-token models); logits K..2K-1 are the negations.

hf-llama adds the position embedding to inputs_embeds (Llama has none of its own);
tl-native has no sink (tokens at 0..T'−1, the readout at T') and a boolean mask
(:meth:`ExportIO.attention_mask`); a self-contained GPT-2 takes no mask (:mod:`.penalty`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..transformer.masks import HeadMask, allowed_pairs, check_mask
from ..transformer.model import CompiledTransformer

Tensor = torch.Tensor


@dataclass(frozen=True)
class ExportIO:
    """What turns inputs into an exported model's arguments and its logits back into y."""

    T: int
    d: int
    min_length: int
    exact_length_only: bool
    """the compiled model's input spec: longest input, token dimension, allowed lengths"""

    @classmethod
    def of(cls, model: CompiledTransformer, slot_masks: tuple[HeadMask, ...], w_x: Tensor, cls_x: Tensor,
           self_contained: bool = False, sink: bool = True, positions: Tensor | None = None,
           vocabulary: int = 0) -> ExportIO:
        """The helper of ``model``'s export, whose slots have ``slot_masks`` and embedding (w_x, cls_x)."""
        return cls(T=model.T, d=model.d, min_length=model.min_length, exact_length_only=model.exact_length_only,
                   per_token=model.per_token, output_shape=model.output_shape, slot_masks=slot_masks, w_x=w_x,
                   cls=cls_x, self_contained=self_contained, sink=sink, positions=positions,
                   vocabulary=vocabulary or (model.card.token_view or 0))

    per_token: bool
    output_shape: tuple[int, ...]
    """where y is read: every token (per-token models) or the readout; () or (K,)"""
    slot_masks: tuple[HeadMask, ...]
    """each head slot's structural mask (:mod:`~infoflow_dsl.transformer.masks`)"""
    w_x: Tensor
    cls: Tensor
    """the embedding: inputs_embeds = [x(t); 1] w_x at a token, cls at the readout"""

    @classmethod
    def from_json(cls, info: Mapping[str, Any]) -> ExportIO:
        """From an ``infoflow.json`` object (its ``input``, ``slots`` and ``embedding``)."""
        spec, embedding = info["input"], info["embedding"]
        dtype = getattr(torch, info["dtype"])
        masks = tuple(check_mask(slot["mask"], f"slot {slot['slot']}", "infoflow.json") for slot in info["slots"])
        return cls(T=spec["T"], d=spec["d"], min_length=spec["min_length"],
                   exact_length_only=spec["exact_length_only"], per_token=spec["output"] == "token",
                   output_shape=tuple(spec["output_shape"]), slot_masks=masks,
                   w_x=torch.tensor(embedding["W_x"], dtype=torch.float64).to(dtype),
                   cls=torch.tensor(embedding["cls"], dtype=torch.float64).to(dtype),
                   self_contained=info.get("self_contained") is not None, sink=info.get("to") != "tl-native",
                   positions=None if "positions" not in embedding else
                   torch.tensor(embedding["positions"], dtype=torch.float64).to(dtype),
                   vocabulary=int(spec.get("vocabulary", 0)))

    def check_shapes(self, width: int) -> None:
        """The embedding read from a file fits the model it feeds (ValueError otherwise): W_x is
        (d + 1, width) ((V + 1, width) for a token export), cls (width,), the positions (≥ T + 2, width)."""
        rows = (self.vocabulary or self.d) + 1
        expected = {"W_x": (rows, width), "cls": (width,)}
        found = {"W_x": tuple(self.w_x.shape), "cls": tuple(self.cls.shape)}
        for name, shape in expected.items():
            if found[name] != shape:
                raise ValueError(f"embedding {name} has shape {list(found[name])}, expected {list(shape)}")
        if self.positions is not None and (self.positions.dim() != 2 or self.positions.shape[0] < self.T + 2
                                           or self.positions.shape[1] != width):
            raise ValueError(f"embedding positions has shape {list(self.positions.shape)}, expected "
                             f"[at least {self.T + 2}, {width}]")

    def json(self) -> dict[str, Any]:
        """The ``input`` entry of ``infoflow.json``."""
        out = {"T": self.T, "d": self.d, "min_length": self.min_length, "exact_length_only": self.exact_length_only,
               "output": "token" if self.per_token else "readout", "output_shape": list(self.output_shape)}
        return out | ({"vocabulary": self.vocabulary} if self.vocabulary else {})

    def vectors(self, x: Tensor) -> Tensor:
        """A token export's ids (B, T') as the one-hot rows (B, T', V) its W_x reads (any dtype
        holding the ids exactly); other inputs as they are."""
        if self.vocabulary and isinstance(x, Tensor) and x.dim() == 2:
            ids = x.to(torch.int64)
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.vocabulary):
                raise ValueError(f"token ids must lie in 0..{self.vocabulary - 1}")
            return torch.nn.functional.one_hot(ids, self.vocabulary).to(self.w_x.dtype)
        return x

    def check_length(self, x: Tensor) -> None:
        """The compiled model's own input checks (shape, length), as ValueError."""
        x = self.vectors(x)
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != self.d:
            raise ValueError(f"input must be a tensor of shape (batch, length, {self.d}), got "
                             f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
        length = x.shape[1]
        if not self.min_length <= length <= self.T or (self.exact_length_only and length != self.T):
            allowed = f"exactly {self.T}" if self.exact_length_only else f"{self.min_length}..{self.T}"
            raise ValueError(f"input length {length} is outside the lengths {allowed} of this model")

    def inputs_embeds(self, x: Tensor) -> Tensor:
        """(B, T'+2, width): 0 at the sink, [x(t); 1] W_x at the tokens, cls_x at the readout
        ((B, T'+1, width) without a sink: tl-native)."""
        x = self.vectors(x)
        self.check_length(x)
        batch = x.shape[0]
        dtype, device = self.w_x.dtype, x.device
        xe = torch.cat([x.to(dtype), x.new_ones(batch, x.shape[1], 1, dtype=dtype)], dim=-1)  # (B, T', d+1)
        tokens = xe @ self.w_x.to(device)  # (B, T', width)
        sink = tokens.new_zeros(batch, int(self.sink), tokens.shape[-1])  # (B, 1 or 0, width)
        embeds = torch.cat([sink, tokens, self.cls.to(device).expand(batch, 1, -1)], dim=1)  # (B, N, width)
        if self.positions is not None:  # hf-llama: the position embedding rides the inputs
            embeds = embeds + self.positions[:embeds.shape[1]].to(device)
        return embeds

    def allowed(self, length: int) -> Tensor:
        """bool (n_head, T'+2, T'+2): which key each slot's query may see (:func:`allowed_keys`)."""
        return allowed_keys(self.slot_masks, length)

    def attention_mask(self, x: Tensor) -> Tensor:
        """The additive (B, n_head, T'+2, T'+2) mask of x's length; without a sink (tl-native) the
        boolean (B, n_head, T'+1, T'+1), True where masked, tokens at rows 0..T'−1 and the readout
        at T' never a key (a row with every key masked gets pattern 0 there)."""
        if not self.sink:
            length = x.shape[1]
            allowed = torch.zeros(len(self.slot_masks), length + 1, length + 1, dtype=torch.bool)
            allowed[:, :, :length] = allowed_pairs(self.slot_masks, length)  # (H, T'+1, T')
            return (~allowed).to(x.device).expand(x.shape[0], *allowed.shape)
        allowed = self.allowed(x.shape[1]).to(x.device)
        dtype = self.w_x.dtype
        mask = torch.where(allowed, torch.zeros((), dtype=dtype), torch.tensor(torch.finfo(dtype).min, dtype=dtype))
        return mask.expand(x.shape[0], *mask.shape)

    def arguments(self, x: Tensor) -> dict[str, Tensor]:
        """``model(**arguments)``: inputs_embeds and attention_mask (inputs_embeds alone for a
        self-contained export, whose masks are penalties in its weights, at length T only)."""
        if self.self_contained:
            self.check_length(x)
            if x.shape[1] != self.T:
                raise ValueError(f"input length {x.shape[1]}: a self-contained export reads inputs of exactly "
                                 f"T = {self.T} tokens (its penalties are functions of the positions)")
            return {"inputs_embeds": self.inputs_embeds(x)}
        return {"inputs_embeds": self.inputs_embeds(x), "attention_mask": self.attention_mask(x)}

    def outputs(self, logits: Tensor) -> Tensor:
        """y from the logits (B, T'+2, 2K): (B,) or (B, K) at the readout, per token (B, T') or (B, T', K)."""
        k = self.output_shape[0] if self.output_shape else 1
        y = logits[:, int(self.sink):-1, :k] if self.per_token else logits[:, -1, :k]
        return y if self.output_shape else y.squeeze(-1)

    self_contained: bool = False
    """the masks are penalties in the weights (:mod:`.penalty`): no attention mask, length T only"""
    sink: bool = True
    """position 0 is the sink (hf-gpt2, hf-llama); tl-native has none"""
    positions: Tensor | None = None
    """(T+2, width) added to inputs_embeds (hf-llama, which has no position embedding of its own)"""
    vocabulary: int = 0
    """V for a token model's export: inputs are ids (B, T'), read as one-hot rows [e_id; 1] W_x"""


def allowed_keys(slot_masks: tuple[HeadMask, ...], length: int) -> Tensor:
    """bool (n_head, T'+2, T'+2): which key each slot's query may see (module docstring)."""
    count = length + 2
    out = torch.zeros(len(slot_masks), count, count, dtype=torch.bool)
    tokens = allowed_pairs(slot_masks, length)  # (H, T'+1, T')  query rows t = 1..T'+1
    out[:, 1:, 1:length + 1] = tokens
    out[:, 1:, 0] = ~tokens.any(dim=-1)
    out[:, 0, 0] = True
    return out
