"""``infoflow_dsl.progress``: long commands show their stage and its count on a terminal, and
nothing in a pipe.

Run as a user runs them, in a fresh process whose stderr is a pseudo-terminal (with a window
size, as a terminal has; ``INFOFLOW_PROGRESS_DELAY=0`` so that the display does not wait its
1.5 s), then with stderr a pipe. Before this module, compile printed nothing until it ended and
check's bar stood at 100% through the whole hypothesis search.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

from programs import EXAMPLES_DIR

from infoflow_dsl import progress

#: compile then check --adversarial in one process (one torch import for both)
SCRIPT = """
import sys
from infoflow_dsl.cli.main import run
codes = [run(["compile", sys.argv[1], "--eps", "1e-3", "--samples", "500", "-o", sys.argv[2]]),
         run(["check", sys.argv[2], "--samples", "500", "--adversarial", "30"])]
sys.exit(max(codes))
"""


def _commands(tmp_path: Path, stderr: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(EXAMPLES_DIR / "min_pairwise.iflow"),
                             str(tmp_path / "m.safetensors")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=stderr, env={**os.environ, "INFOFLOW_PROGRESS_DELAY": "0"})


def _read_all(master: int, process: subprocess.Popen[bytes]) -> str:
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    process.wait()
    return b"".join(chunks).decode("utf-8", errors="replace")


def test_compile_and_check_show_their_stages_on_a_terminal_and_nothing_in_a_pipe(tmp_path: Path) -> None:
    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # rows, columns
    process = _commands(tmp_path, terminal)
    os.close(terminal)
    shown = _read_all(master, process)
    os.close(master)
    assert process.returncode == 0, shown
    for stage in ("compile: fitting the error budget, lowering 1", "compile: assembling the weights",
                  "compile: measuring the error", "check: checking random inputs, corners and near ties",
                  "check: searching for larger errors (hypothesis)"):
        assert stage in shown, stage
    assert "/756" in shown and "/30" in shown  # the measurement's (500 + 256 corners) and the search's counts
    piped = _commands(tmp_path, subprocess.PIPE)
    _, errors = piped.communicate()
    assert piped.returncode == 0 and errors == b""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_display_counts_its_stage_and_the_calls_do_nothing_without_one(monkeypatch) -> None:
    progress.stage("nobody watches", total=3)  # no display: nothing happens, nothing fails
    progress.advance(2)
    monkeypatch.setenv("INFOFLOW_PROGRESS_DELAY", "0")
    stream = _Terminal()
    with progress.shown("work", stream=stream) as display:
        assert display is not None
        progress.stage("counting", total=10, unit="input")
        progress.advance(4)
        display.bar.refresh()
        with progress.shown("inner", stream=stream) as inner:  # a nested command goes on in the outer display
            assert inner is display
    assert "work: counting" in stream.getvalue() and "4/10" in stream.getvalue()
    with progress.shown("quiet", stream=io.StringIO()) as none:  # not a terminal: no display
        assert none is None


def _drawn_on_a_terminal(rows: int, cols: int) -> str:
    """What one bar draws on a pseudo-terminal reporting ``rows`` × ``cols`` (0 × 0: some consoles)."""
    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    stream = os.fdopen(terminal, "w", encoding="utf-8")
    shown = progress.bar(stream, total=10, desc="work", unit="job")
    shown.update(4)
    shown.refresh()
    stream.flush()
    chunks = []
    while select.select([master], [], [], 0.2)[0]:
        chunks.append(os.read(master, 1 << 16))
    drawn = b"".join(chunks).decode("utf-8", errors="replace")
    shown.close()
    stream.close()
    os.close(master)
    return drawn


def test_a_bar_is_80_columns_on_a_terminal_that_reports_0_and_the_terminals_width_otherwise() -> None:
    """Seen: on a terminal reporting 0 columns tqdm printed nothing."""
    lines = [line for line in _drawn_on_a_terminal(0, 0).replace("\r", "\n").splitlines() if "work" in line]
    assert lines and max(len(line.rstrip()) for line in lines) == progress.FALLBACK_COLUMNS and "4/10" in lines[-1]
    wide = [line for line in _drawn_on_a_terminal(24, 120).replace("\r", "\n").splitlines() if "work" in line]
    assert max(len(line.rstrip()) for line in wide) == 120


def test_a_bar_writes_nothing_where_stderr_is_not_a_terminal() -> None:
    """Seen: benchmark's tqdm carriage returns in a log file."""
    log = io.StringIO()
    shown = progress.bar(log, total=3, desc="benchmark")
    shown.update(3)
    shown.close()
    assert log.getvalue() == ""


class _StderrTerminal(_Terminal):
    """stderr on a terminal that reports its size as 0 × 0 (some CI consoles, emacs shells)."""

    def fileno(self) -> int:
        return 2


def test_compiles_stages_show_on_stderr_where_the_terminal_reports_0_columns(monkeypatch) -> None:
    """Seen (issue 69): at 0 columns a 48-second compile showed nothing; tqdm read the 0 rows as
    -1 and drew no line on stderr (only there: tqdm asks stderr and stdout alone for their size)."""
    monkeypatch.setenv("INFOFLOW_PROGRESS_DELAY", "0")
    stream = _StderrTerminal()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(os, "get_terminal_size", lambda *_: os.terminal_size((0, 0)))
    with progress.shown("compile") as display:
        assert display is not None
        progress.stage("measuring the error", total=10, unit="input")
        progress.advance(4)
        display.bar.refresh()
    lines = [line for line in stream.getvalue().split("\r") if "compile: measuring the error" in line]
    assert lines and "4/10" in lines[-1] and len(lines[-1]) == progress.FALLBACK_COLUMNS
