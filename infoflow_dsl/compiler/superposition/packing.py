"""Packed numbers: several numbers of a token model in ONE residual direction at one depth, read
by step tables (the rewrite: :mod:`.tables`).

The margin argument of :mod:`.layout` (docs/superposition.md: Gershgorin) covers *linear*
readers: a number read linearly passes on whatever else shares its direction. But every number
of a token program takes finitely many values (:mod:`.values`), and an FFN reads through ReLUs.
Numbers n_1 .. n_k whose joint values J are known share one direction d:

    v = Σ_i K_i·n_i,   K chosen as a mixed-radix numeral over the members' values:
    K_0 = 1/δ_0,  K_j = (1 + Σ_{i<j} K_i·span_i) / δ_j

(δ_i the least gap between two values of n_i, span_i = max − min). Then any two joint values
that differ have v's at least 1 apart, and so does every partial sum Σ_{i∈P} K_i·n_i (the most
significant differing digit outweighs all below it): the **gap** is 1. A reader at stage s sees
the members **present** there (written before s, not yet erased). Where one is present, every
reader reads it linearly (row_d = row_i / K_i: exact). Where two or more are, every reader must
be an FFN block whose units read present members only (and ``one``): the block is rebuilt as a
**step table** of v over the sorted values v_0 < .. < v_m of Σ_{i∈P} K_i·n_i on J,

    out(v) = out(v_0) + Σ_k (out(v_k) − out(v_{k−1}))·[v ≥ v_k]

each step robust (relu ramps over [v_{k−1} + 1/4, v_k − 1/4], the lowering's ``ffn.step_units``),
out(v_k) the plain block's output on that joint value computed exactly (rationals). A head or the
unembedding reading a present member where another is present passes interference on, so such a
pack is refused. A member whose last read is past is **erased** by the table of the FFN at its
lifetime's end (the table adds −K_i·n_i) when d is read again later.

**Certificate.** v is off its value by at most err_v = Σ_{i∈P} K_i·err_i (the writers' errors:
the heads' tails and rounding) plus the rounding of the sum (2ϱ·(2L + 2)·Σ K_i·max|n_i|); the
table is exact when err_v < 1/4 (a quarter of the gap), at every read. Its own output is off by
its rounding ρ (the lowering's rule: 2ϱ·Σ_u |c_u|·reach_u), which is admitted where it is at most
the plain block's stated error (the plain circuit's bound then holds as it was), or, for an
output only the unembedding reads, within the a-priori bound's slack ε − bound.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy
import torch

from ...transformer.card import ModelCard
from ..compress import drop_unread_writes, ffn_block, is_ffn_stage, lifetimes, stage_map
from .values import CAP, FLOAT32_ROUNDOFF, Row, Source, error_of, joint, sources, until_of

Tensor = torch.Tensor

#: float32's unit roundoff: a packed model is certified for float32 and so for float64
UNIT_ROUNDOFF = FLOAT32_ROUNDOFF
#: the most units a pack's tables may add
UNIT_CAP = 4096


@dataclass(frozen=True)
class Pack:
    """Members (residual indices, least significant digit first) sharing direction ``direction``
    with scales ``scales``; ``rows`` their joint values (members' order); member i written at
    ``written[i]``, erased at ``ends[i]`` (an FFN stage; inf: never), read at ``reads[i]``, its
    values ``rows`` seen by reads up to stage ``until[i]`` (a sum folded onto it later: a
    linear read still passes on what its direction holds, a table may not be built on it)."""

    members: tuple[int, ...]
    scales: tuple[Fraction, ...]
    rows: frozenset[Row]
    written: tuple[int, ...]
    ends: tuple[float, ...]
    reads: tuple[tuple[int, ...], ...]
    errors: tuple[float, ...]
    until: tuple[float, ...] = ()

    @property
    def direction(self) -> int:
        return min(self.members)

    def present(self, stage: int) -> tuple[int, ...]:
        """Positions (in ``members``) of the members a reader at ``stage`` sees."""
        return tuple(k for k in range(len(self.members)) if self.written[k] < stage <= self.ends[k])

    def erased_at(self, stage: int) -> tuple[int, ...]:
        """Members the FFN at ``stage`` erases: their lifetime ends there and d is read later."""
        last = max(max(r, default=-1) for r in self.reads)
        return tuple(k for k in range(len(self.members)) if self.ends[k] == stage and last > stage)

    def values(self, positions: tuple[int, ...]) -> dict[Fraction, Row]:
        """{v: the joint value of the members at ``positions``}: v = Σ K_i·n_i over them."""
        found: dict[Fraction, Row] = {}
        for row in self.rows:
            part = tuple(row[k] for k in positions)
            v = sum((self.scales[k] * row[k] for k in positions), Fraction(0))
            assert found.setdefault(v, part) == part, "a pack's scales must separate its values"
        return found

    def read_error(self, positions: tuple[int, ...], layers: int, roundoff: float = UNIT_ROUNDOFF) -> float:
        """err_v at a read of the members at ``positions`` (module docstring)."""
        size = sum(float(self.scales[k]) * max(abs(float(r[k])) for r in self.rows) for k in positions)
        return sum(float(self.scales[k]) * self.errors[k] for k in positions) + 2 * roundoff * (2 * layers + 2) * size

    def stages(self) -> list[int]:
        """Every stage that reads a member or erases one, in order."""
        found = {s for r in self.reads for s in r} | {int(e) for k, e in enumerate(self.ends)
                                                      if e != math.inf and self.erased_at(int(e))}
        return sorted(found)


def radix(rows: frozenset[Row], order: tuple[int, ...]) -> tuple[Fraction, ...]:
    """The mixed-radix scales of the digits in ``order`` (least significant first): gap ≥ 1 on
    every partial sum."""
    found: dict[int, Fraction] = {}
    below = Fraction(0)
    for k in order:
        values = sorted({r[k] for r in rows})
        gaps = [b - a for a, b in itertools.pairwise(values)]
        delta = min(gaps, default=Fraction(1))
        found[k] = (1 + below) / delta
        below += found[k] * (values[-1] - values[0])
    return tuple(found[k] for k in range(len(order)))


def gap(rows: frozenset[Row], scales: tuple[Fraction, ...], positions: tuple[int, ...]) -> Fraction:
    """The least distance between two values of Σ_{i∈positions} K_i·n_i whose joint values
    differ (0: not injective); 1 when there is one value."""
    found: dict[Fraction, Row] = {}
    for row in rows:
        part = tuple(row[k] for k in positions)
        v = sum((scales[k] * row[k] for k in positions), Fraction(0))
        if found.setdefault(v, part) != part:
            return Fraction(0)
    ordered = sorted(found)
    return min((b - a for a, b in itertools.pairwise(ordered)), default=Fraction(1))


@functools.lru_cache(maxsize=256)
def _ratios(radix: Fraction, budget: int) -> tuple[Fraction, ...]:
    """Candidate scale ratios up to ``radix``: every p/q with q ≤ 16 where they are at most
    ``budget``, else ``budget`` points of a geometric grid from 1/16, each rounded to sixteenths."""
    top = float(radix)
    if top * 136 <= budget:
        found = {(p / q, p, q) for q in range(1, 17) for p in range(1, int(top * q) + 1)}
    else:
        found = {(round(float(x) * 16) / 16, round(float(x) * 16), 16) for x in numpy.geomspace(1 / 16, top, budget)
                 if 1 <= round(float(x) * 16) < top * 16}
    unique = {value: Fraction(p, q) for value, p, q in sorted(found, reverse=True)}
    return (*(unique[v] for v in sorted(unique) if unique[v] < radix), radix)


def scales(rows: frozenset[Row], order: tuple[int, ...], needed: list[tuple[int, ...]]) -> tuple[Fraction, ...]:
    """Scales of the digits in ``order``, each next digit's ratio to the first chosen among
    rationals up to its mixed-radix value for the least dynamic range (span / gap) of the sum so
    far (numpy search, checked exactly); then normalised to gap 1 over ``needed`` (the present
    sets the tables read) and the whole; the mixed radix where that fails."""
    mixed = radix(rows, order)
    data = numpy.array([[float(x) for x in r] for r in rows])
    chosen: dict[int, Fraction] = {order[0]: Fraction(1) / _delta(rows, order[0])}
    for k in order[1:]:
        lower = numpy.zeros(len(rows))
        for i in chosen:
            lower = lower + data[:, i] * float(chosen[i])
        distinct = len({tuple(r) for r in data[:, [*chosen, k]].tolist()})
        ratios = _ratios(mixed[k] / (mixed[order[0]] / chosen[order[0]]), min(1000, max(50, 1_000_000 // len(rows))))
        chosen[k] = _least_spread(lower, data[:, k], ratios, distinct)
    found = tuple(chosen[k] for k in range(len(order)))
    least = min(gap(rows, found, p) for p in [*needed, tuple(range(len(order)))])
    if least <= 0:
        least = min(gap(rows, mixed, p) for p in [*needed, tuple(range(len(order)))])
        return tuple(k / least for k in mixed)
    return tuple(k / least for k in found)


def _least_spread(lower: numpy.ndarray, digit: numpy.ndarray, ratios: tuple[Fraction, ...], distinct: int) -> Fraction:
    """The ratio whose lower + ratio·digit separates the ``distinct`` joint values with the
    least span / gap (the last ratio, the mixed radix, where none does in floats)."""
    v = numpy.sort(lower[None, :] + numpy.array([float(r) for r in ratios])[:, None] * digit[None, :], axis=1)
    step = numpy.diff(v, axis=1)
    tolerance = 1e-9 * (numpy.abs(v).max(axis=1, keepdims=True) + 1)
    apart = step > tolerance
    least = numpy.where(apart, step, numpy.inf).min(axis=1) if step.shape[1] else numpy.ones(len(ratios))
    spread = (v[:, -1] - v[:, 0]) / least
    spread[apart.sum(axis=1) < distinct - 1] = numpy.inf
    best = int(numpy.argmin(spread))
    return ratios[best] if numpy.isfinite(spread[best]) else ratios[-1]


def _delta(rows: frozenset[Row], k: int) -> Fraction:
    values = sorted({r[k] for r in rows})
    return min((b - a for a, b in itertools.pairwise(values)), default=Fraction(1))


@dataclass(frozen=True)
class Plain:
    """What packing reads of the plain model: the value sources, each direction's stages of
    writes and reads and its lifetime's end (tight lifetimes), the layer count, ``one``."""

    sources: tuple[Source, ...]
    writes: tuple[tuple[int, ...], ...]
    reads: tuple[tuple[int, ...], ...]
    ends: dict[int, float]
    layers: int
    one: int | None
    #: the plain units' outputs on joint values, shared by the packs tried (:func:`.tables.outputs`)
    evaluations: dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)


