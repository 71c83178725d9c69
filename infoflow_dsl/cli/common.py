"""What every command of ``infoflowc`` shares: exit codes, the parser class, how a command is
declared (:class:`Command`), flag types, the flags several commands take, a program's text read,
a compiled model loaded for a command.

Each command's module declares it as a :class:`Command` (its name, its one-line help, what adds
its arguments, what runs it); :mod:`.main` lists them (``COMMANDS``) and builds the parser from
that list alone. A flag several commands take (``--T``, ``--eps``, ``--dtype``, ``--seed``,
``--samples``, ``--json``, ``-o``, ``--device``, ``--workers``) is added by its ``add_*`` helper
here, its name, type and default written once.

Exit codes (docs/design.md, "The command line"): 0 success; 2 the user's fault (a bad program, a bad flag, an
unreadable file), with a message on stderr and no traceback; 3 a compiled model measured above
ε; 1 only for a bug; 130 Ctrl-C; 141 (128 + SIGPIPE, what a shell reports for ``yes | head``)
when stdout was closed before everything was written (``infoflowc ... | head``), quietly.

A flag's value is checked here, against the same limits as the checker's (``--T`` at most
``check.MAX_LENGTH``), and reported as the flag's fault before any work. The user's faults are
:class:`~infoflow_dsl.errors.UsageError` (every user-facing error lives in ``errors.py``).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

EXIT_INTERRUPTED = 130  # 128 + SIGINT (console.py holds the same number: it imports nothing before its guard)

EXIT_OK, EXIT_BUG, EXIT_USER, EXIT_ABOVE_EPS = 0, 1, 2, 3
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE


class Parser(argparse.ArgumentParser):
    """argparse, its errors a UsageError (exit 2, one line) instead of its own exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """argparse's, but an unrecognized argument is reported by the subcommand that was given
        it (``infoflowc compile: unrecognized arguments: --epsilon 1e-3``), with the flag of that
        command it most resembles: argparse leaves the extras to the top-level parser."""
        arguments, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._command(getattr(arguments, "command", None))
            unknown = next((e for e in extras if e.startswith("-")), "")
            close = difflib.get_close_matches(unknown, [o for a in command._actions for o in a.option_strings
                                                        if o.startswith("--")], n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" ({command.prog} --help lists them)"
            raise UsageError(f"{command.prog}: unrecognized arguments: {' '.join(extras)}{hint}")
        return arguments

    def _command(self, name: str | None) -> argparse.ArgumentParser:
        """The subcommand's parser called ``name`` (this parser when there is none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                return action.choices[name]
        return self


@dataclass(frozen=True)
class Command:
    """One ``infoflowc`` subcommand, declared in the module that runs it: ``name``, ``help`` (its
    line in ``infoflowc --help``), ``add_arguments`` (adds its arguments to its own parser) and
    ``run`` (runs it on the parsed arguments; its exit code, None for 0)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


def _number(convert: type, noun: str, minimum: float, strict: bool, requirement: str) -> Any:
    """An argparse type: ``convert`` the text, then require it ≥ (or >, with ``strict``) ``minimum``."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not (value > minimum if strict else value >= minimum) or value == float("inf"):  # nan fails too
            shown = text if convert is float else value
            raise argparse.ArgumentTypeError(f"expected {requirement}, got {shown!r}" if convert is float
                                             else f"expected {requirement}, got {shown}")
        return value

    return parse


positive_int = _number(int, "a whole number", 1, False, "a whole number ≥ 1")


nonnegative_int = _number(int, "a whole number", 0, False, "a whole number ≥ 0")


positive_float = _number(float, "a number", 0.0, True, "a positive number")


nonnegative_float = _number(float, "a number", 0.0, False, "a number ≥ 0")


def length_flag(text: str) -> int:
    """``--T``: a whole number from 1 to the checker's MAX_LENGTH (a bad value is the flag's
    fault, reported before the program is read)."""
    from ..language.declarations import MAX_LENGTH

    length = positive_int(text)
    if length > MAX_LENGTH:
        raise argparse.ArgumentTypeError(f"T = {length} is too large (at most {MAX_LENGTH})")
    return length


def comma_list(item: Callable[[str], int]) -> Callable[[str], list[int]]:
    """An argparse type for a grid axis: ``16,32`` -> [16, 32], each part read by ``item``."""

    def parse(text: str) -> list[int]:
        return [item(part) for part in text.split(",")]

    return parse


def head_budget(text: str) -> tuple[int, ...]:
    try:
        budget = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected heads per layer such as 2,2, got {text!r}") from None
    if not budget or any(h < 0 for h in budget) or sum(budget) == 0:
        raise argparse.ArgumentTypeError(f"expected heads per layer (≥ 0, not all 0), got {text!r}")
    return budget


def ray_address(text: str) -> str:
    """A Ray address of a form ``ray.init`` takes (:mod:`.cluster`), checked as a flag."""
    from ..errors import SweepError
    from ..training.cluster import address_endpoint

    try:
        address_endpoint(text)
    except SweepError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def with_compiled_model(path: Path, use: Callable[[Any], Any], verb: str, kept: bool = False) -> tuple[Any, Any]:
    """(the compiled model in ``path``, ``use(model)``); a file that is not a model, a trained
    model (no circuit to ``verb``; with ``kept``, one trained keeping its circuit is taken: its
    edge graph is carried and certified) or a stored program that no longer checks is a UsageError."""
    from ..errors import ModelFileError, StoredProgramError
    from ..transformer.io import load

    try:
        model = load(path, device="cpu")
        if model.card.trained is not None and not (kept and model.card.kept_circuit is not None):
            raise UsageError(f"{path}: a trained model has no circuit to {verb} (only compiled ones do)")
        return model, use(model)
    except ModelFileError as error:
        raise UsageError(str(error)) from None
    except StoredProgramError as error:
        raise UsageError(f"{path}: {error}") from None


def read_program_text(path: Path) -> str:
    """The text of a program file (:func:`~infoflow_dsl.language.files.program_source`: a file
    that is not UTF-8 is a ProgramError at its first bad byte); an unreadable file is a UsageError."""
    from ..language.files import program_source

    try:
        return program_source(path)
    except OSError as error:
        raise UsageError(f"{path}: cannot read: {error.strerror or error}") from None


DTYPES = ("float32", "float64")


def add_program_argument(parser: argparse.ArgumentParser) -> None:
    """The positional ``FILE``: a ``.iflow`` program."""
    parser.add_argument("file", type=Path)


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    """The positional ``MODEL``: a model file (or an export folder, where the command reads one)."""
    parser.add_argument("model", type=Path)


def add_length_flag(parser: argparse.ArgumentParser, kind: Callable[[str], Any] = length_flag) -> None:
    """``--T``: override the program's length (``kind`` reads it: a sweep's takes a comma list)."""
    parser.add_argument("--T", dest="length", type=kind, help="override the program's length T")


def add_eps_flag(parser: argparse.ArgumentParser, help: str, default: float | None = None) -> None:
    """``--eps``: an error bound ε, positive."""
    parser.add_argument("--eps", type=positive_float, default=default, help=help)


def add_dtype_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """``--dtype``: float32 or float64 (default None: the command chooses)."""
    parser.add_argument("--dtype", choices=DTYPES, default=None, help=help)


def add_seed_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """``--seed``: a seed, a whole number ≥ 0, 0 by default."""
    parser.add_argument("--seed", type=nonnegative_int, default=0, help=help)


def add_samples_flag(parser: argparse.ArgumentParser, default: int | None, help: str,
                     kind: Callable[[str], int] = nonnegative_int) -> None:
    """``--samples``: a number of random inputs (``kind`` reads it: ≥ 0 unless said otherwise)."""
    parser.add_argument("--samples", type=kind, default=default, help=help)


def add_json_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """``--json``: print what the command found as JSON."""
    parser.add_argument("--json", action="store_true", help=help)


def add_output_flag(parser: argparse.ArgumentParser, help: str, required: bool = False,
                    metavar: str | None = None) -> None:
    """``-o``/``--output``: the file or folder the command writes."""
    parser.add_argument("-o", "--output", type=Path, required=required, metavar=metavar, help=help)


def add_workers_flag(parser: argparse.ArgumentParser, help: str) -> None:
    """``--workers``: parallel runs, 2 by default (1: in this process)."""
    parser.add_argument("--workers", type=positive_int, default=2, help=help)


def add_device_flag(parser: argparse.ArgumentParser, where: str | None = None, default: str | None = None) -> None:
    """``--device`` on a command that runs models: where ``where`` runs; cuda by default where a
    GPU is present, unless ``default`` says otherwise (``train``: cpu)."""
    place = f": where {where}" if where else ""
    shown = f"default {default}" if default else "default: cuda when available"
    parser.add_argument("--device", default=default, help=f"cpu or cuda{place} ({shown})")


def resolved_device(device: str | None) -> Any:
    """The torch.device a ``--device`` flag names (None: cuda when available, else cpu); a bad
    name, or cuda without one, is a UsageError naming the flag."""
    from ..errors import CompileError
    from ..pipeline.devices import resolve_device

    try:
        return resolve_device(device)
    except (CompileError, RuntimeError) as error:
        raise UsageError(f"--device {device}: {error}") from None


def model_on(model: Any, device: str | None) -> Any:
    """``model`` on the device the flag names (:func:`~infoflow_dsl.pipeline.devices.on_device`: a copy
    moved there, or the model itself when it is there)."""
    from ..pipeline.devices import on_device

    return on_device(model, resolved_device(device))
