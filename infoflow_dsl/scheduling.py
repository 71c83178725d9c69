"""The schedule of any program, the one ``compile`` builds, and ``analyze`` on top of it.

analyze exists to tell, before anything is built, the model ``compile`` will build. For a
program over vectors that is the comparison tree's placement (``analysis.schedule``); for a
token program it is the layout the exact token constructions place (``compiler.tokens``: how
many heads a reduction takes is theirs to say), computed by running the token lowering to its
circuit IR (no tensors, no measurement; a few milliseconds to a second) and read back as a
:class:`Schedule` by ``compiler.tokens.schedule``. ``pipeline.build_circuit`` takes its
schedule from the same two functions, so the two cannot disagree.

Only the token branch imports torch (the token lowering's tables): ``analyze`` of a program
over vectors stays light.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .analysis.ranges import roots_at_zero
from .analysis.report import AnalysisReport, gather_applies
from .analysis.schedule import Schedule, build_schedule
from .analysis.tree import build_tree
from .collector import fewer_collections
from .errors import CompileError
from .language import typed as ir
from .language.load import program_argument

if TYPE_CHECKING:
    from .language.load import ProgramSource


def schedule_program(program: ir.Program, heads: Sequence[int] | None = None) -> Schedule:
    """The schedule of a checked program, the one ``compile`` builds: for a program over vectors
    the comparison tree's placement (``analysis.schedule``), under the head budget ``heads``
    (``--heads``) when given; for a token program the layout its exact constructions place
    (``compiler.tokens.schedule``: the token lowering run to its circuit IR, no weights), or
    its refusal as the one problem."""
    tree = build_tree(program)
    if not program.over_tokens:
        return build_schedule(tree, heads, program.margin)
    import torch

    from .compiler.tokens import lower_tokens
    from .compiler.tokens.schedule import token_schedule

    free = build_schedule(tree, None, program.margin)
    try:
        circuit = lower_tokens(program, math.inf, torch.float64)
    except CompileError as error:  # NoConstruction, or a bound float64 cannot honour either
        return token_schedule(free, None, str(error), heads)
    return token_schedule(free, circuit, None, heads)


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

    from .compiler.assemble import assemble
    from .pipeline import build_circuit
    from .transformer.model import CompiledTransformer

    try:
        lowering = build_circuit(program, 1e-2, torch.float64, allow_inefficient=True)
    except CompileError as error:
        return {"parameters_at_eps_1e-2": None, "refused": str(error)}
    card, tensors = assemble(lowering.circuit, torch.float64, {})
    model = CompiledTransformer(card, tensors, device="cpu", dtype=torch.float64)
    return {"parameters_at_eps_1e-2": model.nonzero_parameter_count(), "refused": None}


