"""Where each comparison and each FFN function of a compiled model lives: ground truth for
interpretability methods (``ifl.circuit(model)``, ``infoflowc circuit MODEL``).

The compiler writes every quantity into named residual directions (the card's ``residual_labels``;
:mod:`infoflow_dsl.compiler.circuit`). A comparison node's value is a linear form over them (a min's value
is Σ_j φ_j(t) ψ̄_j, the query features times the means its head retrieved, formed by FFN
products), complete after the layer that finishes it and unchanged afterwards (each direction
has one writer). An FFN function's value is its direction plus a folded constant. A record
says which hook holds it, which residual coordinates with which weights, at which rows
(``site``: every token row, or the readout row T'+1), and the a-priori bound on its error.

The forms are not stored in the model file: :func:`circuit` lowers the model's program again
(:func:`~infoflow_dsl.pipeline.reading.relower`, deterministic: the same ε, dtype, length and routes
give the same circuit, checked against the model's residual labels). :func:`node_reference`
computes each node's exact value with the reference evaluator, for tests and for users checking
a method against the truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..analysis.comparisons import ComparisonNode, ComparisonTree, NodeResult
from ..analysis.tree import build_tree
from ..compiler.assemble import assemble
from ..compiler.circuit import ONE, AttentionHead, Circuit, FFNBlock, LinearForm
from ..compiler.tokens import SEQUENCE_ROW
from ..compiler.vectors import ROUNDING_SAFETY
from ..errors import StoredProgramError
from ..language import typed as ir
from ..language.functions import POINTWISE
from ..language.printer import describe
from ..oracle.evaluate import VALUE_RULES, ReferenceEvaluator, evaluator_for
from ..oracle.tokens import check_ids, token_values
from ..pipeline.devices import resolve_dtype
from ..pipeline.lowering import Lowering
from ..pipeline.reading import relower
from ..transformer.arguments import model_argument
from ..transformer.model import CompiledTransformer

if TYPE_CHECKING:
    from ..transformer.arguments import ModelSource

Tensor = torch.Tensor


@dataclass(frozen=True)
class Reading:
    """Σ_i weights[i]·h[..., index[i]] + constant, h the activation cached at ``hook`` (B, T'+1, D)."""

    hook: str
    index: tuple[int, ...]
    weights: tuple[float, ...]
    constant: float

    def read(self, cache: Any) -> Tensor:
        """The value at every row, (B, T'+1), float64, from a cache (any ``cache[hook]`` mapping)."""
        h = cache[self.hook].to(torch.float64)  # (B, T'+1, D)
        weights = torch.tensor(self.weights, dtype=torch.float64, device=h.device)
        return h[..., list(self.index)] @ weights + self.constant

    def to_json(self) -> dict[str, Any]:
        return {"hook": self.hook, "index": list(self.index), "weights": list(self.weights), "constant": self.constant}


@dataclass(frozen=True)
class CircuitSite:
    """One comparison node component (``kind`` "comparison"), FFN function or block (``kind``
    "ffn") or token program sub-expression (``kind`` "expression").

    ``value`` reads it from the cache; ``site`` says at which rows it is meant (``token``: rows
    0..T'-1, the value at each token; ``readout``: row T'); ``bound`` is its a-priori error (a
    node: against the exact value of its sub-expression; an FFN function: against ``function``
    of its ``argument`` as the model computed it, rounding included; an expression: against
    ``expression``'s exact value at the row; a token block that stands for no sub-expression:
    against the nearest of its ``values``, and where it has none it claims nothing, its
    ``computes`` naming the construction it is part of). ``head`` is the node's attention head
    as (hook prefix ``blocks.{l}.attn``, head index): its ``hook_z`` and ``hook_pattern`` are
    there.
    """

    name: str
    kind: str
    computes: str
    site: str
    value: Reading
    bound: float
    head: tuple[str, int] | None = None
    function: str | None = None
    argument: Reading | None = None
    #: an ``expression`` site's sub-expression (its free position variable ``row`` standing for
    #: the row's position), claimed at the rows that satisfy ``conditions``
    expression: ir.Expr | None = None
    row: str = ""
    conditions: tuple[ir.PositionCondition, ...] = ()
    #: a token block's claim where it stands for no sub-expression: its value is one of these
    values: tuple[float, ...] | None = None

    @property
    def hook(self) -> str:
        return self.value.hook

    @property
    def index(self) -> tuple[int, ...]:
        return self.value.index

    def read(self, cache: Any) -> Tensor:
        """Its value from a cache: (B, T') at a token site, (B,) at the readout."""
        rows = self.value.read(cache)  # (B, T'+1)
        return rows[:, :-1] if self.site == "token" else rows[:, -1]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "computes": self.computes, "site": self.site,
                               **self.value.to_json(), "bound": self.bound}
        out["head"] = None if self.head is None else {"hook_z": f"{self.head[0]}.hook_z", "index": self.head[1]}
        if self.argument is not None:
            out["function"], out["argument"] = self.function, self.argument.to_json()
        if self.expression is not None:
            out["row"] = self.row
        if self.values is not None:
            out["values"] = list(self.values)
        return out


