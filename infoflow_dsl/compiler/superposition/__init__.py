"""Superposition the compiler builds (``compile --residual D``): a token model whose residual has
at most D dimensions, fewer than its features alive at once, certified.

The plain model is compiled first. Directions that hold no value of their own are folded, each
exactly in real arithmetic: directions it names twice (identical writers: the same value,
:mod:`.duplicates`) into one; numbers only the unembedding reads, where W_U's rows allow, into
coordinates holding their sum (:mod:`.sums`); sharp heads' constant queries, from ``one``
onto a positive number (every score scaled by at least 1: :mod:`.queries`), so that ``one``
may be read by nothing; embedding columns that other embedding columns alive as long span,
onto those (:mod:`.spans`); a token answer read from one categorical group alone, onto
one number its unembedding decodes by argmax (:mod:`.readout`; only where the plain
unembedding cannot reach D). Its
categorical features (``categorical``:
indicators in groups of mass ≤ 1: the token's and the position's one-hot columns, a sharp
head's fetched token) then move to a **storage** block of d_s coordinates on nearly orthogonal
directions (``codes``), every read of them going through a reader that rejects the others'
interference with a margin (``layout``: clean-ups in the FFNs, direct value and score reads),
and every coordinate is shared over the depth with tight lifetimes
(:func:`~infoflow_dsl.compiler.compress.compress_residual`: a write nothing reads dropped, a
direction never read given no dimension, a dimension handed on in the FFN that erases it), so
that a categorical feature shares its dimensions with others alive at the same depth and no
coordinate outlives its last reader.

**Certified**: every thresholded read satisfies err_f + I_f(s) < m (``layout.certify``, stated
there); a clean-up is then exactly 0 or 1, so the superposed model computes what the plain one
does up to the rounding of the reads (folding duplicates and tight lifetimes are exact in real
arithmetic: stated in their modules), and compile measures it as the truth checks it (every
input up to length 4, the constant ones, 2,000 random at T); ``check`` measures it again.
**F** (features alive at once) is what ``disguise --compress`` reaches on the plain model: the
most plain directions alive at one stage under tight lifetimes (a direction alive from its first
write to the FFN at or after its last read, that FFN handing it on), the most that sharing over
the depth reaches. D below F is therefore sharing at one depth, and the certificate says which:
``features_alive_folded`` is F once those folds are made (F minus it: dimensions the folds
saved), and D below that is superposition (categorical features on fewer storage
dimensions). Where the peak is numbers read linearly, nothing is shared at one depth
(docs/superposition.md: the Gram-matrix argument); where their readers are FFNs and their values
are known, **packed numbers** share one direction read by step tables (:mod:`.packed`), a route
taken only where the one without packs cannot reach the D asked for (its certificate in the
config's ``packed``). The smallest storage d_s whose bound holds gives the smallest D of a route;
``--residual`` below the smaller of the two routes' is refused (exit 2) naming it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from ...errors import CompileError
from ...transformer.card import ModelCard, Superposition
from .categorical import usage
from .codes import code, coherence, fitted
from .dictionary import describe, superposed_records
from .duplicates import merged
from .embed import Embedding, rewrite
from .layout import MARGIN, Layout, StorageRead, certify, holds, layout, read_pairs
from .packed import Packed, choices, fewest_within, member_records, packed
from .packing import UNIT_ROUNDOFF
from .queries import MovedQuery, moved_queries
from .readout import ArgmaxReadout, decoded
from .spans import Spans, spanned
from .sums import Sums, summed

Tensor = torch.Tensor

__all__ = ["MARGIN", "Superposed", "features_alive", "smallest_storage", "superpose"]


@dataclass(frozen=True)
class Superposed:
    """A superposed model's weights and card, and what certifies them."""

    tensors: dict[str, Tensor]
    card: ModelCard
    plan: Layout
    embedding: Embedding
    reads: tuple[StorageRead, ...]
    alive: int


def _compressed(tensors: dict[str, Tensor], config: ModelCard) -> tuple[dict[str, Tensor], ModelCard, Any]:
    from ..compress import compress_residual

    tensors = dict(tensors)
    plan, config = compress_residual(tensors, config)
    return tensors, config, plan


def features_alive(tensors: dict[str, Tensor], config: ModelCard) -> int:
    """F: the plain model's features alive at once under tight lifetimes (the dimensions
    ``disguise --compress`` reaches)."""
    return _compressed(tensors, config)[1].d_model


