"""Attention constructions of the token circuit: uniform means, sharp retrievals, fetches, len.

- **Uniform mean** over the keys a structural mask leaves (score 0): z(t) = (1/n) Σ_s v(s),
  exact but for rounding (ϱ·T·max|v|); a query with no key gets 0.
- **Retrieval** softmax_s(β·score(t, s)) · v(s): when the winners' score beats every other
  key's by at least γ, the weight off the winners is at most (T − 1)·e^(−βγ); β is chosen to
  make that :data:`~.builder.TAIL`, so the retrieved value is within TAIL·max|v| of the
  winners' mean (one winner where a tie-break separates them). Scores are bilinear:
  Σₖ qₖ(t)·kₖ(s), each factor a feature of its own position.
- **Fetch** of a token at a position the query computes (``x(len + 1 − t)``, ``x(len)``):
  score 2p·s − s² = p² − (s − p)², maximal at s = p with gap 1 to every other key.
- **len**: a uniform head over every key reads [s = 1] and gives u = 1/T' (exact: the weights
  are 1/T'); a table of robust steps on u's values {1, 1/2, …, 1/T} gives T' exactly: 2(T − 1)
  units, the one cost of a run-time length that grows with T.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from ...analysis.schedule import LENGTH_HEAD
from ...analysis.stages import attention_stage, layer_for
from ...transformer.masks import HeadMask
from ..circuit import AttentionHead, LinearForm
from .builder import TAIL, Feature, TokenCircuitBuilder
from .ffn import table


def _head(builder: TokenCircuitBuilder, *, kind: str, stage: int, score: Sequence[tuple[LinearForm, LinearForm]],
          values: Sequence[LinearForm], beta: float, mask: HeadMask, error: float, formula: str,
          reads: str = "", fetches: object | None = None) -> tuple[str, ...]:
    """A head at the first layer that can read ``stage``; its value rows go to fresh directions."""
    layer = layer_for(stage)
    name = LENGTH_HEAD if kind == "length" else f"h{len(builder.heads) + 1}"
    outputs = tuple(builder.direction(f"{name}:{kind.split()[-1]}[{i + 1}]")  # a head's names are its own
                    for i in range(len(values)))
    query = tuple(q for q, _ in score) or (LinearForm(),)
    key = tuple(k for _, k in score) or (LinearForm(),)
    builder.add_head(AttentionHead(name=name, layer=layer, kind=kind, site="token", query=query, key=key,
                                   value=tuple(values), outputs=outputs, beta=beta, mask=mask, error=error,
                                   formula=formula, reads=reads, fetches=fetches))
    return outputs


def uniform_mean(builder: TokenCircuitBuilder, features: Sequence[Feature],
                 values: Sequence[frozenset[Fraction] | None], mask: HeadMask, formula: str,
                 kind: str = "uniform", fetches: object | None = None) -> list[Feature]:
    """The mean of each feature over the keys ``mask`` leaves (one head for all of them);
    ``kind`` "position" for a mask that leaves one key (a fetch), "length" for ``len``'s head.
    Over every key (no mask: never empty) the mean of v + c is mean(v) + c, so a feature's
    constant is added to the head's output by its readers, not read through W_V.

    Rounding: a mean of n values sums n products w·v, so it is within 2ϱ·k·max|v| of exact where
    v is nonzero at k ≤ T keys (a sum of exact zeros adds nothing). k is T but for a value of the
    positional code alone, whose nonzero positions are known: [s = 1] (the reciprocal 1/n of a
    width, :mod:`.widths`) has k = 1, its mean the weight 1/n rounded once."""
    stage = max(f.stage for f in features)
    shifts = [f.form.constant if not mask else 0.0 for f in features]
    averaged = [LinearForm(f.form.terms, f.form.constant - shift) for f, shift in zip(features, shifts, strict=True)]
    errors = [f.error + 2 * builder.unit_roundoff * _nonzero_keys(builder, form) * f.magnitude
              for f, form in zip(features, averaged, strict=True)]
    outputs = _head(builder, kind=kind, stage=stage, score=(), values=averaged, beta=0.0,
                    mask=mask, error=max(errors, default=0.0), formula=formula, fetches=fetches)
    read = attention_stage(layer_for(stage))
    return [Feature(LinearForm(((out, 1.0),), shift), value_set, read, error)
            for out, shift, value_set, error in zip(outputs, shifts, values, errors, strict=True)]


def _nonzero_keys(builder: TokenCircuitBuilder, form: LinearForm) -> int:
    """How many of the positions 1..T a value ``form`` can be nonzero at: those of its column where
    it reads the positional code only, else T."""
    embedded = builder.embedded_values(form)
    if embedded is None or embedded[0] != "pos":
        return builder.length
    return max(1, sum(1 for value in embedded[1][:builder.length] if value != 0.0))


def merged_score(score: Sequence[tuple[LinearForm, LinearForm]]) -> list[tuple[LinearForm, LinearForm]]:
    """The same score Σᵢ qᵢ(t)·kᵢ(s) in fewer weights: each query form's constant cᵢ is split off,
    (q′ᵢ + cᵢ)·kᵢ = q′ᵢ·kᵢ + cᵢ·kᵢ, and every cᵢ·kᵢ goes to one dimension whose query is the
    constant 1; a key's constant dᵢ adds qᵢ(t)·dᵢ, the same at every key, so it moves no weight
    and is dropped (and a term whose key is a constant with it). Softmax sees the same weights
    (to rounding)."""
    kept: list[tuple[LinearForm, LinearForm]] = []
    constant_query = LinearForm()
    for query, key in score:
        key = LinearForm(key.terms)
        if not key.terms:
            continue
        if query.terms:
            kept.append((LinearForm(query.terms), key))
        constant_query = constant_query.plus(key, query.constant)
    if constant_query.terms:
        kept.append((LinearForm.const(1.0), LinearForm(constant_query.terms)))
    return kept


def sharp_beta(length: int, gap: float) -> float:
    """β with (T − 1)·e^(−β·gap) ≤ TAIL/2."""
    return math.log(2 * max(length - 1, 1) / TAIL) / gap


def retrieve(builder: TokenCircuitBuilder, *, score: Sequence[tuple[LinearForm, LinearForm]], stage: int,
             values: Sequence[LinearForm], gap: float, mask: HeadMask, value_error: float,
             formula: str, kind: str = "token retrieval", reads: str = "",
             fetches: object | None = None) -> tuple[tuple[str, ...], int, float]:
    """A sharp head whose winners beat other keys by ``gap``: (output directions, stage, error
    per unit of value magnitude beyond ``value_error``)."""
    beta = sharp_beta(builder.length, gap)
    outputs = _head(builder, kind=kind, stage=stage, score=merged_score(score), values=values, beta=beta, mask=mask,
                    error=TAIL + value_error, formula=formula, reads=reads, fetches=fetches)
    return outputs, attention_stage(layer_for(stage)), TAIL


def length(builder: TokenCircuitBuilder) -> Feature:
    """T' at every row (cached): a uniform head reads 1/T', a step table decodes it."""
    cached = builder.cache.get("len")
    if isinstance(cached, Feature):
        return cached
    first = Feature(LinearForm.of(builder.first_position()), frozenset({Fraction(0), Fraction(1)}), 0)
    reciprocals = frozenset(Fraction(1, n) for n in range(1, builder.length + 1))
    (inverse,) = uniform_mean(builder, [first], [reciprocals], (), "1/len = mean_<s> [s == 1]", kind="length")
    decoded = table(builder, inverse, lambda u: 1 / u, "len = 1 / (1/len)")
    builder.cache["len"] = decoded
    return decoded
