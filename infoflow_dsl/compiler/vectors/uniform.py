"""Uniform heads: ``mean_<s> f(t, s)`` and ``sum_<s> f(t, s)``.

β = 0, so attention averages its values exactly: the values are the key features ψ_j of every
component of the body, and each component is recombined with its query side, Σ_j φ_j ψ̄_j + o
(``scores.combine``). A sum is N times the mean, N the fixed count of keys. The head adds no
error of its own: the result errs by the products' errors, |φ_j|·err ψ_j + |ψ_j|·err φ_j for
approximate features, and the rounding of a mean of N values, ϱ(√N + 4)·max|ψ_j|.
"""

from __future__ import annotations

import math

from ...analysis.comparisons import ComparisonNode
from ...analysis.schedule import Head
from ...errors import CompileError
from ...language import typed as ir
from ..circuit import AttentionHead
from .builder import CircuitBuilder
from .fetch import ZERO_FORMS
from .quantity import ErrorVec, Quantity
from .scores import body_range, combine, key_count, node_mask, placed, separated


def uniform_head(builder: CircuitBuilder, node: ComparisonNode, head: Head) -> None:
    """The head of a sum/mean node; its result (a component per component of the body) goes to
    ``builder.results[node.name]``."""
    shape = node.body.type.shape
    components = [node.body] if not shape else [ir.Component(node.body, i + 1) for i in range(shape[0])]
    parts = [separated(builder, c, node) for c in components]
    head = placed(builder, head, [pair for varying, _ in parts for pair in varying])
    rows = [k for varying, _ in parts for _, k in varying]
    mask = node_mask(node)
    count = key_count(node, builder.length)
    scale = 1.0
    if node.kind == "sum":
        if any("query" in (c[0], c[2]) for c in mask):
            raise CompileError(f"{node.quoted}: a sum whose range depends on the querying position "
                               f"is not supported; write it as a mean")
        scale = float(count)
    outputs = tuple(builder.direction(f"{node.name}:mean[{j + 1}]") for j in range(len(rows)))
    builder.heads.append(AttentionHead(
        name=node.name, layer=head.layer, kind=head.kind, site=node.site, query=ZERO_FORMS, key=ZERO_FORMS,
        value=tuple(k.form for k in rows), outputs=outputs, beta=0.0, mask=mask, error=0.0, formula=head.compares))
    results = []
    start = 0
    for varying, offset in parts:
        own = outputs[start:start + len(varying)]
        start += len(varying)
        combined = combine(builder, varying, offset, own, head.layer)
        magnitude = max((k.magnitude for _, k in varying), default=0.0)
        rounding = ErrorVec.rounded(builder.unit_roundoff * (math.sqrt(count) + 4) * magnitude)
        error = combined.error.plus(rounding)
        for q, k in varying:  # a mean of approximate features errs by at most their error
            error = error.plus(k.error, q.magnitude).plus(q.error, k.magnitude)
        low, high = body_range(varying, offset)
        results.append(Quantity(form=combined.form.scaled(scale), stage=combined.stage, low=low * scale,
                                high=high * scale, error=error.scaled(scale)))
    builder.results[node.name] = results
