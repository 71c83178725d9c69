"""Stage 3, schedule: :class:`ComparisonTree` -> :class:`Schedule` (layers, heads, information flow).

Every comparison node becomes one attention head (docs/design.md, "The
constructions"): an order-2 node with a position variable in its context is a **retrieval head**
run at every ordinary token; a node whose context holds no variable runs at the readout token
(a **readout head**, or a **token retrieval** for argmin/argmax); sum/mean nodes are
**uniform heads**; every fixed position read (``x(3)``, ``x(T)``) is fetched by a
**position head** at the token site that needs it.

Timing. The residual stream is built in stages: stage 0 the embedding's linear part, stage 1
its ReLU block, then for layer l ≥ 1 stage 2l its attention and stage 2l+1 its FFN. Linear maps
cost no stage (they fold into W_Q, W_K, W_V, W_O, W_in). A nonlinear step (a product by
polarisation, a square, relu, |·|, min, max, sqrt) runs at the next FFN stage; a norm takes two
(squares, then sqrt). A head at layer l may read only what exists at stage ≤ 2l − 1, so a node
is placed at layer ⌊S/2⌋ + 1, S the latest stage among its query, key and value features. A
node's result is the Gibbs mean of its key features, combined with its query features: at
stage 2l if that combination is linear, 2l + 1 if it needs products (the FFN of the same layer).
With a head budget (``--heads``), a node that does not fit its layer moves to the next.

Information sets (docs/theory.md §3): I(t, 0) = {t}, I(T+1, 0) = {T+1}; a retrieval head adds the
retrieved position's set, a position head the fixed position's, a uniform head everyone's.

A token program that reads ``len`` gets a **length head** at layer 1 (uniform attention over
the T' tokens reading [s = 1]: 1/T', decoded by that layer's FFN, stage 3), and
positions relative to len (``x(len)``, ``x(len + 1 - t)``) are fetched at layer 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..language import typed as ir
from ..language.functions import POINTWISE
from ..language.printer import describe
from ..transformer.masks import HeadMask, conditions_mask, presence_mask, term_side
from .comparisons import ComparisonNode, ComparisonTree, NodeResult, fixed_positions_of, sub_nodes
from .features import describe_monomial, describe_polynomial, interpolations, sources_of
from .finite import FiniteSplit, retrieval_note, smallest_gap, value_set
from .info_sets import InfoSets, information_sets
from .plans import node_interpolations, plan_node
from .stages import EMBEDDING, after_ffns, attention_stage, layer_for, layers_for_output, next_ffn
from .verdict import Problem, head_problem, problems_of, top_bound

if TYPE_CHECKING:
    import networkx as nx

TOKEN, READOUT = "token", "readout"
QUERY_TOKEN = "t"  # how a fetched offset names the querying token: t - 1
FETCH_PREFIX = "p"


@dataclass(frozen=True, kw_only=True)
class Head:
    """One attention head of the schedule: which node it realises, where, at which layer.

    ``compares`` is what reports print. A position head fetches the token at ``position``
    (:func:`fetched_position`); a presence head computes the guard ``presence``.
    """

    name: str
    kind: str  # retrieval | readout | token retrieval | uniform | position | presence
    site: str  # token | readout
    layer: int
    compares: str
    query_features: tuple[str, ...] = ()
    key_features: tuple[str, ...] = ()
    mask: str = ""
    dimension: int = 1
    is_comparison: bool = True
    position: ir.Position | None = None
    presence: ir.Presence | None = None
    reads: str = ""  # a token retrieval's variable (``AttentionHead.reads``)
    mask_conditions: HeadMask = ()  # ``mask`` as the model stores it (``transformer.masks``)


LENGTH_HEAD = "len"
#: What the length head does, as reports write it.
LENGTH_COMPARES = "len: uniform attention over the T' tokens reading [s == 1] gives 1/T', decoded by the FFN"


def reads_length(expr: object) -> bool:
    """Does ``expr`` read the run-time length (``len``, ``len ± k``, ``len + c - v``)?"""
    return any(isinstance(n, ir.RunLength) or (isinstance(n, ir.ReflectedPosition) and n.from_length)
               for n in (expr, *sub_nodes(expr)))


def _tree_reads_length(tree: ComparisonTree) -> bool:
    return any(reads_length(n.body) or any(reads_length(c) for c in n.conditions) for n in tree.nodes) or \
        reads_length(tree.output)


@dataclass(frozen=True, kw_only=True)
class Schedule:
    tree: ComparisonTree
    heads: tuple[Head, ...]
    layers: int
    heads_per_layer: tuple[int, ...]
    dimension: int
    info_sets: tuple[InfoSets, ...]
    problems: tuple[Problem, ...]
    interpolated_functions: int
    notes: tuple[str, ...] = ()
    budget: tuple[int, ...] | None = None
    finite_ranks: tuple[tuple[str, str, FiniteSplit], ...] = ()  # (node, function, split): see ``finite``

    @property
    def verdict(self) -> str:
        return "inefficient" if self.problems else "efficient"

    @property
    def dependencies(self) -> nx.DiGraph:
        """The heads (nodes, with their layer, site and kind) and the tree's child -> parent
        edges, built on request: networkx is imported only then."""
        return _dependency_graph(self.tree, self.heads)


# ----------------------------------------------------------------------------- stages


class StageClock:
    """When each quantity exists in the residual stream (see the module docstring).

    ``square_depth`` is how many FFN stages a square (hence a product) takes: 1 for the wide
    route, m for deep squares of m tent levels (``approximations.DeepSquare``).
    """

    def __init__(self, square_depth: int = 1) -> None:
        self.results: dict[str, int] = {}
        self.fetches: dict[ir.Position | str, int] = {}  # a fetched position, or a presence's text
        self.square_depth = square_depth

    def _constant(self, expr: object) -> bool:
        return not sources_of(expr)

    def stage(self, expr: object) -> int:
        """The stage at which ``expr``'s value exists."""
        rule = STAGE_RULES.get(type(expr))
        if rule is None:
            raise TypeError(f"the schedule has no stage rule for {type(expr).__name__}")
        return rule(self, expr)

    def _token(self, expr: ir.Token) -> int:
        position = expr.position
        if isinstance(position, NodeResult):
            return self.results[position.node]
        if isinstance(position, ir.FixedPosition | ir.LastPosition) or (
                isinstance(position, ir.PositionVariable) and position.offset):
            return self.fetches.get(fetched_position(position), 2)
        return 0

    def _position_number(self, expr: ir.PositionNumber) -> int:
        """k and T exist from the start; a token's own position is decoded from its angle code by
        the embedding's ReLU block; len by layer 1's FFN after the length head; a retrieved
        position after its node, by the next FFN."""
        position = expr.position
        if isinstance(position, NodeResult):
            return next_ffn(self.results[position.node])
        if isinstance(position, ir.FixedPosition | ir.LastPosition):
            return 0
        return 3 if reads_length(position) else 1

    def _condition(self, expr: ir.Compare | ir.Logical) -> int:
        """A comparison step (ReLU units narrower than the gap), or a chain of ``and`` (``or``) of
        0/1 values, relu(a₁ + ... + aₙ − (n − 1)) (min(a₁ + ... + aₙ, 1)): one FFN stage each."""
        operands = _chain(expr) if isinstance(expr, ir.Logical) else [expr.left, expr.right]
        inner = max(self.stage(operand) for operand in operands)
        return inner if self._constant(expr) else next_ffn(inner)

    def _product(self, left: object, right: object) -> int:
        """a·b of two values: squares (one FFN route) after both, unless one side is constant."""
        inner = max(self.stage(left), self.stage(right))
        return inner if self._constant(left) or self._constant(right) else after_ffns(inner, self.square_depth)

    def _square(self, expr: ir.Square) -> int:
        argument = expr.argument.argument if isinstance(expr.argument, ir.Norm) else expr.argument
        return after_ffns(self.stage(argument), self.square_depth)

    def _pointwise(self, expr: ir.Pointwise) -> int:
        stage = max(self.stage(a) for a in expr.arguments)
        return after_ffns(stage, POINTWISE[expr.function].ffn_stages)

    def _arithmetic(self, expr: ir.Arithmetic) -> int:
        if expr.operator == "*":
            return self._product(expr.left, expr.right)
        return max(self.stage(expr.left), self.stage(expr.right))


