"""Numbers every later reader reads in one linear form share a coordinate holding that form
(exact in real arithmetic).

Let j be a direction first written at stage w_j, and M the stack of every read of the residual
at a stage after w_j (W_Q, W_K, W_V of the heads there, the FFNs' W_in, W_U; one row per
direction). A read at stage w_j itself comes before j's write (heads of one layer read the same
residual, an FFN reads before it writes), so it sees h_j = 0. When M[j] = Σ_i a_i·M[i] over
other directions i, each first written no later than w_j, j's writers can write into the i's
coordinates instead: :func:`summed` adds a_i times every writer's column of j to i's and sets
j's columns and its rows of every reader to 0. Coordinate i then holds g_i = h_i + a_i·h_j,
and every read after w_j is

    Σ_{k≠j} M[k]·h_k + Σ_i a_i·M[i]·h_j = Σ_k M[k]·h_k,

the same as before, exactly in real arithmetic (in floats each writer's column of i is rounded
once more); at w_j and before, h_j = 0 so g_i = h_i. The i may be read on their own before w_j
(that is what ``w_j`` buys over "read by one reader alone"): a product's factor m, read by the
product's FFN and then only by the output beside the product (x(t)·m = product + lo·m), holds
m + product/lo once the product is written, and the product takes no direction of its own; a
uniform head's values read an FFN's output and the table beside it in one form (a mean of
x(s)·len), which then share one coordinate.

A numeric output (one column of W_U) is the case in point of the last reader: every number
that only the output reads after some stage shares one coordinate holding the output's linear
form (Tracr's nary_add, 2·x(t) − (t − 1): the token's 2·x(t) and the position's t, alive
together and read only by the output, become one direction holding 2·x(t) − t).

Unlike the other folds this one keeps no separate values: coordinate i holds a sum that no reader
splits, so the feature dictionary lists i's record as that ``sum`` (its terms' names and weights)
and j on no direction of its own (``in_sums``: the records that hold it); before j's first write
the sum's value is h_i's (h_j = 0 there). A direction of a categorical group
(:mod:`.categorical`) is never folded nor folded onto: the groups stay what they were for the
clean-ups. The coefficients are exact binary fractions checked in rational arithmetic
(:func:`.spans.combination`), so the fold is never approximate. Folding j onto i makes i a
direction of several writers, whose values packing no longer reads (:mod:`.values`): the fold
is kept only where it lowers the peak of directions alive at once (:func:`summed`).
"""

from __future__ import annotations

import torch

from ...transformer.card import ModelCard
from ..compress import drop_unread_writes, stage_map, stage_tensors
from .categorical import usage
from .spans import basis, combination, scaled_sum

Tensor = torch.Tensor

#: {i: ((name index, weight), ...)}: coordinate i holds Σ weight·h_name (i's own term first)
Sums = dict[int, tuple[tuple[int, float], ...]]


def _stages(tensors: dict[str, Tensor], config: ModelCard) -> tuple[list[list[int]], list[list[int]]]:
    """(writes, reads): every direction's stages under tight lifetimes (a write nothing reads
    dropped; the readers are untouched by that)."""
    size, layers = len(config.labels), len(config.layers)
    tight = dict(tensors)
    drop_unread_writes(tight, size, layers)
    return stage_map(tight, size, layers)


def _read_as_one(tensors: dict[str, Tensor], config: ModelCard, first: list[int | None],
                 binary: bool) -> tuple[dict[str, Tensor], Sums, set[int]]:
    """(the tensors, sums, the members of the groups dissolved): a categorical group whose members
    every later reader reads in one form, Σ_k c_k·h_k (a fetched number's one-hot that only the
    output reads, v·[x(1) = v] summed over v), is folded onto one member i, which then holds that
    sum (the form's coefficients c_k/c_i, exact as :func:`_terms` requires); the group is gone,
    and its one direction a number like any other. A member no later reader reads folds onto
    nothing (its writes are dropped)."""
    if config.vocabulary is None:
        return dict(tensors), {}, set()
    layers, out, sums, dissolved = len(config.layers), dict(tensors), Sums(), set[int]()
    for group in usage(tensors, config).groups:
        written = [j for j in group.members if first[j] is not None]  # a member nothing reads is never written
        if len({first[j] for j in written}) != 1:
            continue
        rows = reads_after(out, layers, first[written[0]] or 0)  # (D, K): every later read
        read = [j for j in group.members if rows[j].ne(0).any()]
        if len(read) < 2:
            continue
        others = set(range(len(first))) - {read[0]}  # read[0] keeps the sum; nothing else supports it
        terms = {j: _terms(out, layers, first, j, others, binary) if j in read else ()
                 for j in sorted(set(group.members) - {read[0]})}
        if any(t is None for t in terms.values()):
            continue
        for j, term in terms.items():
            assert term is not None
            _fold_writes(out, layers, j, term)
            sums = _summed(sums, j, term) if term else sums
        dissolved |= set(group.members)
    return out, sums, dissolved


