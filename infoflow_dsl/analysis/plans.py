"""What scheduling needs to know about one comparison node: its score separated into per-token
features (:class:`NodePlan`, :func:`plan_node`), and how many univariate functions the FFNs
interpolate for it (:func:`node_interpolations`)."""

from __future__ import annotations

from dataclasses import dataclass

from .comparisons import ComparisonNode
from .features import FeaturePair, NotSeparable, interpolations, monomial_interpolations, separate
from .finite import FiniteDomain, FiniteSplit


@dataclass
class NodePlan:
    """What scheduling needs to know about one comparison node."""

    node: ComparisonNode
    pairs: list[FeaturePair] | None
    failure: str | None
    splits: tuple[tuple[str, FiniteSplit], ...] = ()  # finite-valued pairwise functions it separated

    @property
    def key_pairs(self) -> list[FeaturePair]:
        return [p for p in (self.pairs or []) if p.key]

    @property
    def linear_result(self) -> bool:
        """The result is a linear function of the retrieved means (no product at the query)."""
        return all(not any(m for m in p.query) for p in self.key_pairs)

    @property
    def dimension(self) -> int:
        """Key features the head needs; pairs with a constant query side merge into one."""
        pairs = self.key_pairs
        constant = [p for p in pairs if not any(m for m in p.query)]
        return len(pairs) - len(constant) + (1 if constant else 0) if pairs else 1


def plan_node(node: ComparisonNode, finite: FiniteDomain | None = None) -> NodePlan:
    if len(node.variables) != 1:
        return NodePlan(node, None, f"{node.header} compares {len(node.variables)} positions jointly")
    splits: list[tuple[str, FiniteSplit]] = []
    try:
        pairs = separate(node.body, node.variables[0], node.gathered, finite, splits)
    except NotSeparable as error:
        return NodePlan(node, None, str(error))
    return NodePlan(node, pairs, None, tuple(splits))



def node_interpolations(plan: NodePlan) -> int:
    """Univariate functions the FFNs interpolate for one node: features, then the combination."""
    if plan.pairs is None:
        return interpolations(plan.node.body)
    count = 0
    atoms = {a for p in plan.pairs for m in (p.key, *p.query) for a in m}
    count += sum(interpolations(a.expr) for a in atoms)
    count += sum(monomial_interpolations(m) for p in plan.pairs for m in (p.key, *p.query))
    if plan.node.kind not in ("argmin", "argmax"):
        count += 2 * sum(1 for p in plan.key_pairs if any(m for m in p.query))
    return count
