"""``--to tl-native``: a compiled model as TransformerLens 4's own architecture (``boot_native``).

TransformerLens 4.3 has no native on-disk format that it loads by itself: ``HookedTransformer``
and its config are gone; ``TransformerBridge.boot_native(config)`` builds a ``NativeModel``
from a ``TransformerBridgeConfig`` (random or no initialisation, no Hugging Face), and
``bridge.load_state_dict`` takes the bridge's TransformerLens names (``blocks.{L}.attn.q.weight``,
what ``bridge.state_dict()`` gives); its only loader from files,
``sources.tl_legacy``, fetches legacy repositories from the Hub. So the export is the closest
thing: ``DIR/tl_config.json`` (the config's fields, for ``TransformerBridgeConfig.from_dict``),
``DIR/model.safetensors`` (the bridge's state dict) and ``DIR/infoflow.json``;
:func:`load_tl_native` is those two calls. The native model is

    h = inputs_embeds + pos[p];  per block: h += attn(ln1(h), mask);  h += mlp(ln2(h));  logits = head(ln_out(h))

with ``normalization_type: null`` (every norm the identity: the compiled model has none),
split q/k/v/o and fc_in/fc_out linears with biases, scores divided by √d_head, and the 4D
attention mask it combines with its own (``attention_dir: bidirectional``, so none of its own):
a boolean (B, n_heads, N, N), True where masked. The mapping:

- **Residual**: the compiled coordinates 0..D-1 keep their indices; then, with an embedding
  ReLU block, the raw x(t) and a token flag; then a constant coordinate 1 at every position
  (``pos`` writes it; the head has no bias, so b_U rides it). No balance coordinates: no norm.
- **Positions**: tokens t = 1..T' at rows 0..T'−1, the readout at row T' (no sink: a query
  whose keys are all masked gets pattern 0 from NativeAttention, so z = 0, as in the compiled
  model); ``pos[p] = W_pos[p]`` plus the constant.
- **Layers, slots**: as :mod:`.layout` (the embedding's ReLU block is layer 0 with zero
  attention, b_E1 on the token flag; heads grouped by mask kind into slots, since one mask
  serves every layer); d_head the smallest power of 4 at least every head's width, so that
  β √d_head folded into W_q is exact; zero heads and units pad.
- **Biases**: b_in and b_out are fc_in's and fc_out's biases (the readout row's FFN sees them
  as in the compiled model); attention biases are 0.
- **Logits**: the K outputs and their negations (the bridge's compatibility mode subtracts the
  logits' mean, which is then 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..transformer.masks import HeadMask
from ..transformer.model import CompiledTransformer
from .layout import HeadSlot, input_columns, power_of_four_at_least
from .weights import place, span

Tensor = torch.Tensor

CONFIG_FILE = "tl_config.json"
LENS_MISSING = "--to tl-native needs TransformerLens 4: install the 'lens' extra (pip install 'infoflow-dsl[lens]')"


@dataclass(frozen=True)
class NativeLayout:
    """Where a compiled model's parts go in a TL-native model (module docstring)."""

    d_model: int
    d: int
    outputs: int
    length: int
    """the compiled model's residual width D, token dimension d, outputs K, longest input T"""
    width: int
    n_heads: int
    d_head: int
    d_mlp: int
    n_layers: int
    offset: int
    """the native shape; compiled layer l is native layer l + offset"""
    raw_input: int | None
    token_flag: int | None
    one: int
    """x(t), the token flag (None without an embedding ReLU block) and the constant coordinate"""
    heads: tuple[HeadSlot, ...]
    slot_masks: tuple[HeadMask, ...]

    @property
    def vocab(self) -> int:
        return 2 * self.outputs

    @property
    def embedding_layer(self) -> int | None:
        return 0 if self.offset else None

    def slot_columns(self, slot: int, width: int) -> tuple[int, int]:
        """The columns [start, stop) of a slot's first ``width`` entries in q, k, v or z."""
        return slot * self.d_head, slot * self.d_head + width


def native_plan(model: CompiledTransformer) -> NativeLayout:
    """The layout of ``model``'s tl-native export."""
    columns = input_columns(model)
    offset, slot_masks, extra = columns.offset, columns.slot_masks, columns.extra
    widths, units = [1], [model.d_mlp_embedding if offset else 1]
    for block in model.blocks:
        widths += [int(block.attn.W_Q.shape[2]), int(block.attn.W_V.shape[2])]
        units.append(int(block.mlp.W_in.shape[1]))
    n_heads = max(len(slot_masks), 1)
    return NativeLayout(
        d_model=model.d_model, d=model.d, outputs=model.output_shape[0] if model.output_shape else 1,
        length=model.T, width=extra + 1, n_heads=n_heads, d_head=power_of_four_at_least(max(widths)),
        d_mlp=max(max(units), 1), n_layers=len(model.blocks) + offset, offset=offset, raw_input=columns.raw_input,
        token_flag=columns.token_flag, one=extra, heads=columns.heads,
        slot_masks=slot_masks + ((),) * (n_heads - len(slot_masks)),
    )


