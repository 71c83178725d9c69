"""``--self-contained``: the structural masks as score penalties in the weights, no mask passed.

A self-contained export is called with ``inputs_embeds`` alone. What Hugging Face GPT-2
(transformers 5.24) does then, measured for each ``attn_implementation`` (eager and sdpa; GPT-2
has no flex or flash path on CPU): ``GPT2Model`` builds its mask with ``create_causal_mask``,
which, with ``attention_mask=None``, is the plain causal mask (key ≤ query) for both: eager
materialises it, sdpa passes ``is_causal=True``. With ``is_causal: false`` in config.json
``create_causal_mask`` defers to ``create_bidirectional_mask``: no mask at all, for eager and
sdpa alike (both measured equal to an all-zero 4D mask). So the export writes
``is_causal: false`` exactly when some slot lets a query see a later key (min_pairwise's
unmasked heads: token t reads every s), and otherwise stays a plain causal GPT-2 (its penalties
then cover everything causality would not).

**Construction.** The length is fixed at T (the penalties are functions of the positions, and
a mask's ``last`` and the readout's position move with the length; such an export reads inputs
of exactly T tokens). The residual gets N = T + 2 more coordinates, a one-hot of the position
written by ``wpe`` (the sink's included: its compiled coordinates stay 0, so its value is still
exactly 0). For each slot j let A_j (N × N) be the allowed pattern of :meth:`ExportIO.allowed`
(sink and readout rules included); its rows with a forbidden key fall into r_j classes of equal
rows. The last r_j dimensions of slot j's q and k are

    q_extra(p) = e_class(p)                       (W_Q reads the one-hot p with weight 1)
    k_extra(p')[c] = −P √head_dim · [class c forbids p']

so the score gains q_extra · k_extra / √head_dim = −P exactly on forbidden pairs and 0 on
allowed ones (the compiled part of q and k never uses those dimensions).

**When it is exact.** softmax subtracts the row's maximum m, an allowed score: a forbidden key
then has exp(s′ − P − m), exactly 0 once s′ − P − m < −745.2 (float64; −104 in float32, where
exp underflows to 0), and the allowed keys' weights are those of the masked softmax, bit for
bit, but for the rounding the penalty adds to allowed scores (below). With S a bound on every
|score| over the domain (:func:`score_bound`: interval arithmetic through the compiled model),
s′ − m ≤ 2S, so P = the smallest power of two ≥ 2 (2S + UNDERFLOW) is exact; the factor 2
covers the active LayerNorm's shrinking of q and k (by 1 − δ, δ ≤ 2.5e-5). An allowed score
meets the penalty weights only through LayerNorm's computed mean μ (|μ| ≲ u ‖h‖₁, zero in exact
arithmetic: every residual vector is balanced): that adds at most about N u P |μ| ≤ N u² P H₁
(H₁ the interval bound on ‖h‖₁, u the unit roundoff). The export is refused when this exceeds
the score's own rounding u S (N u P H₁ > S), or when S is not finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import StoredProgramError
from ..language.typed import Box
from ..pipeline.reading import program_of
from ..transformer.masks import HeadMask
from ..transformer.model import CompiledTransformer
from .inputs import allowed_keys

Tensor = torch.Tensor

#: exp(x) is exactly 0 in float64 for x below −745.13 (float32: −103.97)
UNDERFLOW = {torch.float64: 746.0, torch.float32: 104.0}


class PenaltyError(ValueError):
    """A self-contained export whose penalties cannot be exact (the reason and the bound)."""


@dataclass(frozen=True)
class Penalties:
    """The penalties of a self-contained export of length ``length``: P, the score bound S it is
    derived from, H₁, each real slot's forbidden classes (r_j, N) and each position's class per
    slot (−1: a row with no forbidden key), and whether any slot reads a later key."""

    length: int
    penalty: float
    score_bound: float
    norm_bound: float
    forbidden: tuple[Tensor, ...]
    classes: tuple[Tensor, ...]
    bidirectional: bool
    underflow: float  # UNDERFLOW of the export's dtype: exp(−underflow) rounds to 0 there

    @property
    def positions(self) -> int:
        """N = T + 2 one-hot coordinates."""
        return self.length + 2

    @property
    def dims(self) -> tuple[int, ...]:
        """r_j: the extra q/k dimensions of each real slot."""
        return tuple(int(f.shape[0]) for f in self.forbidden)

    def json(self) -> dict[str, object]:
        return {"length": self.length, "penalty": self.penalty, "score_bound": self.score_bound,
                "norm_bound": self.norm_bound, "dims": list(self.dims), "is_causal": not self.bidirectional,
                "underflow": self.underflow}


def input_interval(model: CompiledTransformer) -> tuple[Tensor, Tensor]:
    """(low, high) of one token's x over the program's domain, (d,) each (a ball in its box)."""
    domain = program_of(model).domain
    low, high = (domain.low, domain.high) if isinstance(domain, Box) else (-domain.radius, domain.radius)
    return torch.full((model.d,), float(low), dtype=torch.float64), torch.full((model.d,), float(high),
                                                                                 dtype=torch.float64)


def affine(low: Tensor, high: Tensor, weight: Tensor, bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The interval of x W + b for x in [low, high] (rows (R, C) @ (C, K); W dense or sparse COO)."""
    w = weight.detach().to(torch.float64)
    centre, radius = (low + high) / 2, (high - low) / 2
    mid, spread = centre @ w, radius @ w.abs()  # (R, K)
    if bias is not None:
        mid = mid + bias.detach().to(torch.float64).to_dense()
    return mid - spread, mid + spread


