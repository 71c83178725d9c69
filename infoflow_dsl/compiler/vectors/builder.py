"""The circuit under construction: what every construction of the lowering reads and adds to.

A :class:`CircuitBuilder` holds the residual directions named so far, the heads and FFN blocks
built, the error sources registered (each with its share of ε under the current allocation),
the constraints on them, the hidden units spent, and the quantities already lowered (comparison
results, fetched tokens, the expression cache). The constructions are functions of a builder
(``squares``, ``ffn``, ``fetch``, ``retrieval``, ``uniform``, ``values``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...analysis.stages import next_ffn
from ...errors import CompileError
from ...language import typed as ir
from ..build import BuildCore
from ..circuit import ONE, AttentionHead, FFNBlock, LinearForm, input_direction
from .budget import Constraint, Source
from .quantity import ROUNDING_SAFETY, ErrorShares, ErrorVec, Quantity


@dataclass
class CircuitBuilder(BuildCore):
    """One schedule's circuit being lowered under one allocation of error shares.

    ``route`` is how squares are built (wide | deep | auto, see ``approximations``); ``gathered``:
    the gather route, whose fixed positions are fetched exactly at the tokens, by masks.
    ``fetched`` maps (a fetched position or presence guard, site) to its quantities, ``results``
    a comparison node's name to its result, ``cache`` (expression, site) to its components and
    ("monomial", atoms, site) to a product of per-token atoms.
    """

    program: ir.Program
    shares: ErrorShares
    unit_roundoff: float
    route: str = "wide"
    gathered: bool = False
    blocks: list[FFNBlock] = field(default_factory=list)
    heads: list[AttentionHead] = field(default_factory=list)
    sources: dict[str, Source] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    results: dict[str, list[Quantity]] = field(default_factory=dict)
    fetched: dict[tuple[object, str], list[Quantity]] = field(default_factory=dict)
    cache: dict[tuple[object, ...], Any] = field(default_factory=dict)
    source_counter: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.direction(ONE)
        for i in range(self.program.dimension):
            self.direction(input_direction(i))

    @property
    def length(self) -> int:
        return self.program.length

    @property
    def theta(self) -> float:
        """The angle step of the positional code: position p is (cos θp, sin θp), θ = π/(T+1)."""
        return math.pi / (self.length + 1)

    # ------------------------------------------------------------------ names

    def fresh_source(self, stem: str) -> str:
        """The name ``stem``#N of a new FFN error source, N counting sources alone: these names key
        the allocation from one lowering attempt to the next, and the deep route creates a number of
        directions that depends on the shares. The count of fresh names advances too."""
        self.counter += 1
        self.source_counter += 1
        return f"{stem}#{self.source_counter}"

    # ------------------------------------------------------------------ error shares

    def source(self, name: str, kind: str, cost: float = 0.0, law: str = "sqrt") -> float:
        """Register (or update) an error source; its current share."""
        source = self.sources.setdefault(name, Source(name, kind, cost, law))
        source.cost, source.law = cost, law
        return self.share(name)

    def share(self, name: str) -> float:
        return self.shares.of(name)

    def error(self, error: ErrorVec) -> float:
        """The bound ``error`` under the current shares."""
        return error.value(self.shares)

    def head_source(self, name: str, rounding: float) -> tuple[float, float]:
        """Register head ``name``: (its share, what β must achieve). The share covers the head's
        own ``rounding`` too, so the FFN allocation never depends on T (only β does)."""
        share = self.source(name, "head")
        spoiled = ROUNDING_SAFETY * rounding
        return share, max(share - spoiled, share / 2)

    def padded(self, u: Quantity) -> tuple[float, float]:
        """u's range widened by its error: where the computed value lies."""
        pad = self.error(u.error)
        return u.low - pad, u.high + pad

    # ------------------------------------------------------------------ units and inputs

    def reserve_units(self, count: int, why: str = "", fault: type[CompileError] = CompileError) -> None:
        """Refuse, before building them, ``count`` more units that would pass MAX_UNITS, saying
        which ε (and margin) asked for them and what to change."""
        margin = self.program.margin
        at = "this ε" if margin is None else f"this ε and margin δ = {margin:g}"
        fix = "raise ε" if margin is None else "raise ε or δ (a sharper retrieval reads finer differences)"
        super().reserve_units(count, f" at {at}; {fix} (analyze's cost law says how the units grow; a norm that "
                                     "can be 0 costs ε^-1)", fault)

    def token_range(self) -> tuple[float, float]:
        """[low, high] holding every coordinate of every token of the domain."""
        domain = self.program.domain
        if isinstance(domain, ir.Box):
            return domain.low, domain.high
        return -domain.radius, domain.radius

    def token_diameter(self) -> float:
        low, high = self.token_range()
        return high - low

    def own_token(self) -> list[Quantity]:
        """x(t) at its own token: the input directions, exact, at stage 0."""
        low, high = self.token_range()
        return [Quantity(form=LinearForm.of(input_direction(i)), stage=0, low=low, high=high)
                for i in range(self.program.dimension)]


def layer_after(stage: int) -> int:
    """The layer whose FFN is the first FFN stage after ``stage`` (0: the embedding's ReLU block)."""
    return (next_ffn(stage) - 1) // 2
