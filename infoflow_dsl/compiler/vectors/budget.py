"""The error budget: the sources that spend ε, the constraints on them, and the allocation.

β costs no parameters, so heads get 1% of the budget (``HEAD_SHARE``); FFN sources share the
rest to minimise parameters. A source with sensitivity w_i (how much of its error reaches the
output) and cost c_i/√e_i units gets e_i ∝ (c_i/w_i)^(2/3) (Lagrange); a deep square, cost
k_j·ln(1/e_j), gets e_j ∝ k_j/w_j (:func:`allocate_mixed`). The circuit is lowered again with
the new shares, the exact a-priori bound recomputed, and the shares scaled until the bound,
rounding allowance included, is at most ε (:func:`fit_budget`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ... import progress
from .quantity import ROUNDING_SAFETY, ErrorShares, ErrorVec, Quantity

HEAD_SHARE = 0.01
ATTEMPTS = 24


@dataclass
class Source:
    """An error source: an FFN approximation (costs units) or a head's β (free)."""

    name: str
    kind: str  # ffn | head
    cost: float = 0.0
    law: str = "sqrt"  # an FFN's parameters ≈ cost·e^(-1/2) (sqrt) or cost·ln(1/e) + const (log)


@dataclass
class Constraint:
    """An error that must stay below ``limit`` (a retrieval's score error vs its margin)."""

    error: ErrorVec
    limit: float


class RoundingLimit(Exception):
    """Rounding alone would take half of ε (``lower`` turns it into a CompileError)."""

    def __init__(self, rounding: float) -> None:
        super().__init__(rounding)
        self.rounding = rounding


def allocate(sources: dict[str, Source], sensitivity: dict[str, float], budget: float) -> dict[str, float]:
    """Shares minimising the parameters Σ c_i/√e_i (+ Σ k_j ln(1/e_j) for deep squares) subject to
    Σ w_i e_i = budget (heads: 1%, evenly); a source the output does not feel gets ``budget``."""
    heads = [s for s in sources.values() if s.kind == "head" and sensitivity.get(s.name, 0) > 0]
    ffns = [s for s in sources.values() if s.kind == "ffn" and sensitivity.get(s.name, 0) > 0]
    head_budget = budget * (HEAD_SHARE if ffns else 1.0)
    shares: dict[str, float] = {s.name: budget for s in sources.values()}
    for s in heads:
        shares[s.name] = head_budget / (len(heads) * sensitivity[s.name])
    if any(s.law == "log" for s in ffns):
        shares.update(allocate_mixed(ffns, sensitivity, budget - head_budget))
    elif ffns:
        weights = {s.name: (max(s.cost, 1e-12) / sensitivity[s.name]) ** (2 / 3) for s in ffns}
        scale = (budget - head_budget) / sum(sensitivity[n] * w for n, w in weights.items())
        for n, w in weights.items():
            shares[n] = scale * w
    return shares


def allocate_mixed(ffns: Sequence[Source], sensitivity: dict[str, float], budget: float) -> dict[str, float]:
    """Lagrange with both laws: ∂/∂e of c·e^(-1/2) and k·ln(1/e) equal to λ·w give
    e = (c/(2λw))^(2/3) (wide) and e = k/(λw) (deep); λ by bisection (in log λ) on Σ w e = budget."""

    def shares(log_lambda: float) -> dict[str, float]:
        lam = math.exp(log_lambda)
        return {s.name: (max(s.cost, 1e-12) / (2 * lam * sensitivity[s.name])) ** (2 / 3) if s.law == "sqrt"
                else max(s.cost, 1e-12) / (lam * sensitivity[s.name]) for s in ffns}

    def spent(log_lambda: float) -> float:
        return sum(sensitivity[n] * e for n, e in shares(log_lambda).items())

    low, high = -50.0, 50.0
    while spent(low) < budget:
        low -= 50.0
    while spent(high) > budget:
        high += 50.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if spent(middle) > budget else (low, middle)
    return shares(high)


class ErrorSources(Protocol):
    """What the budget loop reads of one lowering's builder (``builder.CircuitBuilder``): the
    error sources it registered, by name, and the constraints on their errors."""

    @property
    def sources(self) -> dict[str, Source]: ...
    @property
    def constraints(self) -> list[Constraint]: ...


Lowered = TypeVar("Lowered", bound=ErrorSources)  # the builder of one lowering


@dataclass(frozen=True)
class BudgetFit(Generic[Lowered]):
    """The lowering kept: its builder, its outputs, their a-priori bound and rounding allowance."""

    builder: Lowered
    outputs: list[Quantity]
    bound: float
    rounding: float


def fit_budget(eps: float,
               attempt: Callable[[ErrorShares], tuple[Lowered, list[Quantity]]]) -> BudgetFit[Lowered] | None:
    """The error-budget loop: lower (``attempt``) with every source's share ε/16, then with
    :func:`allocate`'s shares of the budget 0.97ε less rounding and second-order terms, until the
    bound lies in [0.8ε, ε] with every constraint met (a constraint it breaks tightens its
    sources for good, by 0.7 × limit / error). The last lowering within ε, or None after
    ``ATTEMPTS``; raises :class:`RoundingLimit` where rounding alone takes ε/2."""
    shares = ErrorShares(default=eps / 16)
    correction = 1.0
    allocated = False
    tightening: dict[str, float] = {}  # persistent factors from constraints (margins, √ inputs)
    best: BudgetFit[Lowered] | None = None
    for number in range(1, ATTEMPTS + 1):
        progress.stage(f"fitting the error budget, lowering {number}")
        builder, outputs = attempt(shares)
        rounding = max((ROUNDING_SAFETY * q.error.rounding for q in outputs), default=0.0)
        bound = max((q.error.value(shares) for q in outputs), default=0.0)
        violated = [c for c in builder.constraints if c.error.value(shares) > c.limit]
        if rounding >= 0.5 * eps:
            raise RoundingLimit(rounding)
        if bound <= eps and not violated:
            best = BudgetFit(builder=builder, outputs=outputs, bound=bound, rounding=rounding)
            if bound >= 0.8 * eps:
                break
        elif bound > eps and allocated:  # the allocation's first-order prediction fell short
            correction *= 0.97 * eps / bound
        sensitivity: dict[str, float] = {}
        for q in outputs:
            for n, c in q.error.linear:
                sensitivity[n] = max(sensitivity.get(n, 0.0), c)
        extra = max((q.error.extra for q in outputs), default=0.0)
        budget = max((0.97 * eps - rounding - extra) * correction, eps * 1e-9)
        for constraint in violated:
            ratio = 0.7 * constraint.limit / constraint.error.value(shares)
            for n, _ in constraint.error.linear:
                tightening[n] = tightening.get(n, 1.0) * ratio
        by_source = allocate(builder.sources, sensitivity, budget)
        allocated = True
        for n, factor in tightening.items():
            by_source[n] = by_source.get(n, budget) * factor
        shares = ErrorShares(default=budget, by_source=by_source)
    return best