def plain(tensors: dict[str, Tensor], config: ModelCard) -> Plain:
    labels, layers = list(config.labels), len(config.layers)
    tight = dict(tensors)
    drop_unread_writes(tight, len(labels), layers)
    writes, reads = stage_map(tight, len(labels), layers)
    ends = {f.index: f.end for f in lifetimes(tight, labels, layers)}
    one = labels.index("one") if "one" in labels else None
    return Plain(tuple(sources(tensors, config)), tuple(tuple(w) for w in writes), tuple(tuple(r) for r in reads),
                 ends, layers, one)


def candidates(model: Plain) -> list[int]:
    """Directions a pack may hold: of known values (up to some stage), read after their first write."""
    known = {m for s in model.sources for m in s.members}
    return sorted(i for i in known if i != model.one and i in model.ends
                  and any(r > model.writes[i][0] for r in model.reads[i]))


def build(model: Plain, members: tuple[int, ...], order: tuple[int, ...], searched: bool = True,
          values: frozenset[Row] | None = None) -> Pack | None:
    """The pack of ``members`` with digits in ``order`` (positions in ``members``), its scales
    searched (:func:`scales`) or (not ``searched``) the mixed radix; None where their joint
    values are unknown or too many."""
    rows = joint(list(model.sources), members) if values is None else values
    if rows is None or len(rows) > CAP:
        return None
    ordered = tuple(members[k] for k in order)
    rows = frozenset(tuple(r[k] for k in order) for r in rows)
    written = tuple(model.writes[m][0] for m in ordered)
    ends = tuple(model.ends[m] for m in ordered)
    reads = tuple(tuple(s for s in model.reads[m] if s > model.writes[m][0]) for m in ordered)
    draft = Pack(ordered, tuple(Fraction(1) for _ in ordered), rows, written, ends, reads,
                 tuple(error_of(list(model.sources), m) for m in ordered),
                 tuple(until_of(list(model.sources), m) for m in ordered))
    needed = sorted({draft.present(s) for s in draft.stages() if len(draft.present(s)) >= 1})
    digits = tuple(range(len(order)))
    if not searched:
        mixed = radix(rows, digits)
        least = min(gap(rows, mixed, p) for p in [*needed, digits])
        return dataclasses.replace(draft, scales=tuple(k / least for k in mixed))
    return dataclasses.replace(draft, scales=scales(rows, digits, needed))


