"""A superposed model's weights against its stored program: ``compile --residual`` again.

The weights of a model compiled with ``--residual`` are not its circuit's assembled tensors
(the check of :mod:`.sites`) but that circuit superposed (:mod:`infoflow_dsl.compiler.superposition`);
the superposition is deterministic, so relowering the stored program and superposing it at the
residual the config records gives the file's tensors exactly, or the file was changed.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import StoredProgramError
from ..pipeline.compiling import superposed_weights
from ..pipeline.devices import resolve_dtype
from ..pipeline.reading import relower


def check_superposed(model: Any) -> None:
    """StoredProgramError unless a superposed model's weights and circuit description are what
    ``compile --residual`` builds from its stored program (relowered, then superposed again at
    the residual it was asked for: deterministic)."""
    card = model.card
    lowering = relower(model)
    dtype = resolve_dtype(str(card.dtype))  # relowered: a compiled model, its dtype stored
    residual = card.d_model if card.superposition is None else card.superposition.residual or card.d_model
    built, tensors = superposed_weights(lowering.program, lowering.circuit, dtype, {}, residual)
    held = model.state_dict()
    for name, tensor in tensors.items():
        mine = held.get(name)
        mine = None if mine is None else (mine.to_dense() if mine.is_sparse else mine).cpu().to(dtype)
        if mine is None or mine.shape != tensor.shape or not torch.equal(mine, tensor):
            raise StoredProgramError(f"the weights are not the superposed circuit of the program stored in the file "
                                     f"({name} differs): the file was changed after compiling")
    for field in ("layers", "embedding_mlp", "residual_labels"):
        if getattr(card, field) != getattr(built, field):
            raise StoredProgramError(f"the config's {field!r} does not describe the superposed circuit")
