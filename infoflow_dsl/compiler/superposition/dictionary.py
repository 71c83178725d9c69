"""The feature dictionary: every feature of a compiled token model, what it computes, where it is
alive and its direction at each residual hook (TransformerLens names): the ground truth a
sparse autoencoder's latents are scored against.

A feature is a direction of the plain (unsuperposed) circuit: a number, or a categorical
indicator. In the model it is held by **components**, each alive over a span of stages
(0 the embedding, 2l + 1 layer l's heads, 2l + 2 its FFN): a coordinate of its own (a number, a
clean slot: read **exactly**, the value is the coordinate) or, in a superposed model, its storage
direction u_f (read by **threshold**: the value is 1 when <u_f, h> ≥ 1 − m, 0 when ≤ m, the
margin m of the certificate). At a hook the residual holds value_f × (the sum of its components
alive there) for each feature, so the direction there is that sum.

After stage s the stream is at ``blocks.{l}.hook_resid_pre`` (s = 2l), ``blocks.{l}.hook_resid_mid``
(s = 2l + 1) and ``blocks.{l}.hook_resid_post`` (s = 2l + 2, the same tensor as resid_pre of
layer l + 1). A component spanning [from, to) is alive at the hooks after stages from .. to − 1:
from its write to its last read (the reader at stage ``to`` reads it; after it, the coordinate
may hold another feature).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch

from ...transformer.card import ModelCard, Superposition
from ..compress import stage_map
from .categorical import Usage
from .categorical import usage as find_usage
from .embed import Embedding
from .layout import Layout
from .spans import Spans
from .sums import Sums

Tensor = torch.Tensor


def hooks_after(stage: int, layers: int) -> list[str]:
    """The residual hooks holding the stream after ``stage``."""
    layer, part = divmod(stage, 2)
    if part == 1:
        return [f"blocks.{layer}.hook_resid_mid"]
    names = [f"blocks.{layer - 1}.hook_resid_post"] if layer >= 1 else []
    return names + ([f"blocks.{layer}.hook_resid_pre"] if layer < layers else [])


def describe(config: ModelCard) -> dict[str, str]:
    """What each residual label of a plain model computes: its head's or FFN block's formula,
    the token table's or the positional code's column for the embedding's."""
    found: dict[str, str] = {}
    for layer in config.layers:
        for head in layer.heads:
            for output in head.outputs or ():
                found[output] = f"head {head.name} ({head.kind}): {head.computes}"
        for block in layer.blocks:
            found.setdefault(block.output, f"FFN {block.name}: {block.computes}")
    return found


def _component(dims: list[int], weights: list[float], start: int, end: int, read: str) -> dict[str, Any]:
    return {"dims": dims, "weights": weights, "from": start, "to": end, "read": read}


def _span(usage: Usage, index: int, end: float = math.inf) -> tuple[int, int]:
    """[first write, ``end``) of a direction: present until the FFN stage that erases it
    (``compress``), to the end of the forward when nothing does."""
    return usage.first_write(index), int(min(end, 2 * usage.layers + 2))


def _embedding_column(label: str, usage: Usage, index: int) -> str:
    return f"the embedding's column {label}" if usage.first_write(index) == 0 else label


def plain_records(config: ModelCard, tensors: dict[str, Tensor]) -> list[dict[str, Any]]:
    """The dictionary of a model whose every direction is one feature on its own coordinate
    (categorical where :func:`~.categorical.usage` finds it in a group)."""
    labels = list(config.labels)
    try:
        usage = find_usage(tensors, config)
    except (KeyError, IndexError, TypeError):  # a config without a compiled circuit's heads: no groups
        writes, reads = stage_map(tensors, len(labels), len(config.layers))
        usage = Usage(tuple(labels), len(config.layers), tuple(tuple(w) for w in writes),
                      tuple(tuple(r) for r in reads), ())
    groups = usage.group_of()
    computes = describe(config)
    records = []
    for i, label in enumerate(labels):
        if not usage.writes[i]:
            continue
        start, end = _span(usage, i)
        group = groups.get(i)
        records.append({"name": label, "kind": "number" if group is None else "categorical",
                        "group": None if group is None else group.writer,
                        "computes": computes.get(label, _embedding_column(label, usage, i)),
                        "components": [_component([i], [1.0], start, end, "exact")]})
    return records