def storage_code(plan: Layout, storage: int) -> Tensor:
    """The directions of ``plan``'s stored features in ``storage`` dimensions: :func:`~.codes.code`,
    or where its bound fails, that code fitted to the plan's co-alive groups
    (:func:`~.codes.fitted`); deterministic."""
    u = code(len(plan.stored), storage)
    reads = certify(plan, u)
    if holds(reads) or storage >= len(plan.stored):
        return u
    return fitted(u, read_pairs(plan, reads))


def _build(tensors: dict[str, Tensor], config: ModelCard, plan: Layout, storage: int,
           margin: float) -> tuple[dict[str, Tensor], ModelCard, Embedding, list[StorageRead], Any]:
    u = storage_code(plan, storage)
    reads = certify(plan, u)
    wide, wide_config, embedding = rewrite(tensors, config, plan, u, margin)
    out, out_config, compression = _compressed(wide, wide_config)
    return out, out_config, embedding, reads, compression


def smallest_storage(plan: Layout) -> int:
    """The smallest d_s whose every read holds (:func:`storage_code`), trying 1, 2, .. up to n
    (n: no superposition, which always holds); the bound is not monotone in d_s (a power of 2
    takes Hadamard columns), so every width below the answer is tried."""
    n = len(plan.stored)
    return next((d for d in range(1, n) if holds(certify(plan, storage_code(plan, d)))), n)


def _least_build(tensors: dict[str, Tensor], config: ModelCard, plan: Layout,
                 margin: float) -> tuple[int, Any]:
    """(the smallest storage, the model it builds) of ``plan``."""
    least = smallest_storage(plan)
    return least, _build(tensors, config, plan, least, margin)


def _chosen_layout(tensors: dict[str, Tensor], config: ModelCard, margin: float) -> tuple[Layout, int, Any]:
    """The layout with the smallest D: every categorical group superposed but those with nothing
    to store (read only where their writer can hand them to the reader exactly), then, one pass
    in order, each group kept plain (its own coordinates) when that lowers D: where its clean
    copies cost more than its superposition saves; last, every group plain (no storage: the
    tight lifetimes alone) where that is smaller still. (layout, its smallest storage, its model)."""
    found = usage(tensors, config)
    everything = layout(tensors, config, found)
    plain = frozenset(g for g in found.groups if not set(g.members) & set(everything.stored))
    plan = layout(tensors, config, found, plain)
    least, built = _least_build(tensors, config, plan, margin)
    for group in [*found.groups, None]:
        if group in plain or (group is None and plain == frozenset(found.groups)):
            continue
        trial = layout(tensors, config, found, frozenset(found.groups) if group is None else plain | {group})
        trial_least, trial_built = _least_build(tensors, config, trial, margin)
        if trial_built[1].d_model < built[1].d_model:
            plain = frozenset(found.groups) if group is None else plain | {group}
            plan, least, built = trial, trial_least, trial_built
    return plan, least, built


def _spanned_layout(tensors: dict[str, Tensor], config: ModelCard,
                    margin: float) -> tuple[dict[str, Tensor], Spans, tuple[Layout, int, Any]]:
    """The embedding columns others span folded (:mod:`.spans`), and the chosen layout of that
    model: every spanned column folded, and where that folded the constant direction ``one`` (its
    readers, the heads' constant queries, then read the token's indicators, which can cost
    their superposition clean slots where it saved none), also with ``one`` kept; the variant
    whose layout reaches the smaller D (ties: every column folded)."""
    best: tuple[dict[str, Tensor], Spans, tuple[Layout, int, Any]] | None = None
    for kept in (frozenset(), frozenset({"one"})):
        folded, spans = spanned(tensors, config, kept)
        if best is not None and spans.terms == best[1].terms:
            break
        chosen = _chosen_layout(folded, config, margin)
        if best is None or chosen[2][1].d_model < best[2][2][1].d_model:
            best = (folded, spans, chosen)
    assert best is not None
    return best