def _chain(expr: ir.Logical) -> list[object]:
    """The operands of a chain of one operator: ``a and (b and c)`` has a, b, c."""
    return [leaf for side in (expr.left, expr.right)
            for leaf in (_chain(side) if isinstance(side, ir.Logical) and side.operator == expr.operator else [side])]


#: When each value node exists: ``rule(clock, expr)`` (reductions are comparison nodes by now).
STAGE_RULES: dict[type, Callable[[StageClock, Any], int]] = {
    ir.NumberLiteral: lambda clock, expr: 0,
    ir.Constant: lambda clock, expr: 0,
    NodeResult: lambda clock, expr: clock.results[expr.node],
    ir.Token: StageClock._token,
    ir.Presence: lambda clock, expr: clock.fetches.get(describe(expr), 2),
    ir.Inner: lambda clock, expr: clock._product(expr.left, expr.right),
    ir.Arithmetic: StageClock._arithmetic,
    ir.Square: StageClock._square,
    ir.Norm: lambda clock, expr: next_ffn(after_ffns(clock.stage(expr.argument), clock.square_depth)),
    ir.Pointwise: StageClock._pointwise,
    ir.Component: lambda clock, expr: clock.stage(expr.vector),
    ir.Negate: lambda clock, expr: clock.stage(expr.argument),
    ir.Divide: lambda clock, expr: clock.stage(expr.numerator),
    ir.MatVec: lambda clock, expr: clock.stage(expr.vector),
    ir.TokenLiteral: lambda clock, expr: 0,
    ir.PositionNumber: StageClock._position_number,
    ir.Compare: StageClock._condition,
    ir.Logical: StageClock._condition,
    ir.Not: lambda clock, expr: clock.stage(expr.argument),
    ir.Bracket: lambda clock, expr: clock.stage(expr.condition),
    ir.TableLookup: lambda clock, expr: next_ffn(max(clock.stage(a) for a in expr.arguments)),  # a lookup: one FFN
}