def superposed_records(config: ModelCard, plan: Layout, embedding: Embedding, dims: dict[int, tuple[int, float]],
                       margin: float, categorical: dict[int, str], aliases: dict[int, int] | None = None,
                       spans: Spans | None = None, sums: Sums | None = None,
                       names: list[str] | None = None) -> list[dict[str, Any]]:
    """The dictionary of a superposed model (the plain ``config``): ``dims`` maps the layout's
    coordinates (``embed.Embedding``) to the final ones (after ``compress``) and the stage whose
    FFN erases them (inf: none); ``categorical`` names the group of every categorical direction,
    superposed or kept on its own coordinate. A stored feature's storage direction is listed
    up to its last storage read (where its interference bound holds), a clean slot up to its
    eraser. A direction nothing reads has no dimension in the model and no record; a duplicate
    j of i (``aliases``, :mod:`.duplicates`) is listed on i's components, a spanned embedding
    column (``spans``, :mod:`.spans`) as the ``combination`` of the records it was folded onto, a
    coordinate holding a sum of numbers only the unembedding reads (``sums``, :mod:`.sums`)
    with that ``sum``, and each number folded into it on no direction of its own; these name
    their directions by ``names`` (the plain model's labels, which a packed model's config no
    longer carries for its pack members; default: the layout's)."""
    usage, groups = plan.usage, plan.usage.group_of()
    computes = describe(config)
    storage = [dims[embedding.storage_base + k][0] for k in range(embedding.u.shape[0])]
    final = 2 * usage.layers + 2
    records = []
    for i, label in enumerate(usage.labels):
        if not usage.writes[i]:
            continue
        text = computes.get(label, _embedding_column(label, usage, i))
        if i not in groups:
            placed = dims.get(embedding.kept.index(i))
            if placed is None:  # read by nothing: no dimension (compress's tight lifetimes), not in the model
                continue
            dim, erased = placed
            start, end = _span(usage, i, erased)
            records.append({"name": label, "kind": "categorical" if i in categorical else "number",
                            "group": categorical.get(i), "computes": text,
                            "components": [_component([dim], [1.0], start, end, "exact")]})
            continue
        parts: list[dict[str, Any]] = []
        if i in embedding.column:
            last = max(_storage_reads(plan, i), default=usage.first_write(i) + 1)
            u = embedding.u[:, embedding.column[i]].tolist()
            kept = [(d, w) for d, w in zip(storage, u, strict=True) if w != 0.0]
            parts.append(_component([d for d, _ in kept], [w for _, w in kept], usage.first_write(i), last,
                                    "threshold"))
        for w, chosen in enumerate(plan.providers):
            if i in chosen:
                start = _provider_stage(usage.first_write(i), w, chosen[i])
                parts.append(_component([dims[embedding.slot(w, i)][0]], [1.0], start,
                                        min(2 * w + 2, final), "exact"))
        record: dict[str, Any] = {"name": label, "kind": "categorical", "group": groups[i].writer,
                                  "computes": text, "components": parts, "margin": margin}
        records.append(record)
    records += _aliased(records, aliases or {}, usage, computes, categorical)
    labels = list(names or usage.labels)
    return (_summed(records, sums or {}, labels, computes, categorical)
            + _combined(spans, labels, usage.layers, computes, categorical))


