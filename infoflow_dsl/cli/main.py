"""``infoflowc``: the command line's parser and dispatch.

Each command is declared in its own module as a :class:`~.common.Command` (its name, its help
line, what adds its arguments, what runs it); :data:`COMMANDS` lists them all, in the order
``infoflowc --help`` shows them, and is the only place the parser (:func:`build_parser`) and the
dispatch (:func:`dispatch`) learn of a command. Flags several commands take are added by
:mod:`.common`'s helpers.

Exit codes and flag types: :mod:`.common`. Start-up: this module and ``infoflow_dsl`` import no
torch; a command's module imports what it needs when the command runs.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

from ..errors import USER_FAULTS, ProgramError, UsageError
from .check import CHECK
from .circuit import CIRCUIT
from .common import EXIT_BUG, EXIT_INTERRUPTED, EXIT_OK, EXIT_STDOUT_CLOSED, EXIT_USER, Command, Parser
from .discover import BENCHMARK, DISCOVER
from .disguise import DISGUISE
from .export import EXPORT
from .from_rasp import FROM_RASP
from .program import ANALYZE, COMPILE, PARSE
from .report import REPORT
from .run import RUN
from .sae import SAE
from .train import SWEEP, TRAIN

#: every command of ``infoflowc``, in the order its ``--help`` lists them
COMMANDS: tuple[Command, ...] = (PARSE, ANALYZE, COMPILE, CHECK, CIRCUIT, SAE, REPORT, EXPORT, RUN, FROM_RASP,
                                 DISGUISE, DISCOVER, BENCHMARK, TRAIN, SWEEP)
_BY_NAME = {command.name: command for command in COMMANDS}


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The command line's parser, one subparser for each of :data:`COMMANDS`, built once a process:
    parsing leaves it unchanged (list defaults are tuples, and argparse copies ``--merge``'s before
    appending), and building it took 14 ms, which every in-process :func:`run` paid (the fuzz
    tests' 1,400 runs spent 40% of their time there)."""
    parser = Parser(prog="infoflowc", description="The infoflow compiler: .iflow targets to transformer weights.")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_arguments(subparsers.add_parser(command.name, help=command.help))
    return parser


def dispatch(arguments: argparse.Namespace) -> int:
    """Run the command ``arguments`` were parsed for; one returning nothing exits 0."""
    code = _BY_NAME[arguments.command].run(arguments)
    return EXIT_OK if code is None else int(code)


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (never raises for the user's faults). What it
    prints shows control characters from files as escapes, and cuts an error message of more
    than 2,000 characters (:mod:`.terminal`)."""
    from .terminal import shortened, visible_output

    command = None
    with visible_output():
        try:
            arguments = build_parser().parse_args(argv)
            command = arguments.command
            return dispatch(arguments)
        except ProgramError as error:
            print(shortened(error.render()), file=sys.stderr)
            return EXIT_USER
        except UsageError as error:
            print(shortened(str(error)), file=sys.stderr)
            return EXIT_USER
        except USER_FAULTS as error:  # one a command left as it was raised: still the user's, exit 2
            print(shortened(f"infoflowc {command}: {error}"), file=sys.stderr)
            return EXIT_USER


def main(argv: Sequence[str] | None = None) -> None:
    """The console script: :func:`run`, then stdout flushed; a closed stdout exits 141 quietly."""
    try:
        code = _run_and_flush(argv)
    except BrokenPipeError:  # the reader left (``| head``): not a fault of the program
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush then writes nowhere
        code = EXIT_STDOUT_CLOSED
    sys.exit(code)


def _run_and_flush(argv: Sequence[str] | None) -> int:
    """:func:`run`'s exit code, 130 for Ctrl-C, 1 for a bug; stdout flushed here, so that a
    closed pipe raises BrokenPipeError inside ``main`` rather than in the interpreter's exit."""
    try:
        code = run(argv)
    except SystemExit as exit_:  # --help and --version exit through argparse
        code = exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except Exception as error:
        print(f"infoflowc: internal error (a bug, please report it): {type(error).__name__}: {error}", file=sys.stderr)
        code = EXIT_BUG
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    main()