# ----------------------------------------------------------------------------- heads


def head_kind(node: ComparisonNode) -> str:
    if node.kind in ("sum", "mean"):
        return "uniform"
    if node.kind in ("argmin", "argmax"):
        return "token retrieval"
    return "retrieval" if node.site == TOKEN else "readout"


def _node_mask(node: ComparisonNode) -> HeadMask:
    """The node's structural conditions as the model's mask (its variable the key); a condition
    on len is no mask (the token lowering makes it a bracket of a sum's body)."""
    structural = tuple(c for c in node.conditions if not (reads_length(c.left) or reads_length(c.right)))
    return conditions_mask(structural, node.variables[0])


def _mask_text(node: ComparisonNode) -> str:
    return " and ".join(f"{describe(c.left)} {c.operator} {describe(c.right)}" for c in node.conditions)


def _position_heads(tree: ComparisonTree) -> list[tuple[ir.Position, str]]:
    """(fetched position, site) pairs that need a position head."""
    needed: list[tuple[ir.Position, str]] = []
    for node in tree.nodes:
        for position in fixed_positions_of(node.body):
            sites = (node.site, TOKEN) if node.gathered else (node.site,)  # gathered: key tokens read them too
            needed.extend((position, site) for site in sites if (position, site) not in needed)
    for position in fixed_positions_of(tree.output):
        if (position, tree.output_site) not in needed:
            needed.append((position, tree.output_site))
    for offset in relative_offsets_read(tree):
        if (offset, TOKEN) not in needed:
            needed.append((offset, TOKEN))
    return needed