def stage_hook(stage: int) -> str:
    """The first hook whose residual stream holds what exists at ``stage`` (lower's numbering:
    2l after schedule layer l's heads, 2l + 1 after its FFN; FFN 0 is the embedding's)."""
    layer, after_ffn = divmod(stage, 2)
    if layer == 0:
        return "blocks.0.hook_resid_pre"
    return f"blocks.{layer - 1}.hook_resid_{'post' if after_ffn else 'mid'}"


def _reading(form: LinearForm, hook: str, index: dict[str, int]) -> Reading:
    terms = form.with_one()
    constant = terms.pop(ONE, 0.0)
    return Reading(hook, tuple(index[d] for d in terms), tuple(terms.values()), constant)


# ---------------------------------------------------------------------------- the map


def checked_lowering(model: CompiledTransformer, verify_weights: bool = True) -> Lowering:
    """The model's lowering (:func:`~infoflow_dsl.pipeline.reading.relower`), checked against its weights:
    the circuit of the stored program, assembled in the model's dtype, must be the model's tensors
    exactly (compiling is deterministic). Raises :class:`~infoflow_dsl.errors.StoredProgramError`
    for a model without a program, or whose program no longer gives its residual directions or
    its weights (a program text edited after compiling: ``min`` made ``max`` used to be printed
    as the model's circuit)."""
    if model.card.disguised is not None:
        raise StoredProgramError("a disguised model's weights are not its circuit's (infoflowc disguise): its edge "
                                 "graph is stored with it (infoflowc circuit MODEL --edges)")
    if model.card.superposition is not None:
        raise StoredProgramError("a superposed model's residual is not its circuit's (compile --residual): its "
                                 "features and their directions are in infoflowc circuit MODEL --features, its edges "
                                 "in --edges")
    lowering = relower(model)
    if list(lowering.circuit.directions) != list(model.card.residual_labels or ()):
        raise StoredProgramError("the model's residual directions differ from its program's circuit "
                                 "(compiled by another version of infoflow?)")
    if verify_weights:
        check_weights(model, lowering)
    return lowering


#: the config's description of the circuit (what ``circuit``, ``report`` and ``export`` read
#: besides the weights): checked against the relowered circuit's with the weights
CIRCUIT_FIELDS = ("layers", "embedding_mlp", "residual_labels")


def check_weights(model: CompiledTransformer, lowering: Lowering) -> None:
    """StoredProgramError unless the circuit of ``lowering``, assembled in the dtype the model was
    compiled in (its config's), is the model's tensors in that dtype exactly, and its description
    in the config (:data:`CIRCUIT_FIELDS`: the heads, blocks and directions the tools read) is
    the model's config's."""
    dtype = resolve_dtype(str(model.card.dtype))  # relowered: a compiled model, its dtype stored
    card, tensors = assemble(lowering.circuit, dtype)
    held = model.state_dict()
    for name, tensor in tensors.items():
        mine = held.get(name)
        if mine is None or mine.shape != tensor.shape or not _same_entries(mine.cpu().to(dtype), tensor):
            raise StoredProgramError(f"the weights do not compute the program stored in the file ({name} differs "
                                     f"from its circuit's): the file was changed after compiling, or compiled by "
                                     f"another version of infoflow")
    for field in CIRCUIT_FIELDS:
        if getattr(model.card, field) != getattr(card, field):
            raise StoredProgramError(f"the config's {field!r} does not describe the program's circuit: the file was "
                                     f"changed after compiling, or compiled by another version of infoflow")


