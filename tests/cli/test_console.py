"""The console script's entry (infoflow_dsl/cli/console.py): Ctrl-C while the command line is
still being imported is exit 130 without a traceback, and the guard is in place after importing
nothing but the package itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: a real SIGINT, sent by the process to itself the moment MODULE starts importing (a meta path
#: finder sees every import first), then the console script's entry as pip's script calls it.
#: Python's own SIGINT handler is installed first: a process started in the background of a
#: non-interactive shell (as CI may run the suite) inherits SIGINT ignored, and Ctrl-C never
#: reaches it at all.
INTERRUPTED_DURING = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal (a background job ignores SIGINT)
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
sys.argv = ["infoflowc", "--help"]
from infoflow_dsl.cli.console import main
sys.exit(main())
"""


@pytest.mark.parametrize("module", ["infoflow_dsl.cli.main", "argparse", "infoflow_dsl.errors",
                                    "infoflow_dsl.files"])
def test_ctrl_c_while_the_command_line_imports_exits_130_quietly(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_DURING.format(module=module)], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")


def test_without_an_interrupt_the_entry_runs_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_DURING.format(module="no.such.module")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: infoflowc") and done.stderr == ""


def test_the_guard_is_reached_after_importing_the_package_alone() -> None:
    """The only modules of ours (or the standard library's typing, pathlib, dataclasses) loaded
    before the guard: the package, its light ``transformer`` face (``save``), the ``cli`` package
    and the entry module."""
    probe = ("import sys; before = set(sys.modules); import infoflow_dsl.cli.console; "
             "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(done.stdout.split())
    assert {"infoflow_dsl", "infoflow_dsl.cli", "infoflow_dsl.cli.console"} <= loaded
    assert not loaded & {"infoflow_dsl.errors", "infoflow_dsl.cli.main", "typing", "pathlib", "dataclasses",
                         "argparse", "torch"}


def test_the_installed_script_enters_through_the_guard() -> None:
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="infoflowc")
    assert script.value == "infoflow_dsl.cli.console:main"
