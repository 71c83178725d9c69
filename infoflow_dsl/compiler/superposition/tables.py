"""The rewrite of :mod:`.packing`: packs' members into one direction each, readers through it,
FFN blocks that read two or more present members rebuilt as step tables of v (math: there).

Writers (embedding, heads' W_O, FFNs' W_out and b_out) of member i write K_i times their column
into the pack's direction d; readers where one member is present read row_i / K_i from d; the
FFN units that read present members where several are lose those units, and the FFN gains, per
output direction, the table of the plain units' output on v (and the erasure −Σ K_i·n_i of the
members that end there). A table's constant out(v_0) goes to ``b_out``.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from ...transformer.card import BlockCard, ModelCard
from ..compress import ffn_block, is_ffn_stage, stage_tensors
from .packing import UNIT_ROUNDOFF, Pack
from .values import evaluated, unit_reads

Tensor = torch.Tensor

TABLE = "a step table of a packed direction"


@dataclass(frozen=True)
class Table:
    """The units of one output's table at one FFN: W_in's column entries on d, b_in, W_out's
    coefficient; ``constant`` into b_out; ``rounding`` its ρ."""

    output: int
    slopes: tuple[float, ...]
    biases: tuple[float, ...]
    coefficients: tuple[float, ...]
    constant: float
    rounding: float


def _step(lo: Fraction, hi: Fraction, delta: Fraction, grid: list[Fraction]) -> tuple[list[tuple[float, float, float]],
                                                                                          float]:
    """delta·[v ≥ hi] on the grid: robust ramp over [lo + g/4, hi − g/4], on the side whose
    values lie nearer it (:func:`~infoflow_dsl.compiler.tokens.ffn.threshold`): (units as
    (slope, bias, coefficient), constant)."""
    gap = hi - lo
    start, end = lo + gap / 4, hi - gap / 4
    width = end - start
    # the largest |v| over a sorted grid's suffix (v ≥ hi) or prefix (v ≤ lo) is at one of its ends
    up = max(abs(hi), abs(grid[-1])) + abs(hi)
    down = max(abs(grid[0]), abs(lo)) + abs(hi)
    d, w = float(delta), float(width)
    if up <= down:
        return [(1 / w, float(-start / width), d), (1 / w, float(-end / width), -d)], 0.0
    return [(-1 / w, float(end / width), -d), (-1 / w, float(start / width), d)], d


def rounding(grid: list[Fraction], units: list[tuple[float, float, float]], roundoff: float) -> float:
    """ρ: the lowering's rule 2ϱ·Σ_u |c_u|·reach_u, with reach_u = |slope_u·v| + |b_u| at each
    grid value v where u is active, the largest over the grid."""
    if not units:
        return 0.0
    v = torch.tensor([float(x) for x in grid], dtype=torch.float64)[:, None]
    slope, bias, coefficient = (torch.tensor(c, dtype=torch.float64) for c in zip(*units, strict=True))
    active = (v * slope + bias) > 0
    reach = ((v * slope).abs() + bias.abs()) * coefficient.abs() * active
    return float(2 * roundoff * reach.sum(dim=1).max())


def table(output: int, values: dict[Fraction, Fraction], roundoff: float = UNIT_ROUNDOFF) -> Table:
    """The step table of ``values`` ({v: out(v)}) into ``output``."""
    grid = sorted(values)
    units: list[tuple[float, float, float]] = []
    constant = float(values[grid[0]])
    for lo, hi in itertools.pairwise(grid):
        delta = values[hi] - values[lo]
        if delta:
            more, shift = _step(lo, hi, delta, grid)
            units += more
            constant += shift
    return Table(output, tuple(u[0] for u in units), tuple(u[1] for u in units), tuple(u[2] for u in units),
                 constant, rounding(grid, units, roundoff))


def _fractions(t: Tensor) -> list[Fraction]:
    return [Fraction(float(x)) for x in t.tolist()]


#: {(stage, units, members present, row): (written directions, their outputs)}: the plain units
#: on one joint value, which every order and scale of a pack's digits shares (:func:`outputs`)
Evaluations = dict[tuple[int, tuple[int, ...], tuple[int, ...], tuple[Fraction, ...]],
                   tuple[tuple[int, ...], tuple[Fraction, ...]]]


def outputs(pack: Pack, stage: int, tensors: dict[str, Tensor], units: list[int],
            one: int | None, cache: Evaluations | None = None) -> dict[int, dict[Fraction, Fraction]]:
    """{output direction: {v: the plain units' output there}} at ``stage`` over the present
    members' values, exactly; d's entry (the erasure) where members end there. ``cache``: the
    units' outputs on a joint value, kept across calls on the same tensors."""
    p = f"blocks.{ffn_block(stage)}.mlp."
    present = pack.present(stage)
    grid = pack.values(present)
    members = tuple(pack.members[k] for k in present)
    w_in, b_in, w_out = tensors[p + "W_in"].double(), tensors[p + "b_in"].double(), tensors[p + "W_out"].double()
    reads = unit_reads(w_in[list(members)][:, units])
    bias = _fractions(b_in[units] + (w_in[one, units] if one is not None else 0.0))
    written = tuple(sorted({o for u in units for o in torch.nonzero(w_out[u]).flatten().tolist()}))
    coefficient = [_fractions(w_out[units, o]) for o in written]
    cache = {} if cache is None else cache
    found: dict[int, dict[Fraction, Fraction]] = {o: {} for o in written}
    for v, row in grid.items():
        key = (stage, tuple(units), members, row)
        if key not in cache:
            cache[key] = (written, evaluated(row, reads, bias, coefficient))
        for o, out in zip(*cache[key], strict=True):
            found[o][v] = out
    erased, d = pack.erased_at(stage), pack.direction
    if d in found:  # a write to the member on d (a sum folded onto it): in v's units, beside the erasure
        scale = pack.scales[pack.members.index(d)]
        found[d] = {v: scale * out for v, out in found[d].items()}
    if erased:
        position = {k: present.index(k) for k in erased}
        found.setdefault(d, {v: Fraction(0) for v in grid})
        for v, row in grid.items():
            found[d][v] -= sum((pack.scales[k] * row[position[k]] for k in erased), Fraction(0))
    return found


def _write(tensors: dict[str, Tensor], packs: list[Pack]) -> None:
    """Every writer: member i's column times K_i into d."""
    for _, _, writers in stage_tensors(_layers(tensors)):
        for name in writers:
            t = tensors[name].clone()
            for pack in packs:
                column = sum(float(k) * t[..., m] for m, k in zip(pack.members, pack.scales, strict=True))
                t[..., list(pack.members)] = 0.0
                t[..., pack.direction] = column
            tensors[name] = t


def _layers(tensors: dict[str, Tensor]) -> int:
    return sum(1 for name in tensors if name.endswith(".mlp.W_in"))


def _read(tensors: dict[str, Tensor], packs: list[Pack], one: int | None) -> dict[int, dict[int, list[int]]]:
    """Every reader: where one member is present, row_i / K_i from d; where several are, the
    FFN units reading them are noted ({stage: {pack: units}}) for the tables. Rows of members
    absent at a stage (they read 0 there) are dropped."""
    replaced: dict[int, dict[int, list[int]]] = {}
    for stage, readers, _ in stage_tensors(_layers(tensors)):
        for name in readers:
            t = tensors[name].clone()
            for index, pack in enumerate(packs):
                present = pack.present(stage)
                if len(present) >= 2 and stage % 2 == 0:
                    rows = [pack.members[k] for k in present]
                    units = torch.nonzero(t[rows].ne(0).any(dim=0)).flatten().tolist()
                    replaced.setdefault(stage, {})[index] = units
                    row = torch.zeros_like(t[..., pack.direction, :])
                else:
                    row = sum((t[..., pack.members[k], :] / float(pack.scales[k]) for k in present),
                              torch.zeros_like(t[..., pack.direction, :]))
                t[..., list(pack.members), :] = 0.0
                t[..., pack.direction, :] = row
            tensors[name] = t
    return replaced


def rewrite(tensors: dict[str, Tensor], config: ModelCard, packs: list[Pack],
            one: int | None) -> tuple[dict[str, Tensor], ModelCard, list[dict[str, Any]]]:
    """(tensors, card, every table's record) with ``packs`` packed (module docstring)."""
    original = {n: t.double() for n, t in tensors.items()}
    out = dict(original)
    _write(out, packs)
    replaced = _read(out, packs, one)
    labels = config.labels
    records: list[dict[str, Any]] = []
    for stage in sorted({s for p in packs for s in p.stages() if is_ffn_stage(s)}):
        layer = ffn_block(stage)  # (a pack's attention reads are of one member alone: packing.readers_allow)
        removed: list[int] = []
        tables: list[tuple[Pack, Table]] = []
        for index, pack in enumerate(packs):
            units = replaced.get(stage, {}).get(index, [])
            if len(pack.present(stage)) < 2 and not pack.erased_at(stage):
                continue
            removed += units
            for output, values in outputs(pack, stage, original, units, one).items():
                tables.append((pack, table(output, values)))
        if not tables and not removed:
            continue
        named = _blocks_by_output(config, layer)
        config = _remove_units(out, config, layer, removed)
        for pack, built in tables:
            erases = built.output == pack.direction
            _add(out, pack.direction, layer, built, (built.output, 1.0) if erases else _route(packs, built.output))
            source = named.get(labels[built.output])
            what = "erases the members that end here" if built.output == pack.direction else \
                f"{source.computes if source else labels[built.output]}"
            members = " + ".join(labels[m] for m in pack.members)
            config = config.with_blocks(layer, BlockCard(
                name=f"table:{labels[built.output]}", computes=f"{TABLE} ({members}): {what}",
                units=len(built.slopes), error=built.rounding, output=labels[built.output]))
            records.append({"stage": stage, "output": labels[built.output], "units": len(built.slopes),
                            "rounding": built.rounding, "plain_error": source.error if source else 0.0,
                            "plain_units": source.units if source else 0})
    return out, config, records


def _blocks_by_output(config: ModelCard, layer: int) -> dict[str, BlockCard]:
    return {b.output: b for b in config.layers[layer].blocks}


def _remove_units(tensors: dict[str, Tensor], config: ModelCard, layer: int, units: list[int]) -> ModelCard:
    """Drop ``units`` of block ``layer``'s FFN; the card with its blocks' counts lowered with them."""
    if not units:
        return config
    p = f"blocks.{layer}.mlp."
    keep = torch.ones(tensors[p + "b_in"].shape[0], dtype=torch.bool)
    keep[units] = False
    tensors[p + "W_in"] = tensors[p + "W_in"][:, keep]
    tensors[p + "b_in"] = tensors[p + "b_in"][keep]
    tensors[p + "W_out"] = tensors[p + "W_out"][keep]
    blocks, start = [], 0
    for block in config.layers[layer].blocks:
        count = block.units
        left = int(keep[start:start + count].sum())
        start += count
        if left:
            blocks.append(dataclasses.replace(block, units=left))
    return config.with_layer(layer, mlp=tuple(blocks))


def _route(packs: list[Pack], column: int) -> tuple[int, float]:
    """Where a write to the plain model's ``column`` goes: K_i times into the direction of the
    pack that holds it as member i (a table's output that another pack holds), else itself."""
    for pack in packs:
        if column in pack.members:
            return pack.direction, float(pack.scales[pack.members.index(column)])
    return column, 1.0


def _add(tensors: dict[str, Tensor], direction: int, layer: int, built: Table, target: tuple[int, float]) -> None:
    """The table's units reading ``direction``, writing ``target`` = (column, scale)."""
    p = f"blocks.{layer}.mlp."
    (column, scale), count = target, len(built.slopes)
    size = tensors[p + "W_out"].shape[1]
    w_in = torch.zeros(size, count, dtype=torch.float64)
    w_in[direction] = torch.tensor(built.slopes, dtype=torch.float64)
    w_out = torch.zeros(count, size, dtype=torch.float64)
    w_out[:, column] = scale * torch.tensor(built.coefficients, dtype=torch.float64)
    tensors[p + "W_in"] = torch.cat([tensors[p + "W_in"], w_in], dim=1)
    tensors[p + "b_in"] = torch.cat([tensors[p + "b_in"], torch.tensor(built.biases, dtype=torch.float64)])
    tensors[p + "W_out"] = torch.cat([tensors[p + "W_out"], w_out])
    b_out = tensors[p + "b_out"].clone()
    b_out[column] += scale * built.constant
    tensors[p + "b_out"] = b_out


def member_value(pack: Pack, stage: int, member: int) -> dict[float, float]:
    """{v: member's value} over the present members' joint values at ``stage`` (the dictionary's
    decoding of a packed number)."""
    present = pack.present(stage)
    k = present.index(pack.members.index(member))
    return {float(v): float(row[k]) for v, row in pack.values(present).items()}


__all__ = ["TABLE", "Table", "member_value", "rewrite", "table"]