def fetch_conditions(position: ir.Position) -> HeadMask:
    """The mask of a fetch by mask (key == t ± k, key == k, key == T ± k); none for a position
    computed from len (a scored fetch)."""
    if isinstance(position, ir.PositionVariable | ir.FixedPosition | ir.LastPosition):
        return (("key", "==", term_side(position, "")),)
    return ()


def fetched_position(position: ir.Position) -> ir.Position:
    """The position a position head fetches for a token read at ``position``: k or T ± k as they
    are; an offset t ± k from a position variable as the querying token's, ``PositionVariable("t",
    offset=±k)`` whatever the variable's name (reports write it ``t - 1``)."""
    if isinstance(position, ir.PositionVariable):
        return ir.PositionVariable(QUERY_TOKEN, offset=position.offset)
    if isinstance(position, ir.ReflectedPosition):
        return ir.ReflectedPosition(ir.PositionVariable(QUERY_TOKEN), position.offset, position.from_length)
    return position


def presences_read(tree: ComparisonTree) -> list[ir.Presence]:
    """The slot guards (gather route) read anywhere, each once; each is one head at the tokens."""
    found: dict[str, ir.Presence] = {}
    for expr in (*(n.body for n in tree.nodes), tree.output):
        for node in [expr, *sub_nodes(expr)]:
            if isinstance(node, ir.Presence):
                found.setdefault(describe(node), node)
    return list(found.values())


def relative_offsets_read(tree: ComparisonTree) -> list[ir.Position]:
    """The position offsets (``t - 1``, ``t + 2``, as :func:`fetched_position` writes them) read
    anywhere: each is a token's feature, fetched at the token site by one position head (a
    structural mask key == query ± k)."""
    offsets: list[ir.Position] = []
    for expr in (*(n.body for n in tree.nodes), tree.output):
        for node in [expr, *sub_nodes(expr)]:
            read = node.position if isinstance(node, ir.Token) else None
            if isinstance(read, ir.ReflectedPosition) or (isinstance(read, ir.PositionVariable) and read.offset):
                position = fetched_position(read)
                if position not in offsets:
                    offsets.append(position)
    return offsets


# ----------------------------------------------------------------------------- the schedule


