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
Every merge is kept in order (:func:`choose`'s history): a residual at least what packing
everything reaches takes the first set of packs that brings the peak within it
(:func:`fewest_within`), so it pays only the tables it needs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any

import torch

from ...transformer.card import ModelCard
from ..compress import ffn_block
from .packing import UNIT_CAP, UNIT_ROUNDOFF, Pack, Plain, build, candidates, peak, plain, readers_allow
from .tables import member_value, outputs, rewrite, table
from .values import joint

Tensor = torch.Tensor

#: the most members one pack holds whose orders are all tried
MEMBERS = 4
#: the most members a pack of one reader's inputs holds (:func:`reader_groups`; two orders tried)
READ_TOGETHER = 12
#: the most members a group of several units' shared inputs holds (:func:`_joined`): larger unions
#: are many and slow to certify (mean_of_larger's took minutes) and are not tried
JOINED = 6
#: ... and the most joint values it may take (indicators: 2 per member)
JOINED_VALUES = 64


@dataclass(frozen=True)
class Packed:
    """The packs chosen, the packed (tensors, card), and each pack's certificate."""

    packs: tuple[Pack, ...]
    tensors: dict[str, Tensor]
    card: ModelCard
    records: tuple[dict[str, Any], ...]


def slack(config: ModelCard) -> float:
    """What the a-priori bound leaves of ε (of 1/4 for token scores)."""
    bound = 0.0 if config.error_budget is None else float(config.error_budget.bound)
    room = 0.25 if config.token_output else float(config.eps or 0.0)
    return max(room - bound, 0.0)


def certify(pack: Pack, tensors: dict[str, Tensor], config: ModelCard, model: Plain,
            roundoff: float = UNIT_ROUNDOFF) -> dict[str, Any] | None:
    """The pack's certificate (module docstring), or None where it does not hold."""
    labels = config.labels
    blocks = {b.output: b for layer in config.layers for b in layer.blocks}
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
        for output, values in outputs(pack, stage, tensors, read, model.one, model.evaluations).items():
            built = table(output, values, roundoff)
            plain_error = float(blocks[labels[output]].error) if labels[output] in blocks else 0.0
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


def best_pack(members: tuple[int, ...], tensors: dict[str, Tensor], config: ModelCard,
              model: Plain, roundoff: float = UNIT_ROUNDOFF) -> tuple[Pack, dict[str, Any]] | None:
    """The admitted order of ``members`` with the fewest table units, or None."""
    best: tuple[int, float, float, Pack, dict[str, Any]] | None = None
    values = joint(list(model.sources), members)
    digits = range(len(members))
    orders = list(itertools.permutations(digits)) if len(members) <= MEMBERS else [tuple(digits),
                                                                                    tuple(reversed(digits))]
    for order, searched in itertools.product(orders, (False, True)):
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


def reader_groups(tensors: dict[str, Tensor], model: Plain) -> list[tuple[int, ...]]:
    """Each FFN unit's inputs (``one`` aside) where they are 2 to :data:`READ_TOGETHER` candidates:
    a unit that reads several numbers (an ``and`` of steps) can be a table of their pack only
    where the pack holds all of them, so such a pack is tried whole, not grown pair by pair
    (each pair would be refused: its reader also reads the others)."""
    known = set(candidates(model))
    found: set[tuple[int, ...]] = set()
    for layer in range(model.layers):
        w_in = tensors[f"blocks.{layer}.mlp.W_in"]  # (d_model, d_mlp)
        for unit in range(w_in.shape[1]):
            read = tuple(i for i in torch.nonzero(w_in[:, unit]).flatten().tolist() if i != model.one)
            if 2 <= len(read) <= READ_TOGETHER and set(read) <= known:
                found.add(read)
    return sorted(found | {group for group in _joined(found)
                           if len(joint(list(model.sources), group) or ()) <= JOINED_VALUES})


def _joined(groups: set[tuple[int, ...]]) -> set[tuple[int, ...]]:
    """The unions of groups that share a member (transitively), at most :data:`JOINED` each:
    where two units read one number with two others (x(t) compared with two fetched tokens), no
    pack of one unit's inputs is admitted, since the other unit reads its member beside the table."""
    joined: list[set[int]] = []
    for group in sorted(groups):
        touching = [j for j in joined if j & set(group)]
        merged = set(group).union(*touching)
        joined = [j for j in joined if not j & set(group)] + [merged]
    return {tuple(sorted(j)) for j in joined if len(j) <= JOINED} - groups


def _merges(groups: list[tuple[int, ...]], together: list[tuple[int, ...]],
            model: Plain) -> list[tuple[tuple[int, ...], list[tuple[int, ...]]]]:
    """(merged group, the groups it replaces): every two groups whose lifetimes overlap (at most
    :data:`MEMBERS`), and every reader's inputs with the groups they touch (at most :data:`READ_TOGETHER`)."""
    found = []
    for a, b in itertools.combinations(groups, 2):
        (sa, ea), (sb, eb) = _span(model, a), _span(model, b)
        merged = tuple(sorted(a + b))
        if len(merged) <= MEMBERS and max(sa, sb) < min(ea, eb):
            found.append((merged, [a, b]))
    for inputs in together:
        touched = [g for g in groups if set(g) & set(inputs)]
        merged = tuple(sorted({m for g in touched for m in g}))
        if len(touched) >= 2 and len(merged) <= READ_TOGETHER:
            found.append((merged, touched))
    return found


def chains_hold(picked: list[tuple[Pack, dict[str, Any]]], labels: list[str]) -> bool:
    """Packs that hold one another's table outputs keep their certificates: a table whose output
    is a member of a pack (an FFN output another pack's table now computes) rounds within the
    plain block's error, the member's error that pack's certificate counted. A write after the
    member's values stop being read (a sum folded onto it, past its ``until``) is not one: its
    rounding reaches the linear reads only, as :func:`certify` admitted."""
    tabled = {labels[m]: pack.until[k] for pack, _ in picked for k, m in enumerate(pack.members)}
    return all(t["rounding"] <= t["plain_error"] for pack, record in picked for t in record["tables"]
               if t["output"] in tabled and t["stage"] < tabled[t["output"]] and t["output"] != labels[pack.direction])


def _span(model: Plain, group: tuple[int, ...]) -> tuple[float, float]:
    return min(model.writes[m][0] for m in group), max(model.ends[m] for m in group)


#: one state of the choice: (the peak with these packs, how many stages reach it), the packs, their certificates
Choice = tuple[tuple[int, int], list[Pack], list[dict[str, Any]]]


def choose(tensors: dict[str, Tensor], config: ModelCard, roundoff: float = UNIT_ROUNDOFF) -> list[Choice]:
    """The packs (module docstring) and their certificates after each merge, the peak falling
    from one to the next (empty where no merge lowers it): the last packs the most, an earlier
    one is all a residual between the two needs."""
    model = plain(tensors, config)
    size = len(config.labels)
    groups: list[tuple[int, ...]] = [(c,) for c in candidates(model)]
    chosen: dict[tuple[int, ...], tuple[Pack, dict[str, Any]]] = {}
    score = peak(model, size, [])
    tried: dict[tuple[int, ...], tuple[Pack, dict[str, Any]] | None] = {}
    together = reader_groups(tensors, model)
    history: list[Choice] = []
    while True:
        trials = []
        for merged, replaced in _merges(groups, together, model):
            packs = [g for g in chosen if g not in replaced] + [merged]
            trial = peak(model, size, packs)
            if trial < score:
                trials.append((trial, merged, replaced))
        for trial, merged, replaced in sorted(trials):
            if merged not in tried:
                tried[merged] = best_pack(merged, tensors, config, model, roundoff)
            found = tried[merged]
            kept = [chosen[g] for g in chosen if g not in replaced]
            if found is not None and chains_hold([*kept, found], list(config.labels)):
                for group in replaced:
                    chosen.pop(group, None)
                chosen[merged] = found
                groups = [g for g in groups if g not in replaced] + [merged]
                score = trial
                picked = [chosen[g] for g in sorted(chosen)]
                history.append((score, [p for p, _ in picked], [r for _, r in picked]))
                break
        else:
            break
    return history


def choices(tensors: dict[str, Tensor], config: ModelCard, roundoff: float = UNIT_ROUNDOFF) -> list[Choice]:
    """:func:`choose` on a token model (none on a vector model: its numbers' values are not finite)."""
    return choose(tensors, config, roundoff) if config.vocabulary is not None else []


def fewest_within(history: list[Choice], residual: int) -> Choice | None:
    """The first choice whose peak is at most ``residual`` (the fewest packs, so the fewest table
    units, that bring the plain lifetimes within it), or None."""
    return next((choice for choice in history if choice[0][0] <= residual), None)


def packed(tensors: dict[str, Tensor], config: ModelCard, choice: Choice) -> Packed:
    """The plain model (dense float64) with ``choice``'s packs."""
    _, packs, records = choice
    labels = config.labels
    one = labels.index("one") if "one" in labels else None
    out, out_config, _ = rewrite(tensors, config, packs, one)
    named = list(out_config.labels)
    for pack in packs:
        named[pack.direction] = "pack:" + " + ".join(labels[m] for m in pack.members)
    return Packed(tuple(packs), out, dataclasses.replace(out_config, residual_labels=tuple(named)), tuple(records))


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