def relu_interval(low: Tensor, high: Tensor, w_in: Tensor, b_in: Tensor, w_out: Tensor) -> tuple[Tensor, Tensor]:
    """The interval of relu(x W_in + b_in) W_out."""
    pre_low, pre_high = affine(low, high, w_in, b_in)
    return affine(pre_low.clamp_min(0), pre_high.clamp_min(0), w_out)


def largest(low: Tensor, high: Tensor) -> Tensor:
    return torch.maximum(low.abs(), high.abs())


def embedding_interval(model: CompiledTransformer) -> tuple[Tensor, Tensor]:
    """(low, high) of the embedded stream, (T+1, D): tokens (affine in x, the ReLU block through its
    pre-activation interval) then the readout's cls, plus W_pos."""
    e, length = model.embed, model.T
    x_low, x_high = input_interval(model)
    one = torch.ones(1, dtype=torch.float64)
    xe_low, xe_high = torch.cat([x_low, one])[None], torch.cat([x_high, one])[None]  # (1, d+1)
    low, high = affine(xe_low, xe_high, e.W_E)  # (1, D)
    if model.d_mlp_embedding:
        add_low, add_high = relu_interval(xe_low, xe_high, e.W_E1, e.b_E1, e.W_E2)
        low, high = low + add_low, high + add_high
    cls = e.cls.detach().to(torch.float64)[None]
    pos = model.pos_embed.W_pos.detach().to(torch.float64)[:length + 1]  # (T+1, D)
    return torch.cat([low.expand(length, -1), cls]) + pos, torch.cat([high.expand(length, -1), cls]) + pos


def attention_interval(attn: Any, low: Tensor, high: Tensor) -> tuple[float, Tensor, Tensor]:
    """(the largest |β q·k| of the layer's heads, and the interval of h + Σ_h z_h W_O[h]) for h in
    [low, high] (T+1, D): z_h lies in the hull of the values over every row and 0."""
    scores, out_low, out_high = 0.0, low.clone(), high.clone()
    for i in range(int(attn.W_Q.shape[0])):
        q = largest(*affine(low, high, attn.W_Q[i]))  # (T+1, E)
        k = largest(*affine(low, high, attn.W_K[i]))
        scores = max(scores, abs(float(attn.beta[i])) * float((q @ k.T).max()))
        v_low, v_high = affine(low, high, attn.W_V[i])  # (T+1, V)
        z_low, z_high = v_low.min(0).values.clamp_max(0)[None], v_high.max(0).values.clamp_min(0)[None]
        add_low, add_high = affine(z_low, z_high, attn.W_O[i])
        out_low, out_high = out_low + add_low, out_high + add_high
    return scores, out_low, out_high


