"""Retrieval heads: min/max of a score (retrieval and readout heads) and argmin/argmax token retrieval.

- **retrieval / readout head** for ``min_s f(t, s)`` with ``f = Σ_j φ_j(t) ψ_j(s)``: query rows
  φ_j, key rows ψ_j, β·(q·k) = ±β f, values ψ_j. Token t receives the Gibbs means ψ̄_j and an
  FFN forms Σ_j φ_j ψ̄_j = Σ_s p_s f(t, s), which lies within min(ln N, (N−1)/e)/β of the
  minimum (no gap assumption), plus max|f̃ − f| for approximate features.
- **token retrieval** (``x(argmin_s ...)``), values x(s): ‖Σ p v − v_best‖ ≤ (N−1)e^(−β(δ−2δf))·diam
  under the margin δ (δf the score's error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...analysis.comparisons import ComparisonNode
from ...analysis.schedule import Head
from ...analysis.stages import attention_stage
from ...errors import CompileError
from ..circuit import AttentionHead, LinearForm, input_direction
from .budget import Constraint
from .builder import CircuitBuilder
from .fetch import MaskCondition
from .quantity import ZERO, ErrorVec, Quantity, constant, in_direction
from .scores import FeatureQuantities, body_range, combine, key_count, node_mask, placed, separated


@dataclass(frozen=True)
class Score:
    """A head's score ±Σ_j φ_j ψ_j: query and key rows, its error and magnitude bound."""

    queries: tuple[LinearForm, ...]
    keys: tuple[LinearForm, ...]
    error: ErrorVec
    magnitude: float


def _score(builder: CircuitBuilder, varying: FeatureQuantities, sign: float) -> Score:
    """Σ_j φ_j ψ_j errs by Σ_j |φ_j|·err ψ_j + |ψ_j|·err φ_j + err φ_j·err ψ_j."""
    error = ZERO
    for q, k in varying:
        error = error.plus(k.error, q.magnitude).plus(q.error, k.magnitude)
        error = error.plus(ErrorVec(extra=builder.error(q.error) * builder.error(k.error)))
    return Score(queries=tuple(q.form.scaled(sign) for q, _ in varying), keys=tuple(k.form for _, k in varying),
                 error=error, magnitude=sum(q.magnitude * k.magnitude for q, k in varying))


def comparison_head(builder: CircuitBuilder, node: ComparisonNode, head: Head) -> None:
    """The head of a min/max (a retrieval or readout head) or argmin/argmax node (a token
    retrieval); its result goes to ``builder.results[node.name]``."""
    varying, offset = separated(builder, node.body, node)
    head = placed(builder, head, varying)
    if not varying:
        varying = [(constant(0.0), constant(0.0))]
    count = key_count(node, builder.length)
    score = _score(builder, varying, -1.0 if node.kind in ("min", "argmin") else 1.0)
    mask = node_mask(node)
    if node.kind in ("argmin", "argmax"):
        token_retrieval(builder, node, head, score, mask, count)
        return
    name = f"head:{node.name}"
    value_magnitude = max((k.magnitude for _, k in varying), default=0.0)
    rounding = builder.unit_roundoff * (4 * math.sqrt(len(varying)) * score.magnitude
                                        + (math.sqrt(count) + 4) * value_magnitude)
    share, target = builder.head_source(name, rounding)
    beta = min(math.log(count), (count - 1) / math.e) / target if count > 1 else 0.0
    outputs = tuple(builder.direction(f"{node.name}:mean[{j + 1}]") for j in range(len(varying)))
    builder.heads.append(AttentionHead(
        name=node.name, layer=head.layer, kind=head.kind, site=node.site, query=score.queries, key=score.keys,
        value=score.keys, outputs=outputs, beta=beta, mask=mask, error=share, formula=head.compares))
    combined = combine(builder, varying, offset, outputs, head.layer)
    low, high = body_range(varying, offset)
    error = combined.error.plus(ErrorVec.source(name)).plus(score.error)
    builder.results[node.name] = [Quantity(form=combined.form, stage=combined.stage, low=low, high=high, error=error)]


def token_retrieval(builder: CircuitBuilder, node: ComparisonNode, head: Head, score: Score,
                    mask: tuple[MaskCondition, ...], count: int) -> None:
    """x(argmin/argmax): the values are the token itself; β so that, under the margin δ less
    twice the score's error and rounding, the weight off the best key costs at most the share.
    The score's error must stay below δ/4 (a constraint)."""
    margin = builder.program.margin
    if margin is None:
        raise CompileError(f"{node.quoted} retrieves a token, which jumps where two scores tie: declare "
                           f"`margin δ` (or pass --margin) so the error bound can hold")
    name = f"head:{node.name}"
    low, high = builder.token_range()
    dimension = builder.program.dimension
    share, target = builder.head_source(name, builder.unit_roundoff * (math.sqrt(count) + 4)
                                        * max(abs(low), abs(high)))
    builder.constraints.append(Constraint(score.error, margin / 4))
    rounding = 4 * len(score.keys) * builder.unit_roundoff * score.magnitude
    effective = margin - 2 * builder.error(score.error) - 2 * rounding
    if effective <= 0:
        effective = margin / 2
    beta = max(math.log(max(count - 1, 1) * builder.token_diameter() / target), 0.0) / effective
    outputs = tuple(builder.direction(f"{node.name}:x[{i + 1}]") for i in range(dimension))
    builder.heads.append(AttentionHead(
        name=node.name, layer=head.layer, kind=head.kind, site=node.site, query=score.queries, key=score.keys,
        value=tuple(LinearForm.of(input_direction(i)) for i in range(dimension)), outputs=outputs, beta=beta,
        mask=mask, error=share, formula=head.compares))
    stage = attention_stage(head.layer)
    builder.results[node.name] = [in_direction(o, stage, low, high, ErrorVec.source(name)) for o in outputs]