def _grouped(tensors: dict[str, Tensor], config: ModelCard, alone: bool = True) -> set[int]:
    """The directions of the categorical groups (never folded nor folded onto); not ``alone``:
    of the groups of two or more (a lone indicator may be folded onto like a number)."""
    if config.vocabulary is None:
        return set()
    return {m for g in usage(tensors, config).groups if alone or len(g.members) > 1 for m in g.members}


def reads_after(tensors: dict[str, Tensor], layers: int, stage: int) -> Tensor:
    """(D, K): every read of the residual at a stage after ``stage``, a direction's row its
    entries in every reader there (W_Q, W_K, W_V, W_in, W_U), side by side."""
    blocks = []
    for at, readers, _ in stage_tensors(layers):
        for name in readers if at > stage else ():
            t = tensors[name].to(torch.float64)
            t = t if t.dim() > 1 else t[None]
            blocks.append(t.movedim(-2, 0).reshape(t.shape[-2], -1))  # (..., D, E) -> (D, ...·E)
    return torch.cat(blocks, dim=1)


def read_by_unembedding_alone(tensors: dict[str, Tensor], config: ModelCard) -> dict[int, int]:
    """{direction: its first write} of every direction whose reads after its first write are
    the unembedding's alone (under tight lifetimes), outside the categorical groups."""
    last = 2 * len(config.layers) + 1
    writes, reads = _stages(tensors, config)
    grouped = _grouped(tensors, config)
    return {i: min(w) for i, w in enumerate(writes)
            if w and i not in grouped and [r for r in reads[i] if r > min(w)] == [last]}


def _fold_writes(tensors: dict[str, Tensor], layers: int, j: int, terms: tuple[tuple[int, float], ...]) -> None:
    """In place: every writer's column of j added onto each i's times a_i; j's columns and its
    rows of every reader 0."""
    for _, readers, writers in stage_tensors(layers):
        for name in writers:
            t = tensors[name].clone()
            column = t[..., j].clone()
            for i, a in terms:
                t[..., i] += a * column
            t[..., j] = 0.0
            tensors[name] = t
        for name in readers:
            t = tensors[name].clone()
            t[..., j, :] = 0.0
            tensors[name] = t


def _summed(sums: Sums, j: int, terms: tuple[tuple[int, float], ...]) -> Sums:
    """The sums after j's coordinate (holding its own sum) is added onto each i's times a_i."""
    moved = sums.get(j, ((j, 1.0),))
    out = {k: v for k, v in sums.items() if k != j}
    for i, a in terms:
        out[i] = scaled_sum((1.0, out.get(i, ((i, 1.0),))), (a, moved))
    return out


def _terms(tensors: dict[str, Tensor], layers: int, first: list[int | None], j: int, exclude: set[int],
           binary: bool) -> tuple[tuple[int, float], ...] | None:
    """j's row of every read after its first write ``first[j]`` as Σ a_i·(i's row) over
    directions first written no later, outside ``exclude``, exactly (``binary``: every a_i a
    binary fraction); None where there is none."""
    w = first[j]
    assert w is not None
    supporters = [i for i, f in enumerate(first) if i != j and i not in exclude and f is not None and f <= w]
    rows = reads_after(tensors, layers, w)  # (D, K)
    rows = rows[:, rows[[j, *supporters]].ne(0).any(dim=0)]
    if not rows.shape[1] or not rows[j].ne(0).any():
        return None
    columns = rows.T  # (K, D): every direction's reads as a column
    return combination(columns, j, basis(columns, supporters), binary)


