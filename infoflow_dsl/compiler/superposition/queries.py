"""A sharp head's constant query read from a positive number instead of ``one`` (exact argmax).

A sharp head (β > 0: a retrieval whose winners beat every other key by a gap γ, its β chosen so
that the weight off the winners is at most the tail (T − 1)·e^(−βγ), :mod:`~.tokens.heads`)
whose query reads the constant direction ``one`` alone has the same query q at every row:
scores β·q·k(s). Reading instead c·g(t) from a direction g that holds c·g ≥ 1 at every query
row gives scores β·c·g(t)·q·k(s): every query's scores are scaled by a factor λ(t) = c·g(t) ≥ 1,
so the keys that tie stay tied, the winners stay the winners, and the gap becomes λγ ≥ γ: the
weight off the winners, at most (T − 1)·e^(−βλγ), is no larger than the plain head's certified
tail, and among tied winners the weights stay equal. The head's output is therefore within the
error the plain model certifies for it (its stated ``error``, the layout's tail τ_h), and every
bound downstream holds as it was.

What it saves: ``one`` is read by nothing else in most token models but these queries (the
FFNs hold their constants in biases), so once every such query reads g, ``one`` is never read
and :mod:`~infoflow_dsl.compiler.compress` gives it no dimension: a running maximum
``max_<s ≤ t> x(s)`` holds x and the maximum, not ``one`` beside them.

**Which g.** A direction the embedding alone writes (its value at a row is known from the
tables: E_g[token] + P_g[position] at a token row, cls_g + P_g[T' + 1] at the readout row, which
a per-token model never reads), whose least value g_min over the rows the model reads is
positive, alive at the head's stage under tight lifetimes and already read there by a head of
the same layer (so no lifetime grows, and no number an FFN alone reads, which :mod:`.packed`
could pack, gains a head reader); the head's own key or value first, then in index order.
c = 1 where g_min ≥ 1, else the power of two at least 1/g_min (exact in floats).

**The readout row.** A sequence model's readout row holds cls_g + P_g[T' + 1], often 0 for a
token's number x (the class token is no token). Where nothing reads g at the readout row (no
query, no FFN unit, not the unembedding: keys and values read the token rows alone), that value
is free: cls_g is raised so that the readout row's least is the token rows' (the model's
outputs are unchanged), and only then does a query read it there. The certificate's
``queries`` says so ([head, g, c, lifted]); the feature dictionary's value of g at the readout
row is then the raised one, which no program value is (the readout row holds no token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ...transformer.card import ModelCard
from ..circuit import ONE
from ..compress import drop_unread_writes, lifetimes
from .spans import embedding_only

Tensor = torch.Tensor


@dataclass(frozen=True)
class MovedQuery:
    """Head ``head`` of layer ``layer`` reads ``scale``·g (direction ``source``) where it read
    ``one``; ``lifted``: g's class-token entry was raised (:func:`lifted`) for it."""

    layer: int
    head: int
    source: int
    scale: float
    lifted: bool = False

    def labelled(self, config: ModelCard, labels: list[str]) -> list[Any]:
        """The certificate's ``queries`` entry: [head name, g's label, c, whether g's readout row was lifted]."""
        return [config.layers[self.layer].heads[self.head].name, labels[self.source], self.scale, self.lifted]


def token_least(tensors: dict[str, Tensor]) -> Tensor:
    """(D,) float64: each direction's least embedding value at a token row, E[v] + P[p] (every
    token at every position 1..T; a lower bound where inputs are constrained)."""
    table = tensors["embed.W_E"].to(torch.float64)  # (V, D)
    positions = tensors["pos_embed.W_pos"].to(torch.float64)  # (T + 1, D)
    return table.min(dim=0).values + positions[:-1].min(dim=0).values  # (D,)


def readout_least(tensors: dict[str, Tensor]) -> Tensor:
    """(D,) float64: each direction's least embedding value at the readout row, cls + P[T'] (T' = 1..T)."""
    positions = tensors["pos_embed.W_pos"].to(torch.float64)  # (T + 1, D)
    return tensors["embed.cls"].to(torch.float64).reshape(-1) + positions[1:].min(dim=0).values  # (D,)


def least_values(tensors: dict[str, Tensor], per_token: bool) -> Tensor:
    """(D,) float64: each direction's least embedding value over the rows the model reads: the
    token rows (:func:`token_least`), and unless ``per_token`` the readout row (:func:`readout_least`)."""
    least = token_least(tensors)
    return least if per_token else torch.minimum(least, readout_least(tensors))


