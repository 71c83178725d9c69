"""The whole compiler, stage after stage: checked program -> comparisons -> schedule -> lower ->
assemble -> model; the same lowering again from a model file; and the measurement of a model's
error against the reference evaluator.

``compile_program`` is ``infoflow_dsl.compile``. It refuses (``CompileError``) a target the
analysis calls inefficient, with analyze's reason, and an ε the dtype cannot honour.
:func:`relower` rebuilds a compiled model's circuit from the program its file stores (for
``check --trace`` and ``circuit``).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import torch

from .analysis.comparisons import ComparisonTree, build_tree
from .analysis.gather import UnrollError, gather
from .analysis.schedule import Schedule, build_schedule
from .compiler.assemble import assemble
from .compiler.circuit import Circuit
from .compiler.lower import lower
from .errors import CompileError, ProgramError, single_error
from .language import syntax as ast
from .language import typed as ir
from .language.check import check
from .language.parse import parse
from .reference.evaluate import evaluate, retrieval_margin
from .reference.sampling import domain_corners, sample_inputs
from .transformer.model import CompiledTransformer

DTYPES = {"float32": torch.float32, "float64": torch.float64}
DEFAULT_EPS = 1e-3
DEFAULT_SAMPLES = 10_000  # the most random inputs a budgeted measurement takes (and check's default)
MIN_SAMPLES = 256  # the fewest random inputs a budgeted measurement takes
MEASUREMENT_BUDGET = 4e10  # operations of measurement_cost: about two seconds on a 2-core x86 machine (BENCHMARKS.md)
CORNERS = 256
BATCH_ELEMENTS = 1 << 16  # inputs per forward batch × T
PAIR_ELEMENTS = 1 << 24  # inputs per reference call × T²: bounds its general path's (B, T, T) pair grids
#: inputs per batch × (T+1) × d_model: bounds the residual stream, so that a wide model (the gather
#: route's triangle_center at T = 8 has d_model 2,372) is not measured on 1.4 GB residual tensors
#: (its check spent 7 of its 7.4 minutes in the kernel, mapping and unmapping them)
STREAM_ELEMENTS = 1 << 21


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


def _schedule_summary(schedule: Any, circuit: Circuit | None = None) -> dict[str, Any]:
    """The schedule; with ``circuit``, as that circuit realises it (deep squares move heads later
    than the schedule placed them, and add layers)."""
    placed = {h.name: h.layer for h in circuit.heads} if circuit is not None else {}
    layers = circuit.layers if circuit is not None else schedule.layers
    heads = (list(schedule.heads_per_layer) if circuit is None
             else [sum(1 for h in circuit.heads if h.layer == layer) for layer in range(1, layers + 1)])
    return {
        "layers": layers,
        "heads": heads,
        "order": schedule.tree.order,
        "dimension": schedule.dimension,
        "verdict": schedule.verdict,
        "table": [{"head": h.name, "layer": placed.get(h.name, h.layer), "kind": h.kind, "site": h.site,
                   "compares": h.compares} for h in schedule.heads],
    }


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
    """The lowering of a checked program: the efficient route, or for a target the verdict
    calls inefficient and ``allow_inefficient``, the gather route (``unroll``: comparisons
    unrolled into position slots, a size that grows with T). ``ffn`` is how squares are built
    (``approximations``; None: :func:`square_route`'s default)."""
    refuse_v3(program)
    schedule = build_schedule(build_tree(program), None, program.margin)
    if not (schedule.problems and allow_inefficient):
        circuit = lower(program, schedule, eps, dtype, square_route(ffn, "efficient"))
        return Lowering(program=program, tree=schedule.tree, schedule=schedule, circuit=circuit, route="efficient")
    try:
        gathered = gather(program)
    except UnrollError as error:
        raise CompileError(f"the target is inefficient, and the gather route cannot compile it: {error}") from None
    rewritten = dataclasses.replace(program, target=gathered.target)
    schedule = build_schedule(build_tree(rewritten, gathered=True), None, program.margin)
    circuit = lower(rewritten, schedule, eps, dtype, square_route(ffn, "gather"), gathered=True)
    return Lowering(program=program, tree=schedule.tree, schedule=schedule, circuit=circuit, route="gather")


def refuse_v3(program: ir.Program, action: str = "compiled") -> None:
    """Raise a located :class:`ProgramError` (exit 2) for a program the lowering (``action``
    "compiled") or the trained model family ("trained") cannot build yet: one over a token
    vocabulary, or one that holds a bracket or another language-v3 construct."""
    first = next((n for n in (program.target, *ir.sub_nodes(program.target)) if isinstance(n, ir.V3_NODES)), None)
    if program.over_tokens:
        declaration = next(d for d in program.expanded.declarations if isinstance(d, ast.InputDecl))
        span, message = declaration.span, (
            f"token programs are not {action} yet: the model has no token embedding and no construction for "
            f"brackets [...] or len; parse, analyze and the reference evaluator (ifl.evaluate) support them")
    elif first is not None:
        span, message = first.span, (  # type: ignore[union-attr]
            f"this construct of language v3 (a bracket [...] or a position used as a number) is not {action} "
            f"yet; parse, analyze and the reference evaluator support it")
    else:
        return
    raise single_error(program.path, span, message, program.source)


class StoredProgramError(Exception):
    """The program stored in a model file is missing, or no longer parses or checks."""


def program_of(model: CompiledTransformer) -> ir.Program:
    """The checked program stored in the model's config (its T and margin as compiled)."""
    stored = model.config.get("program") or {}
    source = stored.get("source")
    if not isinstance(source, str):
        raise StoredProgramError("the file holds no program source")
    name = stored.get("name", "<stored program>")
    try:
        return check(parse(source, name), name, source, length=model.T, margin=stored.get("margin"))
    except ProgramError as error:
        first = error.diagnostics[0].headline() if error.diagnostics else str(error)
        raise StoredProgramError(f"the program stored in the file no longer checks: {first}") from None


def relower(model: CompiledTransformer, program: ir.Program | None = None) -> Lowering:
    """The lowering of a compiled model, again as ``compile`` did it: its program (``program``,
    else the one its file stores: :func:`program_of`) at the ε, dtype, square route (``ffn``)
    and route (``"route": "gather"``) its config stores. Lowering is deterministic, so this is
    the model's own circuit unless the file was compiled by another version (its
    ``residual_labels`` then differ from the circuit's directions)."""
    program = program_of(model) if program is None else program
    config = model.config
    return build_circuit(program, float(config["eps"]), resolve_dtype(config["dtype"]),
                         allow_inefficient=config.get("route") == "gather", ffn=config.get("ffn", "wide"))


def compile_program(program: ir.Program, eps: float = DEFAULT_EPS, dtype: str | torch.dtype = "float32",
                    device: str | torch.device | None = None, samples: int | None = None,
                    seed: int = 0, ffn: str | None = None, allow_inefficient: bool = False) -> CompiledTransformer:
    """Compile a checked program into a :class:`CompiledTransformer` within ``eps``.

    ``ffn`` is how squares (hence products and norms) are built: ``wide`` (one hidden layer,
    units ~ ε^(-1/2)), ``deep`` (tent-map compositions over attention-free layers, units
    ~ log(1/ε)) or ``auto`` (per function, the one with fewer nonzero parameters); see
    ``approximations``; by default (None) ``wide``, and ``auto`` on the gather route
    (:func:`square_route`). A route other than ``wide`` is stored in the config as ``"ffn"``
    (``wide`` models keep the bytes they had before routes existed). ``allow_inefficient``
    compiles a target the verdict calls inefficient through the gather route (its config says
    ``"route": "gather"``); an efficient target compiles to the same bytes with or without it.

    The model is measured on random inputs plus the domain's corners (inputs under the declared
    margin excluded) and the result is kept in ``model.config["measured_error"]``: on ``samples``
    random inputs, none with 0, or (``None``, the default) as many as fit the measurement budget
    (:func:`budgeted_samples`).
    """
    torch_dtype = resolve_dtype(dtype)
    target_device = resolve_device(device)
    if not (isinstance(eps, float | int) and math.isfinite(eps) and eps > 0):
        raise CompileError(f"ε must be a positive number, got {eps!r}")
    lowering = build_circuit(program, float(eps), torch_dtype, allow_inefficient, ffn)
    circuit, schedule, route = lowering.circuit, lowering.schedule, lowering.route
    ffn = square_route(ffn, route)
    metadata: dict[str, Any] = {
        "program": {"name": Path(program.path).name, "source": program.source, "margin": program.margin},
        "eps": float(eps),
        "schedule": _schedule_summary(schedule, circuit if ffn != "wide" or route != "efficient" else None),
        "a_priori_bound": circuit.budget.bound,
        "measured_error": None,
    }
    if ffn != "wide":
        metadata["ffn"] = ffn
    if route != "efficient":
        metadata["route"] = route
    config, tensors = assemble(circuit, torch_dtype, metadata)
    model = CompiledTransformer(config, tensors, device=target_device, dtype=torch_dtype)
    if samples is None:
        samples = budgeted_samples(model, program)
    if samples > 0:
        model.config["measured_error"] = measure_error(model, program, samples, seed)
    return model


def reference_cost(program: ir.Program) -> float:
    """Operations the reference spends on one input, roughly: the evaluator gives every node a
    tensor over the positions it reads (the others broadcast as size-1 axes), so a node that
    reads k position variables and holds n numbers per tuple costs T^k · n, and an expression is
    the sum over its nodes. ``max_<s,t> P + max_<s′,t′> Q`` is 2 T² tuples, not T⁴ (the second
    reduction reads no variable of the first); a per-token target reads its own t too."""
    length = float(program.length)

    def cost(node: object) -> float:
        value_type = getattr(node, "type", None)  # position nodes have none
        numbers = max(1, math.prod(value_type.shape)) if value_type is not None else 1
        return length ** len(ir.free_variables(node)) * numbers + sum(cost(child) for child in ir.children(node))

    return 2.0 * cost(program.target) * (length if program.per_token else 1.0)


def measurement_cost(model: CompiledTransformer, program: ir.Program) -> float:
    """Floating-point operations to measure one input, roughly: the model's forward (2 per
    nonzero weight per token, plus each head's (T+1) × T scores, softmax and values) and the
    reference (:func:`reference_cost`)."""
    length = program.length
    cost = 2.0 * (length + 1) * model.nonzero_parameter_count()
    for block in model.blocks:
        heads, _, width = block.attn.W_Q.shape  # (H, D, E)
        cost += 2.0 * heads * (length + 1) * length * (width + block.attn.W_V.shape[-1] + 8)
    return cost + reference_cost(program)


def budgeted_samples(model: CompiledTransformer, program: ir.Program, budget: float = MEASUREMENT_BUDGET) -> int:
    """How many random inputs fit ``budget`` operations: between MIN_SAMPLES and DEFAULT_SAMPLES.

    A count of work, not a clock, so that the same compile always measures the same inputs and
    writes the same bytes."""
    return int(min(DEFAULT_SAMPLES, max(MIN_SAMPLES, budget // measurement_cost(model, program))))


def model_inputs(program: ir.Program, samples: int, seed: int, corners: int = CORNERS) -> torch.Tensor:
    """``samples`` random inputs from the domain, then ``corners`` extreme ones: (N, T, d), float64."""
    parts = [sample_inputs(program, samples, seed=seed)]
    if corners:
        parts.append(domain_corners(program, corners, seed=seed + 1))
    return torch.cat(parts)


def measurement_batches(model: CompiledTransformer, length: int) -> tuple[int, int]:
    """(inputs per forward, inputs per reference call) when measuring at length T: the forward's
    batch bounds B·T (BATCH_ELEMENTS) and the residual stream B·(T+1)·d_model (STREAM_ELEMENTS);
    its attention is fused, so no (B, H, T+1, T) scores are stored. The reference's batch also
    bounds B·T² (PAIR_ELEMENTS), the size of its general path's pair grids; the forward's batch
    holds several of them (at T = 4096: 16 inputs a forward, one a reference call: 8% faster than
    one input a forward, the per-call overhead of its ~60 operations shared)."""
    forward = max(1, min(BATCH_ELEMENTS // length, STREAM_ELEMENTS // ((length + 1) * model.d_model)))
    return forward, max(1, min(forward, PAIR_ELEMENTS // length**2))


def errors_on(model: CompiledTransformer, program: ir.Program, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(|model − reference| per input (max over output components), kept) where ``kept`` marks
    the inputs the guarantee covers (best score ahead by the margin, for token retrievals).
    For a per-token target the error of an input is its largest over the positions where the
    target is defined and, with a margin, where that position's retrieval clears it."""
    error, kept = position_errors(model, program, x)
    if error.dim() == 1:
        return error, kept
    return torch.where(kept, error, 0.0).amax(dim=1), kept.any(dim=1)


def position_errors(model: CompiledTransformer, program: ir.Program,
                    x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Like :func:`errors_on`, but a per-token target's errors and coverage per position:
    (N, T) each (an undefined position has error 0 and is not kept); (N,) for sequence targets."""
    length = max(x.shape[1], 1)
    forward_batch, reference_batch = measurement_batches(model, length)
    # both in batches, written in place into one (N, ...) tensor each: kept in lists, the small
    # results interleaved with the batches' large temporaries fragmented the heap (+3 MB an input
    # at T = 4096)
    predicted = truth = torch.empty(0)
    with torch.no_grad():
        for start in range(0, x.shape[0], forward_batch):
            chunk = x[start:start + forward_batch]
            y = model(chunk.to(model.device, model.dtype)).to("cpu", torch.float64)
            if start == 0:
                predicted = y.new_empty(x.shape[0], *y.shape[1:])
            predicted[start:start + forward_batch] = y
            for part in range(start, start + chunk.shape[0], reference_batch):
                r = evaluate(program, x[part:min(part + reference_batch, start + chunk.shape[0])])
                if part == 0:
                    truth = r.new_empty(x.shape[0], *r.shape[1:])
                truth[part:part + r.shape[0]] = r
    error = (predicted - truth).abs()
    if program.per_token:
        defined = ~truth.isnan()
        error = torch.where(defined, error, 0.0)
        if error.dim() > 2:
            error, defined = error.amax(dim=-1), defined.all(dim=-1)  # (N, T)
    elif error.dim() > 1:
        error = error.amax(dim=-1)
    kept = defined if program.per_token else torch.ones(x.shape[0], dtype=torch.bool)
    if program.margin is not None:
        kept = kept & (retrieval_margin(program, x) >= program.margin)
    return error, kept


def measure_error(model: CompiledTransformer, program: ir.Program, samples: int = DEFAULT_SAMPLES,
                  seed: int = 0) -> dict[str, Any]:
    """The worst error on random inputs and corners, as stored in a model's config."""
    x = model_inputs(program, samples, seed)
    error, kept = errors_on(model, program, x)
    worst = float(error[kept].max()) if bool(kept.any()) else 0.0
    return {"max_error": float(f"{worst:.3g}"), "samples": samples, "corners": CORNERS, "seed": seed,
            "excluded_by_margin": int((~kept).sum())}