class Scheduler:
    def __init__(self, tree: ComparisonTree, budget: Sequence[int] | None, square_depth: int = 1) -> None:
        self.tree = tree
        self.budget = tuple(budget) if budget is not None else None
        self.clock = StageClock(square_depth)
        self.used: dict[int, int] = {}
        self.heads: list[Head] = []
        self.overflow: list[tuple[ComparisonNode, int, int]] = []
        self.plans = {node.name: plan_node(node, tree.finite) for node in tree.nodes}

    def _capacity(self, layer: int) -> int:
        if self.budget is None:
            return 1 << 30
        return self.budget[layer - 1] if layer <= len(self.budget) else 0

    def _place(self, earliest: int, node: ComparisonNode | None) -> int:
        layer = earliest
        while self.used.get(layer, 0) >= self._capacity(layer):
            if self.budget is not None and layer > len(self.budget):
                break
            layer += 1
        if self.budget is not None and layer > len(self.budget) and node is not None:
            self.overflow.append((node, earliest, layer))
        self.used[layer] = self.used.get(layer, 0) + 1
        return layer

    def run(self) -> None:
        if _tree_reads_length(self.tree):
            site = TOKEN if self.tree.output_site == TOKEN or any(n.site == TOKEN for n in self.tree.nodes) else READOUT
            self.heads.append(Head(name=LENGTH_HEAD, kind="length", site=site, layer=self._place(1, None),
                                   compares=LENGTH_COMPARES, is_comparison=False))
        for index, (position, site) in enumerate(_position_heads(self.tree)):
            layer = self._place(2 if reads_length(position) else 1, None)  # len is known after layer 1
            self.clock.fetches[position] = attention_stage(layer)
            mask = f"key == query{ir.offset_text(position.offset)}" if isinstance(position, ir.PositionVariable) else ""
            self.heads.append(Head(name=f"{FETCH_PREFIX}{index + 1}", kind="position", site=site, layer=layer,
                                   compares=f"x({ir.position_label(position)})", mask=mask, is_comparison=False,
                                   position=position, mask_conditions=fetch_conditions(position)))
        for index, presence in enumerate(presences_read(self.tree)):
            layer = self._place(1, None)
            label = describe(presence)
            self.clock.fetches[label] = attention_stage(layer)
            self.heads.append(Head(name=f"g{index + 1}", kind="presence", site=TOKEN, layer=layer, compares=label,
                                   is_comparison=False, presence=presence,
                                   mask_conditions=presence_mask(presence.index, presence.conditions)))
        for node in self.tree.nodes:
            self._schedule_node(node)

    def _schedule_node(self, node: ComparisonNode) -> None:
        plan = self.plans[node.name]
        if plan.pairs is not None:
            stages = [self.clock.stage(_monomial_expr(p.key)) for p in plan.pairs]
            stages += [self.clock.stage(_monomial_expr(m)) for p in plan.pairs for m in p.query]
        else:
            stages = [self.clock.stage(node.body)]
        if node.kind in ("argmin", "argmax"):
            stages.append(EMBEDDING)  # the value is the token itself
        layer = self._place(layer_for(max(stages, default=0)), node)
        linear = plan.pairs is not None and plan.linear_result
        exact = linear or node.kind in ("argmin", "argmax")
        read = attention_stage(layer)
        self.clock.results[node.name] = read if exact else after_ffns(read, self.clock.square_depth)
        key = tuple(describe_monomial(p.key) for p in plan.key_pairs)
        query = tuple(describe_polynomial(p.query) for p in plan.key_pairs)
        self.heads.append(Head(name=node.name, kind=head_kind(node), site=node.site, layer=layer,
                               compares=f"{node.header} {describe(node.body)}", query_features=query,
                               key_features=key, mask=_mask_text(node), dimension=plan.dimension,
                               mask_conditions=_node_mask(node)))

    def layers(self) -> int:
        output_stage = self.clock.stage(self.tree.output)
        head_layers = max((h.layer for h in self.heads), default=0)
        return max(head_layers, layers_for_output(output_stage), 1)


def _monomial_expr(monomial: tuple) -> object:
    """An expression whose stage is the monomial's: a product of its atoms' expressions."""
    if not monomial:
        return ir.NumberLiteral(1.0)
    expr = monomial[0].expr
    for atom in monomial[1:]:
        expr = ir.Arithmetic("*", expr, atom.expr, ir.SCALAR)
    return expr


def _dependency_graph(tree: ComparisonTree, heads: Sequence[Head]) -> nx.DiGraph:
    import networkx as nx

    graph = nx.DiGraph()
    for head in heads:
        graph.add_node(head.name, layer=head.layer, site=head.site, kind=head.kind)
    for node in tree.nodes:
        for child in node.children:
            graph.add_edge(child, node.name)
    return graph


def square_steps(tree: ComparisonTree) -> int:
    """S, the most squares (or products) in a row on any path of the schedule: with m FFN layers
    per square (deep route, m tent levels) the schedule needs at most L + S·(m − 1) layers,
    L its layer count with one FFN stage per square (tight for large m)."""
    probe = 64
    layers = []
    for depth in (1, 1 + probe):
        scheduler = Scheduler(tree, None, depth)
        scheduler.run()
        layers.append(scheduler.layers())
    return math.ceil((layers[1] - layers[0]) / probe)


