"""The finite values of a token model's numbers, read off its weights (for :mod:`.packing`).

Every value a token program computes takes finitely many values; a packed direction needs them
(its scales make Σ K_i·n_i injective on them, its tables are built on them). Three sources are
read exactly, in rationals (each float weight is the rational it stores):

- the **embedding**: a direction written only by ``embed.W_E``/``pos_embed.W_pos``/``embed.cls``
  holds, at a row of token v at position p, W_E[v] + W_pos[p] (or cls + W_pos[p] on the
  readout row); the joint values of several such directions at position p are those rows;
- a **uniform head** (kind ``uniform``, ``length`` or ``position`` (a masked fetch), β = 0: every
  admitted key weighs 1/|K|) whose values read embedding directions and earlier FFN blocks'
  outputs (below: each of their values at any position, joined with the embedding's rows
  there, a superset of the rows that occur): its outputs at query t are
  (1/|K|)·Σ_{s∈K} val(s) W_O, val(s) one of position s's rows through W_V, K the keys its mask
  admits for (t, T'), every T' ≤ T and t ≤ T' + 1 (0 where K is empty). The set of sums is built
  key by key (a sumset), so the joint values of the head's outputs are exact, not the product
  of each output's own values (for a count: (S/c, 1/c), O(T²) pairs, not O(T³));
- a **sharp head** (β > 0) of one score dimension whose key is a form k = Σ w_i·h_i and whose
  value columns are multiples α_j·k, its query one direction positive at every row: its winners
  tie on k, so its outputs hold θ·k(winner) (θ = α·W_O), k taking its values at the token rows
  (the keys: the embedding's there, joined with the other sources'), 0 where its mask admits no
  key; within the head's stated error times max(1, θ·span(k)), plus k's own error times θ (a
  running max's output takes x's values);
- a **sharp head with one winner** (kinds ``position`` and ``token retrieval``: a scored fetch
  x(p) by 2p·s − s², an arg head with its tie-break −γ·s; :func:`_fetch_source`) whose values
  read embedding directions and earlier FFN blocks' outputs: its outputs hold the winner's row
  through W_V·W_O (any position's rows: a superset), 0 where its mask admits no key; within the
  head's stated error (the tail's weight) times the rows' span;
- an **FFN block** that records its output's values (config ``layers[l].mlp[k].values``: the
  token lowering's steps, gates and tables, whose values it knows) and alone writes that
  direction: those values, each within the block's ``error`` (the plain certificate's);
- an FFN block that records none, whose units read directions of known joint values and write
  one direction it alone writes: the block **evaluated** on every joint row, exactly
  (:func:`_evaluated_source`: a product of a token and a head's mean, a gate over a count).

A source's direction that a later stage writes again (a sum folded onto it, :mod:`.sums`) holds
its values up to that stage (``until``): later sources read it only where their stage sees them.
Anything else (other sharp heads, vector FFNs) is not read: :func:`joint` answers None for it.
Values of directions from different sources are joined as the product of their sets (a
superset of the pairs that occur). The error of a head's output is its config's ``error``
(softmax tail, rounding); the embedding's is 0.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from ...transformer.card import BlockCard, ModelCard
from ...transformer.masks import admits
from ..compress import stage_map
from .queries import least_values

Tensor = torch.Tensor
Row = tuple[Fraction, ...]

#: the most joint values a source (or a pack) may have before it is left unread
CAP = 4096
#: float32's unit roundoff (an evaluated FFN's rounding is bounded for it, so for float64 too)
FLOAT32_ROUNDOFF = 2.0**-24
#: the most (sum, row) pairs one step of a head's sumset may form (:func:`_means`)
WORK = 1 << 16
#: the most rows a key position may hold where a head's values read FFN outputs (:func:`_key_rows`)
KEY_ROWS = 256
UNIFORM_KINDS = ("uniform", "length", "position")
#: the sharp heads whose winner is one key (the lowering's tie-break or a unique best score)
FETCH_KINDS = ("position", "token retrieval")


@dataclass(frozen=True)
class Source:
    """Directions ``members`` whose joint values are ``rows`` (one tuple per possible row of
    the model), each within ``error`` of its value; ``stage`` writes them. ``until``: per member,
    the first stage after ``stage`` that writes it again (a sum folded onto it, :mod:`.sums`), inf
    where none does (empty: none for any); a read at a stage up to it sees the member's values (a
    stage reads before it writes), a later one does not."""

    name: str
    members: tuple[int, ...]
    rows: frozenset[Row]
    error: float
    stage: int
    until: tuple[float, ...] = ()

    def until_of(self, member: int) -> float:
        return self.until[self.members.index(member)] if self.until else math.inf

    def seen_at(self, stage: int) -> Source | None:
        """The source as a read at ``stage`` sees it: the members whose values it sees, their rows
        projected on them (None where it sees none)."""
        kept = [k for k, m in enumerate(self.members) if stage <= self.until_of(m)]
        if len(kept) == len(self.members):
            return self
        if not kept:
            return None
        return Source(self.name, tuple(self.members[k] for k in kept),
                      frozenset(tuple(row[k] for k in kept) for row in self.rows), self.error, self.stage,
                      tuple(self.until[k] for k in kept))


def _later_writes(writes: list[list[int]], members: list[int], stage: int) -> tuple[float, ...]:
    """Per member, the first stage after ``stage`` that writes it (inf: none)."""
    return tuple(float(min((w for w in writes[m] if w > stage), default=math.inf)) for m in members)


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
    """{(1/|K|)·Σ_{s∈K} row_s}: the sumset key by key, None past :data:`CAP` sums or a step past
    :data:`WORK` pairs (a key's rows times the sums so far)."""
    if not keys:
        return {tuple(Fraction(0) for _ in range(width))}
    sums: set[Row] = {tuple(Fraction(0) for _ in range(width))}
    for s in sorted(keys):
        if len(sums) * len(per_position[s - 1]) > WORK:
            return None
        sums = {tuple(a + b for a, b in zip(total, row, strict=True)) for total in sums for row in per_position[s - 1]}
        if len(sums) > CAP:
            return None
    return {tuple(x / len(keys) for x in total) for total in sums}


def _key_rows(tensors: dict[str, Tensor], read: list[int], embedded: list[int],
              blocks: list[Source]) -> list[set[Row]] | None:
    """Per position: the rows (in ``read``'s order) a key there can hold: its embedding rows
    joined with every value of the FFN blocks' outputs among ``read`` (a superset: an output's
    values at any position); None where a read direction has neither source, or past
    :data:`KEY_ROWS` rows a position."""
    from_blocks = [m for m in read if m not in embedded]
    block_rows = joint(blocks, tuple(from_blocks)) if from_blocks else frozenset({()})
    if block_rows is None:
        return None
    mine = [m for m in read if m in embedded]
    rows = _embedding_rows(tensors, mine)
    if len(rows[0]) * len(block_rows) > KEY_ROWS:
        return None
    order = [*mine, *from_blocks]
    position = [order.index(m) for m in read]
    return [{tuple((*e, *b)[i] for i in position) for e in at for b in block_rows} for at in rows]


def _own_outputs(tensors: dict[str, Tensor], layer: int, head: int, writes: list[list[int]]) -> list[int]:
    """The directions a head writes, where it alone writes them first (no other head, no earlier
    stage; a later stage may add a sum onto them: the source's ``until``); else [] (their values
    are not the head's alone)."""
    p = f"blocks.{layer}.attn."
    outputs = torch.nonzero(tensors[p + "W_O"][head].ne(0).any(dim=0)).flatten().tolist()
    others = [h for h in range(tensors[p + "W_O"].shape[0]) if h != head]
    if (any(writes[o][:1] != [2 * layer + 1] for o in outputs)
            or any(bool(tensors[p + "W_O"][h][:, outputs].ne(0).any()) for h in others)):
        return []
    return outputs


def _value_rows(tensors: dict[str, Tensor], layer: int, head: int, outputs: list[int], embedded: list[int],
                blocks: list[Source]) -> list[set[Row]] | None:
    """Per key position: the head's ``outputs`` a key there alone would give, its rows
    (:func:`_key_rows`) through W_V·W_O, exact; None where a read direction has no source."""
    p = f"blocks.{layer}.attn."
    w_v, w_o = tensors[p + "W_V"][head].double(), tensors[p + "W_O"][head].double()
    read = torch.nonzero(w_v.ne(0).any(dim=1)).flatten().tolist()
    rows = _key_rows(tensors, read, embedded, blocks)
    if rows is None:
        return None
    through = w_v[read] @ w_o[:, outputs]  # (read, outputs): a key's row of the read directions -> its outputs
    exact = [[Fraction(float(x)) for x in column] for column in through.T.tolist()]
    return [{tuple(sum((r * c for r, c in zip(row, col, strict=True)), Fraction(0)) for col in exact)
             for row in at} for at in rows]


def _head_source(tensors: dict[str, Tensor], config: ModelCard, layer: int, head: int,
                 embedded: list[int], writes: list[list[int]], length: int, blocks: list[Source]) -> Source | None:
    described = config.layers[layer].heads[head]
    p = f"blocks.{layer}.attn."
    if described.kind not in UNIFORM_KINDS or float(tensors[p + "beta"][head]) != 0.0:
        return None
    outputs = _own_outputs(tensors, layer, head, writes)
    per_position = _value_rows(tensors, layer, head, outputs, embedded, blocks) if outputs else None
    if per_position is None:
        return None
    found: set[Row] = set()
    for keys in sorted(_key_sets(described.conditions, length), key=sorted):
        means = _means(keys, per_position, len(outputs))
        if means is None:
            return None
        found |= means
        if len(found) > CAP:
            return None
    return Source(described.name, tuple(outputs), frozenset(found),
                  float(described.error or 0.0), 2 * layer + 1, _later_writes(writes, outputs, 2 * layer + 1))


def _fetch_source(tensors: dict[str, Tensor], config: ModelCard, layer: int, head: int,
                  embedded: list[int], writes: list[list[int]], length: int, blocks: list[Source]) -> Source | None:
    """A sharp head with one winner (kinds :data:`FETCH_KINDS`: a scored fetch x(p) by
    2p·s − s², an arg head with its tie-break −γ·s) whose values read the embedding and earlier
    FFN blocks: its outputs hold val(s*)·W_V·W_O at the winner s*, any key's row (a superset: every
    position's rows), or 0 where its mask admits no key. The tail's weight (the head's stated
    error) moves an output j by at most error·span_j (the other keys' rows differ from the
    winner's by at most the span): the source's error is error·max(1, span)."""
    described = config.layers[layer].heads[head]
    p = f"blocks.{layer}.attn."
    if described.kind not in FETCH_KINDS or float(tensors[p + "beta"][head]) <= 0.0:
        return None
    outputs = _own_outputs(tensors, layer, head, writes)
    per_position = _value_rows(tensors, layer, head, outputs, embedded, blocks) if outputs else None
    if per_position is None:
        return None
    found = set().union(*per_position)
    if any(not keys for keys in _key_sets(described.conditions, length)):
        found.add(tuple(Fraction(0) for _ in outputs))
    if len(found) > CAP:
        return None
    span = max(float(max(r[j] for r in found) - min(r[j] for r in found)) for j in range(len(outputs)))
    return Source(described.name, tuple(outputs), frozenset(found),
                  float(described.error or 0.0) * max(1.0, span), 2 * layer + 1,
                  _later_writes(writes, outputs, 2 * layer + 1))


def _sharp_source(tensors: dict[str, Tensor], config: ModelCard, layer: int, head: int,
                  writes: list[list[int]], length: int, found: list[Source]) -> Source | None:
    """A sharp head (β > 0) of one score dimension, its query one direction positive at every row
    (``one``, or where :mod:`.queries` moved it), its key a form k(s) = Σ w_i·h_i(s) and every
    value column α_j·k(s): the winners tie on k, so each output j holds θ_j·k(winner) (θ = α·W_O),
    off by at most the tail's weight times θ_j·span(k) plus k's own error; 0 where its mask
    admits no key."""
    described = config.layers[layer].heads[head]
    p = f"blocks.{layer}.attn."
    if float(tensors[p + "beta"][head]) <= 0.0:
        return None
    w_q, w_k, w_v, w_o = (tensors[p + n][head].double() for n in ("W_Q", "W_K", "W_V", "W_O"))
    query = torch.nonzero(w_q.ne(0).any(dim=1)).flatten().tolist()
    columns = torch.nonzero(w_k.ne(0).any(dim=0) | w_q.ne(0).any(dim=0)).flatten().tolist()
    outputs = _own_outputs(tensors, layer, head, writes)
    if len(query) != 1 or len(columns) != 1 or not outputs or not _positive(tensors, config, query[0], writes):
        return None
    form = w_k[:, columns[0]]  # (D,): k(s) = form · h(s)
    read = torch.nonzero(form).flatten().tolist()
    if not read:  # a query with no key: every key ties
        return None
    alpha = w_v[read[0]] / form[read[0]]  # (V,): value column j = α_j·k, where it is one
    if not torch.equal(w_v, form[:, None] * alpha[None, :]):
        return None
    values = _form_values(tensors, form, read, found)
    if values is None:
        return None
    theta = [Fraction(float(x)) for x in (alpha @ w_o[:, outputs]).tolist()]  # (outputs,)
    rows = {tuple(v * c for c in theta) for v in values}
    if any(not keys for keys in _key_sets(described.conditions, length)):
        rows.add(tuple(Fraction(0) for _ in outputs))
    span, reach = float(max(values) - min(values)), max(abs(float(c)) for c in theta)
    own = sum(abs(float(form[i])) * error_of(found, i) for i in read if writes[i][:1] != [0])
    error = float(described.error or 0.0) * max(1.0, span * reach) + own * reach
    return Source(described.name, tuple(outputs), frozenset(rows), error,
                  2 * layer + 1, _later_writes(writes, outputs, 2 * layer + 1))


def _form_values(tensors: dict[str, Tensor], form: Tensor, read: list[int],
                 found: list[Source]) -> set[Fraction] | None:
    """The values Σ w_i·h_i(s) takes at the token rows (the keys): the embedding's directions at
    every token v and position p = 1..T (W_pos's last row is the readout row's alone), joined
    with the other sources' values (a superset); None where a direction has no source or past
    :data:`CAP`."""
    visible = {m for source in found if source.stage == 0 for m in source.members}  # ``found``: as the head sees
    embedded = [i for i in read if i in visible]
    rest = tuple(i for i in read if i not in visible)  # an embedding column past a fold has no source: None
    others = joint(found, rest) if rest else frozenset({()})
    if others is None:
        return None
    table, positions = (tensors[n].double()[..., embedded] for n in ("embed.W_E", "pos_embed.W_pos"))
    weights = [Fraction(float(form[i])) for i in [*embedded, *rest]]
    tokens = {tuple(Fraction(float(a)) + Fraction(float(b)) for a, b in zip(e, q, strict=True))
              for e in table.tolist() for q in positions[:-1].tolist()}
    if len(tokens) * len(others) > CAP:
        return None
    return {sum((w * x for w, x in zip(weights, (*e, *o), strict=True)), Fraction(0)) for e in tokens for o in others}


def _positive(tensors: dict[str, Tensor], config: ModelCard, direction: int, writes: list[list[int]]) -> bool:
    """Whether the embedding alone writes ``direction`` and its value is positive at every row
    the model reads (the token rows; the readout row unless per token)."""
    return writes[direction] == [0] and float(least_values(tensors, config.per_token)[direction]) > 0


def sources(tensors: dict[str, Tensor], config: ModelCard) -> list[Source]:
    """The embedding's source (every direction written by the embedding alone, but ``one``'s
    reader-free constant) and every uniform head's whose values read the embedding."""
    labels, layers = list(config.labels), len(config.layers)
    writes, _ = stage_map(tensors, len(labels), layers)
    embedded = [i for i in range(len(labels)) if writes[i][:1] == [0]]  # a later write: a sum folded onto it
    found = []
    if embedded:
        rows = _embedding_rows(tensors, embedded)
        joint = set().union(*rows)
        if len(joint) <= CAP:
            found.append(Source("embedding", tuple(embedded), frozenset(joint), 0.0, 0,
                                _later_writes(writes, embedded, 0)))
    length = int(config.T)
    for layer in range(layers):
        seen = _seen(found, 2 * layer + 1)  # what this layer's heads read
        blocks = [source for source in seen if source.stage > 0 and len(source.members) == 1]  # earlier layers
        visible = [i for i in embedded if any(i in source.members for source in seen if source.stage == 0)]
        for head in range(len(config.layers[layer].heads)):
            source = (_head_source(tensors, config, layer, head, visible, writes, length, blocks)
                      or _sharp_source(tensors, config, layer, head, writes, length, seen)
                      or _fetch_source(tensors, config, layer, head, visible, writes, length, blocks))
            if source is not None:
                found.append(source)
        seen = _seen(found, 2 * layer + 2)  # what this layer's FFN reads
        for index, block in enumerate(config.layers[layer].blocks):
            source = (_block_source(block, labels, writes, layer)
                      or _evaluated_source(tensors, config, layer, index, writes, seen))
            if source is not None:
                found.append(source)
    return found


def unit_reads(w_in: Tensor) -> list[list[tuple[int, Fraction]]]:
    """Per unit (column of ``w_in``, rows: the directions read), its nonzero entries (k, W_in[k, u])
    as rationals."""
    return [[(k, Fraction(w)) for k, w in enumerate(column) if w != 0] for column in w_in.double().T.tolist()]


def evaluated(row: Row, reads: list[list[tuple[int, Fraction]]], biases: list[Fraction],
              columns: list[list[Fraction]]) -> tuple[Fraction, ...]:
    """FFN units on the values ``row`` of the directions they read, exactly: per output column c,
    Σ_u c_u·relu(b_u + Σ_k W_in[k, u]·row_k)."""
    active = [max(Fraction(0), b + sum((w * row[k] for k, w in read), Fraction(0)))
              for b, read in zip(biases, reads, strict=True)]
    return tuple(sum((a * c for a, c in zip(active, column, strict=True) if a), Fraction(0)) for column in columns)


def _seen(found: list[Source], stage: int) -> list[Source]:
    """The sources as a read at ``stage`` sees them (:meth:`Source.seen_at`), in order."""
    return [seen for source in found if (seen := source.seen_at(stage)) is not None]


def _units(config: ModelCard, layer: int, index: int) -> range:
    """The units (columns of W_in) of block ``index`` of layer ``layer``'s FFN, in the order the
    config lists the blocks."""
    blocks = config.layers[layer].blocks
    start = sum(b.units for b in blocks[:index])
    return range(start, start + blocks[index].units)


def _evaluated_source(tensors: dict[str, Tensor], config: ModelCard, layer: int, index: int,
                      writes: list[list[int]], found: list[Source]) -> Source | None:
    """An FFN block that records no values, whose units read directions of known joint values J
    and alone write its one output direction o (first at its stage): its output on every row r
    of J, exactly (rationals),

        out(r) = b_out[o] + Σ_u W_out[u, o]·relu(b_in[u] + Σ_i W_in[i, u]·r_i),

    each within err = Σ_u |W_out[u, o]|·Σ_i |W_in[i, u]|·err_i (relu is 1-Lipschitz; err_i the
    inputs' errors) plus the float32 rounding of the sums (2ϱ·Σ_u |W_out[u, o]|·reach_u, reach_u
    the largest |pre-activation| term sum). None past :data:`WORK` (rows × units) or where an
    input has no source."""
    p = f"blocks.{layer}.mlp."
    units = list(_units(config, layer, index))
    if not units:
        return None
    w_in, b_in = tensors[p + "W_in"].double()[:, units], tensors[p + "b_in"].double()[units]
    w_out, b_out = tensors[p + "W_out"].double()[units], tensors[p + "b_out"].double()
    written = torch.nonzero(w_out.ne(0).any(dim=0)).flatten().tolist()
    if len(written) != 1 or writes[written[0]][:1] != [2 * layer + 2]:
        return None
    (o,) = written
    others = [u for u in range(tensors[p + "W_out"].shape[0]) if u not in set(units)]
    if others and bool(tensors[p + "W_out"][others, o].ne(0).any()):
        return None
    read = torch.nonzero(w_in.ne(0).any(dim=1)).flatten().tolist()
    rows = joint(found, tuple(read)) if read else frozenset({()})
    if rows is None or len(rows) * len(units) > WORK:
        return None
    reads = unit_reads(w_in[read])
    biases = [Fraction(float(b)) for b in b_in.tolist()]
    out_weights = [Fraction(float(w)) for w in w_out[:, o].tolist()]
    constant = Fraction(float(b_out[o]))
    values = {(constant + evaluated(row, reads, biases, [out_weights])[0],) for row in rows}
    if len(values) > CAP:
        return None
    errors = [error_of(found, i) for i in read]
    reach = [float(abs(b_in[u])) + sum(abs(float(w_in[i, u])) * max(abs(float(r[k])) for r in rows)
                                      for k, i in enumerate(read)) for u in range(len(units))]
    slope = [sum(abs(float(w_in[i, u])) * e for i, e in zip(read, errors, strict=True)) for u in range(len(units))]
    error = sum(abs(float(w_out[u, o])) * (slope[u] + 2 * FLOAT32_ROUNDOFF * reach[u]) for u in range(len(units)))
    name = config.layers[layer].blocks[index].name
    return Source(name, (o,), frozenset(values), error, 2 * layer + 2, _later_writes(writes, [o], 2 * layer + 2))


def _block_source(block: BlockCard, labels: list[str], writes: list[list[int]], layer: int) -> Source | None:
    """An FFN block's output direction, where the block records its values (``values``: a token
    program's steps, gates, tables) and writes it alone: each value within the block's ``error``."""
    recorded = block.values
    output = block.output
    if recorded is None or output not in labels:
        return None
    index = labels.index(output)
    if writes[index][:1] != [2 * layer + 2]:
        return None
    return Source(block.name, (index,), frozenset((Fraction(float(v)),) for v in recorded),
                  float(block.error), 2 * layer + 2, _later_writes(writes, [index], 2 * layer + 2))


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


def until_of(found: list[Source], member: int) -> float:
    """The last stage whose reads see ``member``'s values (:attr:`Source.until`)."""
    return next(s.until_of(member) for s in found if member in s.members)


__all__ = ["CAP", "Row", "Source", "error_of", "evaluated", "joint", "sources", "unit_reads", "until_of"]
