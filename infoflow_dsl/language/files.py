"""Program files: their bytes as the text the parser reads.

A ``.iflow`` file is UTF-8 text; a leading byte-order mark (U+FEFF, which some editors write)
is dropped. A file that is not UTF-8 is a :class:`~infoflow_dsl.errors.ProgramError` located at
the first byte that does not decode (its line and column), as every other fault of a program
is; a file that cannot be read is the ``OSError`` the operating system gives.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import single_error
from .syntax import Span

BOM = "\ufeff"


def program_source(path: str | os.PathLike[str]) -> str:
    """The text of the program file ``path``: UTF-8, a leading byte-order mark dropped."""
    data = Path(path).read_bytes()
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
