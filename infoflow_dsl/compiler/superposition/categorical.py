"""Which residual directions of a compiled token model are **categorical**, and where each
direction is written and read.

A categorical feature is an indicator (one value of a finite set at a position) that belongs to
a **group** whose values at every row are a convex combination of one-hot vectors: the sum of
the group's values at a row (its *mass*) is at most 1. Two kinds are recognised from the
weights and the config alone:

- **embedding groups**: directions written only by the token table ``embed.W_E`` (or only by
  the positional code ``pos_embed.W_pos``) with every entry 0 or 1; columns with disjoint
  supports (no token, or no position, sets two of them) share a group, so each row of the
  table adds at most one 1 to the group: mass ≤ 1, values exactly 0/1.
- **FFN groups**: the output directions of the FFN blocks of one layer that the lowering tagged
  with one ``group`` (a token table's scores [f(args) = w], one per token w: the table gives
  one token, so at most one is 1), each block's values 0 and 1 (within its stated error, the
  group's tail) and each direction written by that FFN alone.
- **head groups**: the outputs of a sharp head (kind ``position`` or ``token retrieval``: one
  key holds all but the softmax tail, the head's stated error, of the weight) whose value
  column j reads exactly one direction d_j with coefficient 1, all d_j of one categorical
  group, and writes it to one direction o_j with coefficient 1 that nothing else writes. Its
  output at a row is Σ_s a_s v(s), a convex combination of the group's values at the keys:
  mass ≤ 1, and each o_j is within the tail of 0 or 1.

A model over vectors (no ``vocabulary`` in its config) has no categorical group: its embedding
is a linear map of the input, whose 0/1 columns copy coordinates of x, not indicators.

Stages follow :func:`~infoflow_dsl.compiler.compress.stage_tensors`: 0 the embedding,
2l + 1 layer l's heads, 2l + 2 its FFN, 2L + 1 the unembedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...transformer.card import BlockCard, ModelCard
from ..compress import stage_map

Tensor = torch.Tensor

#: head kinds whose pattern puts all but the tail on one key (compiler.tokens.fetch/heads)
SHARP_KINDS = ("position", "token retrieval")
EMBEDDING_WRITERS = ("embed.W_E", "pos_embed.W_pos")


@dataclass(frozen=True)
class Group:
    """Categorical features (residual indices ``members``) whose values at a row sum to at most
    1; written at stage ``stage`` by ``writer`` (``embedding`` or a head's name), each member
    within ``tail`` of 0 or 1 when its inputs are exact. ``reads`` (a head group's value
    columns) are the members of the group it copies, in the order of ``members``."""

    writer: str
    stage: int
    members: tuple[int, ...]
    tail: float = 0.0
    layer: int = -1
    head: int = -1
    reads: tuple[int, ...] = ()


@dataclass(frozen=True)
class Usage:
    """The plain model's residual directions: each one's stages of writes and reads, and the
    categorical groups."""

    labels: tuple[str, ...]
    layers: int
    writes: tuple[tuple[int, ...], ...]
    reads: tuple[tuple[int, ...], ...]
    groups: tuple[Group, ...]

    def group_of(self) -> dict[int, Group]:
        return {m: g for g in self.groups for m in g.members}

    def first_write(self, index: int) -> int:
        return min(self.writes[index], default=2 * self.layers + 2)

    def live_reads(self, index: int) -> tuple[int, ...]:
        """The stages that read ``index`` after its first write (an earlier read reads 0)."""
        return tuple(s for s in self.reads[index] if s > self.first_write(index))


def _binary(column: Tensor) -> bool:
    return bool(((column == 0) | (column == 1)).all())


def _disjoint_groups(table: Tensor, columns: list[int], writer: str) -> list[Group]:
    """Columns of ``table`` (rows: tokens or positions) in groups of disjoint supports, greedily
    in index order: every row sets at most one member of a group."""
    groups: list[tuple[list[int], Tensor]] = []
    for c in columns:
        support = table[:, c] != 0
        for members, used in groups:
            if not bool((used & support).any()):
                members.append(c)
                used |= support
                break
        else:
            groups.append(([c], support.clone()))
    return [Group(writer, 0, tuple(members)) for members, _ in groups]


def embedding_groups(tensors: dict[str, Tensor], usage_writes: list[list[int]], labels: list[str]) -> list[Group]:
    """The embedding's categorical groups (module docstring): 0/1 columns of W_E or of W_pos."""
    w_e, w_pos, cls = tensors["embed.W_E"], tensors["pos_embed.W_pos"], tensors["embed.cls"]
    by_table: dict[str, list[int]] = {"token": [], "position": []}
    for i, label in enumerate(labels):
        if label == "one" or usage_writes[i] != [0] or cls[i] != 0:
            continue
        token, position = bool(w_e[:, i].ne(0).any()), bool(w_pos[:, i].ne(0).any())
        if token != position and _binary(w_e[:, i]) and _binary(w_pos[:, i]):
            by_table["token" if token else "position"].append(i)
    return (_disjoint_groups(w_e, by_table["token"], "embedding:token")
            + _disjoint_groups(w_pos, by_table["position"], "embedding:position"))


def _single_entry(vector: Tensor) -> int | None:
    """The index of ``vector``'s one nonzero entry when it is exactly 1, else None."""
    nonzero = torch.nonzero(vector).flatten().tolist()
    return nonzero[0] if len(nonzero) == 1 and float(vector[nonzero[0]]) == 1.0 else None


def head_group(tensors: dict[str, Tensor], config: ModelCard, layer: int, head: int,
               groups: dict[int, Group], writes: list[list[int]]) -> Group | None:
    """The group of head ``head`` of ``layer`` if it is a sharp copy of one categorical group
    (module docstring), else None."""
    described = config.layers[layer].heads[head]
    if described.kind not in SHARP_KINDS:
        return None
    p = f"blocks.{layer}.attn."
    w_v, w_o = tensors[p + "W_V"][head], tensors[p + "W_O"][head]  # (D, V), (V, D)
    reads, outputs = [], []
    for j in range(w_v.shape[1]):
        if not bool(w_v[:, j].ne(0).any()) and not bool(w_o[j].ne(0).any()):
            continue
        d, o = _single_entry(w_v[:, j]), _single_entry(w_o[j])
        if d is None or o is None or d not in groups or writes[o] != [2 * layer + 1]:
            return None
        reads.append(d)
        outputs.append(o)
    others = [h for h in range(tensors[p + "W_O"].shape[0]) if h != head]
    if (not reads or len({groups[d] for d in reads}) != 1 or len(set(reads)) != len(reads)
            or any(bool(tensors[p + "W_O"][h][:, outputs].ne(0).any()) for h in others)):
        return None
    return Group(described.name, 2 * layer + 1, tuple(outputs), float(described.error or 0.0), layer, head,
                 tuple(reads))


def ffn_groups(config: ModelCard, writes: list[list[int]], labels: list[str]) -> list[Group]:
    """The FFN groups (module docstring) of every layer."""
    index = {label: i for i, label in enumerate(labels)}
    found = []
    for layer, described in enumerate(config.layers):
        tagged: dict[str, list[BlockCard]] = {}
        for block in described.blocks:
            if block.group is not None:
                tagged.setdefault(block.group, []).append(block)
        for name, blocks in tagged.items():
            if any(b.output not in index for b in blocks):
                continue
            members = tuple(index[b.output] for b in blocks)
            if (len(members) > 1 and len(set(members)) == len(members)
                    and all(writes[m] == [2 * layer + 2] for m in members)
                    and all(set(b.values or ()) <= {0.0, 1.0} for b in blocks)):
                tail = max(float(b.error) for b in blocks)
                found.append(Group(f"ffn:{name}", 2 * layer + 2, members, tail))
    return found


def usage(tensors: dict[str, Tensor], config: ModelCard) -> Usage:
    """The plain model's :class:`Usage`: stages of every direction, and its categorical groups
    (embedding groups, then head groups layer by layer, a head's group read by a later one)."""
    labels = list(config.labels)
    layers = len(config.layers)
    writes, reads = stage_map(tensors, len(labels), layers)
    # a model over vectors embeds its input linearly: its 0/1 columns are coordinates, not indicators
    found = embedding_groups(tensors, writes, labels) if config.vocabulary is not None else []
    found += ffn_groups(config, writes, labels) if config.vocabulary is not None else []
    by_member = {m: g for g in found for m in g.members}
    for layer in range(layers):
        for head in range(len(config.layers[layer].heads)):
            group = head_group(tensors, config, layer, head, by_member, writes)
            if group is not None:
                found.append(group)
                by_member |= {m: group for m in group.members}
    return Usage(tuple(labels), layers, tuple(tuple(w) for w in writes), tuple(tuple(r) for r in reads),
                 tuple(found))
