"""A comparison head's score as quantities: what retrieval and uniform heads share.

A node ``kind_<s> f(t, s)`` separates (``analysis.features``) as f = Σ_j φ_j(t) ψ_j(s) + o(t):
query features φ_j at the node's site, key features ψ_j at every token, and offsets o free of
s. The head's attention reads φ_j and ψ_j; its values ψ_j come back as means ψ̄_j, and the
result Σ_j φ_j ψ̄_j + o is formed by products in the FFN (:func:`combine`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ...analysis.comparisons import ComparisonNode
from ...analysis.features import Atom, FeaturePair, NotSeparable, separate
from ...analysis.schedule import Head
from ...analysis.stages import attention_stage, layer_for
from ...errors import CompileError
from ...language.positions import count_tuples
from ...language.printer import describe
from ...transformer.masks import conditions_mask
from .builder import CircuitBuilder
from .fetch import MaskCondition
from .quantity import Quantity, constant, in_direction, interval_product, linear
from .squares import product
from .values import canonical, scalar

FeatureQuantities = list[tuple[Quantity, Quantity]]


def _monomial(builder: CircuitBuilder, monomial: tuple[Atom, ...], site: str) -> Quantity:
    """The product of a monomial's atoms at ``site`` (1 for the empty monomial), built once per
    site: a query's x(s)[1]·x(s)[1] and a key's x(t)[1]·x(t)[1] are one square at the tokens."""
    if not monomial:
        return constant(1.0)
    key = ("monomial", tuple(canonical(atom.expr) for atom in monomial), site)
    if key not in builder.cache:
        value = scalar(builder, monomial[0].expr, site)
        for atom in monomial[1:]:
            value = product(builder, value, scalar(builder, atom.expr, site))
        builder.cache[key] = value
    return builder.cache[key]


def _query(builder: CircuitBuilder, pair: FeaturePair, site: str) -> Quantity:
    return linear([(c, _monomial(builder, m, site)) for m, c in sorted(pair.query.items())])


def separated(builder: CircuitBuilder, body: object, node: ComparisonNode) -> tuple[FeatureQuantities,
                                                                                     list[Quantity]]:
    """The score Σ_j φ_j ψ_j of ``node`` (``body``: its body or a component of it) as (query, key)
    quantity pairs (those with a constant query merged into one, first) and the terms free of
    the node's variable (offsets). A body that does not separate is refused at the node, quoting
    the user's text and carrying its span."""
    try:
        pairs = separate(body, node.variables[0], builder.gathered)
    except NotSeparable as error:
        refusal = CompileError(f"{node.quoted}: the score of {describe(body)} is not a sum of products of "
                               f"per-token features: {error}")
        refusal.span = node.span
        raise refusal from None
    keyed = [(_query(builder, p, node.site), _monomial(builder, p.key, "token")) for p in pairs if p.key]
    offset = [_query(builder, p, node.site) for p in pairs if not p.key]
    constant_query = [(q, k) for q, k in keyed if q.is_constant]
    varying = [(q, k) for q, k in keyed if not q.is_constant]
    if constant_query:
        merged = linear([(q.form.constant, k) for q, k in constant_query])
        varying.insert(0, (constant(1.0), merged))
    return varying, offset


def placed(builder: CircuitBuilder, head: Head, features: Sequence[tuple[Quantity, Quantity]]) -> Head:
    """The head at the first layer, from the schedule's on, whose attention can read its query
    and key features. The schedule counts one FFN stage per square; a deep square takes one
    per tent level, so a head that reads one moves to the layer after its last level (and
    everything that reads the head's result follows, by its stage). For wide squares the
    schedule's layer always suffices."""
    ready = max((max(q.stage, k.stage) for q, k in features), default=0)
    layer = max(head.layer, layer_for(ready))
    if layer != head.layer and builder.route == "wide" and not builder.gathered:
        raise AssertionError(f"features of {head.name} not ready for layer {head.layer}")  # a scheduling bug
    return dataclasses.replace(head, layer=layer)


def combine(builder: CircuitBuilder, varying: FeatureQuantities, offset: list[Quantity], outputs: Sequence[str],
            layer: int) -> Quantity:
    """Σ_j φ_j ψ̄_j + offsets: the retrieved means ψ̄_j (directions ``outputs``) times the query side."""
    means = [in_direction(o, attention_stage(layer), k.low, k.high) for o, (_, k) in zip(outputs, varying, strict=True)]
    return linear([(1.0, product(builder, q, m)) for (q, _), m in zip(varying, means, strict=True)]
                  + [(1.0, o) for o in offset])


def body_range(varying: FeatureQuantities, offset: list[Quantity]) -> tuple[float, float]:
    """The range of Σ_j φ_j ψ_j + Σ offsets by interval arithmetic."""
    low = high = 0.0
    for q, k in varying:
        a, b = interval_product(q, k)
        low, high = low + a, high + b
    for o in offset:
        low, high = low + o.low, high + o.high
    return low, high


def key_count(node: ComparisonNode, length: int) -> int:
    """The most keys a query of this node can see (N in the Gibbs bound)."""
    variable = node.variables[0]
    own = [c for c in node.conditions if {getattr(c.left, "name", None), getattr(c.right, "name", None)}
           <= {variable, None}]
    return max(count_tuples((variable,), own, length), 1)


def node_mask(node: ComparisonNode) -> tuple[MaskCondition, ...]:
    """The node's conditions as a mask, its variable read as the key (``masks.conditions_mask``)."""
    return conditions_mask(node.conditions, node.variables[0])