def unread_at_readout(tensors: dict[str, Tensor], layers: int) -> Tensor:
    """(D,) bool: the directions nothing reads at the readout row: no query (W_Q), no FFN unit
    (W_in) and not the unembedding (keys and values read the token rows alone)."""
    read = tensors["unembed.W_U"].ne(0).any(dim=-1)  # (D,)
    for layer in range(layers):
        read |= tensors[f"blocks.{layer}.attn.W_Q"].ne(0).any(dim=-1).any(dim=0)
        read |= tensors[f"blocks.{layer}.mlp.W_in"].ne(0).any(dim=-1)
    return ~read


def liftable(tensors: dict[str, Tensor], layers: int) -> list[int]:
    """A sequence model's directions whose token rows are positive, whose readout row is less,
    and whose readout-row value nothing reads (:func:`unread_at_readout`): raising their
    class-token entry changes no output."""
    tokens, readout = token_least(tensors), readout_least(tensors)
    free = unread_at_readout(tensors, layers)
    return [g for g in range(len(tokens))
            if bool(free[g]) and float(tokens[g]) > 0 and float(readout[g]) < float(tokens[g])]


def lifted(tensors: dict[str, Tensor], directions: list[int]) -> dict[str, Tensor]:
    """``tensors`` with each direction's class-token entry raised so that its readout row's least
    value is its token rows' (:func:`liftable`)."""
    if not directions:
        return tensors
    tokens, readout = token_least(tensors), readout_least(tensors)
    cls = tensors["embed.cls"].clone()  # (D,)
    for g in directions:
        cls.view(-1)[g] += tokens[g] - readout[g]
    return {**tensors, "embed.cls": cls}


def _scale(least: float) -> float:
    """c: 1 where g_min ≥ 1, else the least power of two with c·g_min ≥ 1."""
    return 1.0 if least >= 1.0 else float(2.0 ** math.ceil(-math.log2(least)))


def _constant_query(w_q: Tensor, one: int) -> bool:
    """Whether a head's query (its W_Q, (D, E)) reads ``one`` and nothing else."""
    rows = torch.nonzero(w_q.ne(0).any(dim=-1)).flatten().tolist()
    return rows == [one]


def _source(tensors: dict[str, Tensor], layer: int, head: int, candidates: list[int]) -> int | None:
    """The g a head's query moves onto: a candidate its own key or value reads, else one another
    head of its layer reads (index order), else None."""
    p = f"blocks.{layer}.attn."

    def read_by(h: int, g: int) -> bool:
        return any(bool(tensors[p + n][h, g].ne(0).any()) for n in ("W_Q", "W_K", "W_V"))

    own = [g for g in candidates if read_by(head, g)]
    others = [g for g in candidates if any(read_by(h, g) for h in range(tensors[p + "W_Q"].shape[0]))]
    return next(iter(own or others), None)


def moved_queries(tensors: dict[str, Tensor], config: ModelCard) -> tuple[dict[str, Tensor], list[MovedQuery]]:
    """(the tensors with every sharp head's constant query moved onto a positive g, the moves)
    as the module docstring says; ``tensors`` unchanged."""
    labels, layers = list(config.labels), len(config.layers)
    if ONE not in labels:
        return tensors, []
    one, size = labels.index(ONE), len(labels)
    tight = dict(tensors)
    drop_unread_writes(tight, size, layers)
    alive = {f.index: f for f in lifetimes(tight, labels, layers)}
    per_token = config.per_token
    least = least_values(tensors, per_token)
    raisable = [] if per_token else liftable(tensors, layers)
    least[raisable] = token_least(tensors)[raisable]
    positive = [g for g in embedding_only(tensors, size, layers) if g != one and g in alive and float(least[g]) > 0]
    out = dict(tensors)
    moves: list[MovedQuery] = []
    for layer in range(layers):
        p = f"blocks.{layer}.attn."
        stage = 2 * layer + 1
        live = [g for g in positive if alive[g].start <= stage < alive[g].end]
        for head in range(out[p + "W_Q"].shape[0]):
            if float(out[p + "beta"][head]) <= 0 or not _constant_query(out[p + "W_Q"][head], one):
                continue
            g = _source(out, layer, head, live)
            if g is None:
                continue
            scale = _scale(float(least[g]))
            w_q = out[p + "W_Q"].clone()  # (H, D, E)
            w_q[head, g] = scale * w_q[head, one]
            w_q[head, one] = 0.0
            out[p + "W_Q"] = w_q
            moves.append(MovedQuery(layer, head, g, scale, g in raisable))
    out = lifted(out, sorted({m.source for m in moves if m.lifted}))
    return out, moves


__all__ = ["MovedQuery", "least_values", "liftable", "lifted", "moved_queries", "unread_at_readout"]
