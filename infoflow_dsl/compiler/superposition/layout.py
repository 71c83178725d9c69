"""Where each categorical feature lives in a superposed residual, and the certificate.

**Layout.** The residual is three blocks: the plain model's other directions (numbers: each its
own coordinate, later shared over the depth by :mod:`~infoflow_dsl.compiler.compress`),
the **clean slots**, and the **storage**: d_s coordinates where each stored categorical feature
f is the vector value_f · u_f (u_f a column of :func:`~.codes.code`). Reads are grouped in
**windows**: window w holds the reads at stages 2w + 1 and 2w + 2 (layer w's heads and FFN);
window L the unembedding's (2L + 1).

**Readers.** Every read of a categorical feature goes through a reader that rejects the
interference of the others:

- a **clean-up** (two ReLU units in the FFN at stage 2w, before window w) reads
  r = <u_f, h> and writes [relu((r − m)/(1 − 2m)) − relu((r − 1 + m)/(1 − 2m))] into f's clean
  slot of window w: exactly 0 for r ≤ m, exactly 1 for r ≥ 1 − m. Heads' queries and keys,
  uniform heads' values, FFN units and numeric outputs read the slot, which is the exact value.
  Window 0's slots are written by the embedding itself (exact), a head's output read by the
  FFN right after it is written by the head into a slot as well, and so is an FFN's output read
  in the next window (by its writer: a clean-up in the same FFN would read it before it exists);
  the slots of window w are set back to 0 by erasers (relu(h) − relu(−h), written negated) in the FFN at stage 2w + 2;
- a **direct value read**: a sharp head copying one categorical group (``categorical.py``)
  whose outputs nothing reads at the next stage reads its values from storage, r = <u_d, h>;
  its outputs go to storage, carrying r's interference as error to their own clean-up;
- a **direct score read**: a token-output model whose score k is one categorical feature
  reads it from storage; the answer is right while every score is within m of 0 or 1 (m < 1/2).

**The bound.** At a storage read of f at stage s, every stored group G written before s adds
Σ_{g∈G, g≠f} <u_f, u_g>·value_g, at most μ_G(f)·M_G in size, with μ_G(f) = max_{g∈G, g≠f}
|<u_f, u_g>| and M_G the group's mass bound (1 for the embedding's and for heads reading exact
values; M_{G_d} + Σ_j I_{d_j} for a direct value read of group G_d). So

    I_f(s) = Σ_G μ_G(f) · M_G,   and the read is exact (clean-up) / right (scores) when
    err_f + I_f(s) < m,

with err_f f's own distance from 0 or 1 (0 for the embedding's, the softmax tail τ_h for a head
reading exact values, 2τ_h + (1 + τ_h)·max_j (err_{d_j} + I_{d_j}) for a direct value read).
A clean-up's output is then exactly 0 or 1, so nothing downstream of it sees interference.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ...transformer.card import ModelCard
from .categorical import Group, Usage

Tensor = torch.Tensor

#: the clean-up's margin m: thresholds at m and 1 − m (slope 1/(1 − 2m) = 10)
MARGIN = 0.45
#: what the bound keeps free of the margin for the dtype's rounding of r = <u_f, h>
ROUNDING_SLACK = 1e-4


@dataclass(frozen=True)
class Layout:
    """Which reads go through storage and which through clean slots (module docstring).

    ``copies[w]`` lists the features with a clean slot in window w (slot k = position k);
    ``providers[w][f]`` is ``writer`` (the embedding or the head writes the slot) or
    ``cleaner`` (a clean-up at stage 2w); ``stored`` are the features in storage, in the
    order of the code's columns; ``direct_heads`` the (layer, head) reading values from
    storage; ``direct_scores`` whether the unembedding reads its scores from storage."""

    usage: Usage
    copies: tuple[tuple[int, ...], ...]
    providers: tuple[dict[int, str], ...]
    stored: tuple[int, ...]
    direct_heads: frozenset[tuple[int, int]]
    direct_scores: frozenset[int]

    @property
    def slots(self) -> int:
        return max((len(c) for c in self.copies), default=0)

    def slot(self, window: int, feature: int) -> int:
        return self.copies[window].index(feature)


@dataclass(frozen=True)
class StorageRead:
    """A thresholded read of ``feature`` from storage at ``stage`` (``clean-up`` or ``score``):
    its interference bound and the feature's own error, against the margin."""

    feature: int
    stage: int
    kind: str
    interference: float
    error: float

    @property
    def total(self) -> float:
        return self.interference + self.error


def window_of(stage: int) -> int:
    return (stage - 1) // 2


def _direct_heads(usage: Usage) -> frozenset[tuple[int, int]]:
    """Sharp copying heads whose outputs no reader at the next stage (their FFN) reads."""
    found = set()
    for group in usage.groups:
        if group.head >= 0 and not any(2 * group.layer + 2 in usage.reads[o] for o in group.members):
            found.add((group.layer, group.head))
    return frozenset(found)


def _direct_scores(tensors: dict[str, Tensor], config: ModelCard, categorical: set[int]) -> frozenset[int]:
    """The categorical features the unembedding reads as a whole score (a token-output model's
    column k = 1·f, nothing else, no bias)."""
    if not config.token_output:
        return frozenset()
    w_u, b_u = tensors["unembed.W_U"], tensors["unembed.b_U"]
    found = set()
    for k in range(w_u.shape[1]):
        rows = torch.nonzero(w_u[:, k]).flatten().tolist()
        if len(rows) == 1 and rows[0] in categorical and float(w_u[rows[0], k]) == 1.0 and float(b_u[k]) == 0.0 \
                and int(w_u[rows[0]].ne(0).sum()) == 1:
            found.add(rows[0])
    return frozenset(found)


