"""What the token lowering's constructions read of it: the narrow interfaces that
:class:`~.lower.TokenLowering` provides to the modules it calls (:mod:`.counts`, :mod:`.widths`,
:mod:`.fetch`, and through :mod:`.scores` and :mod:`.reductions` their own wider ones), so that
none of them needs the walker that calls them, even for its types.

``TokenLowering`` satisfies each structurally: it is passed as itself, and nothing changes at run time.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Protocol

from ...analysis.finite import FiniteDomain
from ...errors import NoConstruction
from ...language import typed as ir
from .builder import Feature, TokenCircuitBuilder


class BuilderContext(Protocol):
    """The circuit being built: what a construction that only adds units and heads reads."""

    @property
    def builder(self) -> TokenCircuitBuilder:
        """The builder of the token circuit (its length T, vocabulary, columns, units and heads)."""
        ...


class LoweringContext(BuilderContext, Protocol):
    """The builder, the program's finite domain, and the walker's entry points: the feature of a
    sub-expression, the exact values an expression takes, and a refusal naming an expression."""

    @property
    def domain(self) -> FiniteDomain:
        """The finite domain of the program's tokens and positions (exact value sets)."""
        ...

    def feature(self, expr: ir.Expr, row: str) -> Feature:
        """``expr``'s feature at every row, ``row`` standing for the row's position (built once)."""
        ...

    def values(self, expr: ir.Expr) -> frozenset[Fraction] | None:
        """Every value ``expr`` takes over the domain, exactly, or None when they are not finitely many."""
        ...

    def refuse(self, expr: object, why: str) -> NoConstruction:
        """The refusal to compile ``expr``, saying ``why`` (to be raised)."""
        ...
