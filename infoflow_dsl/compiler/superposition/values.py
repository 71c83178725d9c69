"""The finite values of a token model's numbers, read off its weights (for :mod:`.packing`).

Every value a token program computes takes finitely many values; a packed direction needs them
(its scales make Σ K_i·n_i injective on them, its tables are built on them). Three sources are
read exactly, in rationals (each float weight is the rational it stores):

- the **embedding**: a direction written only by ``embed.W_E``/``pos_embed.W_pos``/``embed.cls``
  holds, at a row of token v at position p, W_E[v] + W_pos[p] (or cls + W_pos[p] on the
  readout row); the joint values of several such directions at position p are those rows;
- a **uniform head** (kind ``uniform``, ``length`` or ``position`` (a masked fetch), β = 0: every
  admitted key weighs 1/|K|) whose values read embedding directions only: its outputs at query t are
  (1/|K|)·Σ_{s∈K} val(s) W_O, val(s) one of position s's rows through W_V, K the keys its mask
  admits for (t, T'), every T' ≤ T and t ≤ T' + 1 (0 where K is empty). The set of sums is built
  key by key (a sumset), so the joint values of the head's outputs are exact, not the product
  of each output's own values (for a count: (S/c, 1/c), O(T²) pairs, not O(T³));
- an **FFN block** that records its output's values (config ``layers[l].mlp[k].values``: the
  token lowering's steps, gates and tables, whose values it knows) and alone writes that
  direction: those values, each within the block's ``error`` (the plain certificate's).

Anything else (sharp heads, vector FFNs) is not read: :func:`joint` answers None for it.
Values of directions from different sources are joined as the product of their sets (a
superset of the pairs that occur). The error of a head's output is its config's ``error``
(softmax tail, rounding); the embedding's is 0.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from ...transformer.masks import admits
from ..compress import stage_map

Tensor = torch.Tensor
Row = tuple[Fraction, ...]

#: the most joint values a source (or a pack) may have before it is left unread
CAP = 4096
UNIFORM_KINDS = ("uniform", "length", "position")


@dataclass(frozen=True)
class Source:
    """Directions ``members`` whose joint values are ``rows`` (one tuple per possible row of
    the model), each within ``error`` of its value; ``stage`` writes them."""

    name: str
    members: tuple[int, ...]
    rows: frozenset[Row]
    error: float
    stage: int


def _fractions(vector: Tensor) -> Row:
    return tuple(Fraction(float(x)) for x in vector.tolist())


def _embedding_rows(tensors: dict[str, Tensor], members: list[int]) -> list[set[Row]]:
    """Per position p (0-based row of W_pos): the rows W_E[v] + W_pos[p] (and cls + W_pos[p])."""
    w_e, w_pos, cls = (tensors[n].double()[..., members] for n in ("embed.W_E", "pos_embed.W_pos", "embed.cls"))
    tokens = {_fractions(row) for row in w_e}
    readout = _fractions(cls)
    found = []
    for p in range(w_pos.shape[0]):
        at = _fractions(w_pos[p])
        found.append({tuple(a + b for a, b in zip(t, at, strict=True)) for t in tokens | {readout}})
    return found


def _key_sets(mask: Any, length: int) -> set[frozenset[int]]:
    conditions = tuple(tuple(c) for c in mask)
    return {frozenset(s for s in range(1, last + 1) if admits(conditions, t, s, last))
            for last in range(1, length + 1) for t in range(1, last + 2)}


def _means(keys: frozenset[int], per_position: list[set[Row]], width: int) -> set[Row] | None:
    """{(1/|K|)·Σ_{s∈K} row_s}: the sumset key by key, None past :data:`CAP`."""
    if not keys:
        return {tuple(Fraction(0) for _ in range(width))}
    sums: set[Row] = {tuple(Fraction(0) for _ in range(width))}
    for s in sorted(keys):
        sums = {tuple(a + b for a, b in zip(total, row, strict=True)) for total in sums for row in per_position[s - 1]}
        if len(sums) > CAP:
            return None
    return {tuple(x / len(keys) for x in total) for total in sums}


def _head_source(tensors: dict[str, Tensor], config: dict[str, Any], layer: int, head: int,
                 embedded: list[int], writes: list[list[int]], length: int) -> Source | None:
    described = config["layers"][layer]["heads"][head]
    p = f"blocks.{layer}.attn."
    if described.get("kind") not in UNIFORM_KINDS or float(tensors[p + "beta"][head]) != 0.0:
        return None
    w_v, w_o = tensors[p + "W_V"][head].double(), tensors[p + "W_O"][head].double()
    read = torch.nonzero(w_v.ne(0).any(dim=1)).flatten().tolist()
    outputs = torch.nonzero(w_o.ne(0).any(dim=0)).flatten().tolist()
    others = [h for h in range(tensors[p + "W_O"].shape[0]) if h != head]
    if (not outputs or not set(read) <= set(embedded)
            or any(writes[o] != [2 * layer + 1] for o in outputs)
            or any(bool(tensors[p + "W_O"][h][:, outputs].ne(0).any()) for h in others)):
        return None
    through = w_v[read] @ w_o[:, outputs]  # (read, outputs): a key's row of the read directions -> its outputs
    rows = _embedding_rows(tensors, read)
    exact = [[Fraction(float(x)) for x in column] for column in through.T.tolist()]
    per_position = [{tuple(sum((r * c for r, c in zip(row, col, strict=True)), Fraction(0)) for col in exact)
                     for row in at} for at in rows]
    found: set[Row] = set()
    for keys in sorted(_key_sets(described.get("mask", []), length), key=sorted):
        means = _means(keys, per_position, len(outputs))
        if means is None:
            return None
        found |= means
        if len(found) > CAP:
            return None
    return Source(str(described.get("name", f"{layer}.{head}")), tuple(outputs), frozenset(found),
                  float(described.get("error", 0.0)), 2 * layer + 1)


def sources(tensors: dict[str, Tensor], config: dict[str, Any]) -> list[Source]:
    """The embedding's source (every direction written by the embedding alone, but ``one``'s
    reader-free constant) and every uniform head's whose values read the embedding."""
    labels, layers = list(config["residual_labels"]), len(config["layers"])
    writes, _ = stage_map(tensors, len(labels), layers)
    embedded = [i for i in range(len(labels)) if writes[i] == [0]]
    found = []
    if embedded:
        rows = _embedding_rows(tensors, embedded)
        joint = set().union(*rows)
        if len(joint) <= CAP:
            found.append(Source("embedding", tuple(embedded), frozenset(joint), 0.0, 0))
    length = int(config["T"])
    for layer in range(layers):
        for head in range(len(config["layers"][layer]["heads"])):
            source = _head_source(tensors, config, layer, head, embedded, writes, length)
            if source is not None:
                found.append(source)
        found += [source for block in config["layers"][layer]["mlp"]
                  if (source := _block_source(block, labels, writes, layer)) is not None]
    return found


