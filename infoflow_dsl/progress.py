"""What long work is doing, on a terminal: the stage that runs and how far it is.

``infoflowc compile`` can take minutes (a small ε in float64: the error-budget fit builds the
circuit several times, then the measurement runs the model on ten thousand inputs), ``check``
likewise (its inputs, then the hypothesis search). The CLI wraps such a command in
:func:`shown`; the pipeline announces its stages with :func:`stage` and counts its work with
:func:`advance`, and those calls do nothing when no display is shown (the Python API, tests).

A display writes to stderr only when stderr is a terminal, never into a pipe or a log, and only
once the command has run :data:`DELAY` seconds (``INFOFLOW_PROGRESS_DELAY`` sets it), so a
compile of a second prints nothing more. Each stage is one tqdm line, ``compile: measuring the
error  45%|████▌     | 4608/10256 [00:03<00:04, 1.2k input/s]`` with a count, or the stage's
name and its elapsed time without one; the line is cleared when the stage ends. Every bar of
the package (compile's, check's, train's, benchmark's) is made by :func:`bar`: on a terminal
only, and 80 columns wide where the terminal reports 0 (then tqdm's own reading, 0 - 1 = -1 rows,
hid every bar on stderr: a 48-second compile was silent; issue 69).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, TextIO

#: seconds a command runs before its progress shows (a short command prints none)
DELAY = 1.5


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("INFOFLOW_PROGRESS_DELAY", DELAY)))
    except ValueError:
        return DELAY


#: columns assumed where a terminal reports none (0 columns: some consoles and CI terminals)
FALLBACK_COLUMNS = 80
#: rows assumed likewise (tqdm draws no bar at all where it reads fewer rows than its position)
FALLBACK_ROWS = 24


def is_terminal(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def columns(stream: Any) -> int:
    """The width of the terminal ``stream`` writes to; FALLBACK_COLUMNS where it reports 0 or
    cannot say (tqdm's own choice, 0, printed nothing at all)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or FALLBACK_COLUMNS
    except (AttributeError, OSError, ValueError):  # no descriptor, or not a terminal
        return FALLBACK_COLUMNS


def rows(stream: Any) -> int:
    """The height of the terminal ``stream`` writes to; FALLBACK_ROWS where it reports 0 or cannot
    say (tqdm reads 0 rows as -1 and then draws nothing)."""
    try:
        return os.get_terminal_size(stream.fileno()).lines or FALLBACK_ROWS
    except (AttributeError, OSError, ValueError):
        return FALLBACK_ROWS


def bar(stream: Any = None, **settings: Any) -> Any:
    """A tqdm bar on ``stream`` (stderr), the one way the package shows progress: on a terminal,
    as wide and as high as the terminal (:func:`columns`, :func:`rows`, looked up again at each
    refresh: a resized window is followed); anywhere else (a pipe, a log file) disabled, so that no carriage return or
    half-drawn bar lands in a log. ``settings`` are tqdm's (``disable=True`` hides it anyway)."""
    from tqdm import tqdm

    stream = sys.stderr if stream is None else stream
    hidden = settings.pop("disable", False)
    shown = is_terminal(stream) and not hidden
    size = {"ncols": columns(stream), "nrows": rows(stream)} if shown else {}
    progress = tqdm(file=stream, disable=not shown, **size, **settings)
    if shown:
        progress.dynamic_ncols = lambda out: (columns(out), rows(out))
    return progress


class StageDisplay:
    """The progress line of one command on ``stream`` (a terminal), one tqdm bar per stage."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.started = time.monotonic()
        self.delay = _delay()
        self.bar: Any = None
        self.done = 0

    def stage(self, text: str, total: int | None = None, unit: str = "it") -> None:
        """Start stage ``text`` (``total`` units of work, or None: a running clock)."""
        self.close()
        waited = time.monotonic() - self.started
        fmt = None if total is not None else "{desc} [{elapsed}]"
        self.bar = bar(self.stream, total=total, desc=f"{self.label}: {text}", unit=unit, leave=False,
                       delay=max(0.0, self.delay - waited), bar_format=fmt, mininterval=0.2)
        self.done = 0

    def advance(self, count: int) -> None:
        """``count`` more units of the current stage done."""
        if self.bar is not None:
            self.bar.update(count)
            self.done += count

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


_CURRENT: ContextVar[StageDisplay | None] = ContextVar("infoflow_progress", default=None)


@contextlib.contextmanager
def shown(label: str, stream: TextIO | None = None) -> Iterator[StageDisplay | None]:
    """A progress display labelled ``label`` for the work inside, on ``stream`` (stderr) when it
    is a terminal; nothing otherwise. Within another display, that one goes on."""
    stream = sys.stderr if stream is None else stream
    if _CURRENT.get() is not None or not is_terminal(stream):
        yield _CURRENT.get()
        return
    display = StageDisplay(label, stream)
    token = _CURRENT.set(display)
    try:
        yield display
    finally:
        display.close()
        _CURRENT.reset(token)


def stage(text: str, total: int | None = None, unit: str = "it") -> None:
    """Announce a stage of the current command's work (nothing when no display is shown)."""
    display = _CURRENT.get()
    if display is not None:
        display.stage(text, total, unit)


def advance(count: int = 1) -> None:
    """Count ``count`` units of the current stage (nothing when no display is shown)."""
    display = _CURRENT.get()
    if display is not None:
        display.advance(count)