def score_bound(model: CompiledTransformer) -> tuple[float, float]:
    """(S, H₁): a bound on every head's |β q·k| (any query row, any key row, readout included)
    and on ‖h‖₁ at every layer input, over the domain, by interval arithmetic: the embedding is
    affine in x (:func:`embedding_interval`), a head's output lies in the hull of its values and
    0 (:func:`attention_interval`), FFNs through their pre-activation intervals, residual
    additions add intervals."""
    with torch.no_grad():
        low, high = embedding_interval(model)
        scores, norms = 0.0, float(largest(low, high).sum(-1).max())
        for block in model.blocks:
            layer_scores, low, high = attention_interval(block.attn, low, high)
            scores = max(scores, layer_scores)
            norms = max(norms, float(largest(low, high).sum(-1).max()))
            m = block.mlp
            add_low, add_high = relu_interval(low, high, m.W_in, m.b_in, m.W_out)
            bias = m.b_out.detach().to(torch.float64).to_dense()
            low, high = low + add_low + bias, high + add_high + bias
            norms = max(norms, float(largest(low, high).sum(-1).max()))
    return scores, norms


def forbidden_classes(slot_masks: tuple[HeadMask, ...], length: int) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """(each slot's distinct forbidden rows (r_j, N) bool, each position's class (N,), −1 for a row
    that forbids nothing)."""
    allowed = allowed_keys(slot_masks, length)  # (H, N, N)
    forbidden, classes = [], []
    for pattern in ~allowed:
        rows = pattern.any(-1)  # (N,)
        distinct, inverse = torch.unique(pattern[rows], dim=0, return_inverse=True)
        cls = torch.full((pattern.shape[0],), -1, dtype=torch.long)
        cls[rows] = inverse
        forbidden.append(distinct)
        classes.append(cls)
    return tuple(forbidden), tuple(classes)


def reads_later_keys(slot_masks: tuple[HeadMask, ...], length: int) -> bool:
    """Whether some slot lets a query p see a key p' > p (which a causal GPT-2 would hide)."""
    allowed = allowed_keys(slot_masks, length)  # (H, N, N)
    return bool(allowed.triu(diagonal=1).any())


def plan_penalties(model: CompiledTransformer, slot_masks: tuple[HeadMask, ...], dtype: torch.dtype) -> Penalties:
    """The penalties of ``model``'s self-contained export in ``dtype`` (module docstring), or
    PenaltyError with the bound that fails."""
    length = model.T
    try:
        scores, norms = score_bound(model)
    except StoredProgramError as error:
        raise PenaltyError(f"--self-contained needs the model's program, whose domain bounds the scores ({error})") \
            from None
    if not math.isfinite(scores) or not math.isfinite(norms):
        raise PenaltyError(f"--self-contained: the interval bound on the attention scores is not finite "
                           f"(S = {scores:g}), so no penalty is known to be exact")
    penalty = 2.0 ** math.ceil(math.log2(2 * (2 * scores + UNDERFLOW[dtype])))
    forbidden, classes = forbidden_classes(slot_masks, length)
    unit = torch.finfo(dtype).eps / 2
    positions = length + 2
    if positions * unit * penalty * norms > max(scores, 1.0):
        raise PenaltyError(
            f"--self-contained: the penalty P = {penalty:g} (from the score bound S = {scores:.4g}) would move allowed "
            f"scores by up to N u² P H₁ = {positions * unit**2 * penalty * norms:.3g}, more than their own rounding "
            f"u S = {unit * max(scores, 1.0):.3g} in {str(dtype).removeprefix('torch.')} (N = {positions}, ‖h‖₁ ≤ "
            f"{norms:.4g}); export in float64 or without --self-contained")
    return Penalties(length=length, penalty=penalty, score_bound=scores, norm_bound=norms, forbidden=forbidden,
                     classes=classes, bidirectional=reads_later_keys(slot_masks, length), underflow=UNDERFLOW[dtype])
