"""Tokens at other positions: x(t − k) and x(k) by a mask, x(len + c − t) by a score, and
x(argmin_<s> …) by a sharp head with a tie-break.

- **masked fetch**: a structural mask leaves one key (``key == query − k``, ``key == k``): the
  uniform head's weight on it is exactly 1; a query with no such key gets 0.
- **scored fetch** of a computed position p: score 2p·s − s² = p² − (s − p)², maximal at s = p
  with gap 1 to every other key (p within 1/(8T) of an integer).
- **arg fetch**: score sign·B(s, t) − γ·s with γ = gap/(2T), so the winners lead every other
  key by at least γ − 2·error and a tie goes to the smallest position, as the language says.
"""

from __future__ import annotations

from fractions import Fraction

from ...language import typed as ir
from ...language.printer import describe
from ...transformer.masks import Condition, mask_side
from ..circuit import LinearForm
from .builder import Feature, TokenFeature
from .context import BuilderContext, LoweringContext
from .heads import retrieve, uniform_mean
from .reductions import structural
from .scores import ScoreContext, distance_score, score_terms, value_gap


def onehot(lowering: BuilderContext) -> TokenFeature:
    """The row's own token: the embedding's one-hot columns ``x=a``."""
    vocabulary = lowering.builder.vocabulary
    forms = tuple(LinearForm.of(lowering.builder.token_column(
        f"x={name}", tuple(1.0 if i == v else 0.0 for i in range(vocabulary.size))))
        for v, name in enumerate(vocabulary.names))
    return TokenFeature(forms, 0)


def fetch(lowering: ScoreContext, position: ir.Position, row: str) -> TokenFeature:
    """The token at ``position`` at every row (``row`` standing for the row's position)."""
    own = onehot(lowering)
    if isinstance(position, ir.PositionVariable) and position.name == row:
        if position.offset == 0:
            return own
        return masked_fetch(lowering, own, ("key", "==", mask_side("query", position.offset)), position)
    if isinstance(position, ir.FixedPosition):
        return masked_fetch(lowering, own, ("key", "==", position.index), position)
    if isinstance(position, ir.LastPosition):
        return masked_fetch(lowering, own, ("key", "==", lowering.builder.length + position.offset), position)
    if isinstance(position, ir.RunLength | ir.ReflectedPosition):
        return scored_fetch(lowering, own, lowering.feature(ir.PositionNumber(position), row), position)
    if isinstance(position, ir.ArgPosition):
        return arg_fetch(lowering, own, position, row)
    raise lowering.refuse(position, "this position cannot be fetched")


def masked_fetch(lowering: BuilderContext, own: TokenFeature, condition: Condition, position: object) -> TokenFeature:
    (outputs,) = [uniform_mean(lowering.builder, [Feature(f, frozenset({Fraction(0), Fraction(1)}), 0) for f in
                                              own.onehot], [None] * len(own.onehot), (condition,),
                               f"x({ir.position_label(position)}) by a mask", kind="position",
                               fetches=position)]
    return TokenFeature(tuple(o.form for o in outputs), outputs[0].stage, outputs[0].error)


def scored_fetch(lowering: LoweringContext, own: TokenFeature, place: Feature, position: object) -> TokenFeature:
    """score 2p·s − s²: the key at s = p wins by 1 (p within 1/(8T) of an integer)."""
    if place.error * 4 * lowering.builder.length >= 0.5:
        raise lowering.refuse(position, f"its position is computed within {place.error:.3g}, too coarse to fetch")
    s, s2 = lowering.builder.position_number(), lowering.builder.position_square()
    score = [(place.form, LinearForm.of(s, 2.0)), (LinearForm.const(1.0), LinearForm.of(s2, -1.0))]
    outputs, stage, tail = retrieve(lowering.builder, score=score, stage=place.stage, values=own.onehot, gap=0.5,
                                    mask=(), value_error=0.0,
                                    formula=f"x({ir.position_label(position)}) by score 2p·s − s²",
                                    kind="position", fetches=position)
    return TokenFeature(tuple(LinearForm.of(o) for o in outputs), stage, tail)


def arg_fetch(lowering: ScoreContext, own: TokenFeature, position: ir.ArgPosition, row: str) -> TokenFeature:
    """x(argmax_<s> B): the arg head (:func:`arg_head`) whose values are the key's one-hot token."""
    outputs, stage, tail = arg_head(lowering, position, row, own.onehot, token=True)
    return TokenFeature(tuple(LinearForm.of(o) for o in outputs), stage, tail)


def arg_number(lowering: ScoreContext, position: ir.ArgPosition, row: str) -> Feature:
    """The position argmax_<s> B as a number p ∈ 1..T: the arg head whose value is the key's
    position number, within tail·T (the weight off the one winner, times values up to T)."""
    length = lowering.builder.length
    (output,), stage, tail = arg_head(lowering, position, row, (LinearForm.of(lowering.builder.position_number()),),
                                      token=False)
    return Feature(LinearForm.of(output), frozenset(Fraction(p) for p in range(1, length + 1)), stage, tail * length)


def arg_head(lowering: ScoreContext, position: ir.ArgPosition, row: str,
             values: tuple[LinearForm, ...], token: bool) -> tuple[tuple[str, ...], int, float]:
    """The sharp head of argmax_<s> B (argmin: −B) with the tie-break −γ·s, γ = gap/(2T), reading
    ``values`` at its one winner (``token``: the winner's token, else its position): (output
    directions, stage, error per unit of value)."""
    body = position.body
    mask = structural(lowering, position.conditions, position.variable, row, position)
    sign = 1.0 if position.kind == "argmax" else -1.0
    gap = value_gap(lowering.values(body))
    if gap is None:
        raise lowering.refuse(position, "its score does not take finitely many values")
    tie = gap / (2 * lowering.builder.length)  # −γ·s: the smallest position wins a tie
    distance = distance_score(lowering, body, position.variable, row, sign, 0.4 * tie) if sign < 0 else None
    if distance is not None:
        score, stage, error, scale = distance
        tie *= scale  # the winners lead by scale·gap: so does the tie-break step
    else:
        if isinstance(body, ir.Pointwise) and body.function == "abs":
            body = ir.Square(body.arguments[0])  # argmin |e| = argmin e² (the same winners)
            tie = value_gap(lowering.values(body)) / (2 * lowering.builder.length)  # type: ignore[operator]
        score, stage, error = score_terms(lowering, body, position.variable, row, sign, 0.4 * tie)
    if error >= 0.4 * tie:  # the winner still leads by tie − 2·error ≥ tie/5
        raise lowering.refuse(position, f"its score is computed within {error:.3g}, not below {0.4 * tie:.3g} "
                                    f"(0.4 of the tie-break step); use float64")
    score.append((LinearForm.const(-tie), LinearForm.of(lowering.builder.position_number())))
    arg = f"{position.kind}_<{position.variable}> {describe(body)}"
    return retrieve(lowering.builder, score=score, stage=stage, values=values, gap=tie - 2 * error, mask=mask,
                    value_error=0.0, formula=f"x({arg})" if token else arg,
                    reads=position.variable)

