"""What the Python API takes where it asks for a program or a compiled model.

Every public function that reads a program (``compile``, ``analyze``, ``evaluate``,
``sample_inputs``, ``encode``, ``decode``) takes a checked :class:`~infoflow_dsl.Program` or a
path to a ``.iflow`` file (``str`` or ``os.PathLike``), which it loads and checks as
``ifl.load_program`` does. Every function that reads a compiled model (``circuit``, ``report``,
``hooked``, ``export``) takes a :class:`~infoflow_dsl.CompiledTransformer` or a path to its
``.safetensors`` file (``ifl.load``). Anything else is a TypeError that names the function to
call instead: a program where a model is expected says to compile it first.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeAlias

    from .language.program import Program
    from .transformer.model import CompiledTransformer

    #: a program, or the path of its ``.iflow`` file
    ProgramSource: TypeAlias = "Program | str | os.PathLike[str]"
    #: a compiled model, or the path of its ``.safetensors`` file
    ModelSource: TypeAlias = "CompiledTransformer | str | os.PathLike[str]"


def program_argument(value: Any, function: str) -> Program:
    """``value`` as a checked program: a Program as it is, a path loaded (ProgramError, OSError)."""
    from . import load_program
    from .language.program import Program

    if isinstance(value, Program):
        return value
    if isinstance(value, str | os.PathLike):
        return load_program(Path(value))
    if _is_model(value):
        raise TypeError(f"ifl.{function} takes a program, not a compiled model: pass the program "
                        f"(ifl.load_program(path)), or infoflow_dsl.pipeline.program_of(model)")
    raise TypeError(f"ifl.{function} takes a program (ifl.load_program(path)) or the path of a .iflow file, "
                    f"not {type(value).__name__}")


def model_argument(value: Any, function: str) -> CompiledTransformer:
    """``value`` as a compiled model: a CompiledTransformer as it is, a path loaded (ModelFileError)."""
    from .language.program import Program
    from .transformer.model import CompiledTransformer

    if isinstance(value, CompiledTransformer):
        return value
    if isinstance(value, str | os.PathLike):
        from .transformer.io import load

        return load(value)
    if isinstance(value, Program):
        raise TypeError(f"ifl.{function} takes a compiled model, not a program: compile it first "
                        f"(ifl.compile(program, eps=...)), or load one (ifl.load(path))")
    raise TypeError(f"ifl.{function} takes a compiled model (ifl.compile(program) or ifl.load(path)) or the path "
                    f"of its .safetensors file, not {type(value).__name__}")


def count_argument(value: Any, what: str) -> int:
    """A count of at least 0 (``sample_inputs``' count): ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a whole number ≥ 0, got {value!r}")
    return value


def _is_model(value: Any) -> bool:
    """Whether ``value`` is a compiled model, without importing torch when no model was ever made."""
    module = sys.modules.get("infoflow_dsl.transformer.model")
    return module is not None and isinstance(value, module.CompiledTransformer)