def heads_per_layer(heads: Sequence[Head], layers: int) -> tuple[int, ...]:
    """How many of ``heads`` each layer 1..``layers`` runs."""
    return tuple(sum(1 for h in heads if h.layer == layer) for layer in range(1, layers + 1))


def comparison_dimension(heads: Sequence[Head], layers: int) -> int:
    """β₁ (docs/theory.md §3): the most comparing heads one layer runs at one kind of token."""
    return max((sum(1 for h in heads if h.layer == layer and h.site == site and h.is_comparison)
                for layer in range(1, layers + 1) for site in (TOKEN, READOUT)), default=0)


def build_schedule(tree: ComparisonTree, budget: Sequence[int] | None = None, margin: float | None = None) -> Schedule:
    """The InfoFlow schedule of a comparison tree, optionally under a per-layer head budget."""
    free = Scheduler(tree, None)
    free.run()
    scheduler = free
    if budget is not None:
        scheduler = Scheduler(tree, budget)
        scheduler.run()
    heads = tuple(scheduler.heads)
    # a budget too small leaves heads past its layers: the schedule still lists every layer it uses
    layers = max(len(budget), scheduler.layers()) if budget is not None else scheduler.layers()
    per_layer = heads_per_layer(heads, layers)
    dimension = comparison_dimension(free.heads, free.layers())
    needed = dict(enumerate(heads_per_layer(free.heads, free.layers()), start=1))
    dims = {layer: max((h.dimension for h in free.heads if h.layer == layer), default=1)
            for layer in range(1, free.layers() + 1)}
    problems = problems_of(tree, scheduler.plans, needed)
    if scheduler.overflow and budget is not None:
        problems.append(head_problem(scheduler.overflow, tuple(budget), needed, dims, tree.length))
    notes = _notes(tree, scheduler, margin)
    interpolated = sum(node_interpolations(p) for p in scheduler.plans.values()) + interpolations(tree.output)
    ranks = tuple((name, text, split) for name, plan in scheduler.plans.items() for text, split in plan.splits)
    return Schedule(
        tree=tree, heads=heads, layers=layers, heads_per_layer=per_layer, dimension=dimension,
        info_sets=information_sets(heads, tree, layers), problems=tuple(problems), interpolated_functions=interpolated,
        notes=tuple(notes), budget=tuple(budget) if budget is not None else None, finite_ranks=ranks,
    )


def _notes(tree: ComparisonTree, scheduler: Scheduler, margin: float | None) -> list[str]:
    notes = []
    tops = {n.origin for n in tree.nodes if n.origin.startswith("top(")}
    for origin in sorted(tops):
        k = int(origin[4:origin.index(")")])
        n = max((scheduler.plans[x.name].dimension for x in tree.nodes if x.origin == origin), default=1)
        quoted = next(x.quoted for x in tree.nodes if x.origin == origin)
        order = max(x.order for x in tree.nodes if x.origin == origin)  # k, plus an enclosing context
        notes.append(f"{quoted}: rewritten as {k} nested max/min comparisons (order {order}); "
                     f"one-layer lower bound {top_bound(k, n)}")
    retrievals = [n for n in tree.nodes if n.kind in ("argmin", "argmax")]
    for node in retrievals:
        if tree.finite is not None:  # a token program: the scores' own gap replaces the margin
            scores = value_set(node.body, tree.finite)
            notes.append(retrieval_note(node.quoted, smallest_gap(scores, scores)))
        elif margin is None:
            notes.append(f"{node.quoted} retrieves a token, which jumps where two scores tie: an error bound "
                         f"needs a margin (declare `margin δ`); none is declared")
        else:
            notes.append(f"{node.quoted} retrieves a token, which jumps where two scores tie: the error bound "
                         f"holds for inputs whose best score beats the runner-up by at least the margin δ = {margin:g}")
    return notes
