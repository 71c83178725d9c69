"""Files on disk: outputs checked before the work and written atomically, results appended.

Every output path is tried before a command works (:func:`check_writable`: a file created and
removed in its folder, the one test that covers permissions, read-only and full file systems and
/sys or /proc whoever the user is), and never replaces a device or the command's own input;
every write goes through the one atomic writer, :func:`write_bytes_atomically`. A failure is the user's
(:class:`~infoflow_dsl.errors.UsageError`, exit 2) with the path and the reason.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import UsageError


def umask_mode(directory: bool = False) -> int:
    """The mode a plain ``open`` (``mkdir``) would give a new file (folder) under the user's
    umask: 0o666 (0o777) less the umask, 0644 (0755) under 022. ``tempfile`` creates 0600
    files and 0700 folders whatever the umask, so every writer sets this before its rename."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def write_bytes_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, fsynced, then
    ``os.replace``: the file is either complete or left as it was, with the mode the user's
    umask gives (:func:`umask_mode`). This is the one writer of every output file."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:  # named after the file asked for, not the hidden temporary one
        raise type(error)(error.errno, error.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with the one atomic writer (``transformer.io``); a failure is
    the user's (UsageError, exit 2) with the path and the reason."""
    _existing_parent(path)
    try:
        write_bytes_atomically(path, data)
    except OSError as error:
        raise UsageError(f"{path}: cannot write: {error.strerror or error}") from None


def check_writable(path: Path, *inputs: Path) -> None:
    """Fail (UsageError, exit 2) before any work if ``path`` cannot be written as an output
    file: a missing folder, a folder that refuses a file (tried: permissions, a read-only or
    full file system, /sys or /proc, whoever the user is), a path that names a folder, a
    device, a FIFO or another non-regular file (an output replaces what is there), or one of
    the command's own ``inputs``."""


    folder = _existing_parent(path)
    if path.is_dir():
        raise UsageError(f"{path}: is a folder, expected a file name")
    if path.exists() and not path.is_file():
        raise UsageError(f"{path}: is not a regular file (a device, FIFO or socket); an output replaces the file "
                         f"it is written to")
    for source in inputs:
        if path.exists() and source.exists() and os.path.samefile(path, source):
            raise UsageError(f"{path}: is this command's input {source}; write the output elsewhere")
    _try_writing_in(folder, path)


def check_writable_folder(path: Path) -> None:
    """Fail (UsageError) before any work if the output folder ``path`` cannot be made or
    written: its parent missing or refusing a file, or ``path`` itself a file."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path}: not a folder")
    parent = _existing_parent(path)
    _try_writing_in(path if path.is_dir() else parent, path)


def _existing_parent(path: Path) -> Path:
    """The folder ``path`` is written in, which must exist (UsageError): checked resolved and as
    written, since ``resolve()`` hides the missing ``nope`` of ``nope/../x``."""
    folder = path.resolve().parent
    if not folder.is_dir() or not path.absolute().parent.is_dir():
        raise UsageError(f"{path}: the folder {path.parent} does not exist")
    return folder


def _try_writing_in(folder: Path, path: Path) -> None:
    """Create and remove an empty hidden file in ``folder``: the one test that covers every way
    a write can be refused (``os.access`` says yes to root on a read-only file system)."""

    import tempfile

    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".infoflow-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise UsageError(f"{path}: cannot write to the folder {folder}: {error.strerror or error}") from None


def complete_lines(path: Path) -> bytes:
    """An append-only results file's finished lines (b"" when absent): a torn last line, a run
    killed while appending, is cut off the file first (atomically)."""
    if not path.exists():
        return b""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        write_bytes_atomically(path, data)
    return data


def append_line(path: Path, line: str) -> None:
    """Append one finished line (ending in a newline) to a results file, flushed and fsynced: a
    line on disk is a finished run's."""


    with open(path, "a", encoding="utf-8", newline="") as stream:
        stream.write(line)
        stream.flush()
        os.fsync(stream.fileno())
