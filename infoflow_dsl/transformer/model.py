"""The compiled model: explicit weights + config -> a runnable torch module (docs/design.md, "The compiled model").

A standard attention-only-plus-FFN transformer without LayerNorm::

    xe    = [x, 1]                                                  (B, T', d+1)
    h_tok = xe W_E + relu(xe W_E1 + b_E1) W_E2 + W_pos[0:T']        (B, T', D)
    h_cls = cls + W_pos[T']                                         (B, 1, D)   readout token, position T'+1
    h     = cat(h_tok, h_cls)                                       (B, T'+1, D)
    per layer:
        h = h + sum_heads softmax_s(beta_h * q(t).k(s) | mask_h(t, s)) v(s) W_O     keys: the T' input tokens
        h = h + relu(h W_in + b_in) W_out + b_out
    y     = h[:, T'] W_U + b_U                                      (B,) or (B, K)
    per-token models (config "output": "token"):
    y     = h[:, :T'] W_U + b_U                                     (B, T') or (B, T', K)

A **token model** (config ``"input": "tokens"``, :class:`~infoflow_dsl.transformer.config.ModelConfig`)
reads ids (B, T') int64 in 0..V−1 and embeds each by its row of the table W_E [V, D]::

    h_tok = W_E[ids] + W_pos[0:T']          (= one_hot(ids) W_E + W_pos[0:T'])     (B, T', D)

(no ReLU block: a function of the own token is a row of the table); everything after the
embedding is the same. With ``"token_output"`` the outputs are the V tokens' scores, (B, V) or
(B, T', V); the answer is their argmax (the smallest id on a tie).

Tensor names follow TransformerLens; the model's meaning is its card (``model.card``,
:class:`~infoflow_dsl.transformer.card.ModelCard`), its shape read through the card's
:class:`~infoflow_dsl.transformer.config.ModelConfig` (``model.spec``). Masks are structural: a head's mask is a
list of conditions ``[left, op, right]`` (all must hold) on the key s, the query t and the
length T' (:mod:`infoflow_dsl.transformer.masks`: ``["key", "==", "query-1"]`` is a
previous-token head), evaluated on position indices at run time, never stored as a T x T
matrix. A query whose every key is masked receives nothing from that head (attention 0, no NaN).
Very sparse ReLU matrices are held and multiplied sparse (:mod:`infoflow_dsl.transformer.sparse`).

**Hook points.** The one forward implementation (``_stream``) passes every intermediate through
a ``tap(name, tensor) -> tensor`` at the TransformerLens names (``hook_embed``,
``blocks.{l}.attn.hook_z``, ...; the list and shapes are in :data:`HOOK_SHAPES`). ``model(x)`` taps
nothing (the identity); :func:`infoflow_dsl.transformer.lens.hooked` runs the same code with a tap that calls
TransformerLens ``HookPoint`` s, so a hook can read or replace any of them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..language.typed import Vocabulary
from . import repeated_rows
from .card import ModelCard
from .config import ModelConfig
from .input_checks import checked_input
from .masks import allowed_pairs
from .sparse import Tap, holds_sparse, nonzero_entries, relu_block, sparse_nonzero

Tensor = torch.Tensor


#: Hook points of the forward and their shapes. N = T'+1 rows (the T' tokens, then the readout
#: token); keys are the T' input tokens only; H_l, E_l, V_l, M_l are layer l's heads, query/key
#: width, value width and FFN width. A pattern row with no allowed key is all zeros; every other
#: row sums to 1. Prefix ``blocks.{l}.`` for all but the first two.
HOOK_SHAPES: dict[str, str] = {
    "hook_embed": "(B, N, D)  [x, 1] W_E + relu([x, 1] W_E1 + b_E1) W_E2 (a token model: W_E[ids]) on tokens, "
                  "cls on the readout row",
    "hook_pos_embed": "(B, N, D)  W_pos[0:N]",
    "hook_resid_pre": "(B, N, D)",
    "attn.hook_q": "(B, N, H_l, E_l)",
    "attn.hook_k": "(B, T', H_l, E_l)",
    "attn.hook_v": "(B, T', H_l, V_l)",
    "attn.hook_attn_scores": "(B, H_l, N, T')  beta_h q.k, -inf where masked (0 on rows with no key)",
    "attn.hook_pattern": "(B, H_l, N, T')",
    "attn.hook_z": "(B, N, H_l, V_l)",
    "hook_attn_out": "(B, N, D)",
    "hook_resid_mid": "(B, N, D)",
    "mlp.hook_pre": "(B, N, M_l)  h W_in + b_in",
    "mlp.hook_post": "(B, N, M_l)  relu(hook_pre)",
    "hook_mlp_out": "(B, N, D)",
    "hook_resid_post": "(B, N, D)",
}


def no_tap(name: str, value: Tensor) -> Tensor:
    """The plain forward's tap: the identity."""
    return value


