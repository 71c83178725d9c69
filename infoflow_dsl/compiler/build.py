"""The core both lowerings build on: the residual directions, fresh names and the unit cap.

- **Directions**: each residual direction has one readable name and is added once, in the
  order first asked for (that order is the residual stream's: ``residual_labels``).
- **Fresh names**: ``stem`` followed by N, N counting every fresh name of the circuit
  (``L1:f14``, ``gate5``).
- **Unit cap**: at most :data:`MAX_UNITS` hidden units in a circuit, checked before the units
  that would pass it are built (:meth:`BuildCore.reserve_units`), so a too-large target is
  refused before the work.

``vectors.builder.CircuitBuilder`` (programs over vectors) and ``tokens.builder.TokenCircuitBuilder``
(token programs) extend it with what each lowering keeps (error shares; exact value sets).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CompileError

MAX_UNITS = 1_000_000


@dataclass(kw_only=True)
class BuildCore:
    """Directions, fresh names and the count of hidden units of one circuit being built."""

    directions: list[str] = field(default_factory=list)
    units: int = 0
    counter: int = 0

    def __post_init__(self) -> None:
        self._known: set[str] = set(self.directions)

    def direction(self, name: str) -> str:
        """The residual direction ``name``, added (once) in the order first asked for."""
        if name not in self._known:
            self._known.add(name)
            self.directions.append(name)
        return name

    def fresh(self, stem: str) -> str:
        """A new name ``stem``N, N counting every fresh name."""
        self.counter += 1
        return f"{stem}{self.counter}"

    def reserve_units(self, count: int, why: str = "", fault: type[CompileError] = CompileError) -> None:
        """Refuse (``fault``, a :class:`CompileError`, with ``why``: what to change) before
        ``count`` more units are built that would pass MAX_UNITS (the builder adds them to
        ``units`` as it builds them)."""
        if self.units + count > MAX_UNITS:
            raise fault(f"the target's model would need more than {MAX_UNITS:,} hidden units{why}")
