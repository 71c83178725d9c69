"""A compiled model's weights as a Hugging Face GPT-2 state dict (the layout of :mod:`.layout`).

Every compiled matrix is placed, entry for entry, into a dense GPT-2 tensor (a sparse-held
matrix by its nonzero entries, so that nothing but the output tensors is ever dense):

    transformer.wpe.weight[p]       = W_pos[p - 1]                      p = 1..T+1; row 0 (the sink) = 0
    h.{L}.attn.c_attn.weight        = [β_h √head_dim W_Q[h] | W_K[h] | W_V[h]] at slot columns, bias 0
    h.{L}.attn.c_proj.weight        = W_O[h] at slot rows, bias 0
    h.{L}.mlp.c_fc.weight           = W_in; b_in on the constant pair (b/2c at +c, −b/2c at −c), bias 0
    h.{L}.mlp.c_proj.weight         = W_out; b_out written by one more unit relu(constant) = 1, bias 0
    h.0 (with an embedding ReLU block): zero attention, c_fc = W_E1 from x(t) and the token flag
                                        (b_E1 and W_E1's constant row ride the flag), c_proj = W_E2
    lm_head.weight                  = [W_U | −W_U]ᵀ, b_U on the constant pair
    ln_*                            = gain g, bias 0, ε_LN
    self-contained                  wpe[p] also the one-hot of p; each slot's last r_j q/k columns
                                    the penalties of :mod:`.penalty`

No bias of the GPT-2 is used, so the sink's residual (0 from the input) stays 0 through every
layer (LayerNorm maps 0 to 0), and its value, the one attended by queries with no allowed key,
is exactly 0. Written rows and reader columns are balanced (:func:`balance_rows`,
:func:`balance_columns`) so that LayerNorm's mean is 0 and ignored. With the exact LayerNorm
(ε_LN = 2^80, g = 2^40) LayerNorm(h) = (h − mean(h)) · 2^40 / √(var(h) + 2^80) = h − mean(h)
exactly while var(h) < 2^26 (float64; 2^55 in float32): √(var + 2^80) rounds to 2^40. The
active LayerNorm (:mod:`.active`) has gain 1, a constant pair ±C and its scale folded into the
readers.
"""

from __future__ import annotations

import torch

from ..transformer.model import CompiledTransformer
from .layout import ExportLayout

Tensor = torch.Tensor

EXACT_LN_EPS = 2.0**80
EXACT_LN_GAIN = 2.0**40


def place(out: Tensor, source: Tensor, rows: Tensor, columns: Tensor, scale: Tensor | float = 1.0) -> None:
    """out[rows[i], columns[j]] += scale · source[i, j] for a dense or sparse COO (R, C) source
    (``scale``: a number or a (C,) vector), the sparse one by its nonzero entries only."""
    if source.is_sparse:
        coo = source.coalesce()
        i, j = coo.indices()
        values = coo.values().to(out.dtype)
        if isinstance(scale, Tensor):
            values = values * scale.to(out.dtype)[j]
        else:
            values = values * scale
        out.index_put_((rows[i], columns[j]), values, accumulate=True)
        return
    block = source.to(out.dtype)
    block = block * (scale.to(out.dtype) if isinstance(scale, Tensor) else scale)
    out[rows[:, None], columns[None, :]] += block


def span(start: int, count: int) -> Tensor:
    return torch.arange(start, start + count)


def balance_rows(out: Tensor, column: int) -> None:
    """Each row's entry at ``column`` = −(the sum of its other entries): every vector written
    into the residual then sums to 0."""
    out[:, column] = 0.0
    out[:, column] = -out.sum(dim=1)


def balance_columns(out: Tensor, row: int) -> None:
    """Each column's entry at ``row`` = −(the sum of its other entries): a reader then gives the
    same for h and h − mean(h)."""
    out[row, :] = 0.0
    out[row, :] = -out.sum(dim=0)