def _summed(records: list[dict[str, Any]], sums: Sums, labels: list[str], computes: dict[str, str],
            categorical: dict[int, str]) -> list[dict[str, Any]]:
    """The records with every summed coordinate's ``sum`` [[name, weight], ...], and a record per
    number folded into sums (``in_sums``: the records holding it; no component of its own)."""
    holders: dict[int, list[str]] = {}
    for i, terms in sorted(sums.items()):
        for name, _ in terms:
            if name != i:
                holders.setdefault(name, []).append(labels[i])
    by_name = {r["name"]: r for r in records}
    for i, terms in sums.items():
        if labels[i] in by_name:
            by_name[labels[i]]["sum"] = [[labels[name], weight] for name, weight in terms]
    return records + [{"name": labels[j], "kind": "categorical" if j in categorical else "number",
                       "group": categorical.get(j), "computes": computes.get(labels[j], labels[j]),
                       "components": [], "in_sums": held} for j, held in sorted(holders.items())]


def _combined(spans: Spans | None, labels: list[str], layers: int, computes: dict[str, str],
              categorical: dict[int, str]) -> list[dict[str, Any]]:
    """A record per spanned column j: its ``combination`` [[i's name, a_i], ...] (h_j = Σ a_i·h_i
    at every token row), alive from the embedding to ``to`` (the FFN that erased it)."""
    if spans is None:
        return []
    final = 2 * layers + 2
    return [{"name": labels[j], "kind": "categorical" if j in categorical else "number",
             "group": categorical.get(j), "computes": computes.get(labels[j], labels[j]),
             "components": [], "combination": [[labels[i], a] for i, a in terms],
             "to": int(min(spans.ends[j], final))}
            for j, terms in sorted(spans.terms.items())]


def _aliased(records: list[dict[str, Any]], aliases: dict[int, int], usage: Usage, computes: dict[str, str],
             categorical: dict[int, str]) -> list[dict[str, Any]]:
    """A record per duplicate j on its i's components, with j's own name, kind and formula."""
    by_name = {r["name"]: r for r in records}
    found = []
    for j, i in sorted(aliases.items()):
        if usage.labels[i] in by_name:
            record = copy.deepcopy(by_name[usage.labels[i]])
            label = usage.labels[j]
            record.update({"name": label, "kind": "categorical" if j in categorical else "number",
                           "group": categorical.get(j), "computes": computes.get(label, label)})
            found.append(record)
    return found


def _provider_stage(written: int, window: int, how: str) -> int:
    return 2 * window if how == "cleaner" else written


def _storage_reads(plan: Layout, feature: int) -> list[int]:
    """The stages that read ``feature`` from storage: clean-ups, direct value and score reads."""
    usage = plan.usage
    stages = [2 * w for w, chosen in enumerate(plan.providers) if chosen.get(feature) == "cleaner"]
    stages += [g.stage for g in usage.groups if (g.layer, g.head) in plan.direct_heads and feature in g.reads]
    if feature in plan.direct_scores:
        stages.append(2 * usage.layers + 1)
    return stages


def features(model: Any) -> list[dict[str, Any]]:
    """``ifl.features(model)``: every feature of a compiled model with its direction at each
    residual hook where it is alive (module docstring).

    Args:
        model: a compiled model, or the path of its ``.safetensors`` file.

    Returns:
        One record per feature: ``name``, ``kind`` (``number`` or ``categorical``), ``computes``,
        ``group``, ``layers`` (the layers whose stream holds it), ``hooks`` {TransformerLens hook:
        {"direction": [d_model floats], "read": "exact" (with its ``coordinate``), "threshold"
        or "table" (a packed number sharing its direction with others there, read by step
        tables: its ``coordinate`` holds v, its ``grid`` [[v, value], ..] decodes it) or
        "combination" (an embedding column the others span, folded onto them: its ``terms``
        [{weight a_i, feature, entry, margin}], value Σ a_i·value_i)}} and, for a superposed
        feature, the certificate's ``margin``; a packed number's ``pack``; a spanned column's
        ``combination`` [[name, a_i], ...]; a coordinate holding a sum of numbers only the
        unembedding reads, its ``sum`` [[name, weight], ...] (its value, read exactly, is that
        sum), and each number held only in such sums its ``in_sums`` (no hooks of its own).

    Raises:
        TypeError: ``model`` is neither a model nor a path.
        ModelFileError: the path is not a readable model file.
    """
    from ...transformer.arguments import model_argument

    model = model_argument(model, "features")
    config = model.card
    stored = None if config.superposition is None else list(config.superposition.features)
    if stored is None:
        tensors = {n: (t.to_dense() if t.is_sparse else t).to(torch.float64) for n, t in model.state_dict().items()}
        stored = plain_records(config, tensors)
    width, layers = config.d_model, len(config.layers)
    found = {r["name"]: _expanded(r, width, layers) for r in stored if "combination" not in r}
    return [found[r["name"]] if "combination" not in r else _expanded_combination(r, found) for r in stored]


