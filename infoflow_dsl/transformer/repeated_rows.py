"""Repeated rows: attention and pair reductions over the distinct rows of long sequences.

An input that repeats tokens (a discrete vocabulary, or the domain's corners: a box's corner
tokens take only 2^d values) gives a head many identical (k(s), v(s)) rows and a pair reduction
many identical tokens. Equal rows contribute equal terms, so with U distinct rows r_u of
multiplicities c_u the work is done on those U rows:

attention (inference, no mask)::

    z(t) = Σ_s e^{q'(t)·k(s) - m} v(s) / Σ_s e^{q'(t)·k(s) - m}
         = Σ_u c_u e^{q'(t)·k_u - m} v_u / Σ_u c_u e^{q'(t)·k_u - m},     m = max_u q'(t)·k_u

the same sums regrouped, (T'+1) × U scores instead of (T'+1) × T' (rounding apart: the terms
are added in another order); the reference's ``min``/``max`` over pairs (``fast_pairs``, no
position condition): min_{s,t} f(x(s), x(t)) = min_{u,w} f(x_u, x_w), the same values, exactly.

The fused attention kernel spends about 1 ns a score on a CPU (min_pairwise at T = 4096: 16 ms
an input); a corner input has 16 distinct rows in its first layer and 2 in its second (3 ms an
input in all). An input without repeats pays a sort of T'/8 fingerprints per head (below 3% of
its attention).

Finding the distinct rows: ``fingerprint = Σ_i r_i w_i`` with fixed pseudo-random weights w,
rows sorted by it, and a new group started wherever a row differs from the previous one in any
coordinate (an exact comparison). Equal rows have equal fingerprints, so they are adjacent
unless a different row with the same fingerprint sorts between them; that only splits a group
in two, which neither use minds (the sums and the min are still exact), so no collision can make
a result wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

Tensor = torch.Tensor

#: the shortest sequence in which repeated rows are looked for: below it the plain computation
#: is cheaper than the sort
MIN_LENGTH = 512
#: distinct rows are used when every sequence of the call has at most n / SPARSITY groups
SPARSITY = 16
FINGERPRINT_SEED = 0


@dataclass(frozen=True)
class DistinctRows:
    """The distinct rows of G sequences, padded to the most any sequence has: rows (G, U, W)
    (the padding repeats the sequence's first row, harmless to a min or max), counts (G, U)
    (their multiplicities; 0 on padding)."""

    rows: Tensor
    counts: Tensor


def distinct_rows(rows: Tensor) -> DistinctRows | None:
    """The distinct rows of each of G sequences, rows (G, n, W); None when n < MIN_LENGTH or some
    sequence has more than n / SPARSITY groups (the plain computation is then the cheaper). The
    first 2n / SPARSITY rows are looked at first: with more groups than that among them the
    answer is None without sorting the rest."""
    length = rows.shape[1]
    limit = length // SPARSITY
    if length < MIN_LENGTH or rows.numel() == 0:
        return None
    weights = torch.randn(rows.shape[-1], generator=torch.Generator().manual_seed(FINGERPRINT_SEED),
                          dtype=torch.float64).to(rows.device, rows.dtype)  # (W,) the fingerprint's
    if _last_group(_groups(rows[:, :2 * limit], weights)[1]) >= limit:
        return None
    rows, group = _groups(rows, weights)  # (G, n, W) sorted, (G, n)
    distinct = _last_group(group) + 1
    if distinct > limit:
        return None
    counts = rows.new_zeros(rows.shape[0], distinct).scatter_add_(1, group, rows.new_ones(group.shape))  # (G, U)
    # every row of a group is the same, so which one the scatter keeps does not matter
    kept = rows.new_zeros(rows.shape[0], distinct, rows.shape[-1]).scatter_(1, group[..., None].expand_as(rows), rows)
    return DistinctRows(torch.where(counts[..., None] > 0, kept, kept[:, :1]), counts)


def _groups(rows: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """(rows sorted by fingerprint Σ_i r_i w_i, each sorted row's group 0, 1, ...): rows (G, n, W),
    weights (W,) -> (G, n, W), (G, n); a group is a run of equal rows."""
    order = (rows * weights).sum(-1).argsort(dim=1, stable=True)  # (G, n)
    rows = rows.gather(1, order[..., None].expand_as(rows))  # (G, n, W)
    starts = torch.ones(rows.shape[:2], dtype=torch.bool, device=rows.device)  # (G, n)
    starts[:, 1:] = (rows[:, 1:] != rows[:, :-1]).any(dim=-1)
    return rows, starts.cumsum(dim=1) - 1


def _last_group(group: Tensor) -> int:
    """The largest group index of any sequence: group (G, n), n ≥ 1."""
    return int(group[:, -1].max())


def distinct_keys(scaled_q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> DistinctRows | None:
    """The distinct rows [k(s), v(s)] of every head, q' (B, H, N, E), k (B, H, T', E), v (B, H, T', V)
    -> rows (B·H, U, E+V), when attention may use them: no mask (a mask tells keys apart by
    their position) and nothing autograd must differentiate (training keeps the fused kernel
    and its backward); else None, as when there are too many (:func:`distinct_rows`)."""
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (scaled_q, k, v))
    if allowed is not None or needs_grad:
        return None
    batch, heads, length, width = k.shape
    return distinct_rows(torch.cat([k, v], dim=-1).reshape(batch * heads, length, width + v.shape[-1]))


def distinct_attention(scaled_q: Tensor, keys: DistinctRows) -> Tensor:
    """Σ_u c_u e^{s_u - m} v_u / Σ_u c_u e^{s_u - m}, s_u = q'·k_u: scaled_q (B, H, N, E) (β_h q,
    already scaled) and the heads' distinct [k, v] rows -> (B, H, N, V). Padding (c_u = 0) gets
    score -inf, so weight 0."""
    batch, heads, rows, width = scaled_q.shape
    k, v = keys.rows[..., :width], keys.rows[..., width:]  # (G, U, E), (G, U, V)
    scores = scaled_q.reshape(batch * heads, rows, width) @ k.transpose(1, 2)  # (G, N, U)
    scores = torch.where(keys.counts[:, None] > 0, scores, float("-inf"))
    weights = (scores - scores.amax(dim=-1, keepdim=True)).exp() * keys.counts[:, None]  # (G, N, U)
    z = (weights @ v) / weights.sum(dim=-1, keepdim=True)  # (G, N, V)
    return z.view(batch, heads, rows, -1)
