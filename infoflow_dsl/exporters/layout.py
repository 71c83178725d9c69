"""Where a compiled model's parts go in a GPT-2: residual coordinates, layers, head slots.

A GPT-2 has one width n_embd = n_head · head_dim, the same n_head heads of width head_dim in
every layer, one FFN width n_inner, LayerNorms before each sublayer and no way to give heads of
one layer different masks except through the (B, n_head, N, N) attention mask shared by all
layers. The compiled model fits it so:

- **Residual coordinates**: 0..D-1 are the compiled model's own directions (the same index, so a
  circuit reading is the same vector); then, when the embedding has a ReLU block, the d raw
  input coordinates x(t) and a token flag (1 on input tokens); then a constant pair (+c, −c)
  on every position but the sink (c = 1; biases ride it); then two balance coordinates: every
  vector written into the residual has its entry at ``write_balance`` set to minus the sum of
  its other entries (so every residual vector sums to 0: LayerNorm's mean is 0), and every
  reader column (W_Q, W_K, W_V, W_in, W_U) its entry at ``read_balance`` (a coordinate nothing
  writes, so it reads 0) set likewise (so a reader ignores any mean the LayerNorm subtracts);
  the rest up to n_head · head_dim is zero.
- **Layers**: the embedding's ReLU block, when it has one, is exported layer 0 (zero
  attention, its FFN reading x(t) and the token flag); compiled layer l is exported layer
  l + ``offset``.
- **Head slots**: heads are grouped by mask kind, as the attention mask is one per slot for
  every layer: a kind gets as many slots as the most heads of that kind any layer has; the i-th
  head of a kind in a layer takes that kind's i-th slot. Slots a layer does not use are zero
  heads. head_dim is the smallest power of 4 at least every head's width and the residual's
  width over the slots (so that no head is added for width alone), so that √head_dim, which
  GPT-2 divides scores by and W_Q is multiplied by, is a power of 2 (both exact).
- **FFN units**: n_inner is the widest FFN, plus one unit per layer whose b_out is nonzero
  (relu of the constant pair: 1 on every position but the sink, writing b_out).
- **Positions**: 0 is a sink (every value 0: the residual is 0 there at every layer), input
  token t (1-based) is position t, the readout token position T' + 1.
- **Self-contained** (:mod:`.penalty`): N = T + 2 more residual coordinates after
  ``read_balance``, a one-hot of the position, and r_j more q/k dimensions at the end of each
  slot (head_dim covers the widest q/k plus the most r_j); the sink's residual is then its
  one-hot (balanced), its compiled coordinates still 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..transformer.masks import HeadMask
from ..transformer.model import CompiledTransformer
from ..transformer.sparse import nonzero_entries
from .penalty import Penalties, plan_penalties


@dataclass(frozen=True)
class HeadSlot:
    """A compiled head (``name``, index ``compiled_index`` of layer ``compiled_layer``) in the
    export: head ``slot`` of exported layer ``layer``."""

    name: str
    compiled_layer: int
    compiled_index: int
    layer: int
    slot: int


@dataclass(frozen=True)
class ExportLayout:
    """The GPT-2 shape a compiled model exports to, and where each of its parts goes (see the
    module docstring). Coordinates are indices into the exported residual (width ``width``);
    ``raw_input`` and ``token_flag`` are None without an embedding ReLU block."""

    d_model: int
    d: int
    outputs: int
    length: int
    """the compiled model's residual width D, token dimension d, outputs K, longest input T"""

    @property
    def vocab(self) -> int:
        """Output logits: the K outputs, then their negations (the logits' mean is 0)."""
        return 2 * self.outputs

    @property
    def n_positions(self) -> int:
        """The sink, T tokens and the readout token."""
        return self.length + 2

    width: int
    n_head: int
    head_dim: int
    n_inner: int
    n_layers: int
    """the GPT-2's shape: n_embd = n_head · head_dim, n_inner, n_layer"""

    @property
    def embedding_layer(self) -> int | None:
        """The exported layer of the embedding's ReLU block (0), None without one."""
        return 0 if self.offset else None

    offset: int
    """1 with an embedding layer: compiled layer l is exported layer l + offset"""
    raw_input: int | None
    token_flag: int | None
    one_pos: int
    one_neg: int
    """residual coordinates beyond the compiled ones: x(t), the token flag, the constant pair"""

    def slot_columns(self, slot: int, width: int) -> tuple[int, int]:
        """The columns [start, stop) of a slot's first ``width`` entries in q, k, v or z."""
        return slot * self.head_dim, slot * self.head_dim + width

    write_balance: int
    read_balance: int
    """the balance coordinates of written vectors and of reader columns"""
    heads: tuple[HeadSlot, ...]
    slot_masks: tuple[HeadMask, ...]
    bias_units: tuple[int | None, ...]
    """every compiled head's slot, each slot's mask, each exported layer's b_out unit (None: no b_out)"""
    penalties: Penalties | None = None
    positions: int | None = None
    """a self-contained export's penalties and the first of its N one-hot position coordinates"""

    def penalty_columns(self, slot: int) -> tuple[int, int]:
        """The columns [start, stop) of a slot's r_j penalty dimensions in q or k (the slot's last)."""
        assert self.penalties is not None
        stop = (slot + 1) * self.head_dim
        return stop - self.penalties.dims[slot], stop