class _Builder:
    """Fills the GPT-2 tensors of one export, in float64 (cast once at the end)."""

    def __init__(self, model: CompiledTransformer, layout: ExportLayout, constant: float) -> None:
        self.model, self.layout, self.constant = model, layout, constant
        self.dm = torch.arange(layout.d_model)  # the compiled directions' coordinates

    def zeros(self, *shape: int) -> Tensor:
        return torch.zeros(*shape, dtype=torch.float64)

    def bias_row(self, out: Tensor, bias: Tensor, columns: Tensor) -> None:
        """A reader's bias b on the constant pair: b/2c at +c, −b/2c at −c."""
        lay = self.layout
        value = bias.detach().to_dense().to(torch.float64) / (2 * self.constant)
        out[lay.one_pos, columns] += value
        out[lay.one_neg, columns] -= value

    def embedding_layer(self) -> dict[str, Tensor]:
        """Exported layer 0: the embedding's ReLU block relu(W_E1 [x; 1] + b_E1) W_E2 on tokens."""
        m, lay = self.model.embed, self.layout
        assert lay.raw_input is not None and lay.token_flag is not None
        units = int(m.W_E1.shape[1])
        fc = self.zeros(lay.width, lay.n_inner)
        rows = torch.cat([span(lay.raw_input, lay.d), torch.tensor([lay.token_flag])])  # x(t), then the flag
        place(fc, m.W_E1.detach(), rows, span(0, units))
        fc[lay.token_flag, :units] += m.b_E1.detach().to(torch.float64)
        balance_columns(fc, lay.read_balance)
        proj = self.zeros(lay.n_inner, lay.width)
        place(proj, m.W_E2.detach(), span(0, units), self.dm)
        balance_rows(proj, lay.write_balance)
        return {"mlp.c_fc.weight": fc, "mlp.c_proj.weight": proj}

    def attention(self, layer: int) -> dict[str, Tensor]:
        """Compiled layer ``layer``'s heads in their slots (β_h √head_dim folded into W_Q)."""
        a, lay = self.model.blocks[layer].attn, self.layout
        hd, width = lay.head_dim, lay.width
        qkv = self.zeros(width, 3 * width)
        proj = self.zeros(width, width)
        for head in (h for h in lay.heads if h.compiled_layer == layer):
            i, base = head.compiled_index, head.slot * hd
            scale = float(a.beta[i]) * hd**0.5
            e, v = int(a.W_Q.shape[2]), int(a.W_V.shape[2])
            place(qkv, a.W_Q[i].detach(), self.dm, span(base, e), scale)
            place(qkv, a.W_K[i].detach(), self.dm, span(width + base, e))
            place(qkv, a.W_V[i].detach(), self.dm, span(2 * width + base, v))
            place(proj, a.W_O[i].detach(), span(base, v), self.dm)
        if lay.penalties is not None:
            self.penalize(qkv)
        balance_columns(qkv, lay.read_balance)
        balance_rows(proj, lay.write_balance)
        return {"attn.c_attn.weight": qkv, "attn.c_proj.weight": proj}

    def penalize(self, qkv: Tensor) -> None:
        """Every real slot's penalty dimensions (:mod:`.penalty`): q reads the one-hot of its
        query's class (weight 1), k puts −P √head_dim on the keys that class forbids."""
        lay, pen = self.layout, self.layout.penalties
        assert pen is not None and lay.positions is not None
        one_hot = span(lay.positions, pen.positions)  # the residual's N position coordinates
        for slot, (forbidden, classes) in enumerate(zip(pen.forbidden, pen.classes, strict=True)):
            start, _ = lay.penalty_columns(slot)
            rows = classes >= 0
            qkv[one_hot[rows], start + classes[rows]] = 1.0
            keys = forbidden.to(torch.float64).T * (-pen.penalty * lay.head_dim**0.5)  # (N, r_j)
            qkv[one_hot[:, None], lay.width + start + torch.arange(forbidden.shape[0])[None, :]] = keys

    def mlp(self, layer: int) -> dict[str, Tensor]:
        """Compiled layer ``layer``'s FFN, b_in on the constant pair, b_out by its bias unit."""
        m, lay = self.model.blocks[layer].mlp, self.layout
        units = int(m.W_in.shape[1])
        fc = self.zeros(lay.width, lay.n_inner)
        place(fc, m.W_in.detach(), self.dm, span(0, units))
        self.bias_row(fc, m.b_in, span(0, units))
        proj = self.zeros(lay.n_inner, lay.width)
        place(proj, m.W_out.detach(), span(0, units), self.dm)
        unit = lay.bias_units[layer + lay.offset]
        if unit is not None:
            fc[lay.one_pos, unit] = 1.0 / self.constant  # relu(+c/c) = 1 on every position but the sink
            proj[unit, :lay.d_model] = m.b_out.detach().to(torch.float64)
        balance_columns(fc, lay.read_balance)
        balance_rows(proj, lay.write_balance)
        return {"mlp.c_fc.weight": fc, "mlp.c_proj.weight": proj}

    def positions(self) -> Tensor:
        lay = self.layout
        wpe = self.zeros(lay.n_positions, lay.width)
        place(wpe, self.model.pos_embed.W_pos.detach(), span(1, lay.length + 1), self.dm)
        if lay.positions is not None:  # self-contained: the one-hot of every position, the sink's included
            wpe[torch.arange(lay.n_positions), span(lay.positions, lay.n_positions)] = 1.0
        balance_rows(wpe, lay.write_balance)
        return wpe

    def unembedding(self) -> Tensor:
        """lm_head.weight (vocab, width): [W_U | −W_U]ᵀ with b_U on the constant pair."""
        u, lay = self.model.unembed, self.layout
        reader = self.zeros(lay.width, lay.vocab)
        k = lay.outputs
        place(reader, u.W_U.detach(), self.dm, span(0, k))
        place(reader, u.W_U.detach(), self.dm, span(k, k), -1.0)
        self.bias_row(reader, u.b_U, span(0, k))
        self.bias_row(reader, -u.b_U.detach(), span(k, k))
        balance_columns(reader, lay.read_balance)
        return reader.T.contiguous()

    def embedding(self) -> tuple[Tensor, Tensor]:
        """(W_x (d+1, width), cls_x (width,)): inputs_embeds of a token is [x; 1] W_x, of the
        readout token cls_x (both balanced): the compiled [x; 1] W_E, x itself and the token
        flag when the embedding has a ReLU block, and the constant pair."""
        e, lay = self.model.embed, self.layout
        w_x = self.zeros(lay.d + 1, lay.width)
        place(w_x, e.W_E.detach(), torch.arange(lay.d + 1), self.dm)
        if lay.raw_input is not None and lay.token_flag is not None:
            w_x[torch.arange(lay.d), span(lay.raw_input, lay.d)] = 1.0
            w_x[lay.d, lay.token_flag] = 1.0
        cls = self.zeros(1, lay.width)
        cls[0, :lay.d_model] = e.cls.detach().to(torch.float64)
        for out in (w_x[lay.d:], cls):
            out[:, lay.one_pos] += self.constant
            out[:, lay.one_neg] -= self.constant
        balance_rows(w_x, lay.write_balance)
        balance_rows(cls, lay.write_balance)
        return w_x, cls[0]