def _same_entries(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same tensor, entry for entry; a sparse-held matrix is compared by its nonzero entries
    (never made dense)."""
    if not (a.is_sparse or b.is_sparse):
        return torch.equal(a, b)
    a, b = ((t if t.is_sparse else t.to_sparse()).coalesce() for t in (a, b))
    return torch.equal(a.indices(), b.indices()) and torch.equal(a.values(), b.values())


def circuit(model: ModelSource, verify_weights: bool = True) -> tuple[CircuitSite, ...]:
    """Every comparison node (one record per component) and FFN function of a compiled model
    (or the path of its file), once its weights are checked to be its stored program's
    (:func:`check_weights`; ``verify_weights=False`` for a view of a model checked already, as
    export's one-hot view of a token model).

    Args:
        model: a compiled model, or the path of its ``.safetensors`` file.
        verify_weights: check the weights against the stored program's circuit first.

    Returns:
        One :class:`CircuitSite` per comparison component and FFN function: its hook, residual
        index, weights and bound.

    Raises:
        ModelFileError: a path that is not a model file.
        StoredProgramError: the stored program no longer checks, or the weights are not its circuit's.
    """
    lowered = checked_lowering(model_argument(model, "circuit"), verify_weights).circuit
    index = {name: i for i, name in enumerate(lowered.directions)}
    if lowered.vocabulary is not None:
        return token_sites(lowered, index)
    heads = {h.name: h for h in lowered.heads}
    records = []
    for value in lowered.values:
        head = heads[value.name]
        where = _head_of(lowered, head)
        for j, form in enumerate(value.forms):
            name = value.name if len(value.forms) == 1 else f"{value.name}[{j + 1}]"
            records.append(CircuitSite(name, "comparison", head.formula, head.site,
                                       _reading(form, stage_hook(value.stage), index), value.bound, where))
    readout = {o for h in lowered.heads if h.site == "readout" for o in h.outputs}
    for block in lowered.blocks:
        site = "readout" if any(d in readout for d, _ in block.argument.terms) else "token"
        if site == "readout":
            readout.add(block.output)
        records.append(_ffn_site(block, site, index))
    return tuple(records)


def _head_of(lowered: Circuit, head: AttentionHead) -> tuple[str, int]:
    """The head's hook prefix ``blocks.{l}.attn`` and its index in its layer."""
    return f"blocks.{head.layer - 1}.attn", [h.name for h in lowered.heads if h.layer == head.layer].index(head.name)


def _ffn_site(block: FFNBlock, site: str, index: dict[str, int]) -> CircuitSite:
    value = LinearForm.of(block.output).plus(LinearForm.const(block.bias))
    return CircuitSite(block.name, "ffn", block.formula, site, _reading(value, stage_hook(2 * block.layer + 1), index),
                       block.approximation + ROUNDING_SAFETY * block.rounding, None, block.function,
                       _reading(block.argument, stage_hook(2 * block.layer), index))


# ---------------------------------------------------------------------------- token circuits


def token_sites(lowered: Circuit, index: dict[str, int]) -> tuple[CircuitSite, ...]:
    """A token circuit's map: one ``expression`` site per sub-expression the lowering recorded
    (:class:`~infoflow_dsl.compiler.circuit.ExpressionValue`) whose form reads a head's or an FFN
    block's direction (the first of equal forms), read with its constant, the unembedding's
    bias where it is the output; then one ``ffn`` site per FFN block that no expression site
    is (its direction plus a constant): an exact unit as its function of its argument, any
    other as a part of the construction its formula names, claiming its ``values``."""
    writers = {b.output: b.name for b in lowered.blocks} | {o: h.name for h in lowered.heads for o in h.outputs}
    layer_of = {b.output: 2 * b.layer + 1 for b in lowered.blocks} | {o: 2 * h.layer for h in lowered.heads
                                                                     for o in h.outputs}
    heads = {h.name: _head_of(lowered, h) for h in lowered.heads}
    records: list[CircuitSite] = []
    seen: set[LinearForm] = set()
    for value in lowered.expressions:
        written = [d for d, _ in value.form.terms if d in writers]
        if not written or value.form in seen:
            continue
        seen.add(value.form)
        names = sorted({writers[d] for d in written}, key=lambda n: -layer_of[next(d for d in written
                                                                                if writers[d] == n)])
        site = "readout" if value.row == SEQUENCE_ROW and lowered.output_site == "readout" else "token"
        records.append(CircuitSite("+".join(names), "expression", describe(value.expression), site,
                                   _reading(value.form, stage_hook(value.stage), index), value.bound,
                                   heads.get(names[0]), expression=value.expression, row=value.row,
                                   conditions=value.conditions))
    whole = {value.terms[0][0] for value in seen if len(value.terms) == 1 and value.terms[0][1] == 1.0}
    readout = {o for h in lowered.heads if h.site == "readout" for o in h.outputs}
    for block in lowered.blocks:
        if block.output not in whole:
            site = "readout" if block.output in readout else "token"
            records.append(_block_site(block, site, index) if not block.function else _ffn_site(block, site, index))
    return tuple(records)


def _block_site(block: FFNBlock, site: str, index: dict[str, int]) -> CircuitSite:
    """A token block that stands for no sub-expression: a part of its formula's construction,
    its direction plus its constant one of its recorded values (none where it is ``partial``)."""
    value = LinearForm.of(block.output).plus(LinearForm.const(block.bias))
    values = None if block.values is None or block.partial else tuple(v + block.bias for v in block.values)
    return CircuitSite(block.name, "ffn", f"part of {block.formula}", site,
                       _reading(value, stage_hook(2 * block.layer + 1), index), block.error, values=values)


#: The univariate function each FFN block computes: the one-argument pointwise functions of the
#: language's table, and the compiler's own square and tent (a deep square's level, ``approximations``).
FUNCTIONS = {
    **{name: row.apply for name, row in POINTWISE.items() if row.arity == 1},
    "square": lambda u: u * u,
    "tent": lambda u: 2 * torch.relu(u) - 4 * torch.relu(u - 0.5),
}


def ffn_reference(site: CircuitSite, cache: Any) -> Tensor:
    """``function(argument)`` of an FFN record, its argument read from the cache: (B, T') or (B,)."""
    assert site.argument is not None and site.function is not None
    rows = FUNCTIONS[site.function](site.argument.read(cache))  # (B, T'+1)
    return rows[:, :-1] if site.site == "token" else rows[:, -1]


# ---------------------------------------------------------------------------- the truth


class _NodeEvaluator(ReferenceEvaluator):
    """The reference evaluator, with each comparison node's value looked up once computed."""

    def __init__(self, x: Tensor, last: int | None = None) -> None:
        super().__init__(x, last)
        self.nodes: dict[str, tuple[tuple[str, ...], Tensor]] = {}  # name -> (its variables, value)

    def placed(self, expr: NodeResult, scope: tuple[str, ...]) -> Tensor:
        """A node's value (B, *[T per own variable], *shape) laid out on ``scope``'s axes."""
        variables, value = self.nodes[expr.node]
        order = [variables.index(v) for v in scope if v in variables]
        trailing = list(range(1 + len(variables), value.dim()))
        value = value.permute(0, *(1 + i for i in order), *trailing)
        shape = [value.shape[0]] + [self.length if v in variables else 1 for v in scope] + list(value.shape[
            1 + len(variables):])
        return value.reshape(shape)

    def _NodeResult(self, expr: NodeResult, scope: tuple[str, ...]) -> Tensor:
        return self.placed(expr, scope)

    def _Presence(self, expr: ir.Presence, scope: tuple[str, ...]) -> Tensor:
        """present(j : conditions): 1 where slot j satisfies the conditions at the scope's tokens, else 0."""
        return self.mask(expr.conditions, scope).to(torch.float64)

    def position(self, expr: ir.Expr, scope: tuple[str, ...]) -> Tensor:
        if isinstance(expr, NodeResult):
            return self.placed(expr, scope)
        return super().position(expr, scope)

    def node(self, node: ComparisonNode) -> Tensor:
        """The node's exact value over its context: (B, *[T per context variable], *shape)."""
        scope = node.context_variables
        if node.kind in ("argmin", "argmax"):
            (variable,) = node.variables
            arg = ir.ArgPosition(node.kind, variable, node.conditions, node.body)  # type: ignore[arg-type]
            at = self.position(arg, scope)  # (B, *dims)
            value = at.expand(self.batch, *at.shape[1:])
            self.nodes[node.name] = (scope, value)
            token = ir.Token(NodeResult(node.name, scope, ir.POSITION, node.name),  # type: ignore[arg-type]  # a leaf
                             ir.vector(self.dimension))
            some_key = self.mask(node.conditions, (*scope, variable)).any(dim=-1)  # (1, *dims)
            return torch.where(some_key[..., None], self.value(token, scope), torch.nan)  # (B, *dims, d)
        reduce = ir.Reduce(node.kind, node.variables, node.conditions, node.body,  # type: ignore[arg-type]
                           node.body.type, node.rank)
        value = self.value(reduce, scope)
        value = value.expand(self.batch, *value.shape[1:])
        self.nodes[node.name] = (scope, value)
        return value


_NodeEvaluator.value_rules = {
    **VALUE_RULES, NodeResult: _NodeEvaluator._NodeResult, ir.Presence: _NodeEvaluator._Presence,
}


def node_reference(program: ir.Program, x: Tensor) -> dict[str, Tensor]:
    """The exact value of every comparison node of ``program`` on x (B, T, d), float64, or a
    token program's ids (B, T'): (B, T, *shape) for a node with a context position (its value at
    each token), else (B, *shape) (one value, which a per-token target's model holds at every
    token: its record's site is token). A token retrieval's value is the retrieved token. Where
    a node's range is empty its value is undefined: ±inf for min/max/top, NaN for mean and token
    retrieval (sum: 0)."""
    if program.over_tokens:
        return tree_reference(build_tree(program), token_values(program, check_ids(program, torch.as_tensor(x))),
                              last=program.length)
    return tree_reference(build_tree(program), x)


def tree_reference(tree: ComparisonTree, x: Tensor, last: int | None = None) -> dict[str, Tensor]:
    """:func:`node_reference` for the nodes of a comparison tree: for a model, those of its
    lowering (``relower(model).tree``: on the gather route, nodes that read slots and presences).
    ``last``: what T means (a token program's compiled length; None: x's length)."""
    x = torch.as_tensor(x).to(torch.float64)
    evaluator = _NodeEvaluator(x, last)
    values = {}
    for node in tree.nodes:
        if len(node.context_variables) > 1:
            raise ValueError(f"node {node.name} has more than one context position")
        values[node.name] = evaluator.node(node)
    return values


def expression_reference(site: CircuitSite, program: ir.Program, ids: Tensor) -> Tensor:
    """The exact value of an ``expression`` site's sub-expression on a token program's ids
    (B, T'), float64, by the reference evaluator: (B, T') at a token site (the row's position
    standing for ``site.row``), NaN at rows outside its ``conditions``; (B,) at the readout. A
    condition's value is 1 where it holds, else 0."""
    assert site.expression is not None
    _, evaluator = evaluator_for(program, ids)
    if site.site == "readout":
        return evaluator.value(site.expression, ()).to(torch.float64).expand(evaluator.batch)
    scope = (site.row,)
    value = evaluator.value(site.expression, scope).to(torch.float64).expand(evaluator.batch, evaluator.length)
    return torch.where(evaluator.mask(site.conditions, scope), value, torch.nan)