def power_of_four_at_least(n: int) -> int:
    """The smallest 4^k ≥ n (k ≥ 0)."""
    size = 1
    while size < n:
        size *= 4
    return size


def assign_slots(masks: tuple[tuple[HeadMask, ...], ...], names: tuple[tuple[str, ...], ...],
                 offset: int) -> tuple[tuple[HeadSlot, ...], tuple[HeadMask, ...]]:
    """(every head's slot, each slot's mask): slots grouped by mask kind in order of first use,
    a kind taking max over layers of its heads in the layer."""
    kinds: dict[HeadMask, int] = {}
    for kinds_of_layer in masks:
        for kind in set(kinds_of_layer):
            kinds[kind] = max(kinds.get(kind, 0), kinds_of_layer.count(kind))
    order = list(dict.fromkeys(kind for layer in masks for kind in layer))
    start: dict[HeadMask, int] = {}
    slot_masks: list[HeadMask] = []
    for kind in order:
        start[kind] = len(slot_masks)
        slot_masks.extend([kind] * kinds[kind])
    heads = []
    for layer, (layer_masks, layer_names) in enumerate(zip(masks, names, strict=True)):
        used: dict[HeadMask, int] = {}
        for index, (kind, name) in enumerate(zip(layer_masks, layer_names, strict=True)):
            slot = start[kind] + used.get(kind, 0)
            used[kind] = used.get(kind, 0) + 1
            heads.append(HeadSlot(name=name, compiled_layer=layer, compiled_index=index, layer=layer + offset,
                                  slot=slot))
    return tuple(heads), tuple(slot_masks)


@dataclass(frozen=True)
class InputColumns:
    """What both exports place before their own columns: an embedding layer or none (``offset``
    1 or 0), every head's slot and each slot's mask, and the residual columns after the compiled
    model's d_model: the raw input x and the token flag (with an embedding layer), ``extra`` the
    first free column."""

    offset: int
    heads: tuple[HeadSlot, ...]
    slot_masks: tuple[HeadMask, ...]
    raw_input: int | None
    token_flag: int | None
    extra: int


def input_columns(model: CompiledTransformer) -> InputColumns:
    """The :class:`InputColumns` of ``model``'s export (an embedding layer when its embedding MLP
    has a nonzero weight)."""
    embedding = model.d_mlp_embedding > 0 and nonzero_entries(model.embed.W_E2) > 0
    offset = 1 if embedding else 0
    heads, slot_masks = assign_slots(model.spec.masks, model.spec.head_names, offset)
    extra = model.d_model
    raw_input = token_flag = None
    if embedding:
        raw_input, token_flag = extra, extra + model.d
        extra += model.d + 1
    return InputColumns(offset, heads, slot_masks, raw_input, token_flag, extra)


def plan(model: CompiledTransformer, self_contained: bool = False, dtype: torch.dtype = torch.float64) -> ExportLayout:
    """The layout of ``model``'s export (see the module docstring); ``self_contained``: with the
    penalties of :mod:`.penalty` for weights in ``dtype`` (PenaltyError where they cannot be exact)."""
    columns = input_columns(model)
    offset, heads, slot_masks, extra = columns.offset, columns.heads, columns.slot_masks, columns.extra
    penalties = plan_penalties(model, slot_masks, dtype) if self_contained else None
    extra_qk = max(penalties.dims, default=0) if penalties is not None else 0
    widths = [1]
    for block in model.blocks:
        widths += [int(block.attn.W_Q.shape[2]) + extra_qk, int(block.attn.W_V.shape[2])]
    one_pos, one_neg, write_balance, read_balance = range(extra, extra + 4)
    needed = extra + 4 + (penalties.positions if penalties is not None else 0)
    slots = max(len(slot_masks), 1)
    head_dim = power_of_four_at_least(max(*widths, math.ceil(needed / slots)))  # no zero heads for width alone
    n_head = max(slots, math.ceil(needed / head_dim))
    bias_units: list[int | None] = []
    inner = [model.d_mlp_embedding if offset else 1]
    for block in model.blocks:
        units = int(block.mlp.W_in.shape[1])
        has_bias = nonzero_entries(block.mlp.b_out) > 0
        bias_units.append(units if has_bias else None)
        inner.append(units + int(has_bias))
    return ExportLayout(
        d_model=model.d_model, d=model.d, outputs=model.output_shape[0] if model.output_shape else 1,
        length=model.T, width=n_head * head_dim, n_head=n_head, head_dim=head_dim, n_inner=max(max(inner), 1),
        n_layers=len(model.blocks) + offset, offset=offset, raw_input=columns.raw_input, token_flag=columns.token_flag,
        one_pos=one_pos, one_neg=one_neg, write_balance=write_balance, read_balance=read_balance,
        heads=heads, slot_masks=slot_masks + ((),) * (n_head - len(slot_masks)),
        bias_units=(None,) * offset + tuple(bias_units), penalties=penalties,
        positions=None if penalties is None else extra + 4,
    )
