"""The ``infoflowc`` console script's entry point: the command line (:mod:`.main`) behind a guard
for Ctrl-C.

The script imports this module first; it and ``infoflow_dsl`` import nothing else, so the guard
is in place a few milliseconds after the interpreter starts. Ctrl-C from then on, while the
command line's modules are still being imported included, exits 130 (as a shell reports
Ctrl-C) without a traceback. Before it, the interpreter's own start-up (about 20 ms, ``site``)
is Python's: a SIGINT there either ends the process by the signal or, once Python has installed
its handler, prints Python's KeyboardInterrupt.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT: common.EXIT_INTERRUPTED (imported by nothing here, so the guard comes first)


def main() -> None:
    """Import the command line and run it; Ctrl-C during the import is exit 130, quietly."""
    try:
        from .main import main as run_command_line
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    run_command_line()
