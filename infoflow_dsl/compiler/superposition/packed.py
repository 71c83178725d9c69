"""The packed route of ``compile --residual``: which numbers to pack (:mod:`.packing`), the
rewrite (:mod:`.tables`), the certificate, and the packed numbers' dictionary records.

**Choice.** Packs only pay where they lower the peak: starting from every number of known
values on its own, two groups are merged (one direction alive from the first member's write to
the last one's end) when that lowers (the most directions alive at one stage, the stages that
reach it) of the plain model's tight lifetimes and the merged pack is admitted: its readers
allow it, and under some order of its digits (all orders are tried) every table read holds
err_v + the rounding of the erasures before it < 1/4 (a quarter of the gap), every table's
rounding is within an eighth of the a-priori bound's slack (ε − bound; 1/4 − bound for token
scores) of the plain block's error, and the tables add at most :data:`~.packing.UNIT_CAP` units;
the order with the fewest units is kept. Deterministic: candidates and orders in index order.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import torch

from ..compress import ffn_block
from .packing import UNIT_CAP, UNIT_ROUNDOFF, Pack, Plain, build, candidates, peak, plain, readers_allow
from .tables import member_value, outputs, rewrite, table
from .values import joint

Tensor = torch.Tensor

#: the most members one pack holds (its orders are all tried)
MEMBERS = 4


@dataclass(frozen=True)
class Packed:
    """The packs chosen, the packed (tensors, config), and each pack's certificate."""

    packs: tuple[Pack, ...]
    tensors: dict[str, Tensor]
    config: dict[str, Any]
    records: tuple[dict[str, Any], ...]


def slack(config: dict[str, Any]) -> float:
    """What the a-priori bound leaves of ε (of 1/4 for token scores)."""
    budget = config.get("error_budget", {})
    room = 0.25 if config.get("token_output") else float(config.get("eps", 0.0))
    return max(room - float(budget.get("bound", 0.0)), 0.0)


def certify(pack: Pack, tensors: dict[str, Tensor], config: dict[str, Any], model: Plain,
            roundoff: float = UNIT_ROUNDOFF) -> dict[str, Any] | None:
    """The pack's certificate (module docstring), or None where it does not hold."""
    labels = config["residual_labels"]
    blocks = {b["output"]: b for layer in config["layers"] for b in layer["mlp"]}
    allowed = slack(config) / 8
    reads, tables, units, erasing = [], [], 0, 0.0
    for stage in pack.stages():
        present = pack.present(stage)
        if len(present) < 2 and not pack.erased_at(stage):  # a linear read: the erasures' rounding / K_i
            if erasing and present and erasing / float(pack.scales[present[0]]) > allowed:
                return None
            continue
        w_in = tensors[f"blocks.{ffn_block(stage)}.mlp.W_in"]
        rows = [pack.members[k] for k in present]
        read = torch.nonzero(w_in[rows].ne(0).any(dim=0)).flatten().tolist() if len(present) >= 2 else []
        error = pack.read_error(present, model.layers, roundoff) + erasing
        reads.append({"stage": stage, "members": [labels[pack.members[k]] for k in present], "error": error})
        if error >= 0.25:
            return None
        for output, values in outputs(pack, stage, tensors, read, model.one).items():
            built = table(output, values, roundoff)
            plain_error = float(blocks.get(labels[output], {}).get("error", 0.0))
            if output == pack.direction:
                erasing += built.rounding
            elif built.rounding > plain_error + allowed:
                return None
            units += len(built.slopes)
            tables.append({"stage": stage, "output": labels[output], "units": len(built.slopes),
                           "rounding": built.rounding, "plain_error": plain_error})
    if units > UNIT_CAP or not tables:
        return None
    return {"members": [labels[m] for m in pack.members], "scales": [float(k) for k in pack.scales],
            "direction": labels[pack.direction], "values": len(pack.rows), "gap": 1.0, "reads": reads,
            "tables": tables, "units": units,
            "plain_units": _plain_units(pack, tensors, model), "holds": True}


def _plain_units(pack: Pack, tensors: dict[str, Tensor], model: Plain) -> int:
    """The plain units the tables replace."""
    count = 0
    for stage in pack.stages():
        present = pack.present(stage)
        if len(present) >= 2:
            rows = [pack.members[k] for k in present]
            count += int(tensors[f"blocks.{ffn_block(stage)}.mlp.W_in"][rows].ne(0).any(dim=0).sum())
    return count