def native_config(layout: NativeLayout, dtype: torch.dtype) -> dict[str, Any]:
    """The ``TransformerBridgeConfig`` fields of the export (JSON: the dtype as its name)."""
    return {"architecture": "TransformerLensNative", "d_model": layout.width, "d_head": layout.d_head,
            "n_heads": layout.n_heads, "n_layers": layout.n_layers, "n_ctx": layout.length + 1,
            "d_mlp": layout.d_mlp, "d_vocab": layout.vocab, "d_vocab_out": layout.vocab, "act_fn": "relu",
            "normalization_type": None, "attention_dir": "bidirectional", "positional_embedding_type": "standard",
            "use_attn_scale": True, "attn_scale": -1.0, "init_weights": False, "tokenizer_prepends_bos": False,
            "default_prepend_bos": False, "dtype": str(dtype).removeprefix("torch.")}


def zeros(*shape: int) -> Tensor:
    return torch.zeros(*shape, dtype=torch.float64)


def native_state_dict(model: CompiledTransformer, layout: NativeLayout,
                      dtype: torch.dtype) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """(the bridge's state dict, W_x, cls_x) of ``model``, in ``dtype`` (built in float64), under
    the TransformerLens names ``bridge.state_dict()`` gives (``blocks.{L}.attn.q.weight``,
    ``blocks.{L}.mlp.in.weight``, ``unembed.weight`` ...), which ``load_state_dict`` maps onto every
    alias of the NativeModel's parameters (its raw names, ``layers.{L}.mlp.fc_in``, have aliases
    that a strict load of the raw names misses). Linear weights are (out, in)."""
    lay = layout
    with torch.no_grad():
        pos = zeros(lay.length + 1, lay.width)
        place(pos, model.pos_embed.W_pos.detach(), span(0, lay.length + 1), torch.arange(lay.d_model))
        pos[:, lay.one] = 1.0
        out: dict[str, Tensor] = {"embed.weight": zeros(lay.vocab, lay.width), "pos_embed.weight": pos}
        for layer in range(lay.n_layers):
            parts = native_attention(model, lay, layer - lay.offset) | native_mlp(model, lay, layer - lay.offset)
            out |= {f"blocks.{layer}.{name}": tensor for name, tensor in parts.items()}
        out |= native_unembedding(model, lay)
        w_x, cls = native_embedding(model, lay)
    return {name: t.to(dtype).contiguous() for name, t in out.items()}, w_x.to(dtype), cls.to(dtype)


def native_attention(model: CompiledTransformer, layout: NativeLayout, compiled: int) -> dict[str, Tensor]:
    """attn.{q,k,v,o}.{weight,bias} of compiled layer ``compiled`` (zero for the embedding layer,
    −1): q.weight[slot·d_head + e, i] = β √d_head W_Q[h][i, e], o.weight[i, slot·d_head + v] = W_O[h][v, i]."""
    lay, dm = layout, torch.arange(layout.d_model)
    q_dim = lay.n_heads * lay.d_head
    parts = {name: zeros(lay.width, q_dim) for name in ("q", "k", "v")} | {"o": zeros(q_dim, lay.width)}  # (in, out)
    if compiled >= 0:
        a = model.blocks[compiled].attn
        for head in (h for h in lay.heads if h.compiled_layer == compiled):
            i, base = head.compiled_index, head.slot * lay.d_head
            width, values = int(a.W_Q.shape[2]), int(a.W_V.shape[2])
            place(parts["q"], a.W_Q[i].detach(), dm, span(base, width), float(a.beta[i]) * lay.d_head**0.5)
            place(parts["k"], a.W_K[i].detach(), dm, span(base, width))
            place(parts["v"], a.W_V[i].detach(), dm, span(base, values))
            place(parts["o"], a.W_O[i].detach(), span(base, values), dm)
    out: dict[str, Tensor] = {}
    for name, weight in parts.items():
        out |= {f"attn.{name}.weight": weight.T, f"attn.{name}.bias": zeros(weight.shape[1])}
    return out


