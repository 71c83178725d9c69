"""The circuit IR: what ``lower`` produces and ``assemble`` turns into weights.

Everything is written in **named residual directions** (``one``, ``x[2]``, ``pos:cos``,
``c1:mean[3]``, ``L1:square7``, ...). A quantity is a :class:`LinearForm` over them: linear
maps are never materialised, they fold into the matrices that read them (W_Q, W_K, W_V, W_in,
W_U). Only three things write a direction:

- the embedding (``x[i]``, ``one``, the positional code ``pos:cos``/``pos:sin``),
- an :class:`AttentionHead` (its value rows, through W_O, into its output directions),
- a :class:`ReLUUnit` of an FFN block: ``Σ_k c_k·relu(form)`` added into one direction.

Each head and FFN block records the a-priori error it adds (``error``), so the circuit's
:class:`ErrorBudget` is a readable account of where ε went.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..language import typed as ir

ONE = "one"
POS_COS, POS_SIN = "pos:cos", "pos:sin"


def input_direction(coordinate: int) -> str:
    """The direction of the input token's coordinate ``coordinate`` (0-based): ``x[1]``, ``x[2]``, ..."""
    return f"x[{coordinate + 1}]"


@dataclass(frozen=True, slots=True)
class LinearForm:
    """Σ coefficient·direction + constant (the constant is read from the ``one`` direction)."""

    terms: tuple[tuple[str, float], ...] = ()
    constant: float = 0.0

    @staticmethod
    def of(direction: str, coefficient: float = 1.0) -> LinearForm:
        return LinearForm(((direction, coefficient),))

    @staticmethod
    def const(value: float) -> LinearForm:
        return LinearForm((), value)

    def plus(self, other: LinearForm, scale: float = 1.0) -> LinearForm:
        if not other.terms:  # a constant: the terms stay (an interpolant's million knots take this path)
            return LinearForm(tuple((d, c) for d, c in self.terms if c != 0.0), self.constant + scale * other.constant)
        merged = dict(self.terms)
        for direction, coefficient in other.terms:
            merged[direction] = merged.get(direction, 0.0) + scale * coefficient
        terms = tuple((d, c) for d, c in merged.items() if c != 0.0)
        return LinearForm(terms, self.constant + scale * other.constant)

    def scaled(self, factor: float) -> LinearForm:
        if factor == 0.0:
            return LinearForm()
        return LinearForm(tuple((d, c * factor) for d, c in self.terms), self.constant * factor)

    @property
    def is_constant(self) -> bool:
        return not self.terms

    def with_one(self) -> dict[str, float]:
        """The form as direction -> coefficient, the constant on ``one``."""
        out = dict(self.terms)
        if self.constant:
            out[ONE] = out.get(ONE, 0.0) + self.constant
        return out

    def __str__(self) -> str:
        parts = [f"{c:+.6g}·{d}" for d, c in self.terms]
        if self.constant or not parts:
            parts.append(f"{self.constant:+.6g}")
        return " ".join(parts)


def readout_rounding(form: LinearForm, magnitude: float, unit_roundoff: float) -> float:
    """The rounding of the unembedding's sum of ``form`` (a value of size ``magnitude``):
    √(D+1)·(|y| + Σ|coefficients|)·ϱ, D the form's terms."""
    return unit_roundoff * (math.sqrt(len(form.terms) + 1) * (magnitude + sum(abs(c) for _, c in form.terms)))


@dataclass(frozen=True, slots=True)
class ReLUUnit:
    """One hidden unit: ``coefficient · relu(input)`` added to direction ``output``."""

    input: LinearForm
    output: str
    coefficient: float


@dataclass(frozen=True, kw_only=True)
class ComputedFunction:
    """What a set of ReLU units computes into its direction: ``function`` (square, sqrt, relu,
    abs or tent; "" when not recorded) of the linear form ``argument``, minus ``bias``, within
    ``approximation`` (the interpolant's largest departure on its knots' range) plus the
    floating-point estimate ``rounding``. Shared by an approximation's levels and FFN blocks."""

    bias: float = 0.0
    function: str = ""
    argument: LinearForm = LinearForm()
    rounding: float = 0.0
    approximation: float = 0.0


