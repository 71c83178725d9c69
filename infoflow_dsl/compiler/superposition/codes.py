"""Nearly orthogonal directions for n features in d dimensions, deterministic.

The first min(n, d) features get the standard basis vectors e_1..e_d (orthogonal to each other);
every further feature gets, among a pool of seeded random sign vectors (entries ±1/√d, unit
length), the one whose largest |cosine| with the directions already chosen (the *coherence*
μ it adds) is smallest. The same (n, d) always gives the same matrix.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor

SEED = 53
POOL = 512


def sign_pool(d: int, count: int = POOL, seed: int = SEED) -> Tensor:
    """(d, count) float64: seeded random ±1/√d columns."""
    generator = torch.Generator().manual_seed(seed * 1009 + d)
    signs = torch.randint(0, 2, (d, count), generator=generator, dtype=torch.int64) * 2 - 1
    return signs.to(torch.float64) / d ** 0.5


def code(n: int, d: int) -> Tensor:
    """(d, n) float64 unit columns: the module docstring's construction."""
    chosen = torch.zeros(d, n, dtype=torch.float64)
    for k in range(min(n, d)):
        chosen[k, k] = 1.0
    if n <= d:
        return chosen
    pool = sign_pool(d)
    structured = hadamard(d)
    if structured is not None:  # orthogonal to each other, 1/√d to the standard basis: taken first
        pool = torch.cat([structured, pool], dim=1)
    taken = torch.zeros(pool.shape[1], dtype=torch.bool)
    for k in range(d, n):
        worst = (chosen[:, :k].T @ pool).abs().amax(dim=0)  # (count,): each candidate's coherence
        worst[taken] = float("inf")
        best = int(torch.argmin(worst))
        taken[best] = True
        chosen[:, k] = pool[:, best]
    return chosen


def coherence(u: Tensor) -> float:
    """max over i ≠ j of |<u_i, u_j>| for unit columns u (0 for fewer than two)."""
    if u.shape[1] < 2:
        return 0.0
    gram = (u.T @ u).abs()
    gram.fill_diagonal_(0.0)
    return float(gram.max())


def hadamard(d: int) -> Tensor | None:
    """(d, d) Sylvester Hadamard matrix over √d (orthonormal columns, ±1/√d), or None when d is
    not a power of 2."""
    if d < 1 or d & (d - 1):
        return None
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / d ** 0.5


Pairs = list[tuple[int, int, list[int]]]


def fitted(start: Tensor, pairs: Pairs, steps: int = 300, seed: int = SEED) -> Tensor:
    """``start`` (d × n unit columns) moved by Adam to lower the largest interference sum
    Σ_G max_{g∈G} |<u_f, u_g>| of a read: ``pairs`` holds (read, f, the columns of one group
    co-alive with that read), columns kept at unit length; the best iterate by that objective.
    Deterministic (CPU, float64, fixed steps)."""
    if not pairs:
        return start
    torch.manual_seed(seed)
    terms = _Terms(pairs)
    u = start.clone().requires_grad_(True)
    optimiser = torch.optim.Adam([u], lr=0.02)
    best, best_value = start.clone(), terms.value(start)
    for _ in range(steps):
        loss = terms.value(u / u.norm(dim=0, keepdim=True), smooth=True)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        with torch.no_grad():
            current = u / u.norm(dim=0, keepdim=True)
            value = terms.value(current)
            if float(value) < float(best_value):
                best, best_value = current.clone(), value
    return best.detach()


class _Terms:
    """The pairs as index tensors: per pair its f, its group's columns (padded), its read."""

    SHARPNESS = 50.0

    def __init__(self, pairs: Pairs) -> None:
        width = max(len(others) for _, _, others in pairs)
        self.f = torch.tensor([f for _, f, _ in pairs])
        self.others = torch.tensor([others + [others[0]] * (width - len(others)) for _, _, others in pairs])
        reads = sorted({r for r, _, _ in pairs})
        self.read = torch.tensor([reads.index(r) for r, _, _ in pairs])
        self.count = len(reads)

    def value(self, u: Tensor, smooth: bool = False) -> Tensor:
        """The largest per-read sum over its groups of the largest overlap (``smooth``: soft maxima)."""
        overlaps = torch.einsum("dp,dpk->pk", u[:, self.f], u[:, self.others]).abs()  # (pairs, width)
        k = self.SHARPNESS
        part = torch.logsumexp(overlaps * k, dim=1) / k if smooth else overlaps.amax(dim=1)
        totals = torch.zeros(self.count, dtype=u.dtype).index_add(0, self.read, part)
        return torch.logsumexp(totals * k, dim=0) / k if smooth else totals.max()