def superpose(tensors: dict[str, Tensor], config: ModelCard, residual: int,
              margin: float = MARGIN, storage: int | None = None, roundoff: float = UNIT_ROUNDOFF) -> Superposed:
    """The plain token model (``tensors`` dense float64, ``config``) superposed into at most
    ``residual`` dimensions: the largest storage that fits, at least the smallest whose bound
    holds; CompileError naming the smallest D when ``residual`` is below it. ``storage``
    forces d_s with every group superposed and no spanned column folded (a test's model past
    the margin: nothing is refused or checked). ``roundoff``: the unit roundoff of the dtype the
    model will hold (packed numbers' tables are certified for it; float32's by default, which
    covers float64)."""
    alive = features_alive(tensors, config)
    original, tensors, aliases = tensors, *merged(tensors, config)
    given = config
    if storage is None:
        route = _best_route(tensors, config, margin, roundoff, residual)
        tensors, config, result, spans, plan = route.tensors, route.card, route.result, route.spans, route.plan
        sums, moves, folded, built, smallest = route.sums, route.moves, route.folded, route.built, route.smallest
        n = len(plan.stored)
        if residual < smallest:
            packs = "" if result is None else (f", {sum(len(p.members) for p in result.packs)} numbers packed in "
                                               f"{len(result.packs)} directions read by step tables")
            raise CompileError(f"--residual {residual} is too small: the smallest residual whose clean-ups keep "
                               f"every superposed feature's interference below the margin {margin:g} is "
                               f"{smallest} ({n} categorical features on {route.least} storage dimensions{packs}; "
                               f"the plain model has {alive} features alive at once)")
        for wider in range(min(n, route.least + residual - smallest), route.least, -1):
            if holds(certify(plan, storage_code(plan, wider))):
                candidate = _build(tensors, config, plan, wider, margin)
                if candidate[1].d_model <= residual:
                    built = candidate
                    break
    else:  # the plain layout of the model as given (duplicates folded), spanned columns kept
        result, sums, moves, route = None, {}, [], None
        spans, folded = Spans({}, {}), features_alive(tensors, config)
        plan = layout(tensors, config, usage(tensors, config))
        built = _build(tensors, config, plan, storage, margin)
    out, out_config, embedding, reads, compression = built
    labels = list(given.labels)
    record = certificate(plan, embedding, reads, alive, out_config.d_model, margin)
    record["compression"] = compression.to_json()
    record["features_alive_folded"] = folded
    record["duplicates"] = [[labels[j], labels[i]] for j, i in sorted(aliases.items())]
    record["spanned"] = spans.labelled(labels)
    record["queries"] = [move.labelled(given, labels) for move in moves]
    record["summed"] = [[labels[i], [[labels[n], w] for n, w in terms]] for i, terms in sorted(sums.items())]
    if route is not None and route.readout is not None:
        record["readout"] = route.readout.to_json(labels, given)
    dims = {f.index: (d, f.end if f is not occupants[-1] else math.inf)  # the last occupant is never erased
            for d, occupants in enumerate(compression.slots) for f in occupants}
    categorical = {f: g.writer for f, g in usage(original, given).group_of().items()}
    found = superposed_records(config, plan, embedding, dims, margin, categorical, aliases, spans, sums, labels)
    if result is not None:
        record["packed"] = _packed_record(result, features_alive(result.tensors, result.card))
        found = [r for r in found if not r["name"].startswith("pack:")]
        held = {labels[i]: [[labels[n], w] for n, w in terms]
                for i, terms in sums.items()}  # a member a sum is folded onto reads as that sum
        found += [{**r, "sum": held[r["name"]]} if r["name"] in held else r
                  for r in member_records(result, labels, describe(given), dims, embedding.kept, plan.usage.layers)]
    record["features"] = found
    out_config = dataclasses.replace(out_config, superposition=Superposition.from_json(record, ("superposition",)))
    return Superposed(out, out_config, plan, embedding, tuple(reads), alive)


@dataclass(frozen=True)
class FoldedRoute:
    """One route of ``--residual``: the exact folds (sums ``reach``, moved queries, spanned
    columns) on the model, its chosen layout, and the packs where they reach a smaller D."""

    tensors: dict[str, Tensor]
    card: ModelCard
    result: Packed | None
    sums: Sums
    readout: ArgmaxReadout | None
    moves: list[MovedQuery]
    spans: Spans
    folded: int
    plan: Layout
    least: int
    built: Any
    smallest: int


