"""Stages 2-4, a checked program to its circuit IR: the comparison tree, the schedule, the route
(:func:`choose_route`: ``tokens``, ``efficient`` or ``gather``) and its lowering, in the dtype
that certifies ε (:func:`certified_lowering`), with the refusals located in the user's text.

``analyze``'s schedule is the one this lowers (:mod:`.scheduling`): the two cannot disagree."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import torch

from ..analysis.comparisons import ComparisonTree
from ..analysis.gather import UnrollError, gather
from ..analysis.info_sets import information_sets
from ..analysis.schedule import Schedule, build_schedule, heads_per_layer
from ..analysis.tree import build_tree
from ..compiler.circuit import Circuit
from ..compiler.prefixes import gathered_min_length
from ..compiler.tokens import lower_tokens
from ..compiler.tokens.schedule import token_schedule
from ..compiler.vectors import lower
from ..errors import CompileError, NoConstruction, single_error
from ..language import typed as ir


def realised_schedule(schedule: Schedule, circuit: Circuit) -> Schedule:
    """``schedule`` as ``circuit`` realises it: deep squares (``--ffn deep``/``auto``) move heads
    later than the schedule placed them and add attention-free layers; every head keeps its
    name. On the wide route of an efficient program, and for every token program, this is
    ``schedule`` itself (the table test in tests/pipeline/test_scheduling.py holds it)."""
    placed = {h.name: h.layer for h in circuit.heads}
    heads = tuple(dataclasses.replace(h, layer=placed.get(h.name, h.layer)) for h in schedule.heads)
    per_layer = heads_per_layer(heads, circuit.layers)
    if heads == schedule.heads and per_layer == schedule.heads_per_layer:
        return schedule
    return dataclasses.replace(schedule, heads=heads, layers=circuit.layers, heads_per_layer=per_layer,
                               info_sets=information_sets(heads, schedule.tree, circuit.layers))


def square_route(ffn: str | None, route: str) -> str:
    """The square route (``--ffn``) a compile uses: the one asked for, else ``wide`` on the
    efficient route (its files keep their bytes) and ``auto`` on the gather route, whose error
    shares shrink like T^-k over its T^k slots: one wide layer would need (T^k/ε)^(1/2) units
    per square, the deep route log(T^k/ε) (triangle_center at T = 4, ε = 0.2: 481,035 nonzero
    parameters wide, 6,019 auto), so auto is what a user of --allow-inefficient wants."""
    if ffn is not None:
        return ffn
    return "wide" if route == "efficient" else "auto"


@dataclasses.dataclass(frozen=True)
class Lowering:
    """A checked program lowered to its circuit.

    ``program`` is the program as checked (the reference); ``route`` is ``efficient``, or
    ``gather`` where the target was rewritten into position slots before lowering; ``tree`` is
    the comparison tree the circuit computes (on the gather route, the gathered one, whose nodes
    read slots and presences), ``schedule`` its placement (``schedule.tree`` is ``tree``)."""

    program: ir.Program
    tree: ComparisonTree
    schedule: Schedule
    circuit: Circuit
    route: str


def build_circuit(program: ir.Program, eps: float, dtype: torch.dtype, allow_inefficient: bool = False,
                  ffn: str | None = None) -> Lowering:
    """Stages 2-4 of a checked program: its comparison tree, the schedule, and the lowering of
    the route :func:`choose_route` picks. ``ffn`` is how squares are built (``approximations``;
    None: :func:`square_route`'s default)."""
    refuse_v3(program)
    tree = build_tree(program)  # stage 2
    schedule = build_schedule(tree, None, program.margin)  # stage 3
    route = choose_route(program, schedule, allow_inefficient)
    return LOWERINGS[route](program, schedule, eps, dtype, ffn)  # stage 4


def choose_route(program: ir.Program, schedule: Schedule, allow_inefficient: bool) -> str:
    """The lowering a program takes: ``tokens`` (the exact token constructions: a program over a
    vocabulary has no other route), ``efficient`` (the schedule's heads, as analyze reports
    them), or ``gather`` (a target the verdict calls inefficient, with ``allow_inefficient``:
    comparisons unrolled into position slots, a size that grows with T)."""
    if program.over_tokens:
        return "tokens"
    return "gather" if schedule.problems and allow_inefficient else "efficient"


def _lower_tokens(program: ir.Program, schedule: Schedule, eps: float, dtype: torch.dtype,
                  ffn: str | None) -> Lowering:
    """The token lowering: exact constructions on finite values; its schedule is the layout they place."""
    circuit = _token_circuit(program, eps, dtype)
    return Lowering(program=program, tree=schedule.tree, schedule=token_schedule(schedule, circuit, None),
                    circuit=circuit, route="efficient")


def _lower_efficient(program: ir.Program, schedule: Schedule, eps: float, dtype: torch.dtype,
                     ffn: str | None) -> Lowering:
    """The lowering of a program over vectors on the schedule's own heads."""
    circuit = lower(program, schedule, eps, dtype, square_route(ffn, "efficient"))
    return Lowering(program=program, tree=schedule.tree, schedule=schedule, circuit=circuit, route="efficient")


def _lower_gathered(program: ir.Program, schedule: Schedule, eps: float, dtype: torch.dtype,
                    ffn: str | None) -> Lowering:
    """The gather route: the target rewritten into position slots, its own tree and schedule."""
    try:
        gathered = gather(program)
    except UnrollError as error:
        raise CompileError(f"the target is inefficient, and the gather route cannot compile it: {error}") from None
    rewritten = dataclasses.replace(program, target=gathered.target)
    schedule = build_schedule(build_tree(rewritten, gathered=True), None, program.margin)
    circuit = lower(rewritten, schedule, eps, dtype, square_route(ffn, "gather"), gathered=True)
    circuit = dataclasses.replace(circuit, min_length=gathered_min_length(program, circuit))  # prefixes, if proved
    return Lowering(program=program, tree=schedule.tree, schedule=schedule, circuit=circuit, route="gather")


#: stage 4 of each route (:func:`choose_route`)
LOWERINGS: dict[str, Callable[[ir.Program, Schedule, float, torch.dtype, str | None], Lowering]] = {
    "tokens": _lower_tokens, "efficient": _lower_efficient, "gather": _lower_gathered}


def certified_lowering(program: ir.Program, eps: float, dtype: torch.dtype | None, allow_inefficient: bool = False,
                       ffn: str | None = None) -> tuple[Lowering, torch.dtype, str | None]:
    """Stages 2-4 in ``dtype``; with None (compile's default), in the dtype that certifies ε:
    float32 where its a-priori bound (its rounding included) is within ε, else float64, the
    first that builds. Returns the lowering, its dtype, and, where float64 was chosen so, the
    rule as the config and compile's output state it (float32's refusal). A refusal no dtype
    lifts (NoConstruction: no construction of that node) is not retried."""
    if dtype is not None:
        return build_circuit(program, eps, dtype, allow_inefficient, ffn), dtype, None
    try:
        return build_circuit(program, eps, torch.float32, allow_inefficient, ffn), torch.float32, None
    except NoConstruction:
        raise
    except CompileError as refusal:
        float32_refusal = str(refusal)
    lowering = build_circuit(program, eps, torch.float64, allow_inefficient, ffn)
    return lowering, torch.float64, f"float64: float32 does not certify ε = {eps:g} ({float32_refusal})"


TOKEN_ROUTES = ("a token program has one route, the exact token lowering: --allow-inefficient (the gather route) "
                "does not apply to it")


def _token_circuit(program: ir.Program, eps: float, dtype: torch.dtype) -> Circuit:
    """The token lowering's circuit; its refusal says that no flag gives another route."""
    try:
        return lower_tokens(program, eps, dtype)
    except CompileError as error:
        routes = f" ({TOKEN_ROUTES}){precedence_hint(program)}" if isinstance(error, NoConstruction) else ""
        kind = NoConstruction if isinstance(error, NoConstruction) else CompileError  # no dtype lifts the first
        raise kind(f"{refused_where(program, error.span)}{error}{routes}") from None


def precedence_hint(program: ir.Program) -> str:
    """A note for a refused token program where a reduction's body is ``a ± b`` with ``b`` free of
    the reduction's variables: the body of ``sum_<r>`` runs to the end of the expression, so
    ``sum_<r> a - b`` is ``sum_<r> (a - b)``, which a new user often meant as ``(sum_<r> a) - b``
    (an inline width in an argmin: ``|(sum_<r> [x(r) < x(s)]) - (t - 1)|``). Else nothing."""
    for node in ir.sub_nodes(program.target):
        body = getattr(node, "body", None)
        if (isinstance(node, ir.Reduce) and isinstance(body, ir.Arithmetic) and body.operator in "+-"
                and not ir.free_variables(body.right) & set(node.variables)):
            where = f" at line {node.span.line}, column {node.span.column}" if node.span.line else ""
            variables = ", ".join(node.variables)
            return (f"; note: the body of the `{node.kind}_<{variables}>`{where} runs to the end of the expression, "
                    f"so `{node.kind}_<{variables}> a {body.operator} b` is `{node.kind}_<{variables}> (a "
                    f"{body.operator} b)`: write `({node.kind}_<{variables}> a) {body.operator} b` to "
                    f"{'subtract' if body.operator == '-' else 'add'} b after the {node.kind}")
    return ""


def refused_where(program: ir.Program, span: object | None) -> str:
    """``line L, column C, in `let NAME`: `` for a refusal's innermost located node (the macro
    whose text it is), else nothing. For a program from RASP, the line's origin comes first and
    the text's place, which its author never saw, after it: ``prog.py:12:5: Aggregate 'frac'
    (line L, column C of its .iflow translation, in `let NAME`): ``."""
    line, column = getattr(span, "line", 0), getattr(span, "column", 0)
    if not line:
        return ""
    lines = program.source.splitlines()
    text = lines[line - 1] if line <= len(lines) else ""
    declared = re.match(r"\s*let\s+(\w+)", text)
    inside = f", in `let {declared.group(1)}`" if declared else ""
    origin = program.origin_at(line)
    if origin is not None:
        return f"{origin} (line {line}, column {column} of its .iflow translation{inside}): "
    return f"line {line}, column {column}{inside}: "


def refuse_v3(program: ir.Program, action: str = "compiled") -> None:
    """Raise a located :class:`ProgramError` (exit 2) for a language-v3 construct (a bracket, a
    position as a number) in a program over vectors, which neither the lowering (``action``
    "compiled") nor the trained model family ("trained") builds: its compared values have no
    finite gap. Token programs have their own lowering (``compiler.tokens``) and model family."""
    if program.over_tokens:
        return
    first = next((n for n in (program.target, *ir.sub_nodes(program.target)) if isinstance(n, ir.V3_NODES)), None)
    if first is None:
        return
    message = (f"this construct of language v3 (a bracket [...] or a position used as a number) is not {action} "
               f"yet over vectors; parse, analyze and the reference evaluator support it")
    raise single_error(program.path, first.span, message, program.source)  # type: ignore[attr-defined]  # V3 nodes have spans