def readers_allow(pack: Pack, tensors: dict[str, Tensor], model: Plain) -> bool:
    """Every read where two or more members are present is an FFN's, whose units reading them
    read nothing else (but ``one``), and the present members' values are seen there (``until``)."""
    for stage in pack.stages():
        present = pack.present(stage)
        if len(present) < 2 and not pack.erased_at(stage):
            continue
        if any(stage > pack.until[k] for k in present):
            return False
        read = [k for k in present if stage in pack.reads[k]]
        if stage % 2 == 1 and read:
            return False
        if stage % 2 == 1:
            continue
        if not is_ffn_stage(stage) or f"blocks.{ffn_block(stage)}.mlp.W_in" not in tensors:
            return False  # no FFN there (the embedding's stage) to rebuild as a table
        w_in = tensors[f"blocks.{ffn_block(stage)}.mlp.W_in"]
        rows = [pack.members[k] for k in present]
        units = w_in[rows].ne(0).any(dim=0)
        allowed = torch.zeros(w_in.shape[0], dtype=torch.bool)
        allowed[rows] = True
        if model.one is not None:
            allowed[model.one] = True
        allowed[[m for m in pack.members]] = True  # an absent member's row reads 0 there
        if bool((w_in[:, units].ne(0) & ~allowed[:, None]).any()):
            return False
    return True


def peak(model: Plain, size: int, packs: list[tuple[int, ...]]) -> tuple[int, int]:
    """(the most directions alive at one stage, how many stages reach it) with every pack one
    direction alive from its first member's write to its last one's end."""
    spans: list[tuple[float, float]] = []
    packed = {m for p in packs for m in p}
    for i in range(size):
        if i in model.ends and i not in packed:
            spans.append((min(model.writes[i], default=0), model.ends[i]))
    for p in packs:
        spans.append((min(model.writes[m][0] for m in p), max(model.ends[m] for m in p)))
    counts = [sum(1 for a, b in spans if a <= s < b) for s in range(2 * model.layers + 2)]
    top = max(counts, default=0)
    return top, counts.count(top)
