"""Tables of bad programs, each row with the exact line, column and message of every diagnostic
(read off the program text: the column is where the offending text starts), shared by the
checker's, the declarations' and the macros' tests: a row is checked in process and through
``infoflowc parse`` (exit 2, every diagnostic on stderr)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.errors import ProgramError

HEADER = "input x : R^2\nlength T = 4\n"  # lines 1 and 2; most bad targets sit on line 3

Expected = list[tuple[int, int, str]]


def bad(name: str, body: str, *diagnostics: tuple[int, int, str], header: str = HEADER):
    """A table row: the program ``header + body`` and the diagnostics it must produce, in order."""
    return pytest.param(header + body + "\n", list(diagnostics), id=name)


def diagnostics_of(source: str, path: str = "f.iflow", **overrides) -> Expected:
    """(line, column, message) of every diagnostic that checking ``source`` raises."""
    with pytest.raises(ProgramError) as error:
        ifl.parse_program(source, path, **overrides)
    assert all(d.path == path for d in error.value.diagnostics)
    return [(d.line, d.column, d.message) for d in error.value.diagnostics]


def assert_the_cli_reports(folder: Path, source: str, expected: Expected) -> None:
    """``infoflowc parse`` on ``source`` exits 2 and prints each expected diagnostic, the first one first."""
    path = folder / "bad.iflow"
    path.write_text(source, encoding="utf-8")
    code, out, err = run_cli(["parse", str(path)])
    assert (code, out) == (2, "")
    assert "Traceback" not in err
    line, column, message = expected[0]
    assert err.startswith(f"{path}:{line}:{column}: error: {message}\n")
    for line, column, message in expected:
        assert f"{path}:{line}:{column}: error: {message}\n" in err


def assert_distinct(table: list) -> None:
    """The rows of ``table`` are distinct programs."""
    sources = [param.values[0] for param in table]
    assert len(set(sources)) == len(sources)
