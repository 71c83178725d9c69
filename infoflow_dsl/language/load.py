"""Stage 1, load: program text -> the checked, typed program (``parse`` then ``check``).

``load_program`` and ``parse_program`` are ``ifl.load_program`` and ``ifl.parse_program``.
Every public function that reads a program (``compile``, ``analyze``, ``evaluate``,
``sample_inputs``, ``encode``, ``decode``) takes a checked :class:`~infoflow_dsl.Program` or a
path to a ``.iflow`` file (``str`` or ``os.PathLike``), which it loads as :func:`load_program`
does (:func:`program_argument`); anything else is a TypeError that names the function to call
instead (a compiled model where a program is expected included).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .check import check
from .files import program_source
from .parse import parse
from .program import Program

if TYPE_CHECKING:
    from typing import TypeAlias

    #: a program, or the path of its ``.iflow`` file
    ProgramSource: TypeAlias = "Program | str | os.PathLike[str]"


def parse_program(source: str, path: str = "<string>", length: int | None = None,
                  margin: float | None = None) -> Program:
    """Parse and check program text.

    Args:
        source: the program's text (the ``.iflow`` language).
        path: the name its messages give the text (a file's path, else ``<string>``).
        length: T, overriding the program's ``length`` declaration (None: the declaration).
        margin: the comparison margin, overriding the program's ``margin`` declaration.

    Returns:
        The checked program (:class:`~infoflow_dsl.Program`), what every later stage reads.

    Raises:
        ProgramError: every fault of the program, each with its line and column.
    """
    return check(parse(source, path), path, source, length=length, margin=margin)


def load_program(path: str | os.PathLike[str], length: int | None = None,
                 margin: float | None = None) -> Program:
    """Read, parse and check a ``.iflow`` file (UTF-8, a byte-order mark allowed).

    Args:
        path: the program file.
        length: T, overriding the program's ``length`` declaration.
        margin: the comparison margin, overriding the program's ``margin`` declaration.

    Returns:
        The checked program.

    Raises:
        ProgramError: every fault in the program, a file that is not UTF-8 included.
        OSError: the file cannot be read.
    """
    source = program_source(path)
    return parse_program(source, str(path), length=length, margin=margin)


def program_argument(value: Any, function: str) -> Program:
    """``value`` as a checked program: a Program as it is, a path loaded (ProgramError, OSError);
    a compiled model or anything else is a TypeError naming what ``ifl.<function>`` takes."""
    if isinstance(value, Program):
        return value
    if isinstance(value, str | os.PathLike):
        return load_program(Path(value))
    if _is_model(value):
        raise TypeError(f"ifl.{function} takes a program, not a compiled model: pass the program "
                        f"(ifl.load_program(path)), or infoflow_dsl.pipeline.reading.program_of(model)")
    raise TypeError(f"ifl.{function} takes a program (ifl.load_program(path)) or the path of a .iflow file, "
                    f"not {type(value).__name__}")


def count_argument(value: Any, what: str) -> int:
    """A count of at least 0 (``sample_inputs``' count): ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a whole number ≥ 0, got {value!r}")
    return value


def _is_model(value: Any) -> bool:
    """Whether ``value`` is a compiled model, without importing torch (nor the transformer layer,
    which sits above this one) when no model was ever made."""
    module = sys.modules.get("infoflow_dsl.transformer.model")
    return module is not None and isinstance(value, module.CompiledTransformer)