def best_pack(members: tuple[int, ...], tensors: dict[str, Tensor], config: dict[str, Any],
              model: Plain, roundoff: float = UNIT_ROUNDOFF) -> tuple[Pack, dict[str, Any]] | None:
    """The admitted order of ``members`` with the fewest table units, or None."""
    best: tuple[int, float, float, Pack, dict[str, Any]] | None = None
    values = joint(list(model.sources), members)
    for order, searched in itertools.product(itertools.permutations(range(len(members))), (False, True)):
        pack = build(model, members, order, searched, values)
        if pack is None:
            return None
        if not readers_allow(pack, tensors, model):
            continue
        record = certify(pack, tensors, config, model, roundoff)
        if record is None:
            continue
        size = max(abs(float(sum(k * r[i] for i, k in enumerate(pack.scales)))) for r in pack.rows)
        rounding = sum(t["rounding"] for t in record["tables"])
        if best is None or (record["units"], rounding, size) < best[:3]:
            best = (record["units"], rounding, size, pack, record)
    return None if best is None else (best[3], best[4])


def _span(model: Plain, group: tuple[int, ...]) -> tuple[float, float]:
    return min(model.writes[m][0] for m in group), max(model.ends[m] for m in group)


def choose(tensors: dict[str, Tensor], config: dict[str, Any],
           roundoff: float = UNIT_ROUNDOFF) -> tuple[list[Pack], list[dict[str, Any]]]:
    """The packs (module docstring) and their certificates."""
    model = plain(tensors, config)
    size = len(config["residual_labels"])
    groups: list[tuple[int, ...]] = [(c,) for c in candidates(model)]
    chosen: dict[tuple[int, ...], tuple[Pack, dict[str, Any]]] = {}
    score = peak(model, size, [])
    tried: dict[tuple[int, ...], tuple[Pack, dict[str, Any]] | None] = {}
    while True:
        trials = []
        for a, b in itertools.combinations(groups, 2):
            (sa, ea), (sb, eb) = _span(model, a), _span(model, b)
            merged = tuple(sorted(a + b))
            if len(merged) > MEMBERS or max(sa, sb) >= min(ea, eb):
                continue
            packs = [g for g in chosen if g not in (a, b)] + [merged]
            trial = peak(model, size, packs)
            if trial < score:
                trials.append((trial, merged, a, b))
        for trial, merged, a, b in sorted(trials):
            if merged not in tried:
                tried[merged] = best_pack(merged, tensors, config, model, roundoff)
            found = tried[merged]
            if found is not None:
                chosen.pop(a, None)
                chosen.pop(b, None)
                chosen[merged] = found
                groups = [g for g in groups if g not in (a, b)] + [merged]
                score = trial
                break
        else:
            break
    picked = [chosen[g] for g in sorted(chosen)]
    return [p for p, _ in picked], [r for _, r in picked]


def packed(tensors: dict[str, Tensor], config: dict[str, Any], roundoff: float = UNIT_ROUNDOFF) -> Packed | None:
    """The plain model (dense float64) packed, or None where no pack lowers its peak."""
    if config.get("vocabulary") is None:
        return None
    packs, records = choose(tensors, config, roundoff)
    if not packs:
        return None
    labels = config["residual_labels"]
    one = labels.index("one") if "one" in labels else None
    out, out_config, _ = rewrite(tensors, config, packs, one)
    for pack in packs:
        out_config["residual_labels"][pack.direction] = "pack:" + " + ".join(labels[m] for m in pack.members)
    return Packed(tuple(packs), out, out_config, tuple(records))


def member_records(result: Packed, labels: list[str], computes: dict[str, str], dims: dict[int, tuple[int, float]],
                   kept: list[int], layers: int) -> list[dict[str, Any]]:
    """A dictionary record per packed number: on its pack's direction (weight K_i) from its
    write to its end, read ``exact`` where it is alone there and ``table`` (decoded from v by its
    ``grid`` {v: value}) where others are present."""
    found = []
    final = 2 * layers + 2
    for pack in result.packs:
        placed = dims.get(kept.index(pack.direction))
        if placed is None:
            continue
        dim = placed[0]
        for k, member in enumerate(pack.members):
            end = int(min(pack.ends[k], final))
            parts = []
            for start, stop in _segments(pack, k, end):
                part: dict[str, Any] = {"dims": [dim], "weights": [float(pack.scales[k])], "from": start, "to": stop,
                                        "read": "exact" if len(pack.present(start + 1)) < 2 else "table"}
                if part["read"] == "table":
                    part["grid"] = sorted(member_value(pack, start + 1, member).items())
                parts.append(part)
            text = computes.get(labels[member], f"the embedding's column {labels[member]}" if pack.written[k] == 0
                                else labels[member])
            found.append({"name": labels[member], "kind": "number", "group": None, "computes": text,
                          "components": parts, "pack": [labels[m] for m in pack.members]})
    return found


def _segments(pack: Pack, k: int, end: int) -> list[tuple[int, int]]:
    """[from, to) spans of member k over which the members present stay the same."""
    start = pack.written[k]
    cuts = [start]
    for s in range(start + 1, end):
        if pack.present(s + 1) != pack.present(s):
            cuts.append(s)
    cuts.append(end)
    return [(a, b) for a, b in itertools.pairwise(cuts) if a < b and not math.isinf(b)]


__all__ = ["Packed", "choose", "member_records", "packed"]
