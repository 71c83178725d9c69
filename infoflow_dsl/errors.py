"""The faults that end a command with an exit code (docs/design.md, "The command line"), in one place.

- :class:`ProgramError` (exit 2): every fault in a program, each a :class:`Diagnostic` reported
  as ``FILE:LINE:COL: error: MESSAGE``.
- :class:`CompileError` (exit 2): a target the compiler refuses, with the reason.
- :class:`ModelFileError` (exit 2): a file that is not a valid infoflow model;
  :class:`StoredProgramError` (exit 2): one whose stored program no longer checks.
- :class:`ExportError`, :class:`TrainError`, :class:`SweepError` (exit 2): an export, a training
  setting or a sweep that cannot be made as asked; :class:`UsageError` (exit 2): a flag or a
  file path; :class:`WorkloadError` (exit 2): a measurement too large for this machine
  (estimated before it starts). :class:`NoConstruction` is the :class:`CompileError` of a construct no lowering builds.

Every one is reachable as ``infoflow_dsl.NAME``.

Each diagnostic is printed with the offending source line and a caret (``^~~~``) under the
span it names. :class:`ProgramError` is the one exception type for every fault in a program
(syntax, names, types, ranges); it carries all the diagnostics found, in source order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .language.syntax import Span


@dataclass(frozen=True)
class Diagnostic:
    """One error: where (``span`` in ``path``) and what (``message``)."""

    path: str
    span: Span
    message: str

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def column(self) -> int:
        return self.span.column

    def headline(self) -> str:
        return f"{self.path}:{self.span.line}:{self.span.column}: error: {self.message}"

    def render(self, source: str) -> str:
        """The headline, the source line, and a caret under the span."""
        # lines as the lexer counts them: str.splitlines would also break at \f, \v, U+2028, ...
        lines = source.split("\n")
        if not 1 <= self.span.line <= len(lines):
            return self.headline()
        text = lines[self.span.line - 1].rstrip("\r").expandtabs(1)
        start = max(self.span.column, 1)
        if self.span.end_line == self.span.line and self.span.end_column > start:
            width = self.span.end_column - start
        else:
            width = max(len(text) - start + 1, 1)
        text, start, width = _quoted(text, start, width)
        caret = " " * (start - 1) + "^" + "~" * (width - 1)
        return f"{self.headline()}\n    {text}\n    {caret}"


#: characters of a source line quoted under a diagnostic: a longer line (a binary file read as a
#: program, a generated one-line program) is cut to this many around the span, marked with "…"
QUOTED = 160


def _quoted(text: str, start: int, width: int) -> tuple[str, int, int]:
    """(the part of ``text`` quoted, the span's column in it, its width): the whole line when it
    has at most QUOTED characters, else QUOTED of them from a quarter of that before the span."""
    if len(text) <= QUOTED:
        return text, start, width
    left = max(0, min(start - 1 - QUOTED // 4, len(text) - QUOTED))
    before = "…" if left else ""
    after = "…" if left + QUOTED < len(text) else ""
    column = start - left + len(before)
    return before + text[left:left + QUOTED] + after, column, max(1, min(width, QUOTED + len(before) - column + 1))


class ProgramError(Exception):
    """Every fault found in a program; ``str()`` gives them all, rendered with carets."""

    def __init__(self, diagnostics: list[Diagnostic], source: str = "") -> None:
        ordered = sorted(diagnostics, key=lambda d: (d.span.line, d.span.column, d.message))
        self.diagnostics: tuple[Diagnostic, ...] = tuple(ordered)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render(self.source) for d in self.diagnostics)


def single_error(path: str, span: Span, message: str, source: str = "") -> ProgramError:
    """A :class:`ProgramError` holding one diagnostic."""
    return ProgramError([Diagnostic(path, span, message)], source)


class CompileError(Exception):
    """A target this compiler refuses (with the reason), or an ε the dtype cannot honour.
    ``span``: the source region of the innermost node whose construction failed, where the
    token lowering knows it (None otherwise)."""

    span: object | None = None


class UncertifiedModel(CompileError):
    """A compiled model that its own measurement shows wrong, above ε or above its a-priori
    bound: a compiler bug, never returned (``ifl.compile``, ``from_rasp`` and the CLI alike).
    ``model`` is the refused model, for a report of what was built."""

    def __init__(self, message: str, model: object = None) -> None:
        super().__init__(message)
        self.model = model


class NoConstruction(CompileError):
    """A part of a target that no construction builds (the token lowering's refusals): analyze's
    verdict for it is ``inefficient``, with this message as the reason."""


def located(refusal: CompileError, node: object) -> CompileError:
    """``refusal`` with the span of ``node`` when it has none yet (the innermost node with a real
    span wins: a refusal passes through every enclosing node's rule on its way out)."""
    span = getattr(node, "span", None)
    if refusal.span is None and span is not None and getattr(span, "line", 0) > 0:
        refusal.span = span
    return refusal


class ModelFileError(Exception):
    """A model file that cannot be read or is not a valid infoflow model; the message is one line
    of the form ``<file>: <fault>``."""


class StoredProgramError(Exception):
    """The program stored in a model file is missing, or no longer parses or checks (exit 2)."""


class ExportError(ValueError):
    """An export that cannot be made or read (a bad target, an existing folder, not an export)."""


class TrainError(ValueError):
    """A setting that cannot be trained (bad distribution, head budget, init model)."""


class SweepError(ValueError):
    """A sweep that cannot run as asked (a bad grid, an unreadable or foreign results.csv)."""


class UsageError(Exception):
    """A fault of the user's outside a program (a flag, a file): one line on stderr, exit 2."""


class WorkloadError(UsageError):
    """A measurement that would need more memory than this process may use, or more time than
    the limit (``INFOFLOW_MAX_SECONDS``), estimated before anything is allocated
    (:mod:`infoflow_dsl.measure.workload`): exit 2, with both figures and what to change."""


#: Every fault of the user's besides a program's (:class:`ProgramError`, rendered with carets):
#: whichever command it escapes from, it is one message on stderr and exit 2, never "internal
#: error" (the CLI's last net for a command that did not turn it into a UsageError itself).
USER_FAULTS: tuple[type[Exception], ...] = (UsageError, CompileError, ModelFileError, StoredProgramError,
                                            ExportError, TrainError, SweepError)
