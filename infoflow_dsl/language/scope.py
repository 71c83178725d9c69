"""The position variables bound at a point of a target, and the signal of an expression already
diagnosed: what the checker's typing rules (``check``, ``token_typing``) share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import typed as ir


@dataclass(frozen=True)
class Scope:
    """The position variables bound at a point: (source name, unique name) pairs, outermost first.

    An inner binder may reuse an outer binder's name (lexical shadowing, as in
    ``max_<t> f(t) + max_<t> g(t)``, whose second reduction sits in the first one's body);
    it then gets a unique name with primes (``t′``), so later stages never see two
    variables with one name.
    """

    bindings: tuple[tuple[str, str], ...] = ()
    conditions: tuple[ir.PositionCondition, ...] = ()
    conditions_known: bool = True

    def constrained(self, conditions: Sequence[ir.PositionCondition], known: bool = True) -> Scope:
        """This scope with more conditions holding (a reduction's, or a per-token target's);
        ``known`` is False when some condition failed to check (offsets are then not range-checked)."""
        return Scope(self.bindings, (*self.conditions, *conditions), self.conditions_known and known)

    @property
    def variables(self) -> tuple[str, ...]:
        """The unique names of the bound variables, outermost first."""
        return tuple(unique for _, unique in self.bindings)

    def lookup(self, name: str) -> str | None:
        """The unique name of the innermost binding of source name ``name``; None if unbound."""
        for source, unique in reversed(self.bindings):
            if source == name:
                return unique
        return None

    def bind(self, names: Sequence[str]) -> tuple[Scope, tuple[str, ...]]:
        """This scope with ``names`` bound innermost, and the unique names they get."""
        taken = {unique for _, unique in self.bindings}
        bindings = list(self.bindings)
        uniques: list[str] = []
        for name in names:
            unique = name
            while unique in taken:
                unique += "′"
            taken.add(unique)
            bindings.append((name, unique))
            uniques.append(unique)
        return Scope(tuple(bindings), self.conditions, self.conditions_known), tuple(uniques)

    def source_name(self, unique: str) -> str:
        """The name a bound variable has in the source (``t`` for ``t′``)."""
        return next((source for source, u in self.bindings if u == unique), unique)


class Failed(Exception):
    """An expression already diagnosed: its parents stay silent."""
