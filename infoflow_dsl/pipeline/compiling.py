"""``ifl.compile``: the whole chain from a program to a certified model, stage after stage
(the list in :mod:`infoflow_dsl.pipeline`): lowering (stages 2-4, :mod:`.lowering`), assembly
(stage 5), superposition (stage 6, with ``residual``), the measurement (stage 7), and the refusal
of any model the measurement shows outside its certificate (:func:`refuse_uncertified`)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .. import progress
from ..analysis.schedule import Schedule
from ..collector import fewer_collections
from ..compiler.assemble import assemble
from ..compiler.circuit import Circuit
from ..compiler.vectors import UNIT_ROUNDOFF
from ..errors import CompileError, UncertifiedModel
from ..language import typed as ir
from ..language.load import program_argument
from ..measure.measurement import Measurement, measure, uncertified_reason
from ..measure.vectors import budgeted_samples
from ..measure.workload import measurement_workload
from ..transformer.card import Measurement as MeasurementCard
from ..transformer.card import ModelCard, ProgramRecord, ScheduledHead
from ..transformer.card import Schedule as ScheduleCard
from ..transformer.model import CompiledTransformer
from .devices import resolve_device, resolve_dtype
from .lowering import Lowering, build_circuit, certified_lowering, realised_schedule, square_route

if TYPE_CHECKING:
    from ..language.load import ProgramSource

DEFAULT_EPS = 1e-3


#: what a compile too large to measure here can change (measure/workload.py)
MEASUREMENT_CHANGE = ("measure fewer inputs (--samples N, samples=N in Python; 0 skips the measurement: check the "
                      "model afterwards), or lower T")


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
    margin excluded) and the result is kept in the card's ``measured_error``: on ``samples``
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


def _schedule_summary(schedule: Schedule) -> ScheduleCard:
    """The card's ``schedule``: the realised schedule's layers, heads and table."""
    table = tuple(ScheduledHead(head=h.name, layer=h.layer, kind=h.kind, site=h.site, compares=h.compares)
                  for h in schedule.heads)
    return ScheduleCard(layers=schedule.layers, heads=tuple(schedule.heads_per_layer), order=schedule.tree.order,
                        dimension=schedule.dimension, verdict=schedule.verdict, table=table)


def assemble_model(lowering: Lowering, eps: float, dtype: torch.dtype, device: torch.device,
                   ffn: str, dtype_rule: str | None = None, residual: int | None = None) -> CompiledTransformer:
    """Stage 5: the circuit's tensors as a model, its config holding the program, ε, the
    realised schedule and the a-priori bound (``measured_error`` None until stage 7), and
    ``dtype_rule`` where float64 was chosen for the default dtype; with ``residual``, superposed
    (:func:`superposed_weights`)."""
    circuit, program = lowering.circuit, lowering.program
    metadata: dict[str, Any] = {
        "program": ProgramRecord(name=Path(program.path).name, source=program.source, margin=program.margin),
        "eps": eps,
        "schedule": _schedule_summary(realised_schedule(lowering.schedule, circuit)),
        "a_priori_bound": circuit.budget.bound,
        "measured_error": None,  # null until stage 7 measures it
    }
    if ffn != "wide":
        metadata["ffn"] = ffn
    if lowering.route != "efficient":
        metadata["route"] = lowering.route
    if dtype_rule is not None:
        metadata["dtype_rule"] = dtype_rule
    if residual is not None:
        card, tensors = superposed_weights(program, circuit, dtype, metadata, residual)
    else:
        card, tensors = assemble(circuit, dtype, metadata)
    return CompiledTransformer(card, tensors, device=device, dtype=dtype)


def superposed_weights(program: ir.Program, circuit: Circuit, dtype: torch.dtype, metadata: dict[str, Any],
                       residual: int) -> tuple[ModelCard, dict[str, torch.Tensor]]:
    """(card, tensors) of the plain circuit superposed into ``residual`` dimensions, in ``dtype``."""
    from ..compiler.superposition import superpose

    if isinstance(residual, bool) or not isinstance(residual, int) or residual < 1:
        raise CompileError(f"--residual must be a positive whole number, got {residual!r}")
    card, tensors = assemble(circuit, torch.float64, metadata)
    dense = {name: t.to_dense() if t.is_sparse else t for name, t in tensors.items()}
    built = superpose(dense, card, residual, roundoff=UNIT_ROUNDOFF[dtype])
    assert built.card.superposition is not None
    card = dataclasses.replace(built.card, dtype=str(dtype).replace("torch.", ""),
                               superposition=dataclasses.replace(built.card.superposition, residual=residual))
    return card, {name: t.to(dtype).contiguous() for name, t in built.tensors.items()}


def measure_model(model: CompiledTransformer, program: ir.Program, samples: int | None, seed: int) -> None:
    """Stage 7: the model measured against the oracle on ``samples`` inputs (None: as many as
    fit the measurement budget; 0: none), the result kept in the card's ``measured_error``. A
    measurement too large for this machine is refused (WorkloadError) before it starts; a model
    the measurement shows outside its certificate is refused (:func:`refuse_uncertified`)."""
    if samples is None:
        samples = budgeted_samples(model, program)
    if samples > 0:
        measurement_workload(model, program, samples, MEASUREMENT_CHANGE).refuse_if_unaffordable()
        measured = measure(model, program, samples, seed)
        model.card = dataclasses.replace(model.card, measured_error=MeasurementCard.from_record(measured.record))
        refuse_uncertified(model, program, measured)


def refuse_uncertified(model: CompiledTransformer, program: ir.Program, measured: Measurement) -> None:
    """Raise :class:`UncertifiedModel` where the measurement breaks the certificate: a wrong
    answer, an error above ε, or above the a-priori bound (a bound is a proof: docs/design.md)."""
    card = model.card
    assert card.eps is not None  # a compiled model's
    reason = uncertified_reason(measured.worst, program.token_output, measured.record.get("wrong", 0),
                                float(card.eps), card.a_priori_bound)
    if reason is not None:
        raise UncertifiedModel(f"{program.path}: a compiler bug: {reason} on {measured.witness}; the model is not "
                               f"returned (please report the program)", model)
