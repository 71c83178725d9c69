"""The token circuit under construction: features, tables, heads and FFN units.

A token program's every intermediate value takes finitely many values (``analysis.finite``), so
its lowering keeps, for each value it computes, a :class:`Feature`: where it lives (a linear
form over named residual directions), the exact values it can take, the a-priori error of the
computed value (exact arithmetic gives 0 for every construction but a softmax's tail; the
rest is the dtype's rounding, estimated per construction), and the **stage** after which it is
in the residual stream, on the one stage clock of :mod:`~infoflow_dsl.analysis.stages` (0 the
embedding, 2l layer l's attention, 2l + 1 its FFN): a feature's stage fixes the layer of the
head (``layer_for``) or FFN block (``ffn_layer``) that reads it.

Functions of a position's own token are table lookups: a **token column** is a direction
whose value for token v is written in row v of ``embed.W_E`` (one-hot indicators ``x=a``, a
numeric token's value, any expression of x(t) alone). Functions of the own position alone
(``pos:t``, ``pos:t^2``, ``pos:first`` = [t = 1]) are **position columns** of the fixed
positional code W_pos, whose width does not grow with T.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TypeVar

from ...errors import CompileError, NoConstruction
from ...language import typed as ir
from ..build import BuildCore
from ..circuit import ONE, AttentionHead, FFNBlock, LinearForm, ReLUUnit

Built = TypeVar("Built")

#: Every softmax tail (the weight a head leaves off its winners) is made at most this.
TAIL = 1e-9

Values = frozenset[Fraction] | None


@dataclass(frozen=True)
class Feature:
    """A scalar the circuit computes at every row: value ``form`` (over residual directions),
    one of ``values`` (None: not finite), within ``error`` of the exact value, from ``stage`` on."""

    form: LinearForm
    values: Values
    stage: int
    error: float = 0.0

    @cached_property
    def low(self) -> float:
        return float(min(self.values)) if self.values else 0.0

    @cached_property
    def high(self) -> float:
        return float(max(self.values)) if self.values else 0.0

    @cached_property
    def magnitude(self) -> float:
        return max(abs(self.low), abs(self.high))

    @property
    def is_indicator(self) -> bool:
        return self.values is not None and self.values <= {Fraction(0), Fraction(1)}

    @property
    def constant(self) -> Fraction | None:
        """The one value of a constant feature (its form has no direction), else None."""
        if self.form.is_constant and self.values is not None and len(self.values) == 1:
            return next(iter(self.values))
        return None


@dataclass(frozen=True)
class TokenFeature:
    """A token the circuit holds at every row as V indicator forms: ``onehot[v]`` is 1 where the
    token is v (within ``error`` of it), from ``stage`` on."""

    onehot: tuple[LinearForm, ...]
    stage: int
    error: float = 0.0


def constant_feature(value: Fraction) -> Feature:
    return Feature(LinearForm.const(float(value)), frozenset({value}), 0)


@dataclass
class TokenCircuitBuilder(BuildCore):
    """Directions, columns, heads and FFN blocks of one token circuit being lowered."""

    program: ir.Program
    unit_roundoff: float
    token_columns: dict[str, tuple[float, ...]] = field(default_factory=dict)
    position_columns: dict[str, tuple[float, ...]] = field(default_factory=dict)
    heads: list[AttentionHead] = field(default_factory=list)
    blocks: list[FFNBlock] = field(default_factory=list)
    steps: dict[tuple[LinearForm, Fraction], Feature] = field(default_factory=dict)
    cache: dict[object, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.direction(ONE)

    @property
    def length(self) -> int:
        return self.program.length

    @property
    def vocabulary(self) -> ir.Vocabulary:
        assert self.program.vocabulary is not None
        return self.program.vocabulary

    def fresh(self, stem: str) -> str:
        """A new residual direction named ``stem``N (``BuildCore.fresh``)."""
        return self.direction(super().fresh(stem))

    def token_column(self, name: str, values: tuple[float, ...]) -> str:
        """Direction ``name`` written by the embedding: value ``values[v]`` for token id v. A
        column equal to the own token's indicator of v is that indicator, ``x=v`` (as
        :func:`.fetch.onehot` names it), and a column equal to one already written is that one:
        one value, one direction (Tracr's sort reads [x(t) == 2] and fetches x=2)."""
        ones = [v for v, value in enumerate(values) if value != 0.0]
        if len(ones) == 1 and values[ones[0]] == 1.0:
            name = f"x={self.vocabulary.names[ones[0]]}"
        return self.direction(_column(self.token_columns, name, values))

    def position_column(self, name: str, values: tuple[float, ...]) -> str:
        """Direction ``name`` of the positional code: ``values[p − 1]`` at position p = 1..T+1
        (a column equal to one already written is that one)."""
        return self.direction(_column(self.position_columns, name, values))

    def embedded_values(self, form: LinearForm) -> tuple[str, tuple[float, ...]] | None:
        """("tok", the form's value for each token) where it reads token columns only, ("pos",
        its value at each position 1..T+1) where it reads position columns only, else None: a
        function of such a form is a column of its own, no unit."""
        for prefix, columns in (("tok", self.token_columns), ("pos", self.position_columns)):
            if form.terms and all(d in columns for d, _ in form.terms):
                size = len(next(iter(columns.values())))
                return prefix, tuple(form.constant + sum(c * columns[d][i] for d, c in form.terms) for i in range(size))
        return None

    def position_number(self) -> str:
        """``pos:t``: the position p itself."""
        return self.position_column("pos:t", tuple(float(p) for p in range(1, self.length + 2)))

    def position_square(self) -> str:
        """``pos:t^2``: p², for fetches by score −(s − p)²."""
        return self.position_column("pos:t^2", tuple(float(p * p) for p in range(1, self.length + 2)))

    def first_position(self) -> str:
        """``pos:first``: [p = 1], whose mean over the T' keys is 1/T'."""
        return self.position_column("pos:first", tuple(1.0 if p == 1 else 0.0 for p in range(1, self.length + 2)))

    def tried(self, build: Callable[[], Built]) -> Built | None:
        """``build()``, or None where it raises a CompileError, the circuit then as it was before
        (directions, columns, heads, blocks, steps, cache, names): a cheaper construction may
        be tried first and given up for the general one where its error does not certify."""
        saved = (list(self.directions), set(self._known), self.units, self.counter, dict(self.token_columns),
                 dict(self.position_columns), list(self.heads), list(self.blocks), dict(self.steps), dict(self.cache))
        try:
            return build()
        except CompileError:
            (self.directions, self._known, self.units, self.counter, self.token_columns, self.position_columns,
             self.heads, self.blocks, self.steps, self.cache) = saved
            return None

    def add_units(self, *, name: str, layer: int, output: str, formula: str, units: list[ReLUUnit],
                  error: float = 0.0, values: tuple[float, ...] | None = None, bias: float = 0.0,
                  partial: bool = False, function: tuple[str, LinearForm, float] | None = None) -> None:
        """One FFN block of ``units`` at ``layer`` (1-based), computing ``formula`` into ``output``
        (whose values, where finitely many are known, are ``values``): ``formula`` is the
        direction plus ``bias`` (the constant its readers fold in), plus other directions'
        terms where ``partial``. ``function``: (name, argument, rounding) where the direction is
        that function of that argument (an exact relu or |·| unit)."""
        self.reserve_units(len(units), " (a token circuit's units grow with T where it decodes len or a count)",
                           NoConstruction)
        self.units += len(units)
        name_of, argument, rounding = function or ("", LinearForm(), 0.0)
        self.blocks.append(FFNBlock(name=name, layer=layer, output=output, formula=formula, units=tuple(units),
                                    error=error, values=values, bias=bias, partial=partial, function=name_of,
                                    argument=argument, rounding=rounding))

    def add_head(self, head: AttentionHead) -> None:
        self.heads.append(head)

    @property
    def layers(self) -> int:
        return max([h.layer for h in self.heads] + [b.layer for b in self.blocks] + [0])


def _column(columns: dict[str, tuple[float, ...]], name: str, values: tuple[float, ...]) -> str:
    """The name of the column holding ``values``: an existing one with those values, else ``name``
    (added)."""
    for existing, held in columns.items():
        if held == values:
            return existing
    columns.setdefault(name, values)
    return name
