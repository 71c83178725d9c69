"""Text from files on the terminal: control characters shown, not obeyed; long messages cut.

Program names, token names, head names and tensor names come from the files the commands read,
and a hostile file can put terminal escape sequences in them (``\\x1b]0;title\\x07`` retitles
the window, others move the cursor or rewrite what was printed). Every command's output goes
through :func:`visible_output`, which writes each such character as its ``\\xNN`` escape; the
line breaks and tabs of the output itself are kept, and ``\\r`` on stderr, where the progress
display (:mod:`infoflow_dsl.progress`) rewrites its line. An error message longer than
:data:`MAX_MESSAGE` characters (a 2-million-token vocabulary with a duplicate used to be echoed
whole, 65 MB for a config of 300k layers) is cut, saying how much was left out.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

#: C0 controls but tab and newline, DEL and the C1 controls (``\r`` is decided per stream)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CONTROL_AND_RETURN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: characters of an error message that are shown; the rest is counted
MAX_MESSAGE = 2_000


def visible(text: str, keep_return: bool = False) -> str:
    """``text`` with every control character written as ``\\xNN`` (tab and newline kept, and
    ``\\r`` with ``keep_return``)."""
    pattern = _CONTROL if keep_return else _CONTROL_AND_RETURN
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def shortened(message: str) -> str:
    """``message`` cut to MAX_MESSAGE characters, with the count of those left out."""
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[:MAX_MESSAGE]}… ({len(message) - MAX_MESSAGE:,} more characters)"


class VisibleStream:
    """A text stream that writes :func:`visible` text to the stream it wraps."""

    def __init__(self, stream: TextIO, keep_return: bool) -> None:
        self._stream = stream
        self._keep_return = keep_return

    def write(self, text: str) -> int:
        self._stream.write(visible(text, self._keep_return))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding ... of the stream
        return getattr(self._stream, name)


@contextlib.contextmanager
def visible_output() -> Iterator[None]:
    """stdout and stderr, for the duration, as :class:`VisibleStream` s."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = VisibleStream(out, keep_return=False), VisibleStream(err, keep_return=True)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
