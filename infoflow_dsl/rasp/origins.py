"""Where a RASP expression was built in its author's Python: the first frame of the call stack
outside the ``infoflow_dsl`` package when the expression is constructed (a program built by
:mod:`.library`'s functions is located at the user's call of them). A refusal of ``from_rasp``
or ``ifl.compile`` names this place (``prog.py:12:5``) and the node's label, not the
translated ``.iflow`` text the user never saw.
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

#: The package's own folder: frames of files below it are the library's, never the user's.
PACKAGE_FOLDER = str(Path(__file__).resolve().parents[1]) + os.sep


@dataclass(frozen=True)
class Origin:
    """A place in a Python file: its path as the interpreter names it, a line and (where the
    interpreter records it) a column, both counted from 1."""

    file: str
    line: int
    column: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" + ("" if self.column is None else f":{self.column}")


def caller_origin() -> Origin | None:
    """The place of the innermost frame outside the package on the current call stack; None
    when every frame is the package's, or the first other one is the import machinery's (an
    expression the package builds as it is imported: ``tokens``, ``indices``, ``length``)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _in_package(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename.startswith("<frozen "):
        return None
    return _origin_of(frame)


def _in_package(filename: str) -> bool:
    return os.path.abspath(filename).startswith(PACKAGE_FOLDER)


def _origin_of(frame: FrameType) -> Origin:
    """The frame's file, and the line and column where the instruction running in it starts
    (the start of a call written over several lines)."""
    code, line, column = frame.f_code, frame.f_lineno, None
    positions_of = getattr(code, "co_positions", None)  # Python 3.11 and later
    if positions_of is not None and frame.f_lasti >= 0:  # one entry per 2-byte code unit
        here = next(itertools.islice(positions_of(), frame.f_lasti // 2, None), None)
        if here is not None and here[0] is not None:
            line = here[0]
            column = None if here[2] is None else here[2] + 1
    return Origin(code.co_filename, line, column)


def origin_of(node: object) -> Origin | None:
    """Where ``node`` was built (None for an expression of Tracr's own ``rasp``, duck-typed)."""
    found = getattr(node, "origin", None)
    return found if isinstance(found, Origin) else None