#: the matrices that read the residual (after a LayerNorm): an active LayerNorm's scale folds into them
READERS = ("attn.c_attn.weight", "mlp.c_fc.weight", "lm_head.weight")


def gpt2_state_dict(model: CompiledTransformer, layout: ExportLayout, dtype: torch.dtype, ln_gain: float,
                    constant: float = 1.0, reader_scale: float = 1.0) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """(the GPT2LMHeadModel state dict, W_x, cls_x) of ``model`` in ``layout`` (module
    docstring), every tensor in ``dtype``; LayerNorm gains ``ln_gain`` (biases 0), the constant
    pair ±``constant``, every reader (:data:`READERS`) times ``reader_scale``."""
    build = _Builder(model, layout, constant)
    lay = layout
    with torch.no_grad():
        tensors: dict[str, Tensor] = {
            "transformer.wte.weight": build.zeros(lay.vocab, lay.width),
            "transformer.wpe.weight": build.positions(),
        }
        for exported in range(lay.n_layers):
            p = f"transformer.h.{exported}."
            compiled = exported - lay.offset
            parts = build.embedding_layer() if compiled < 0 else build.mlp(compiled)
            parts |= build.attention(compiled) if compiled >= 0 else {
                "attn.c_attn.weight": build.zeros(lay.width, 3 * lay.width),
                "attn.c_proj.weight": build.zeros(lay.width, lay.width)}
            parts |= {"attn.c_attn.bias": build.zeros(3 * lay.width), "attn.c_proj.bias": build.zeros(lay.width),
                      "mlp.c_fc.bias": build.zeros(lay.n_inner), "mlp.c_proj.bias": build.zeros(lay.width)}
            for norm in ("ln_1", "ln_2"):
                parts |= {f"{norm}.weight": torch.full((lay.width,), ln_gain, dtype=torch.float64),
                          f"{norm}.bias": build.zeros(lay.width)}
            tensors |= {p + name: value for name, value in parts.items()}
        tensors |= {"transformer.ln_f.weight": torch.full((lay.width,), ln_gain, dtype=torch.float64),
                    "transformer.ln_f.bias": build.zeros(lay.width), "lm_head.weight": build.unembedding()}
        w_x, cls = build.embedding()
        if reader_scale != 1.0:
            for name in tensors:
                if name.endswith(READERS):
                    tensors[name] *= reader_scale
    return {name: t.to(dtype).contiguous() for name, t in tensors.items()}, w_x.to(dtype), cls.to(dtype)


def embedding_of(model: CompiledTransformer, layout: ExportLayout, constant: float = 1.0) -> tuple[Tensor, Tensor]:
    """(W_x, cls_x) of ``model``'s export in float64 (:meth:`_Builder.embedding`)."""
    with torch.no_grad():
        return _Builder(model, layout, constant).embedding()
