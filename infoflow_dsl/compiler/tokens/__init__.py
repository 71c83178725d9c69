"""Stage 4 for token programs (language v3): a checked token program -> an exact circuit.

Every value a token program computes takes finitely many values (``analysis.finite``), so the
lowering does not approximate: each construction is exact in exact arithmetic on those values
(robust steps re-quantise brackets and integers, gates multiply by indicators, uniform heads
average exactly, sharp heads leave at most :data:`~.builder.TAIL` off their winners), and the
a-priori bound is the softmax tails plus the dtype's rounding. Token outputs are the V tokens'
scores: the right token's is within the bound of 1, every other's within it of 0, so the
margin is 1 − 2·bound. Modules: ``builder`` (features, columns, stages), ``ffn`` (units),
``heads`` (attention, len), ``separate`` (bodies as products of per-position features, key
classes), ``counts`` (how many keys a mask leaves), ``lower`` (the walker and its rule table).

**The bound's argument.** The a-priori bound of a token model rests on four facts, each checked
where it is used and each broken on purpose by a test that sees the refusal:

1. *Exact values* (``language/exact.py``, ``language/value_sets.py``): every feature's value set
   holds the program's exact rationals (a number is the decimal written), and every identity a
   construction uses, a finite split Σ_v [a = v]·g(v, b) included, substitutes those values
   exactly (``NumberLiteral.exact``). Broken (a split's literal as its float): the measurement
   finds the model wrong and ``ifl.compile`` refuses it (tests/pipeline/test_compiling.py).
2. *A gap*: a step [z ≥ c] is exact while z's error is below a quarter of the gap g below c
   (``ffn.threshold``, which refuses otherwise: tests/compiler/tokens/test_token_ffn.py).
3. *A tail*: a sharp head leaves at most :data:`~.builder.TAIL` of its weight off its winners,
   which its readers carry as error (``heads``, ``fetch``).
4. *A rounding*: each unit adds 2ϱ·(Σ|cᵢxᵢ| + |b|) through its output coefficient, each head its
   values' rounding (docs/theory.md §4's √n accumulation for long sums); an ε below the total is refused
   with the smallest ε the dtype honours (tests/pipeline/test_compiling.py).

Stage 6 then measures the model against the exact reference (every short sequence, the constant
ones, random ones), and a model above ε or above this bound is refused as a compiler bug
(``pipeline.compiling.refuse_uncertified``).

The model reads token ids of any length T' ≤ T (docs/design.md, "The compiled model"): masks read only the
query's and the key's positions, ``len`` is computed (a uniform head and a table of 2(T − 1)
units), and sums are count × mean, the count an exact feature of the position and len, or, for
a 0/1 body, steps on its mean and 1/count (``widths``). A column no construction reads is not
written (:func:`_read_directions`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import torch

from ...analysis.causality import is_causal
from ...analysis.finite import finite_domain
from ...errors import CompileError, NoConstruction
from ...language import typed as ir
from ..circuit import Circuit, ErrorBudget, ExpressionValue, LinearForm, ReLUUnit, readout_rounding
from ..vectors import UNIT_ROUNDOFF
from .builder import TokenCircuitBuilder
from .lower import RULES, TokenLowering

SEQUENCE_ROW = "@"  # a sequence target's row: the readout token, which no expression reads as a position

__all__ = ["RULES", "lower_tokens"]


def lower_tokens(program: ir.Program, eps: float, dtype: torch.dtype) -> Circuit:
    """The circuit of a token program; CompileError (exit 2) for a construct it cannot build or
    a numeric bound above ``eps``."""
    domain = finite_domain(program)
    assert domain is not None and program.vocabulary is not None
    if program.target.type.shape:
        raise NoConstruction("a vector-valued target over tokens is not compiled yet")
    builder = TokenCircuitBuilder(program, UNIT_ROUNDOFF[dtype])
    row = program.token_variable or SEQUENCE_ROW
    lowering = TokenLowering(builder, domain, {row: program.token_conditions})
    if program.token_output:
        output, error = _token_scores(program, lowering, row)
        output = _group_scores(builder, output, program.token_table)
        bound = error + max(readout_rounding(f, 1.0, builder.unit_roundoff) for f in output)
        shape: tuple[int, ...] = (len(output),)
        if bound >= 0.25:
            raise CompileError(f"the token scores are within {bound:.3g} of 0/1, not a safe margin")
    else:
        value = lowering.feature(program.target, row)
        output = (value.form,)
        bound = value.error + readout_rounding(value.form, value.magnitude, builder.unit_roundoff)
        shape = ()
        if bound > eps:
            raise CompileError(f"the a-priori bound {bound:.3g} of this token program in {str(dtype)[6:]} is above "
                               f"ε = {eps:g} (the dtype's rounding through {builder.layers} layers); raise ε or use "
                               "float64")
    vocabulary = program.vocabulary
    read = _read_directions(builder, output)
    token_columns = tuple((d, c) for d, c in builder.token_columns.items() if d in read)
    position_columns = tuple((d, c) for d, c in builder.position_columns.items() if d in read)
    unread = (set(builder.token_columns) | set(builder.position_columns)) - read
    return Circuit(
        dimension=vocabulary.size, length=program.length,
        directions=tuple(d for d in builder.directions if d not in unread),
        heads=tuple(builder.heads), blocks=tuple(builder.blocks), output=tuple(output), output_shape=shape,
        layers=max(builder.layers, 1), theta=0.0,
        budget=ErrorBudget(eps=eps, shares=(("exact construction: softmax tails and rounding", bound),),
                           rounding=bound, bound=bound),
        output_site="token" if program.per_token else "readout", causal=program.per_token and is_causal(program),
        vocabulary=(vocabulary.names, vocabulary.values), token_columns=token_columns,
        position_columns=position_columns, token_output=program.token_output,
        output_vocabulary=None if program.token_table is None else program.token_table.tokens,
        expressions=tuple(v for v in builder.cache.values() if isinstance(v, ExpressionValue)))


def _read_directions(builder: TokenCircuitBuilder, output: tuple[LinearForm, ...]) -> set[str]:
    """Every direction a head, an FFN unit or the readout reads: a column no one reads (one the
    lowering made and a later construction made unneeded, as ``t − 1`` once its steps are
    columns themselves) is not written."""
    forms = [*output, *(u.input for b in builder.blocks for u in b.units),
             *(f for h in builder.heads for f in (*h.query, *h.key, *h.value))]
    return {direction for form in forms for direction, _ in form.terms}


def _group_scores(builder: TokenCircuitBuilder, scores: tuple[LinearForm, ...],
                  table: ir.Table | None) -> tuple[LinearForm, ...]:
    """A token table's scores [f(args) = w], one per token w, are exclusive (the table gives one
    token). Where each is one FFN block's output direction plus a constant, all blocks in one
    layer, each block writes its constant c itself (one unit c·relu(1) on ``one``: two weights),
    so its direction holds the indicator, and the blocks are tagged as one group
    (``FFNBlock.group``), which the superposition reads as categorical
    (:mod:`..superposition.categorical`). The scores, then each one direction; else unchanged."""
    if table is None:
        return scores
    written = Counter(b.output for b in builder.blocks)
    writers = {b.output: k for k, b in enumerate(builder.blocks) if written[b.output] == 1}
    direct = [f.terms[0][0] for f in scores if len(f.terms) == 1 and f.terms[0][1] == 1.0]
    chosen = [writers[d] for d in direct if d in writers]
    if (len(chosen) != len(scores) or len(set(direct)) != len(direct)
            or len({builder.blocks[k].layer for k in chosen}) != 1):
        return scores
    for k, form in zip(chosen, scores, strict=True):
        block = builder.blocks[k]
        units = block.units + ((ReLUUnit(LinearForm.const(1.0), block.output, form.constant),) if form.constant else ())
        values = None if block.values is None else tuple(v + form.constant for v in block.values)
        builder.blocks[k] = dataclasses.replace(block, units=units, values=values, group=f"scores of {table.name}",
                                                bias=block.bias - form.constant)
        _moved(builder, block.output, form.constant)
    return tuple(LinearForm.of(builder.blocks[k].output) for k in chosen)


def _moved(builder: TokenCircuitBuilder, direction: str, constant: float) -> None:
    """``direction`` now holds ``constant`` more than it did: every recorded expression's form
    a·direction + rest becomes a·direction + rest − a·constant (the same value)."""
    for key, value in builder.cache.items():
        if isinstance(value, ExpressionValue):
            coefficient = dict(value.form.terms).get(direction, 0.0)
            if coefficient:
                form = value.form.plus(LinearForm.const(-coefficient * constant))
                builder.cache[key] = dataclasses.replace(value, form=form)


def _token_scores(program: ir.Program, lowering: TokenLowering, row: str) -> tuple[tuple[LinearForm, ...], float]:
    """A token output's scores, one per token it can answer with, and their error: the fetched
    token's indicators, or, for a table of tokens, [f(args) = w] for each of its tokens w (an
    indicator table of the same keys: exact)."""
    table = program.token_table
    if table is None:
        assert isinstance(program.target, ir.Token)
        token = lowering.token(program.target.position, row)
        return token.onehot, token.error
    assert isinstance(program.target, ir.TableLookup)
    scores = []
    for index, name in enumerate(table.tokens):
        default = None if table.default is None else float(table.default == index)
        indicator = ir.Table(f'{table.name} == "{name}"', table.keys, tuple(float(v == index) for v in table.values),
                             default, table.token_columns)
        scores.append(lowering.feature(ir.TableLookup(indicator, program.target.arguments, program.target.span), row))
    return tuple(s.form for s in scores), max(s.error for s in scores)