#: what :func:`summed` folds: ``output``, numbers the unembedding alone reads (after their own
#: first write), by binary coefficients; ``form``, every direction whose reads after its first
#: write are one form of earlier-written directions', by any fraction (module docstring)
REACHES = ("output", "form")


def summed(tensors: dict[str, Tensor], config: ModelCard, reach: str = "form") -> tuple[dict[str, Tensor], Sums]:
    """(the tensors with every direction whose later reads are a combination of earlier-written
    directions' folded onto them, within ``reach`` (:data:`REACHES`), {i: the sum coordinate i
    holds}) as the module docstring says; the latest-written direction first (ties: the higher
    index); ``tensors`` unchanged. First writes are read once: a fold adds writes to an i at j's
    first write, never before i's own, and changes no reader but j's rows."""
    assert reach in REACHES, reach
    layers = len(config.layers)
    first = [min(w) if w else None for w in _stages(tensors, config)[0]]
    out, sums, dissolved = _read_as_one(tensors, config, first, binary=reach == "output")
    grouped = _grouped(out, config, alone=reach == "output")  # the groups left
    if reach == "output":
        alone = set(read_by_unembedding_alone(out, config))
        grouped |= {i for i in range(len(first)) if i not in alone}
    folded = dissolved - set(sums)
    for j in sorted((i for i, f in enumerate(first) if f is not None and i not in grouped | folded),
                    key=lambda i: (-(first[i] or 0), -i)):
        terms = _terms(out, layers, first, j, folded | grouped, binary=reach == "output")
        if terms is None:
            continue
        _fold_writes(out, layers, j, terms)
        sums = _summed(sums, j, terms)
        folded.add(j)
    if reach == "form" and config.vocabulary is not None and not config.per_token:
        out, sums = _hosted_at_readout(out, config, sums, first, folded)
    return out, sums


def _hosted_at_readout(tensors: dict[str, Tensor], config: ModelCard, sums: Sums, first: list[int | None],
                       folded: set[int]) -> tuple[dict[str, Tensor], Sums]:
    """A sequence model's output is read at the readout row alone. A number i first written at
    stage w and read after w by the unembedding alone is written onto a direction j that the
    embedding alone writes, 0 at the readout row (its ``cls`` entry and every row of the
    positional code a readout can take), and that nothing reads after w nor the unembedding
    reads: j's coordinate holds h_j + h_i (a sum, in the dictionary too), which is h_i at the
    readout row, where the unembedding reads it (its row of j becomes its row of i), and which
    no reader reads anywhere else after w (reads at w come before the writes). Exact: the
    output at the readout row is unchanged; the token rows' outputs of a sequence model are no
    value of the program. (Tracr-like `flip(x(len))`: the fetched token's one-hot takes the
    directions of the token's own indicators, which the fetch head reads at w.)"""
    layers, last = len(config.layers), 2 * len(config.layers) + 1
    writes, reads = _stages(tensors, config)
    cls, w_pos = tensors["embed.cls"], tensors["pos_embed.W_pos"]
    taken = set(sums) | folded | {i for terms in sums.values() for i, _ in terms}
    hosts = [j for j in range(len(first)) if writes[j] == [0] and j not in taken and last not in reads[j]
             and float(cls[j]) == 0.0 and not w_pos[1:, j].ne(0).any()]
    out = dict(tensors)
    for i in sorted(i for i, w in enumerate(first) if w is not None and i not in taken
                    and [r for r in reads[i] if r > w] == [last]):
        host = next((j for j in hosts if max(reads[j], default=0) <= (first[i] or 0)), None)
        if host is None:
            continue
        hosts.remove(host)
        unembedding = out["unembed.W_U"].clone()
        unembedding[host] += unembedding[i]
        _fold_writes(out, layers, i, ((host, 1.0),))
        out["unembed.W_U"] = unembedding
        out["unembed.W_U"][i] = 0.0
        sums = _summed(sums, i, ((host, 1.0),))
    return out, sums


__all__ = ["REACHES", "Sums", "read_by_unembedding_alone", "reads_after", "summed"]
