"""``infoflowc`` in process, for tests: exit code and both streams."""

from __future__ import annotations

import contextlib
import io

from infoflow_dsl.cli.main import run


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``infoflowc ARGV`` in process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()