@dataclass(frozen=True)
class FFNBlock(ComputedFunction):
    """ReLU units that together compute one function into one direction, at ``layer``.

    ``layer`` 0 is the embedding's ReLU block; layer l ≥ 1 is the FFN of block l − 1.
    ``formula`` says what it computes; ``error`` is its a-priori approximation error.
    It computes ``function`` (square, sqrt, relu or abs) of the linear form ``argument``:
    direction ``output`` holds that value minus ``bias`` (a constant folded into the forms that
    read it), within ``approximation`` (the interpolant's largest departure on its knots' range;
    ``error`` is the block's share of the budget, which for the two squares of a product is
    their difference's) plus the floating-point estimate ``rounding``.
    """

    name: str
    layer: int
    output: str
    formula: str
    units: tuple[ReLUUnit, ...]
    error: float
    #: the values direction ``output`` takes where finitely many are known (a token program's
    #: steps, gates, tables), ascending; None: not recorded. :mod:`.superposition.values` reads them.
    values: tuple[float, ...] | None = None
    #: blocks of one layer naming the same group hold indicators of which at most one is 1 at a
    #: row (a token table's scores [f(args) = w], one per token w); :mod:`.superposition.categorical`
    #: reads them as a categorical group. None: no such group.
    group: str | None = None
    #: a token block whose direction plus ``bias`` is one term of ``formula``, other directions'
    #: terms completing it (a product's linear part): the direction alone is not the formula
    partial: bool = False


@dataclass(frozen=True)
class NodeValue:
    """Where the value of comparison node ``name`` lives: component j is ``forms[j]`` over the
    residual directions, complete from ``stage`` on (2l: after schedule layer l's heads, 2l + 1:
    after its FFN), within ``bound`` of the exact value of the node's sub-expression (the
    a-priori error; for a token retrieval, on inputs with the declared margin)."""

    name: str
    forms: tuple[LinearForm, ...]
    stage: int
    bound: float


@dataclass(frozen=True)
class ExpressionValue:
    """Where a token program's sub-expression lives: ``expression``, whose free position
    variable (if any) is ``row``, is ``form`` over the residual directions at every row (``row``
    standing for the row's position), complete from ``stage`` on (the stage clock of
    :class:`NodeValue`), within ``bound`` of its exact value wherever that is defined and the
    row satisfies ``conditions`` (a per-token target's ``t : t >= 2``, under which its features
    were built; () elsewhere)."""

    expression: ir.Expr
    row: str
    form: LinearForm
    stage: int
    bound: float
    conditions: tuple[ir.PositionCondition, ...] = ()


@dataclass(frozen=True)
class AttentionHead:
    """softmax_s(β·q(t)·k(s) | mask) · v(s), value row i written into ``outputs[i]``.

    ``mask`` holds conditions (left, op, right) over ``key``, ``query``, ``last`` (each
    optionally with an offset: ``query-1``) and literal positions. ``error`` is the a-priori
    error of its result (Gibbs or retrieval bound). ``reads`` is the variable a retrieval picks
    (``s``) and ``fetches`` the position a fetch reads (``len + 1 - t``), for the reports'
    information sets; both empty for a head placed by the schedule (its node and schedule entry
    say it).
    """

    name: str
    layer: int
    kind: str
    site: str
    query: tuple[LinearForm, ...]
    key: tuple[LinearForm, ...]
    value: tuple[LinearForm, ...]
    outputs: tuple[str, ...]
    beta: float
    mask: tuple[tuple[str | int, str, str | int], ...]
    error: float
    formula: str
    reads: str = ""
    fetches: object | None = None  # an ir.PositionTerm


@dataclass(frozen=True)
class ErrorBudget:
    """Where ε went: each source's share (heads, FFN blocks, rounding) and their sum."""

    eps: float
    shares: tuple[tuple[str, float], ...]
    rounding: float
    bound: float


@dataclass(frozen=True)
class Circuit:
    """A whole compiled target in named directions: embedding, layers, output."""

    dimension: int
    length: int
    directions: tuple[str, ...]
    heads: tuple[AttentionHead, ...]
    blocks: tuple[FFNBlock, ...]
    output: tuple[LinearForm, ...]
    output_shape: tuple[int, ...]
    layers: int
    theta: float
    budget: ErrorBudget
    exact_length_only: bool = False
    min_length: int = 1
    notes: tuple[str, ...] = field(default=())
    output_site: str = "readout"  # "token": y(t) = W_U h(t) + b_U at every input token
    causal: bool = False  # a causal per-token target (its masks keep the output at t free of later tokens)
    values: tuple[NodeValue, ...] = field(default=())
    #: a token circuit's sub-expressions and where each lives (the circuit map's records)
    expressions: tuple[ExpressionValue, ...] = field(default=())
    #: a token circuit (``compiler.tokens``): the vocabulary's names and numbers (None:
    #: categorical), the embedding's columns (direction -> its value for each token id) and the
    #: positional code's (direction -> its value at positions 1..T+1); ``token_output``: the
    #: output is the V tokens' scores
    vocabulary: tuple[tuple[str, ...], tuple[float, ...] | None] | None = None
    token_columns: tuple[tuple[str, tuple[float, ...]], ...] = field(default=())
    position_columns: tuple[tuple[str, tuple[float, ...]], ...] = field(default=())
    token_output: bool = False
    output_vocabulary: tuple[str, ...] | None = None  # a token output over a table's tokens, not the input's