def _readers_at(tensors: dict[str, Tensor], stage: int, layers: int, feature: int,
                direct_heads: frozenset[tuple[int, int]], direct_scores: frozenset[int]) -> bool:
    """Whether a reader at ``stage`` other than a direct one reads ``feature``."""
    if stage == 2 * layers + 1:
        return feature not in direct_scores and bool(tensors["unembed.W_U"][feature].ne(0).any())
    layer = window_of(stage)
    if stage % 2 == 0:
        return bool(tensors[f"blocks.{layer}.mlp.W_in"][feature].ne(0).any())
    p = f"blocks.{layer}.attn."
    for head in range(tensors[p + "W_Q"].shape[0]):
        names = ("W_Q", "W_K") if (layer, head) in direct_heads else ("W_Q", "W_K", "W_V")
        if any(bool(tensors[p + n][head, feature].ne(0).any()) for n in names):
            return True
    return False


def layout(tensors: dict[str, Tensor], config: ModelCard, usage: Usage,
           plain: frozenset[Group] = frozenset()) -> Layout:
    """The plain model's :class:`Layout` (module docstring); the groups ``plain`` keep their own
    coordinates (not superposed: read exactly, as numbers are)."""
    usage = dataclasses.replace(usage, groups=tuple(g for g in usage.groups if g not in plain))
    layers = usage.layers
    groups = usage.group_of()
    direct_heads = _direct_heads(usage)
    direct_scores = _direct_scores(tensors, config, set(groups))
    copies: list[list[int]] = [[] for _ in range(layers + 1)]
    providers: list[dict[int, str]] = [{} for _ in range(layers + 1)]
    stored: set[int] = set(direct_scores)
    for group in usage.groups:
        if (group.layer, group.head) in direct_heads:
            stored |= set(group.reads) & set(groups)
    for f in sorted(groups):
        written = usage.first_write(f)
        for stage in usage.live_reads(f):
            w = window_of(stage)
            if f in providers[w] or not _readers_at(tensors, stage, layers, f, direct_heads, direct_scores):
                continue
            copies[w].append(f)
            by_writer = written in (2 * w, 2 * w + 1)  # the embedding / an FFN before window w, or its heads
            providers[w][f] = "writer" if by_writer else "cleaner"
            if not by_writer:
                stored.add(f)
    order = sorted(stored, key=lambda f: (groups[f].stage, usage.groups.index(groups[f]), f))
    return Layout(usage, tuple(tuple(c) for c in copies), tuple(providers), tuple(order), direct_heads,
                  direct_scores)


def certify(plan: Layout, u: Tensor) -> list[StorageRead]:
    """Every thresholded storage read of ``plan`` under the code ``u`` (d_s × stored), with its
    bound (module docstring), in stage order."""
    usage, groups = plan.usage, plan.usage.group_of()
    column = {f: k for k, f in enumerate(plan.stored)}
    gram = (u.T @ u).abs()  # (n, n): |<u_f, u_g>|
    error: dict[int, float] = {}
    mass: dict[Group, float] = {}

    def interference(f: int, stage: int) -> float:
        total = 0.0
        for group, m in mass.items():
            others = [column[g] for g in group.members if g in column and g != f]
            if group.stage < stage and others:
                total += float(gram[column[f], others].max()) * m
        return total

    for group in sorted(usage.groups, key=lambda g: g.stage):  # errors and masses in stage order
        source = groups.get(group.reads[0]) if group.reads else None
        if (group.layer, group.head) in plan.direct_heads and source is not None:
            read = [interference(d, group.stage) for d in group.reads]
            worst = max(error[d] + i for d, i in zip(group.reads, read, strict=True))
            for o in group.members:
                error[o] = 2 * group.tail + (1 + group.tail) * worst
            mass[group] = mass[source] + sum(read)
        else:
            for o in group.members:
                error[o] = group.tail
            mass[group] = 1.0
    reads = [StorageRead(f, 2 * w, "clean-up", interference(f, 2 * w), error[f])
             for w, chosen in enumerate(plan.providers) for f, how in chosen.items() if how == "cleaner"]
    final = 2 * usage.layers + 1
    reads += [StorageRead(f, final, "score", interference(f, final), error[f]) for f in sorted(plan.direct_scores)]
    return sorted(reads, key=lambda r: (r.stage, r.feature))


def holds(reads: list[StorageRead], margin: float = MARGIN) -> bool:
    """Whether every thresholded read's bound is below the margin, with the rounding's slack."""
    return all(r.total < margin - ROUNDING_SLACK for r in reads)


def read_pairs(plan: Layout, reads: list[StorageRead]) -> list[tuple[int, int, list[int]]]:
    """For :func:`~.codes.fitted`: (read, f's column, a co-alive group's other columns) for every
    thresholded read and direct value read and every stored group written before it."""
    usage = plan.usage
    column = {f: k for k, f in enumerate(plan.stored)}
    targets = [(r.feature, r.stage) for r in reads]
    for group in usage.groups:
        if (group.layer, group.head) in plan.direct_heads:
            targets += [(d, group.stage) for d in group.reads if d in column]
    pairs = []
    for read, (f, stage) in enumerate(targets):
        for group in usage.groups:
            others = [column[g] for g in group.members if g in column and g != f]
            if group.stage < stage and others:
                pairs.append((read, column[f], others))
    return pairs