def listens(tap: Tap, name: str) -> bool:
    """Whether ``tap`` may read or replace ``name``: never for the plain tap; a tap can answer
    with a ``listens(name)`` method (else it is taken to listen to everything). The FFN gathers
    its hidden activations (B, N, M) only for a tap that listens to them."""
    if tap is no_tap:
        return False
    ask = getattr(tap, "listens", None)
    return True if ask is None else bool(ask(name))


class _Holder(nn.Module):
    """A plain container so that state_dict keys read ``embed.W_E``, ``blocks.0.attn.W_Q`` ...

    Its attributes are the tensors and sub-holders registered by :func:`_hold_weights`, so to a
    type checker every attribute is ``Any`` (``nn.Module.__getattr__`` says ``Tensor | Module``)."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...


class _Blocks(nn.ModuleList):
    """The layers, ``blocks.{l}`` (each a holder of ``attn`` and ``mlp``)."""

    if TYPE_CHECKING:
        def __getitem__(self, index: int) -> _Holder: ...  # type: ignore[override]

        def __iter__(self) -> Iterator[_Holder]: ...


def _hold_weights(model: CompiledTransformer, tensors: Mapping[str, Tensor], device: torch.device | str | None,
                  dtype: torch.dtype, sparse: bool) -> None:
    """Register the file's tensors on ``model`` under their TransformerLens names (``embed.W_E``,
    ``blocks.{l}.attn.W_Q``, ...): weights as frozen parameters, the positional code a buffer;
    each dense, or sparse COO where ``holds_sparse`` says the model keeps it sparse."""

    def own(name: str) -> Tensor:  # dense, or sparse COO where the model holds it sparse
        tensor = tensors[name].detach()
        if sparse and holds_sparse(name, tensor.shape, nonzero_entries(tensor)):
            return sparse_nonzero(tensor.to(device=device, dtype=dtype, copy=True))
        return (tensor.to_dense() if tensor.is_sparse else tensor).to(device=device, dtype=dtype,
                                                                       copy=True).contiguous()

    model.embed = _Holder()
    for name in ("W_E", "W_E1", "b_E1", "W_E2", "cls"):
        model.embed.register_parameter(name, nn.Parameter(own(f"embed.{name}"), requires_grad=False))
    model.pos_embed = _Holder()
    model.pos_embed.register_buffer("W_pos", own("pos_embed.W_pos"))
    model.blocks = _Blocks()
    block_names = (("attn", ("W_Q", "W_K", "W_V", "W_O", "beta")), ("mlp", ("W_in", "b_in", "W_out", "b_out")))
    for i in range(len(model._masks)):
        block = _Holder()
        block.attn, block.mlp = _Holder(), _Holder()
        for sub, names in block_names:
            for name in names:
                param = nn.Parameter(own(f"blocks.{i}.{sub}.{name}"), requires_grad=False)
                getattr(block, sub).register_parameter(name, param)
        model.blocks.append(block)
    model.unembed = _Holder()
    for name in ("W_U", "b_U"):
        model.unembed.register_parameter(name, nn.Parameter(own(f"unembed.{name}"), requires_grad=False))


def mlp_block(m: _Holder, h: Tensor, tap: Tap = no_tap, prefix: str = "") -> Tensor:
    """relu(h W_in + b_in) W_out + b_out, (B, T'+1, D) -> (B, T'+1, D); hidden activations tapped
    as ``{prefix}hook_pre``/``hook_post`` when the tap listens to them (else the fused chunks)."""
    hooked = tap if listens(tap, prefix + "hook_pre") or listens(tap, prefix + "hook_post") else None
    return relu_block(m, h, m.W_in, m.b_in, m.W_out, hooked, prefix).add_(m.b_out)  # a fresh tensor: in place


class CompiledTransformer(nn.Module):
    """The compiled transformer. ``model(x)``: x (B, T', d), 1 <= T' <= T -> (B,) or (B, K); a
    per-token model (config ``"output": "token"``) gives (B, T') or (B, T', K). A token model
    (``model.vocabulary`` not None) takes ids (B, T') int64 in 0..V−1 instead of x.

    Every weight is an ``nn.Parameter`` with ``requires_grad=False`` (flip it to fine-tune),
    except the fixed positional code ``pos_embed.W_pos``, a (persistent) buffer. State-dict keys
    are the TransformerLens-style names listed in docs/model-files.md.

    ``tensors`` may be dense or sparse COO. With ``sparse`` (the default) a very large, very
    sparse ReLU-block matrix (:func:`holds_sparse`) is held as a sparse COO parameter, so that
    memory follows the nonzero count; it is frozen (the forward multiplies by its CSR copy), and
    ``tensor.to_dense()`` gives the usual matrix. ``sparse=False`` holds every weight dense (the
    trainer does, to train them).
    """

    embed: _Holder
    pos_embed: _Holder
    blocks: _Blocks
    unembed: _Holder

    def __init__(self, config: ModelCard | Mapping[str, Any], tensors: Mapping[str, Any],
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32,
                 sparse: bool = True) -> None:
        super().__init__()
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ValueError(f"dtype must be a floating torch dtype, got {dtype!r}")
        self._card = ModelCard.of(config)  # what the model means (``card``): config read and checked
        #: the card's shape, which the forward reads
        self.spec: ModelConfig = self._card.spec
        #: compute every layer's scores and pattern explicitly and z = pattern·v (``verify.trace``
        #: sets it: it recomputes each layer that way and compares bit for bit near rounding)
        self.explicit_attention = False
        tensors = {name: torch.as_tensor(value) for name, value in tensors.items()}
        self.spec.check_tensor_shapes({name: tuple(t.shape) for name, t in tensors.items()})
        self.T: int = self.spec.T
        self.d: int = self.spec.d
        self.d_model: int = self.spec.d_model
        self.output_shape: tuple[int, ...] = self.spec.output_shape
        self.exact_length_only: bool = self.spec.exact_length_only
        self.per_token: bool = self.spec.per_token
        self.min_length: int = self.spec.min_length
        #: a token model's vocabulary (ids 0..V−1 in its order), None for a model over vectors
        self.vocabulary: Vocabulary | None = self.spec.vocabulary
        self.token_output: bool = self.spec.token_output
        self._masks = self.spec.masks

        _hold_weights(self, tensors, device, dtype, sparse)

    # ------------------------------------------------------------------ properties

    @property
    def card(self) -> ModelCard:
        """The model's card (:class:`~infoflow_dsl.transformer.card.ModelCard`): what it means."""
        return self._card

    @card.setter
    def card(self, card: ModelCard) -> None:
        """A new card for the same weights (a measurement, a training record added): its shape
        must be the model's (ValueError otherwise)."""
        if not isinstance(card, ModelCard) or card.spec != self.spec:
            raise ValueError("a model's new card must be a ModelCard of the same shape")
        self._card = card

    @property
    def config(self) -> dict[str, Any]:
        """The card as the JSON object a file stores (a fresh copy: give the model a new card,
        ``model.card = dataclasses.replace(model.card, ...)``, to change what it says)."""
        return self._card.to_json()

    @property
    def dtype(self) -> torch.dtype:
        return self.unembed.W_U.dtype

    @property
    def device(self) -> torch.device:
        return self.unembed.W_U.device

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def d_mlp(self) -> list[int]:
        """Hidden units of each layer's FFN (M_l)."""
        return [int(block.mlp.W_in.shape[1]) for block in self.blocks]

    @property
    def d_mlp_embedding(self) -> int:
        """Hidden units of the embedding's FFN (M0)."""
        return int(self.embed.W_E1.shape[1])

    def parameter_count(self) -> int:
        """Total number of weights, excluding the fixed positional code ``pos_embed.W_pos``."""
        return sum(p.numel() for p in self.parameters())

    def nonzero_parameter_count(self) -> int:
        """Number of nonzero weights, excluding the fixed positional code ``pos_embed.W_pos``."""
        return sum(nonzero_entries(p) for p in self.parameters())

    def extra_repr(self) -> str:
        heads = [len(m) for m in self._masks]
        tokens = f", vocabulary={self.vocabulary.describe()}" if self.vocabulary is not None else ""
        return (f"T={self.T}, d={self.d}, d_model={self.d_model}, heads={heads}, "
                f"output_shape={list(self.output_shape)}{tokens}")

    # ------------------------------------------------------------------ forward

    @property
    def token_input(self) -> bool:
        """The model reads token ids (B, T') rather than vectors (B, T', d)."""
        return self.vocabulary is not None

    def _check_input(self, x: Any) -> Tensor:
        """x as the forward reads it, on the model's device (:func:`~.input_checks.checked_input`)."""
        return checked_input(self.spec, x, self.device, self.dtype)

    def _attention(self, layer: int, h: Tensor, readout_only: bool = False, tap: Tap = no_tap) -> Tensor:
        """The summed output of one layer's heads: (B, T'+1, D), or (B, 1, D) for the readout
        token's queries alone (``readout_only``: all the last layer needs for the output).

        z = softmax(β_h q·k, masked) v per head, computed by the fused
        ``scaled_dot_product_attention`` on the queries β_h q (:func:`fused_attention`): the
        (B, H, N, T') scores are never stored (at T = 4096 they are 64 MiB per head and input).
        A tap that listens to ``hook_attn_scores`` or ``hook_pattern`` gets them computed
        explicitly; when it only reads them (returns them unchanged) z is still the fused one, so
        the output has the same bits with or without hooks; when it replaces either or edits it in
        place, z is that pattern times v, so an edit of the pattern acts on the output.

        q, k, v and z are tapped as (B, rows, H, width) (TransformerLens's layout), transposed
        views of the (B, H, rows, width) tensors the products use."""
        a = self.blocks[layer].attn
        p = f"blocks.{layer}.attn."
        length = h.shape[1] - 1
        tokens = h[:, :length]  # (B, T', D)     keys and values: the input tokens only
        queries = h[:, -1:] if readout_only else h  # (B, N, D), N = 1 or T'+1
        q = _tap_heads(tap, p + "hook_q", project_heads(queries, a.W_Q))  # (B, H, N, E)
        k = _tap_heads(tap, p + "hook_k", project_heads(tokens, a.W_K))  # (B, H, T', E)
        v = _tap_heads(tap, p + "hook_v", project_heads(tokens, a.W_V))  # (B, H, T', V)
        scaled = q * a.beta[:, None, None]  # (B, H, N, E)  β_h q
        allowed = None
        if any(self._masks[layer]):
            allowed = head_masks(self, layer, length, slice(length, length + 1) if readout_only else None)  # (H, N, T')
        if self.explicit_attention or listens(tap, p + "hook_attn_scores") or listens(tap, p + "hook_pattern"):
            scores, has_key = masked_scores(scaled @ k.transpose(-1, -2), allowed)  # (B, H, N, T')
            tapped_scores, kept_scores = _tap_unchanged(tap, p + "hook_attn_scores", scores)
            attn = attention_pattern(tapped_scores, has_key)  # (B, H, N, T')
            tapped_attn, kept_attn = _tap_unchanged(tap, p + "hook_pattern", attn)
            fused = kept_scores and kept_attn and not self.explicit_attention
            z = fused_attention(scaled, k, v, allowed) if fused else tapped_attn @ v  # (B, H, N, V)
        else:
            z = fused_attention(scaled, k, v, allowed)  # (B, H, N, V)
        z = _tap_heads(tap, p + "hook_z", z)  # (B, H, N, V)
        return merge_heads(z, a.W_O)  # (B, N, D)  summed over heads

    def _stream(self, x: Tensor, readout_only: bool = False, tap: Tap = no_tap) -> Iterator[Tensor]:
        """Yield the residual stream after the embedding and after each layer, each (B, T'+1, D).

        With ``readout_only`` the last layer is computed for the readout token alone, (B, 1, D):
        the output reads nothing else, so ``forward`` skips the other rows' work. Every
        intermediate goes through ``tap`` (the names of :data:`HOOK_SHAPES`); with a tap other
        than the identity, layers without heads still run (and tap) an empty attention.
        """
        h = embed_checked(self, self._check_input(x), tap)
        yield h
        last = len(self.blocks) - 1
        for layer, block in enumerate(self.blocks):
            p = f"blocks.{layer}."
            only = readout_only and layer == last
            h = tap(p + "hook_resid_pre", h)
            row = h[:, -1:] if only else h  # (B, N, D)
            if self._masks[layer] or tap is not no_tap:  # H_l = 0: an FFN-only layer
                attn_out = tap(p + "hook_attn_out", self._attention(layer, h, only, tap))  # (B, N, D)
                row = tap(p + "hook_resid_mid", _residual_sum(row, attn_out, tap))
            mlp_out = tap(p + "hook_mlp_out", mlp_block(block.mlp, row, tap, p + "mlp."))  # (B, N, D)
            h = tap(p + "hook_resid_post", _residual_sum(row, mlp_out, tap))
            yield h

    def residual_stream(self, x: Tensor) -> list[Tensor]:
        """h after the embedding and after each of the L layers: L+1 tensors of shape (B, T'+1, D)."""
        return list(self._stream(x))

    def readout(self, h: Tensor) -> Tensor:
        """The output from a final residual stream h (B, T'+1, D): (B,) or (B, K) read at the
        readout token; for a per-token model (B, T') or (B, T', K), y(t) = W_U h(t) + b_U at
        every input token."""
        rows = h[:, :-1] if self.per_token else h[:, -1]  # (B, T', D) or (B, D)
        y = rows @ self.unembed.W_U + self.unembed.b_U  # (..., K)
        return y.squeeze(-1) if not self.output_shape else y

    def run(self, x: Tensor, tap: Tap = no_tap) -> Tensor:
        """The output, every intermediate passed through ``tap``. ``model(x)`` (the identity tap)
        runs the last layer for the readout row alone unless the model reads every token; with
        another tap every row of every layer is computed, so that every hook sees (B, T'+1, ...)."""
        (h,) = deque(self._stream(x, readout_only=tap is no_tap and not self.per_token, tap=tap), maxlen=1)
        return self.readout(h)

    def forward(self, x: Tensor) -> Tensor:
        return self.run(x)



def head_masks(model: CompiledTransformer, layer: int, length: int, rows: slice | None = None) -> Tensor:
    """Allowed (query, key) pairs of each head of one layer: bool (H, N, T') for the query
    rows ``rows`` of the T'+1 (all of them by default; :func:`~.masks.allowed_pairs`)."""
    return allowed_pairs(model.spec.masks[layer], length, rows, model.device)


def embed_checked(model: CompiledTransformer, x: Tensor, tap: Tap = no_tap) -> Tensor:
    """h after the embedding, (B, T'+1, D), from checked input (vectors or ids)."""
    batch, length = x.shape[:2]
    e, pos = model.embed, model.pos_embed.W_pos  # pos: (T+1, D)
    if model.token_input:
        h_tok = e.W_E[x]  # (B, T', D)  the table's row per id: one_hot(ids) W_E
    else:
        xe = torch.cat([x, x.new_ones(batch, length, 1)], dim=-1)  # (B, T', d+1)
        h_tok = xe @ e.W_E + relu_block(e, xe, e.W_E1, e.b_E1, e.W_E2)  # (B, T', D)
    h_cls = e.cls.expand(batch, 1, model.d_model)  # (B, 1, D)  readout token at T'+1
    embed = tap("hook_embed", torch.cat([h_tok, h_cls], dim=1))  # (B, T'+1, D)
    return embed + tap("hook_pos_embed", pos[:length + 1].expand(batch, length + 1, model.d_model))


def embedded(model: CompiledTransformer, x: Tensor) -> Tensor:
    """h after ``model``'s embedding, (B, T'+1, D): what its first layer reads."""
    return embed_checked(model, model._check_input(x))


def attention_masks(model: CompiledTransformer, layer: int, length: int) -> Tensor | None:
    """The allowed (query, key) pairs of each head of ``layer`` at length T': bool (H, T'+1, T'),
    or None where no head of the layer has a mask."""
    return head_masks(model, layer, length) if any(model._masks[layer]) else None


def _residual_sum(row: Tensor, update: Tensor, tap: Tap) -> Tensor:
    """row + update (B, N, D), a block's output added to the stream. Without hooks nothing else
    holds ``update`` (a fresh block output), so the sum is written into it: update + row, the
    same bits (IEEE addition commutes), one (B, N, D) allocation fewer a block."""
    return update.add_(row) if tap is no_tap else row + update


def project_heads(h: Tensor, w: Tensor) -> Tensor:
    """Every head's projection h W[i] at once: h (B, N, D), w (H, D, E) -> (B, H, N, E).

    One (B·N, D) @ (D, H·E) product rather than a batched one per head: the same dot products
    of length D, but a single large product is several times faster on a CPU (and in training
    its backward is too)."""
    batch, rows, width = h.shape
    heads, _, out = w.shape
    flat = h.reshape(batch * rows, width) @ w.permute(1, 0, 2).reshape(width, heads * out)  # (B·N, H·E)
    return flat.view(batch, rows, heads, out).transpose(1, 2)


def merge_heads(z: Tensor, w_o: Tensor) -> Tensor:
    """Σ_i z[:, i] W_O[i]: z (B, H, N, V), W_O (H, V, D) -> (B, N, D), as one product over (i, v)."""
    batch, heads, rows, width = z.shape
    flat = z.transpose(1, 2).reshape(batch * rows, heads * width)  # (B·N, H·V)
    return (flat @ w_o.reshape(heads * width, w_o.shape[-1])).view(batch, rows, w_o.shape[-1])


def masked_scores(scores: Tensor, allowed: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """(scores with masked keys at -inf, has_key (H, N, 1) or None without masks) for scores
    (B, H, N, T') and allowed (H, N, T'): a query row with no key at all gets zeros (a harmless
    uniform softmax), which :func:`attention_pattern` then multiplies by 0 (no NaN, forward or
    gradient)."""
    if allowed is None:
        return scores, None
    has_key = allowed.any(dim=-1, keepdim=True)  # (H, N, 1)
    return torch.where(allowed, scores, torch.where(has_key, float("-inf"), 0.0).to(scores.dtype)), has_key


def attention_pattern(scores: Tensor, has_key: Tensor | None) -> Tensor:
    """softmax over the keys of masked scores (B, H, N, T'), rows without a key zeroed."""
    attn = torch.softmax(scores, dim=-1)
    return attn if has_key is None else attn * has_key


def fused_attention(scaled_q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
    """softmax(q'·k, masked) v for every head and query row, q' = β_h q already scaled:
    (B, H, N, E), (B, H, T', E), (B, H, T', V), allowed (H, N, T') or None -> (B, H, N, V).

    The fused ``scaled_dot_product_attention`` (scale 1): blocked over keys with a running max,
    so the scores are never stored, the same sums as the explicit softmax up to rounding. A
    query row with no allowed key gives 0 (as the explicit path's has_key factor). The last
    query row goes in a call of its own: a call for one row may round differently from the
    same row among many, and the last layer runs either for the readout row alone
    (``model(x)``) or for every row (hooks, ``residual_stream``); both must give the same bits.

    In inference on long unmasked sequences whose heads repeat their (key, value) rows (at most
    T'/16 distinct ones: repeated tokens, the domain's corners), the softmax runs over the
    distinct rows weighted by their counts instead (:mod:`infoflow_dsl.transformer.repeated_rows`: the same
    sums regrouped, rounding apart); the choice depends on k and v alone, so both ways of running
    the last layer still agree."""
    has_key = None
    if allowed is not None:
        has_key = allowed.any(dim=-1, keepdim=True)  # (H, N, 1)
        allowed = allowed | ~has_key  # rows without a key: a uniform pattern, zeroed below
    distinct = repeated_rows.distinct_keys(scaled_q, k, v, allowed)

    def attend(rows: slice) -> Tensor:
        if distinct is not None:
            return repeated_rows.distinct_attention(scaled_q[:, :, rows], distinct)
        mask = None if allowed is None else allowed[:, rows]
        return nn.functional.scaled_dot_product_attention(scaled_q[:, :, rows], k, v, attn_mask=mask, scale=1.0)

    rows = scaled_q.shape[2]
    z = attend(slice(0, rows)) if rows == 1 else torch.cat([attend(slice(0, rows - 1)), attend(slice(rows - 1, rows))],
                                                           dim=2)
    return z if has_key is None or bool(has_key.all()) else z * has_key


def _tap_unchanged(tap: Tap, name: str, value: Tensor) -> tuple[Tensor, bool]:
    """(tap(name, value), whether the tap left it as it was): the same tensor, not edited in place
    (its version counter, which every in-place operation advances, did not move)."""
    version = value._version
    tapped = tap(name, value)
    return tapped, tapped is value and value._version == version


def _tap_heads(tap: Tap, name: str, value: Tensor) -> Tensor:
    """Tap a (B, H, rows, width) tensor in TransformerLens's (B, rows, H, width) layout."""
    if tap is no_tap:
        return value
    return tap(name, value.transpose(1, 2)).transpose(1, 2)


