"""A checked finite table (language v4) as the typed IR holds it: its keys, values, default and
columns, with the lookup every stage reads (``ir.Table``, re-exported by :mod:`.typed`).

It sits below the nodes (:class:`~.nodes.TableLookup` holds one) and the checked program
(:meth:`~.program.Program.token_table`), and imports neither.
"""

from __future__ import annotations

from typing import NamedTuple


class Table(NamedTuple):
    """A checked finite table (language v4): each key tuple (one number per argument; a
    categorical token's key is its id in the vocabulary) and its value, and the value of every
    other key (None: none; the checker proved every argument value a key). A NamedTuple, not a
    node: the walkers never descend into it."""

    name: str
    keys: tuple[tuple[float, ...], ...]
    values: tuple[float, ...]
    default: float | None
    token_columns: tuple[bool, ...]  # per argument: keyed by categorical tokens
    tokens: tuple[str, ...] = ()  # a table of tokens: its values are ids into these (its output vocabulary)

    @property
    def arity(self) -> int:
        return len(self.token_columns)

    def lookup(self, key: tuple[float, ...]) -> float | None:
        """The value at ``key`` (floats compared exactly), the default, or None."""
        for entry, value in zip(self.keys, self.values, strict=True):
            if entry == key:
                return value
        return self.default

    def outputs(self) -> frozenset[float]:
        """Every value the table can give."""
        return frozenset(self.values) | (frozenset() if self.default is None else {self.default})
