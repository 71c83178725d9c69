"""``ifl.analyze``: the analysis report of a program, before anything is built: its comparison
tree, the schedule ``compile`` builds (:mod:`.scheduling`), the cost law and the verdict, and
for an inefficient target the gather route's size. analyze of a program over vectors stays
light (no torch)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..analysis.ranges import roots_at_zero
from ..analysis.report import AnalysisReport, gather_applies
from ..collector import fewer_collections
from ..errors import CompileError
from ..language import typed as ir
from ..language.load import program_argument
from .scheduling import schedule_program

if TYPE_CHECKING:
    from ..language.load import ProgramSource


@fewer_collections()
def analyze(program: ProgramSource, heads: Sequence[int] | None = None) -> AnalysisReport:
    """``infoflow_dsl.analyze``: the analysis of a checked program (what ``analyze`` prints), its
    schedule the model ``compile`` builds (:func:`schedule_program`); ``heads`` asks whether that
    per-layer head budget suffices. ``program`` may be a path (:mod:`.language.load`).

    Args:
        program: a checked program, or the path of a ``.iflow`` file.
        heads: a head budget per layer (``--heads 2,2``); None asks for the schedule's own.

    Returns:
        The :class:`AnalysisReport`: order, dimension, schedule, cost law, verdict (``.to_json()``).

    Raises:
        ProgramError: a path whose program does not check.
        TypeError: a compiled model or anything else where a program is expected.
    """
    program = program_argument(program, "analyze")
    schedule = schedule_program(program, heads)
    return AnalysisReport(program=program, tree=schedule.tree, schedule=schedule,
                          roots_at_zero=roots_at_zero(program),
                          gather_size=gather_size(program) if gather_applies(program, schedule) else None)


@lru_cache(maxsize=64)
def gather_size(program: ir.Program) -> dict[str, Any]:
    """The gather route's nonzero parameters at ε = 1e-2 (float64, lowered and assembled, not
    measured), or why it is refused: what analyze's fallback reports for an inefficient target.
    Cached per program (a few seconds each); imports torch."""
    import torch

    from ..compiler.assemble import assemble
    from ..transformer.model import CompiledTransformer
    from .lowering import build_circuit

    try:
        lowering = build_circuit(program, 1e-2, torch.float64, allow_inefficient=True)
    except CompileError as error:
        return {"parameters_at_eps_1e-2": None, "refused": str(error)}
    card, tensors = assemble(lowering.circuit, torch.float64, {})
    model = CompiledTransformer(card, tensors, device="cpu", dtype=torch.float64)
    return {"parameters_at_eps_1e-2": model.nonzero_parameter_count(), "refused": None}
