"""``infoflowc``: the command line.

Exit codes (DESIGN.md): 0 success; 2 the user's fault (a bad program, a bad flag, an
unreadable file), with a message on stderr and no traceback; 1 only for a bug.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .diagnostics import ProgramError
from .printer import print_program

EXIT_OK, EXIT_BUG, EXIT_USER = 0, 1, 2


class UsageError(Exception):
    """A fault of the user's outside a program (a flag, a file): one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="infoflowc", description="The infoflow compiler: .iflow targets to transformer weights.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parse_cmd = commands.add_parser("parse", help="check a program and print it with macros expanded")
    parse_cmd.add_argument("file", type=Path)
    parse_cmd.add_argument("--T", dest="length", type=_positive_int, help="override the program's length T")
    return parser


def read_program_text(path: Path) -> str:
    """The text of a program file; unreadable or non-UTF-8 files are a UsageError."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file (it is not valid UTF-8)") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot read: {error.strerror or error}") from None


def command_parse(arguments: argparse.Namespace) -> int:
    from . import parse_program

    source = read_program_text(arguments.file)
    program = parse_program(source, str(arguments.file), length=arguments.length)
    sys.stdout.write(print_program(program.expanded))
    return EXIT_OK


COMMANDS = {"parse": command_parse}


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (never raises for the user's faults)."""
    try:
        arguments = build_parser().parse_args(argv)
        return COMMANDS[arguments.command](arguments)
    except ProgramError as error:
        print(error.render(), file=sys.stderr)
        return EXIT_USER
    except UsageError as error:
        print(str(error), file=sys.stderr)
        return EXIT_USER


def main(argv: Sequence[str] | None = None) -> None:
    try:
        code = run(argv)
    except SystemExit as exit_:  # --help and --version exit through argparse
        code = exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except KeyboardInterrupt:
        code = 130
    except Exception as error:
        print(f"infoflowc: internal error (a bug, please report it): {type(error).__name__}: {error}", file=sys.stderr)
        code = EXIT_BUG
    sys.exit(code)


if __name__ == "__main__":
    main()
