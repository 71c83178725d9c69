"""A per-token token answer decoded by argmax from ONE number the embedding writes (exact).

A per-token model with a token output answers argmax_o (b_U + h(t)·W_U)[o] at every token row
t. Where every direction W_U reads is written by the token table alone (``embed.W_E``; its
``pos_embed.W_pos`` and later writes none), the logits, and so the answer out(v), are a function
of the token v alone: a token map (``nx(x(t))``, ``x(t)`` itself) whose plain model holds one
indicator per token, each alive to the end, k directions for k tokens. The answer needs one:

    n(v) = j,   the index of out(v) among the m answers (tokens of one answer share it),
    logit_o(n) = 2j·n − j²   for the j-th answer o,    −1 for a token no input answers,

so logit_o(n) = n² − (n − j)²: the answer at n = i is the nearest j, i itself, ahead of the
j-th by (i − j)² ≥ 1, and ahead of a token no input answers by i² + 1 ≥ 1 (the plain model's
gap was 1: a one-hot row of W_U). Integers, exact in floats; n is the embedding's, with no error.

**Where.** W_U's rows are the only read of one of its directions, the **host**, after the
embedding (heads and FFNs read none of it): the host's column of W_E becomes n(v), W_U keeps
only its row, and b_U the intercepts; the other directions W_U read lose that read (where it was
their last, tight lifetimes give them no dimension after their last other reader). Each token's
row over those directions is one-hot or zero (the tokens of zero rows share one answer, placed
at n = 0), so the host holds the sum Σ_i n(v_i)·[x = v_i] of the plain indicators: the feature
dictionary lists it as that ``sum`` (:mod:`.sums`' record). Only per-token models (a sequence
model answers at its readout row, which holds no token).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from ..compress import stage_map
from .sums import Sums

Tensor = torch.Tensor


@dataclass(frozen=True)
class ArgmaxReadout:
    """The host direction, the directions whose W_U rows were cleared, n(v) per token (the
    vocabulary's order) and the answer index j → output token (``answers``)."""

    host: int
    members: tuple[int, ...]
    values: tuple[int, ...]
    answers: tuple[int, ...]

    def to_json(self, labels: list[str], config: dict[str, Any]) -> dict[str, Any]:
        """The certificate's ``readout``: the host, n per token and each answer's line."""
        names = config["vocabulary"]["names"]
        outputs = (config.get("output_vocabulary") or {}).get("names") or names
        return {"host": labels[self.host], "read": "argmax", "members": [labels[i] for i in self.members],
                "n": {names[v]: n for v, n in enumerate(self.values)},
                "lines": [{"token": outputs[o], "slope": 2 * j, "intercept": -j * j}
                          for j, o in enumerate(self.answers)],
                "gap": 1}


def _answers(rows: list[tuple[Fraction, ...]], w_u: Tensor, b_u: Tensor) -> list[int] | None:
    """Each token's answer argmax_o (b_U + row·W_U) in rationals, None where one ties."""
    bias = [Fraction(float(b)) for b in b_u.tolist()]
    found = []
    for row in rows:
        logits = [bias[o] + sum((r * Fraction(float(w_u[i, o])) for i, r in enumerate(row)), Fraction(0))
                  for o in range(len(bias))]
        best = max(logits)
        if logits.count(best) != 1:
            return None
        found.append(logits.index(best))
    return found


def plan(tensors: dict[str, Tensor], config: dict[str, Any], sums: Sums) -> ArgmaxReadout | None:
    """The readout decoding of the module docstring, or None where it does not apply (a sequence
    model, W_U reading a direction something else writes or that the position sets, rows that
    are no one-hot, no host read by W_U alone, a direction a sum already holds or is in)."""
    if config.get("output") != "token" or not config.get("token_output") or config.get("vocabulary") is None:
        return None
    layers = len(config["layers"])
    w_u, w_e = tensors["unembed.W_U"].double(), tensors["embed.W_E"].double()  # (D, K), (V, D)
    members = torch.nonzero(w_u.ne(0).any(dim=1)).flatten().tolist()
    writes, reads = stage_map(tensors, w_u.shape[0], layers)
    taken = set(sums) | {i for terms in sums.values() for i, _ in terms}
    if (len(members) < 2 or taken & set(members) or tensors["pos_embed.W_pos"][:, members].ne(0).any()
            or any(writes[i] != [0] for i in members)):
        return None
    table = w_e[:, members]  # (V, |members|): each row one-hot or zero
    if not bool(((table == 0) | (table == 1)).all()) or bool((table.sum(dim=1) > 1).any()):
        return None
    rows = [tuple(Fraction(int(x)) for x in row) for row in table.tolist()]
    answers = _answers(rows, w_u[members], tensors["unembed.b_U"].double())
    if answers is None:
        return None
    zero = {answers[v] for v, row in enumerate(rows) if not any(row)}
    if len(zero) > 1:
        return None
    order = [*sorted(zero), *dict.fromkeys(a for a in answers if a not in zero)]  # n = 0: the zero rows' answer
    values = tuple(order.index(a) for a in answers)
    hosts = [i for i in members if reads[i] == [2 * layers + 1] and w_e[:, i].ne(0).any()]  # read by W_U alone
    if not hosts:
        return None
    weighted = [i for i in hosts if values[int(torch.nonzero(w_e[:, i])[0])] > 0]
    return ArgmaxReadout((weighted or hosts)[0], tuple(members), values, tuple(order))


def _read_elsewhere(tensors: dict[str, Tensor], config: dict[str, Any], i: int) -> bool:
    """Whether a head or an FFN reads direction ``i`` (a stage before the unembedding's)."""
    layers = len(config["layers"])
    return any(r != 2 * layers + 1 for r in stage_map(tensors, tensors["unembed.W_U"].shape[0], layers)[1][i])


def decoded(tensors: dict[str, Tensor], sums: Sums, config: dict[str, Any]) -> tuple[dict[str, Tensor], Sums,
                                                                                       ArgmaxReadout | None]:
    """(tensors, sums, the decoding) with the readout decoded where :func:`plan` finds it (the
    host's sum added to ``sums``), else as given."""
    found = plan(tensors, config, sums)
    if found is None:
        return tensors, sums, None
    out = dict(tensors)
    w_e, w_u, b_u = (out[n].clone() for n in ("embed.W_E", "unembed.W_U", "unembed.b_U"))
    w_e[:, found.host] = torch.tensor(found.values, dtype=w_e.dtype)  # (V,): n(v)
    w_u[list(found.members)] = 0.0
    unread = [i for i in found.members if i != found.host and not _read_elsewhere(tensors, config, i)]
    w_e[:, unread] = 0.0  # read by W_U alone, now by nothing: no write
    out["embed.cls"] = out["embed.cls"].clone().index_fill_(-1, torch.tensor(unread, dtype=torch.long), 0.0)
    b_u[:] = -1.0  # a token no input answers
    for j, o in enumerate(found.answers):
        w_u[found.host, o], b_u[o] = 2.0 * j, -float(j * j)
    out["embed.W_E"], out["unembed.W_U"], out["unembed.b_U"] = w_e, w_u, b_u
    table = tensors["embed.W_E"].double()
    terms = [(i, float(found.values[int(torch.nonzero(table[:, i])[0])])) for i in found.members
             if table[:, i].ne(0).any()]
    own = next(t for t in terms if t[0] == found.host)
    held = (own, *(t for t in terms if t[0] != found.host))  # a weight 0: that token's answer is n = 0
    return out, {**sums, found.host: held}, found
