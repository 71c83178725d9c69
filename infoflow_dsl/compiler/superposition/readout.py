"""A token answer decoded by argmax from ONE number instead of a one-hot group (exact).

A token model answers argmax_o (b_U + h·W_U)[o] at each row it answers at (every token row of a
per-token model, the readout row of a sequence model). Where every direction W_U reads belongs
to one categorical group G (:mod:`.categorical`: the token's indicators, a sharp head's fetched
one-hot, an FFN's token table; at a row one member k is 1, within the group's tail, or none
is) and nothing else reads G's members after they are written, the answer is a function of
the state alone: out(k) = argmax (b_U + W_U[k]), out(none) = the first argmax of b_U (the plain
model's answer there, ties included). The state needs one number, not |G| directions:

    n_k = j,   the index of out(k) among the m answers (n = 0: the answer of no member),
    logit_o(n) = 2j·n − j²   for the j-th answer o,    −1 for a token no state answers,

so logit_j(n) = n² − (n − j)²: at n = i + δ answer i leads answer j by
(i − j)² + 2(i − j)·δ ≥ |i − j|·(|i − j| − 2|δ|), and a token no state answers (−1) by
i² + 2i·δ + 1: both at least 1/2 for |δ| ≤ 1/4 (the plain model's gap was 1: a one-hot row
of W_U).

**The fold.** One member, the **host** (one W_U reads, its n nonzero where one is), holds
n = Σ_k n_k·g_k: every writer's column of the host becomes Σ_k n_k·(its column of k) (the
embedding's, a head's W_O, an FFN's W_out and b_out), the other members' columns 0 (read by
W_U alone, now by nothing: no dimension), W_U reads the host alone by the lines and b_U holds
their intercepts. At a row of state k the host holds n_k within (m − 1)·tail (the members'
mass, 1 within the tail, sits on k), which the fold admits only below 1/4: the answer is the
plain model's at every row, with a lead of at least 1/2. The feature dictionary lists the
host's coordinate as the ``sum`` Σ_k n_k·[k] of the plain group (:mod:`.sums`' record), the
certificate's ``readout`` n per state and the lines. A token map ``nx(x(t))`` over k tokens
(F = k) compiles at D = 1. ``compile --residual`` takes it only where the route without it
cannot reach the D asked for (:func:`~infoflow_dsl.compiler.superposition._best_route`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from ...transformer.card import ModelCard
from ..compress import stage_tensors
from .categorical import Group, usage
from .sums import Sums

Tensor = torch.Tensor

#: the most a state's number may be off (the members' tail times the largest step): the lines'
#: lead is then at least 1/2
DRIFT = 0.25


@dataclass(frozen=True)
class ArgmaxReadout:
    """The host direction, the group's members, n per member (``values``; members' order), the
    answer index j → output token (``answers``), and the group's tail."""

    host: int
    members: tuple[int, ...]
    values: tuple[int, ...]
    answers: tuple[int, ...]
    tail: float = 0.0

    def to_json(self, labels: list[str], config: ModelCard) -> dict[str, Any]:
        """The certificate's ``readout``: the host, n per state and each answer's line."""
        outputs = (config.output_vocabulary or config.vocabulary).names  # type: ignore[union-attr]  # a token output's
        return {"host": labels[self.host], "read": "argmax",
                "n": {labels[k]: n for k, n in zip(self.members, self.values, strict=True)},
                "lines": [{"token": outputs[o], "slope": 2 * j, "intercept": -j * j}
                          for j, o in enumerate(self.answers)],
                "gap": 1, "drift": (len(self.answers) - 1) * self.tail}


def _logits(w_u: Tensor, b_u: Tensor, member: int | None) -> list[Fraction]:
    bias = [Fraction(float(b)) for b in b_u.tolist()]
    if member is None:
        return bias
    return [b + Fraction(float(w)) for b, w in zip(bias, w_u[member].tolist(), strict=True)]


def _answer(logits: list[Fraction], first: bool = False) -> int | None:
    """The argmax; None where it ties (``first``: the first of the ties, torch's rule)."""
    best = max(logits)
    return logits.index(best) if first or logits.count(best) == 1 else None


def _group(tensors: dict[str, Tensor], config: ModelCard, sums: Sums) -> Group | None:
    """The one categorical group holding every direction W_U reads (two or more), none of its
    members read after its first write but by W_U, none in ``sums``; else None."""
    read = set(torch.nonzero(tensors["unembed.W_U"].ne(0).any(dim=1)).flatten().tolist())
    found = usage(tensors, config)
    last = 2 * found.layers + 1
    taken = set(sums) | {i for terms in sums.values() for i, _ in terms}
    for group in found.groups:
        members = set(group.members)
        if (len(read) >= 2 and read <= members and not taken & members
                and all(set(found.live_reads(k)) <= {last} for k in group.members)):
            return group
    return None


def plan(tensors: dict[str, Tensor], config: ModelCard, sums: Sums) -> ArgmaxReadout | None:
    """The decoding of the module docstring, or None where it does not apply (no token output,
    W_U reading beyond one group or a group read elsewhere, a member's state tying, a tail too
    large for the lines)."""
    if not config.token_output or config.vocabulary is None:
        return None
    group = _group(tensors, config, sums)
    if group is None:
        return None
    w_u, b_u = tensors["unembed.W_U"].double(), tensors["unembed.b_U"].double()
    answers = [_answer(_logits(w_u, b_u, k)) for k in group.members]
    if any(a is None for a in answers):
        return None
    order = list(dict.fromkeys([_answer(_logits(w_u, b_u, None), first=True), *answers]))
    values = tuple(order.index(a) for a in answers)
    if (len(order) - 1) * group.tail > DRIFT:
        return None
    read = [k for k in group.members if w_u[k].ne(0).any()]
    host = next((k for k, n in zip(group.members, values, strict=True) if n and k in read), read[0])
    return ArgmaxReadout(host, group.members, values, tuple(a for a in order if a is not None), group.tail)


def decoded(tensors: dict[str, Tensor], sums: Sums, config: ModelCard) -> tuple[dict[str, Tensor], Sums,
                                                                                       ArgmaxReadout | None]:
    """(tensors, sums, the decoding) with the answer decoded where :func:`plan` finds it (the
    host's sum added to ``sums``), else as given."""
    found = plan(tensors, config, sums)
    if found is None:
        return tensors, sums, None
    out = dict(tensors)
    weights = dict(zip(found.members, found.values, strict=True))
    for _, _, writers in stage_tensors(len(config.layers)):
        for name in writers:
            t = out[name].clone()  # (..., D)
            t[..., found.host] = sum(float(n) * t[..., k] for k, n in weights.items())
            t[..., [k for k in found.members if k != found.host]] = 0.0
            out[name] = t
    w_u, b_u = out["unembed.W_U"].clone(), out["unembed.b_U"].clone()
    w_u[list(found.members)] = 0.0
    b_u[:] = -1.0  # a token no state answers
    for j, o in enumerate(found.answers):
        w_u[found.host, o], b_u[o] = 2.0 * j, -float(j * j)
    out["unembed.W_U"], out["unembed.b_U"] = w_u, b_u
    held = ((found.host, float(weights[found.host])),
            *((k, float(n)) for k, n in weights.items() if k != found.host))
    return out, {**sums, found.host: held}, found