def _block_source(block: dict[str, Any], labels: list[str], writes: list[list[int]], layer: int) -> Source | None:
    """An FFN block's output direction, where the block records its values (``values``: a token
    program's steps, gates, tables) and writes it alone: each value within the block's ``error``."""
    recorded = block.get("values")
    output = block.get("output")
    if recorded is None or output not in labels:
        return None
    index = labels.index(output)
    if writes[index] != [2 * layer + 2]:
        return None
    return Source(str(block.get("name", output)), (index,), frozenset((Fraction(float(v)),) for v in recorded),
                  float(block.get("error", 0.0)), 2 * layer + 2)


def joint(found: list[Source], members: tuple[int, ...]) -> frozenset[Row] | None:
    """The joint values of ``members`` (in that order): each source's rows projected on its
    members among them, the sources' sets multiplied; None where a member has no source or the
    product passes :data:`CAP`."""
    parts: list[tuple[list[int], set[Row]]] = []
    placed: set[int] = set()
    for source in found:
        mine = [m for m in members if m in source.members]
        if not mine:
            continue
        index = [source.members.index(m) for m in mine]
        parts.append((mine, {tuple(row[i] for i in index) for row in source.rows}))
        placed |= set(mine)
    if placed != set(members) or len(placed) != len(members):
        return None
    if _product_size([rows for _, rows in parts]) > CAP:
        return None
    order = [m for mine, _ in parts for m in mine]
    position = [order.index(m) for m in members]
    return frozenset(tuple(flat[i] for i in position)
                     for combo in itertools.product(*(sorted(rows) for _, rows in parts))
                     for flat in [tuple(x for row in combo for x in row)])


def _product_size(sets: list[set[Row]]) -> int:
    size = 1
    for s in sets:
        size *= len(s)
    return size


def error_of(found: list[Source], member: int) -> float:
    return next(s.error for s in found if member in s.members)


__all__ = ["CAP", "Row", "Source", "error_of", "joint", "sources"]
