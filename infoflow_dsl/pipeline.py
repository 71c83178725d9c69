"""The whole compiler as a fixed chain of named stages, and the same lowering again from a file.

:func:`compile_program` (``ifl.compile``) runs, each stage a pure function of the one before::

    program  = program_argument(...)       1 load      language/load.py   text -> typed program
    tree     = build_tree(program)         2 tree      analysis/tree.py   -> comparison tree
    schedule = build_schedule(tree, ...)   3 schedule  analysis/schedule.py -> heads and layers
    route    = choose_route(...)             (tokens, efficient or gather: :func:`choose_route`)
    lowering = LOWERINGS[route](...)       4 lower     compiler/vectors/, compiler/tokens/ -> circuit IR
    model    = assemble_model(...)         5 assemble  compiler/assemble.py -> tensors, the model
    measured = measure_error(...)          6 measure   measure/measurement.py -> its error, stored

Stages 2-4 are :func:`build_circuit` (``analyze``'s schedule is the one it lowers:
``scheduling.py``), in the dtype :func:`certified_lowering` picks by default (float32 where its
bound certifies ε, else float64). It refuses (``CompileError``) a target the analysis calls inefficient, with
analyze's reason, and an ε the dtype cannot honour. :func:`relower` rebuilds a compiled model's
circuit from the program its file stores (for ``check --trace``, ``circuit`` and ``export``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from . import progress
from .analysis.comparisons import ComparisonTree
from .analysis.gather import UnrollError, gather
from .analysis.info_sets import information_sets
from .analysis.schedule import Schedule, build_schedule, heads_per_layer
from .analysis.tree import build_tree
from .collector import fewer_collections
from .compiler.assemble import assemble
from .compiler.circuit import Circuit
from .compiler.prefixes import gathered_min_length
from .compiler.tokens import lower_tokens
from .compiler.tokens.schedule import token_schedule
from .compiler.vectors import UNIT_ROUNDOFF, lower
from .errors import CompileError, NoConstruction, ProgramError, StoredProgramError, UncertifiedModel, single_error
from .language import typed as ir
from .language.check import check
from .language.load import program_argument
from .language.parse import parse
from .measure.measurement import Measurement, measure, uncertified_reason
from .measure.vectors import budgeted_samples
from .measure.workload import measurement_workload
from .transformer.model import CompiledTransformer

if TYPE_CHECKING:
    from .language.load import ProgramSource

DTYPES = {"float32": torch.float32, "float64": torch.float64}
DEFAULT_EPS = 1e-3
#: what compile writes in every model's config besides its circuit, and relowering reads
#: (their values' kinds are checked when the file is read: transformer/config.py)
COMPILED_FIELDS = ("eps", "a_priori_bound", "dtype")
#: what a compile too large to measure here can change (measure/workload.py)
MEASUREMENT_CHANGE = ("measure fewer inputs (--samples N, samples=N in Python; 0 skips the measurement: check the "
                      "model afterwards), or lower T")


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise CompileError(f"dtype must be float32 or float64, got {dtype}")
        return dtype
    if dtype not in DTYPES:
        raise CompileError(f"dtype must be float32 or float64, got {dtype!r}")
    return DTYPES[dtype]


DEVICE_TYPES = ("cpu", "cuda")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to build on: ``cpu``, ``cuda`` or ``cuda:N`` (None: cuda when available).

    Any other name, or cuda on a machine without it, is a CompileError (exit 2 in the CLI)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        resolved = None
    if resolved is None or resolved.type not in DEVICE_TYPES:
        raise CompileError(f"unknown device {str(device)!r} (expected cpu, cuda or cuda:N)")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise CompileError(f"--device {device} was asked for, but no CUDA device is available")
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise CompileError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return resolved


def on_device(model: CompiledTransformer, device: str | torch.device | None) -> CompiledTransformer:
    """``model`` on ``device`` (:func:`resolve_device`; None: where it is): the model itself when it
    is there already, else a copy moved there (the caller's model stays where it was)."""
    if device is None:
        return model
    resolved = resolve_device(device)
    here = model.device
    if here.type == resolved.type and (resolved.index is None or here.index in (None, resolved.index)):
        return model
    return copy.deepcopy(model).to(resolved)


def realised_schedule(schedule: Schedule, circuit: Circuit) -> Schedule:
    """``schedule`` as ``circuit`` realises it: deep squares (``--ffn deep``/``auto``) move heads
    later than the schedule placed them and add attention-free layers; every head keeps its
    name. On the wide route of an efficient program, and for every token program, this is
    ``schedule`` itself (the table test in tests/test_scheduling.py holds it)."""
    placed = {h.name: h.layer for h in circuit.heads}
    heads = tuple(dataclasses.replace(h, layer=placed.get(h.name, h.layer)) for h in schedule.heads)
    per_layer = heads_per_layer(heads, circuit.layers)
    if heads == schedule.heads and per_layer == schedule.heads_per_layer:
        return schedule
    return dataclasses.replace(schedule, heads=heads, layers=circuit.layers, heads_per_layer=per_layer,
                               info_sets=information_sets(heads, schedule.tree, circuit.layers))


def _schedule_summary(schedule: Schedule) -> dict[str, Any]:
    """The config's ``schedule``: the realised schedule's layers, heads and table."""
    table = [{"head": h.name, "layer": h.layer, "kind": h.kind, "site": h.site, "compares": h.compares}
             for h in schedule.heads]
    return {"layers": schedule.layers, "heads": list(schedule.heads_per_layer), "order": schedule.tree.order,
            "dimension": schedule.dimension, "verdict": schedule.verdict, "table": table}


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


def program_of(model: CompiledTransformer) -> ir.Program:
    """The checked program stored in the model's config (its T and margin as compiled)."""
    stored = model.config.get("program") or {}
    return _stored_program(stored.get("source"), stored.get("name", "<stored program>"), stored.get("margin"),
                           model.T)


def _stored_program(source: object, name: str, margin: float | None, length: int) -> ir.Program:
    if not isinstance(source, str):
        raise StoredProgramError("the file holds no program source")
    try:
        return check(parse(source, name), name, source, length=length, margin=margin)
    except ProgramError as error:
        first = error.diagnostics[0].headline() if error.diagnostics else str(error)
        raise StoredProgramError(f"the program stored in the file no longer checks: {first}") from None
    except ValueError as error:  # a stored T or margin that is no declaration's value
        raise StoredProgramError(f"the program stored in the file cannot be checked: {error}") from None


@fewer_collections()
def relower(model: CompiledTransformer, program: ir.Program | None = None) -> Lowering:
    """The lowering of a compiled model, again as ``compile`` did it: its program (``program``,
    else the one its file stores: :func:`program_of`) at the ε, dtype, square route (``ffn``)
    and route (``"route": "gather"``) its config stores. Lowering is deterministic, so this is
    the model's own circuit unless the file was compiled by another version (its
    ``residual_labels`` then differ from the circuit's directions)."""
    config = model.config
    stored = config.get("program") or {}
    if program is None and not isinstance(stored.get("source"), str):
        raise StoredProgramError("the file holds no program source")
    missing = [key for key in COMPILED_FIELDS if config.get(key) is None]
    if missing:
        raise StoredProgramError(f"the config lacks {' and '.join(repr(key) for key in missing)}, which every "
                                 f"compiled model holds: the file was changed after compiling")
    route = (float(config["eps"]), str(config["dtype"]), config.get("route") == "gather", config.get("ffn", "wide"))
    if program is not None:
        return build_circuit(program, route[0], resolve_dtype(route[1]), allow_inefficient=route[2], ffn=route[3])
    return _stored_lowering(stored.get("source"), stored.get("name", "<stored program>"), stored.get("margin"),
                            model.T, *route)


@lru_cache(maxsize=16)
def _stored_lowering(source: object, name: str, margin: float | None, length: int, eps: float, dtype: str,
                     gather: bool, ffn: str) -> Lowering:
    """The lowering of a stored program, kept for the next call with the same file's settings
    (export checks a model's weights against it, then reads its circuit map off it; check
    --trace and circuit relower too). Lowering is deterministic and its result immutable."""
    program = _stored_program(source, name, margin, length)
    return build_circuit(program, eps, resolve_dtype(dtype), allow_inefficient=gather, ffn=ffn)


@fewer_collections()
def compile_program(program: ProgramSource, eps: float = DEFAULT_EPS, dtype: str | torch.dtype | None = None,
                    device: str | torch.device | None = None, samples: int | None = None,
                    seed: int = 0, ffn: str | None = None, allow_inefficient: bool = False,
                    residual: int | None = None) -> CompiledTransformer:
    """Compile a checked program into a :class:`CompiledTransformer` within ``eps``.

    ``ffn`` is how squares (hence products and norms) are built: ``wide`` (one hidden layer,
    units ~ ε^(-1/2)), ``deep`` (tent-map compositions over attention-free layers, units
    ~ log(1/ε)) or ``auto`` (per function, the one with fewer nonzero parameters); see
    ``approximations``; by default (None) ``wide``, and ``auto`` on the gather route
    (:func:`square_route`). A route other than ``wide`` is stored in the config as ``"ffn"``
    (``wide`` models keep the bytes they had before routes existed). ``allow_inefficient``
    compiles a target the verdict calls inefficient through the gather route (its config says
    ``"route": "gather"``); an efficient target compiles to the same bytes with or without it.

    ``residual`` superposes the model into at most that many residual dimensions
    (:mod:`infoflow_dsl.compiler.superposition`: a token program's categorical features on nearly
    orthogonal directions, read through clean-ups with a certified margin; every direction with
    tight lifetimes: a program over vectors, which has no categorical features, gets those
    alone); the config's ``superposition`` holds F, D, F/D and every read's interference against
    the margin.

    The model is measured on random inputs plus the domain's corners (inputs under the declared
    margin excluded) and the result is kept in ``model.config["measured_error"]``: on ``samples``
    random inputs, none with 0, or (``None``, the default) as many as fit the measurement budget
    (:func:`budgeted_samples`).

    Args:
        program: a checked program, or the path of a ``.iflow`` file.
        eps: the error bound ε the model is certified within (> 0).
        dtype: ``float32`` or ``float64`` (or the torch dtype); None (the default): float32 where
            its a-priori bound certifies ε, else float64, which the config then says
            (``"dtype_rule"``; :func:`certified_lowering`).
        device: ``cpu``, ``cuda`` or ``cuda:N``; None: cuda when available.
        samples: random inputs to measure on; None: as many as fit the budget; 0: none.
        seed: the measurement's seed.
        ffn: ``wide``, ``deep`` or ``auto`` (how squares are built); None: the route's default.
        allow_inefficient: compile an inefficient target through the gather route.
        residual: superpose the model into at most this many dimensions.

    Returns:
        The :class:`CompiledTransformer`, its config holding the program, ε, the schedule, the
        a-priori bound and the measured error.

    Raises:
        CompileError: an inefficient target (without ``allow_inefficient``), an ε the dtype cannot
            honour, a construct with no construction, a bad dtype or device, a ``residual`` below
            the smallest that keeps every superposed read within its margin (the message names it)
            or given for a program over vectors.
        WorkloadError: the measurement would not fit this machine.
        ProgramError: a path whose program does not check.
    """
    program = program_argument(program, "compile")  # stage 1
    requested = None if dtype is None else resolve_dtype(dtype)
    target_device = resolve_device(device)
    if not (isinstance(eps, float | int) and math.isfinite(eps) and eps > 0):
        raise CompileError(f"ε must be a positive number, got {eps!r}")
    progress.stage("fitting the error budget")
    lowering, torch_dtype, rule = certified_lowering(program, float(eps), requested, allow_inefficient, ffn)  # 2-4
    progress.stage("assembling the weights")
    try:
        model = assemble_model(lowering, float(eps), torch_dtype, target_device, square_route(ffn, lowering.route),
                               rule, residual)
    except CompileError as refusal:
        if requested is not None or residual is None or torch_dtype == torch.float64:
            raise
        # the default dtype: float64's rounding certifies tables (packed numbers) float32's does not
        lowering = build_circuit(program, float(eps), torch.float64, allow_inefficient, ffn)
        model = assemble_model(lowering, float(eps), torch.float64, target_device, square_route(ffn, lowering.route),
                               f"float64: float32 does not certify --residual {residual} ({refusal})", residual)
    measure_model(model, program, samples, seed)
    return model


def assemble_model(lowering: Lowering, eps: float, dtype: torch.dtype, device: torch.device,
                   ffn: str, dtype_rule: str | None = None, residual: int | None = None) -> CompiledTransformer:
    """Stage 5: the circuit's tensors as a model, its config holding the program, ε, the
    realised schedule and the a-priori bound (``measured_error`` None until stage 6), and
    ``dtype_rule`` where float64 was chosen for the default dtype; with ``residual``, superposed
    (:func:`superposed_weights`)."""
    circuit, program = lowering.circuit, lowering.program
    metadata: dict[str, Any] = {
        "program": {"name": Path(program.path).name, "source": program.source, "margin": program.margin},
        "eps": eps,
        "schedule": _schedule_summary(realised_schedule(lowering.schedule, circuit)),
        "a_priori_bound": circuit.budget.bound,
        "measured_error": None,
    }
    if ffn != "wide":
        metadata["ffn"] = ffn
    if lowering.route != "efficient":
        metadata["route"] = lowering.route
    if dtype_rule is not None:
        metadata["dtype_rule"] = dtype_rule
    if residual is not None:
        config, tensors = superposed_weights(program, circuit, dtype, metadata, residual)
    else:
        config, tensors = assemble(circuit, dtype, metadata)
    return CompiledTransformer(config, tensors, device=device, dtype=dtype)


def superposed_weights(program: ir.Program, circuit: Circuit, dtype: torch.dtype, metadata: dict[str, Any],
                       residual: int) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config, tensors) of the plain circuit superposed into ``residual`` dimensions, in ``dtype``."""
    from .compiler.superposition import superpose

    if isinstance(residual, bool) or not isinstance(residual, int) or residual < 1:
        raise CompileError(f"--residual must be a positive whole number, got {residual!r}")
    config, tensors = assemble(circuit, torch.float64, metadata)
    dense = {name: t.to_dense() if t.is_sparse else t for name, t in tensors.items()}
    built = superpose(dense, config, residual, roundoff=UNIT_ROUNDOFF[dtype])
    built.config["dtype"] = str(dtype).replace("torch.", "")
    built.config["superposition"]["residual"] = residual
    return built.config, {name: t.to(dtype).contiguous() for name, t in built.tensors.items()}


def measure_model(model: CompiledTransformer, program: ir.Program, samples: int | None, seed: int) -> None:
    """Stage 6: the model measured against the oracle on ``samples`` inputs (None: as many as
    fit the measurement budget; 0: none), the result kept in ``config["measured_error"]``. A
    measurement too large for this machine is refused (WorkloadError) before it starts; a model
    the measurement shows outside its certificate is refused (:func:`refuse_uncertified`)."""
    if samples is None:
        samples = budgeted_samples(model, program)
    if samples > 0:
        measurement_workload(model, program, samples, MEASUREMENT_CHANGE).refuse_if_unaffordable()
        measured = measure(model, program, samples, seed)
        model.config["measured_error"] = measured.record
        refuse_uncertified(model, program, measured)


def refuse_uncertified(model: CompiledTransformer, program: ir.Program, measured: Measurement) -> None:
    """Raise :class:`UncertifiedModel` where the measurement breaks the certificate: a wrong
    answer, an error above ε, or above the a-priori bound (a bound is a proof: docs/design.md)."""
    config = model.config
    reason = uncertified_reason(measured.worst, program.token_output, measured.record.get("wrong", 0),
                                float(config["eps"]), config.get("a_priori_bound"))
    if reason is not None:
        raise UncertifiedModel(f"{program.path}: a compiler bug: {reason} on {measured.witness}; the model is not "
                               f"returned (please report the program)", model)