def native_mlp(model: CompiledTransformer, layout: NativeLayout, compiled: int) -> dict[str, Tensor]:
    """mlp.{in,out}.{weight,bias}: compiled layer ``compiled``'s FFN with its biases, or (−1) the
    embedding's ReLU block from x(t) and the token flag (b_E1 on the flag)."""
    lay, dm = layout, torch.arange(layout.d_model)
    fc_in, fc_out = zeros(lay.width, lay.d_mlp), zeros(lay.d_mlp, lay.width)  # (in, out) until transposed
    b_in, b_out = zeros(lay.d_mlp), zeros(lay.width)
    if compiled < 0:
        e = model.embed
        units = int(e.W_E1.shape[1])
        assert lay.raw_input is not None and lay.token_flag is not None
        rows = torch.cat([span(lay.raw_input, lay.d), torch.tensor([lay.token_flag])])  # x(t), then the flag
        place(fc_in, e.W_E1.detach(), rows, span(0, units))
        fc_in[lay.token_flag, :units] += e.b_E1.detach().to(torch.float64)
        place(fc_out, e.W_E2.detach(), span(0, units), dm)
    else:
        m = model.blocks[compiled].mlp
        units = int(m.W_in.shape[1])
        place(fc_in, m.W_in.detach(), dm, span(0, units))
        place(fc_out, m.W_out.detach(), span(0, units), dm)
        b_in[:units] = m.b_in.detach().to_dense().to(torch.float64)
        b_out[:lay.d_model] = m.b_out.detach().to_dense().to(torch.float64)
    return {"mlp.in.weight": fc_in.T, "mlp.in.bias": b_in, "mlp.out.weight": fc_out.T, "mlp.out.bias": b_out}


def native_unembedding(model: CompiledTransformer, layout: NativeLayout) -> dict[str, Tensor]:
    """unembed.weight (vocab, width) = [W_U | −W_U]ᵀ with b_U on the constant coordinate; bias 0."""
    u, lay = model.unembed, layout
    dm, k = torch.arange(lay.d_model), lay.outputs
    head = zeros(lay.width, lay.vocab)
    place(head, u.W_U.detach(), dm, span(0, k))
    place(head, u.W_U.detach(), dm, span(k, k), -1.0)
    head[lay.one, :k] = u.b_U.detach().to(torch.float64)
    head[lay.one, k:] = -u.b_U.detach().to(torch.float64)
    return {"unembed.weight": head.T, "unembed.bias": zeros(lay.vocab)}


def native_embedding(model: CompiledTransformer, layout: NativeLayout) -> tuple[Tensor, Tensor]:
    """(W_x (d+1, width), cls_x (width,)), float64: inputs_embeds of a token is [x; 1] W_x (the
    compiled [x; 1] W_E, x itself and the token flag), of the readout token cls_x."""
    e, lay = model.embed, layout
    with torch.no_grad():
        w_x = torch.zeros(lay.d + 1, lay.width, dtype=torch.float64)
        place(w_x, e.W_E.detach(), torch.arange(lay.d + 1), torch.arange(lay.d_model))
        if lay.raw_input is not None and lay.token_flag is not None:
            w_x[torch.arange(lay.d), span(lay.raw_input, lay.d)] = 1.0
            w_x[lay.d, lay.token_flag] = 1.0
        cls = torch.zeros(lay.width, dtype=torch.float64)
        cls[:lay.d_model] = e.cls.detach().to(torch.float64)
    return w_x, cls


def lens_module() -> Any:
    """TransformerLens's native source, or an ImportError naming the extra."""
    try:
        from transformer_lens.model_bridge.sources import native
    except ImportError:
        raise ImportError(LENS_MISSING) from None
    return native


def boot(lens_settings: dict[str, Any], tensors: dict[str, Tensor]) -> Any:
    """``TransformerBridge.boot_native`` of the bridge's settings (its ``config.json``), then
    ``load_state_dict`` of the tensors (strict)."""
    native = lens_module()
    from transformer_lens.config import TransformerBridgeConfig

    dtype = getattr(torch, lens_settings["dtype"])
    bridge = native.boot(TransformerBridgeConfig.from_dict({**lens_settings, "dtype": dtype}), dtype=dtype,
                         device="cpu")
    bridge.load_state_dict(tensors, strict=True)
    return bridge.eval()


def load_tl_native(directory: str | Path, dtype: torch.dtype | None = None) -> Any:
    """An exported tl-native directory as a TransformerBridge (its NativeModel loaded), in its
    own dtype or ``dtype``."""
    from safetensors.torch import load_file

    directory = Path(directory)
    lens_settings = json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8"))
    if dtype is not None:
        lens_settings["dtype"] = str(dtype).removeprefix("torch.")
    tensors = load_file(str(directory / "model.safetensors"))
    return boot(lens_settings, {name: t.to(getattr(torch, lens_settings["dtype"])) for name, t in tensors.items()})