def _best_route(tensors: dict[str, Tensor], config: ModelCard, margin: float, roundoff: float,
                residual: int) -> FoldedRoute:
    """The first route that reaches ``residual``, else the one of the smallest D (ties: the
    earlier), in order: sums the output reads, then the same with the token answer decoded from
    one number (:mod:`.readout`), then the wide reach's sums (where they differ), then those
    decoded: each later route is tried only where the earlier ones cannot reach ``residual``,
    so a model keeps its plain unembedding where that is enough."""
    best: FoldedRoute | None = None
    narrow: Sums | None = None
    for reach in ("output", "form"):
        folded, sums = summed(tensors, config, reach)
        if narrow is not None and sums == narrow:
            break
        narrow = sums if narrow is None else narrow
        for decode in (False, True):
            found = decoded(folded, sums, config) if decode else (folded, sums, None)
            if decode and found[2] is None:
                continue
            trial = _folded_route(*found, config, margin, roundoff, residual)
            best = trial if best is None or trial.smallest < best.smallest else best
            if residual >= best.smallest:
                return best
    assert best is not None
    return best


def _folded_route(tensors: dict[str, Tensor], sums: Sums, readout: ArgmaxReadout | None, config: ModelCard,
                  margin: float, roundoff: float, residual: int) -> FoldedRoute:
    """The route from ``tensors`` with ``sums`` folded (:func:`.sums.summed`, one reach) and the
    answer decoded from one number (:mod:`.readout`, where it applies): its smallest D, and the
    model it builds (packed where packing reaches below the layout alone)."""
    tensors, moves = moved_queries(tensors, config)
    tensors, spans, (plan, least, built) = _spanned_layout(tensors, config, margin)
    folded = features_alive(tensors, config)
    smallest = built[1].d_model
    result = None
    if residual < smallest:
        current = (plan, least, built, smallest)
        result, plan, least, built, smallest = _packed_route(tensors, config, margin, current, roundoff, residual)
    if result is not None:
        tensors, config = result.tensors, result.card
    return FoldedRoute(tensors, config, result, sums, readout, moves, spans, folded, plan, least, built, smallest)


def _packed_route(tensors: dict[str, Tensor], config: ModelCard, margin: float,
                  current: tuple[Layout, int, Any, int], roundoff: float,
                  residual: int) -> tuple[Packed | None, Layout, int, Any, int]:
    """The packed route (:mod:`.packed`) where it reaches a smaller D than ``current`` (plan,
    storage, model, D) does, else ``current`` (with no packs). Where ``residual`` is at least
    what packing everything reaches, only the packs that bring the plain lifetimes within it
    (:func:`.packed.fewest_within`: fewer tables, fewer units, and D near the one asked for)."""
    history = choices(tensors, config, roundoff)
    if not history:
        return (None, *current)
    result = packed(tensors, config, history[-1])
    plan, least, built = _chosen_layout(result.tensors, result.card, margin)
    width = built[1].d_model
    if width >= current[3]:
        return (None, *current)
    enough = fewest_within(history, residual) if residual >= width else None
    if enough is not None and enough is not history[-1]:
        fewer = packed(tensors, config, enough)
        few_plan, few_least, few_built = _chosen_layout(fewer.tensors, fewer.card, margin)
        if few_built[1].d_model <= residual:
            return fewer, few_plan, few_least, few_built, few_built[1].d_model
    return result, plan, least, built, width


def _packed_record(result: Packed, alive: int) -> dict[str, Any]:
    """The config's ``superposition.packed``: F once packed, and every pack's certificate."""
    return {"features_alive_packed": alive, "read": "table",
            "units_added": sum(r["units"] for r in result.records),
            "units_replaced": sum(r["plain_units"] for r in result.records), "packs": list(result.records)}


def certificate(plan: Layout, embedding: Embedding, reads: list[StorageRead], alive: int, width: int,
                margin: float) -> dict[str, Any]:
    """The config's ``superposition``: F, D, F/D, the storage, and every thresholded read's
    interference against the margin (the largest first in ``worst``)."""
    labels = plan.usage.labels
    worst = max(reads, key=lambda r: r.total, default=None)
    return {
        "features_alive": alive, "d_model": width, "ratio": alive / width,
        "superposed": len(plan.stored), "storage": int(embedding.u.shape[0]), "clean_slots": plan.slots,
        "margin": margin, "coherence": coherence(embedding.u),
        "max_interference": max((r.interference for r in reads), default=0.0),
        "max_bound": 0.0 if worst is None else worst.total,
        "worst": None if worst is None else {"feature": labels[worst.feature], "stage": worst.stage,
                                             "kind": worst.kind},
        "holds": holds(reads, margin),
        "reads": [{"feature": labels[r.feature], "stage": r.stage, "kind": r.kind,
                   "interference": r.interference, "error": r.error} for r in reads],
    }
