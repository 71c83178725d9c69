"""The schedule of any program, the one ``compile`` builds.

For a program over vectors that is the comparison tree's placement (``analysis.schedule``); for
a token program it is the layout the exact token constructions place (``compiler.tokens``: how
many heads a reduction takes is theirs to say), computed by running the token lowering to its
circuit IR (no tensors, no measurement; a few milliseconds to a second) and read back as a
:class:`Schedule` by ``compiler.tokens.schedule``. Only that token branch imports torch."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..analysis.schedule import Schedule, build_schedule
from ..analysis.tree import build_tree
from ..errors import CompileError
from ..language import typed as ir


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

    from ..compiler.tokens import lower_tokens
    from ..compiler.tokens.schedule import token_schedule

    free = build_schedule(tree, None, program.margin)
    try:
        circuit = lower_tokens(program, math.inf, torch.float64)
    except CompileError as error:  # NoConstruction, or a bound float64 cannot honour either
        return token_schedule(free, None, str(error), heads)
    return token_schedule(free, circuit, None, heads)
