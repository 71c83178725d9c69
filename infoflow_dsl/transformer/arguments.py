"""What the Python API takes where it asks for a compiled model.

Every function that reads a compiled model (``circuit``, ``report``, ``hooked``, ``export``,
``circuit_graph``, ``edge_truth``, ``disguise``, ``discover``) takes a
:class:`~infoflow_dsl.CompiledTransformer` or a path to its ``.safetensors`` file (``ifl.load``).
Anything else is a TypeError that names the function to call instead: a program where a model is
expected says to compile it first.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..language.program import Program
from .model import CompiledTransformer

if TYPE_CHECKING:
    from typing import TypeAlias

    #: a compiled model, or the path of its ``.safetensors`` file
    ModelSource: TypeAlias = "CompiledTransformer | str | os.PathLike[str]"


def model_argument(value: Any, function: str) -> CompiledTransformer:
    """``value`` as a compiled model: a CompiledTransformer as it is, a path loaded (ModelFileError)."""
    if isinstance(value, CompiledTransformer):
        return value
    if isinstance(value, str | os.PathLike):
        from .io import load

        return load(value)
    if isinstance(value, Program):
        raise TypeError(f"ifl.{function} takes a compiled model, not a program: compile it first "
                        f"(ifl.compile(program, eps=...)), or load one (ifl.load(path))")
    raise TypeError(f"ifl.{function} takes a compiled model (ifl.compile(program) or ifl.load(path)) or the path "
                    f"of its .safetensors file, not {type(value).__name__}")
