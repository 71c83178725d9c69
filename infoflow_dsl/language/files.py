"""Program files: their bytes as the text the parser reads.

A ``.iflow`` file is UTF-8 text; a leading byte-order mark (U+FEFF, which some editors write)
is dropped. A file that is not UTF-8 is a :class:`~infoflow_dsl.errors.ProgramError` located at
the first byte that does not decode (its line and column), as every other fault of a program
is; a file that cannot be read is the ``OSError`` the operating system gives. A model file
(safetensors: an 8-byte little-endian header length that fits the file, then the JSON header's
``{``) given where a program is expected is a :class:`~infoflow_dsl.errors.UsageError` that says
so, not a dump of its binary as a line that does not decode.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ..errors import UsageError, single_error
from .syntax import Span

BOM = "\ufeff"


def program_source(path: str | os.PathLike[str]) -> str:
    """The text of the program file ``path``: UTF-8, a leading byte-order mark dropped."""
    data = Path(path).read_bytes()
    if is_safetensors(data):
        raise UsageError(f"{path}: a model file (safetensors), not a .iflow program; give the program here "
                         f"(a model is read by check, run, circuit, export ...: e.g. infoflowc check {path})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        message = (f"not a UTF-8 text file: byte 0x{data[error.start]:02x} cannot be decoded "
                   f"(save the program as UTF-8)")
        shown = data.decode("utf-8", errors="replace")  # the line under the caret, the bad byte as U+FFFD
        raise single_error(str(path), Span(line, column, line, column + 1), message, shown) from None
    return text[1:] if text.startswith(BOM) else text


def is_safetensors(data: bytes) -> bool:
    """Whether ``data`` begins as a safetensors file does: a header length n (8 bytes, little
    endian) with 8 + n ≤ len(data), then the header's JSON object (``{``)."""
    if len(data) < 10:
        return False
    (n,) = struct.unpack("<Q", data[:8])
    return 2 <= n <= len(data) - 8 and data[8:9] == b"{"