def _expanded_combination(record: dict[str, Any], found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A spanned column's hooks: where it is alive (before ``to``) and every term's feature is,
    the direction Σ a_i·direction_i, read as ``combination`` of the terms' own reads."""
    terms = [(a, found[name]) for name, a in record["combination"]]
    hooks: dict[str, dict[str, Any]] = {}
    for hook in terms[0][1]["hooks"]:
        if _hook_stage(hook) >= record["to"] or any(hook not in f["hooks"] for _, f in terms):
            continue
        entries = [(a, f["hooks"][hook], f.get("margin")) for a, f in terms]
        width = len(entries[0][1]["direction"])
        direction = [sum(a * e["direction"][d] for a, e, _ in entries) for d in range(width)]
        hooks[hook] = {"direction": direction, "read": "combination",
                       "terms": [{"weight": a, "feature": f["name"], "entry": e, "margin": m}
                                 for (a, e, m), (_, f) in zip(entries, terms, strict=True)]}
    out = {key: record[key] for key in ("name", "kind", "computes", "group", "combination")}
    out["layers"] = sorted({int(hook.split(".")[1]) for hook in hooks})
    out["hooks"] = hooks
    return out


def _hook_stage(hook: str) -> int:
    """The stage after which ``hook`` holds the stream (the inverse of :func:`hooks_after`)."""
    layer, name = int(hook.split(".")[1]), hook.rsplit(".", 1)[1]
    return {"hook_resid_pre": 2 * layer, "hook_resid_mid": 2 * layer + 1, "hook_resid_post": 2 * layer + 2}[name]


def _expanded(record: dict[str, Any], width: int, layers: int) -> dict[str, Any]:
    hooks: dict[str, dict[str, Any]] = {}
    alive_layers: set[int] = set()
    for stage in range(0, 2 * layers + 1):
        live = [c for c in record["components"] if c["from"] <= stage < c["to"]]
        if not live:
            continue
        direction = [0.0] * width
        for c in live:
            for d, w in zip(c["dims"], c["weights"], strict=True):
                direction[d] += w
        exact = [c["dims"][0] for c in live if c["read"] == "exact"]
        tabled = [c for c in live if c["read"] == "table"]
        entry: dict[str, Any] = {"direction": direction, "read": "exact" if exact else "threshold"}
        if exact:
            entry["coordinate"] = exact[0]
        elif tabled:  # a packed number where others share its direction: decoded from v by its grid
            entry.update({"read": "table", "coordinate": tabled[0]["dims"][0], "grid": tabled[0]["grid"]})
        for hook in hooks_after(stage, layers):
            hooks[hook] = entry
            alive_layers.add(int(hook.split(".")[1]))
    out = {key: record[key] for key in ("name", "kind", "computes", "group")}
    out["layers"] = sorted(alive_layers)
    out["hooks"] = hooks
    for key in ("margin", "pack", "sum", "in_sums"):
        if key in record:
            out[key] = record[key]
    return out


def read_value(entry: dict[str, Any], residual: Tensor, margin: float | None = None) -> Tensor:
    """The feature's value from a residual stream (..., D) at one of its hooks: the exact
    coordinate of a component read exactly (over its weight), a packed number's value at the
    grid point nearest v (``table``: :mod:`.packed`), a spanned column's Σ a_i·value_i of its
    terms (``combination``: :mod:`.spans`), else the threshold of <u_f, h> at the margin (the
    value 0.5 where the read lies between m and 1 − m: no certified value)."""
    if entry["read"] == "combination":  # a spanned embedding column: Σ a_i·value_i of its terms
        return sum((t["weight"] * read_value(t["entry"], residual, t["margin"]) for t in entry["terms"]),
                   torch.zeros(residual.shape[:-1], dtype=residual.dtype))
    if entry["read"] == "exact":  # its coordinate, over its weight there (1 but for a packed number alone: K_i)
        return residual[..., entry["coordinate"]] / entry["direction"][entry["coordinate"]]
    if entry["read"] == "table":  # a packed number: the grid value nearest v = <e_d, h>
        grid = torch.tensor(entry["grid"], dtype=residual.dtype)
        v = residual[..., entry["coordinate"]]
        return grid[(v[..., None] - grid[:, 0]).abs().argmin(dim=-1), 1]
    r = residual @ torch.tensor(entry["direction"], dtype=residual.dtype)
    m = 0.45 if margin is None else margin
    return torch.where(r >= 1 - m, 1.0, torch.where(r <= m, 0.0, 0.5)).to(residual.dtype)


def alive_text(record: Superposition) -> str:
    """"F = n features alive at once" of a superposition certificate, with F once its exact folds
    are made where that is fewer (F minus it: dimensions the folds saved, the rest of F − D
    superposition's and packing's)."""
    folded = record.features_alive_folded
    extra = "" if folded in (None, record.features_alive) else f" ({folded} with its exact folds)"
    return f"F = {record.features_alive} features alive at once{extra}"


def print_features(name: str, model: Any, found: list[dict[str, Any]]) -> None:
    """``circuit --features``: one line per feature (kind, group, layers, hooks and how each is
    read, what it computes), the superposition's certificate first when there is one."""
    record = model.card.superposition
    print(f"{name}: {len(found)} features in d_model = {model.d_model}")
    if record is not None:
        print(f"  superposed: {alive_text(record)}, D = {record.d_model}, "
              f"F/D = {record.ratio:.3g}; largest interference {record.max_bound:.3g} against the margin "
              f"{record.margin:g}")
        for head, source, scale, raised in record.queries or ():
            lift = f"; {source}'s readout row raised to its tokens' least, unread there before" if raised else ""
            print(f"  {head}'s constant query reads {scale:g}·{source} in place of one (scores scaled by ≥ 1{lift})")
    readout = None if record is None else record.readout
    if readout is not None:
        lines = ", ".join(f"{line['token']}: {line['slope']}·n{line['intercept']:+d}" for line in readout["lines"])
        print(f"  the answer is argmax over lines of n = {readout['host']}'s coordinate ({lines}; gap "
              f"{readout['gap']}), n per token {readout['n']}")
    for f in found:
        reads = sorted({entry["read"] for entry in f["hooks"].values()})
        group = f" ({f['group']})" if f["group"] else ""
        print(f"  {f['name']:<28} {f['kind']}{group}, layers {f['layers']}, {len(f['hooks'])} hooks, read "
              f"{'/'.join(reads) or '-'}: {f['computes']}{_fold_text(f)}")


def _fold_text(feature: dict[str, Any]) -> str:
    """What an exact fold made of a feature, for ``circuit --features``: the combination it is,
    the sum its coordinate holds, or the sums that hold it."""
    def terms(pairs: list[list[Any]]) -> str:
        return " + ".join(f"{weight:g}·{name}" for name, weight in pairs)

    if "combination" in feature:
        return f" [= {terms(feature['combination'])}]"
    if "sum" in feature:
        return f" [its coordinate holds {terms(feature['sum'])}]"
    if "in_sums" in feature:
        return f" [held only in the sum of {', '.join(feature['in_sums'])}]"
    return ""


__all__ = ["alive_text", "features", "hooks_after", "plain_records", "print_features", "read_value",
           "superposed_records"]
