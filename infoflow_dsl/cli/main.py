"""``infoflowc``: the command line's parser and dispatch; each command lives in its own module.

| command | module |
|---|---|
| parse, analyze, compile | :mod:`.program` |
| check | :mod:`.check` |
| circuit, disguise | :mod:`.circuit` |
| discover, benchmark | :mod:`.discover` |
| export | :mod:`.export` |
| report | :mod:`.report` |
| run | :mod:`.run` |
| from-rasp | :mod:`.from_rasp` |
| train, sweep | :mod:`.train` |

Exit codes and flag types: :mod:`.common`. Start-up: this module and ``infoflow_dsl`` import no
torch; each command imports what it needs when it runs (:func:`_elsewhere`).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import USER_FAULTS, ProgramError, UsageError
from .common import (
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STDOUT_CLOSED,
    EXIT_USER,
    Parser,
    add_device_flag,
    comma_list,
    head_budget,
    length_flag,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    ray_address,
)


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The command line's parser, built once a process: parsing leaves it unchanged (list
    defaults are tuples, and argparse copies ``--merge``'s before appending), and building it
    (every subcommand's arguments) took 14 ms, which every in-process :func:`run` paid (the
    fuzz tests' 1,400 runs spent 40% of their time there)."""
    parser = Parser(prog="infoflowc", description="The infoflow compiler: .iflow targets to transformer weights.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    parse_cmd = commands.add_parser("parse", help="check a program and print it with macros expanded")
    parse_cmd.add_argument("file", type=Path)
    parse_cmd.add_argument("--T", dest="length", type=length_flag, help="override the program's length T")
    analyze_cmd = commands.add_parser("analyze", help="how hard the target is for a transformer, and why")
    analyze_cmd.add_argument("file", type=Path)
    analyze_cmd.add_argument("--T", dest="length", type=length_flag, help="override the program's length T")
    analyze_cmd.add_argument("--heads", type=head_budget, help="a head budget per layer, e.g. 2,2")
    analyze_cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    analyze_cmd.add_argument("--plot", type=Path, metavar="OUT.png", help="draw tokens × layers with the flow")
    analyze_cmd.add_argument("--html", type=Path, metavar="OUT.html", help="write the analysis as an HTML page")
    compile_cmd = commands.add_parser("compile", help="explicit transformer weights within ε, as .safetensors")
    compile_cmd.add_argument("file", type=Path)
    compile_cmd.add_argument("--eps", type=positive_float, default=1e-3, help="the error bound ε (default 1e-3)")
    compile_cmd.add_argument("--T", dest="length", type=length_flag, help="override the program's length T")
    compile_cmd.add_argument("--margin", type=positive_float, help="override the program's margin δ")
    compile_cmd.add_argument("--dtype", choices=["float32", "float64"], default=None,
                             help="the weights' floating type (default: float32 where its bound certifies ε, "
                                  "else float64, said in the output and the config)")
    compile_cmd.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    compile_cmd.add_argument("--ffn", choices=["wide", "deep", "auto"], default=None,
                             help="squares by one wide hidden layer (the default), by tent maps over extra "
                                  "attention-free layers (deep), or per function the one with fewer parameters "
                                  "(auto, the default with --allow-inefficient)")
    compile_cmd.add_argument("--samples", type=nonnegative_int, default=None,
                             help="random inputs to measure the error on (default: as many as fit a few seconds "
                                  "of work, at least 256 and at most 10000)")
    compile_cmd.add_argument("-o", "--output", type=Path, help="the model file (default: FILE with .safetensors)")
    compile_cmd.add_argument("--dense", action="store_true",
                             help="store every tensor dense (default: tensors under 10%% nonzero in the sparse "
                                  "layout, see the README)")
    compile_cmd.add_argument("--allow-inefficient", action="store_true",
                             help="compile a target the verdict calls inefficient through the gather route, whose "
                                  "size grows with T (analyze's cost.fallback gives its law)")
    compile_cmd.add_argument("--residual", type=positive_int, default=None, metavar="D",
                             help="a residual of at most D dimensions: a token program's categorical features "
                                  "superposed, every read certified by a clean-up margin, and every direction "
                                  "with tight lifetimes (a program over vectors: those alone); refused, naming "
                                  "the smallest D that works, when D is too small")
    check_cmd = commands.add_parser("check", help="verify a compiled model against its target")
    check_cmd.add_argument("model", type=Path)
    check_cmd.add_argument("--samples", type=nonnegative_int, default=10_000, help="random inputs (default 10000)")
    check_cmd.add_argument("--eps", type=positive_float, help="the ε to check against (default: the model's)")
    check_cmd.add_argument("--seed", type=nonnegative_int, default=0,
                           help="the seed of the random inputs and of the search (0): the same seed, the same check")
    check_cmd.add_argument("--adversarial", type=nonnegative_int, nargs="?", const=300, default=0, metavar="N",
                           help="then search for larger errors with hypothesis (N examples, default 300)")
    check_cmd.add_argument("--trace", action="store_true",
                           help="name the first residual direction, layer and token where the model leaves its circuit")
    add_device_flag(check_cmd, "the model runs")
    circuit_cmd = commands.add_parser("circuit", help="where each comparison and FFN function of a model lives "
                                      "(TransformerLens hook, residual index, bound)")
    circuit_cmd.add_argument("model", type=Path)
    circuit_cmd.add_argument("--json", action="store_true", help="print the records as JSON")
    circuit_cmd.add_argument("--features", action="store_true",
                             help="the feature dictionary: every feature, what it computes, the layers where it is "
                                  "alive and its direction at each residual hook (superposed ones read by threshold)")
    from .circuit import add_edge_flags

    add_edge_flags(circuit_cmd, nonnegative_int)
    from .sae import add_sae_parser

    add_sae_parser(commands, positive_int, nonnegative_int)
    report_cmd = commands.add_parser("report", help="a self-contained HTML page of a compiled model")
    report_cmd.add_argument("model", type=Path)
    report_cmd.add_argument("-o", "--output", type=Path, help="the page (default: MODEL with .html)")

    from .circuit import add_disguise_parser
    from .export import add_export_parser
    from .from_rasp import add_from_rasp_parser
    from .run import add_run_parser

    add_export_parser(commands)
    add_run_parser(commands)
    add_from_rasp_parser(commands, positive_int)
    add_disguise_parser(commands, positive_int, nonnegative_int)
    from .discover import add_discovery_parsers

    add_discovery_parsers(commands, positive_int, nonnegative_int)
    train_cmd = commands.add_parser("train", help="train a model of the compiled family on the target")
    _training_flags(train_cmd, grid=False)
    train_cmd.add_argument("-o", "--output", type=Path, help="the model file (default: FILE with .trained.safetensors)")
    from .train import add_keep_flags

    add_keep_flags(train_cmd, positive_float, nonnegative_float, positive_int)
    sweep_cmd = commands.add_parser("sweep", help="a grid of train runs, in-process or on Ray, resumable")
    _training_flags(sweep_cmd, grid=True)
    sweep_cmd.add_argument("--seeds", type=positive_int, default=1, help="seeds per configuration (default 1)")
    sweep_cmd.add_argument("--workers", type=positive_int, default=2,
                           help="parallel runs: 1 runs in this process, more start a local Ray (default 2)")
    sweep_cmd.add_argument("--address", type=ray_address,
                           help="join this Ray cluster: auto, HOST:6379 (a head's GCS port) or ray://HOST:10001 "
                                "(Ray Client); refused in seconds when no head answers")
    sweep_cmd.add_argument("--compare-eps", type=positive_float, default=1e-2,
                           help="ε of the compiled model shown for reference (default 1e-2)")
    sweep_cmd.add_argument("--no-batch", dest="batch_runs", action="store_false",
                           help="train runs one after another (default: runs of one shape, seeds, learning rates "
                                "and head budgets of the same layers, train as one stacked model)")
    sweep_cmd.add_argument("--compile", action="store_true",
                           help="torch.compile the stacked training step (pays its compile time first)")
    sweep_cmd.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="the sweep's folder")
    return parser


def _training_flags(command: argparse.ArgumentParser, grid: bool) -> None:
    """The flags of ``train``; in a sweep ``--heads``/``--layers`` repeat and ``--T``, ``--d-model``
    and ``--steps`` take comma lists (grid axes)."""
    counts = comma_list(positive_int) if grid else positive_int
    lengths = comma_list(length_flag) if grid else length_flag
    repeat: dict[str, Any] = {"action": "append"} if grid else {}
    command.add_argument("file", type=Path)
    command.add_argument("--heads", type=head_budget, required=True, help="heads per layer, e.g. 2,2", **repeat)
    command.add_argument("--layers", type=positive_int, help="layers (a single --heads count repeats)", **repeat)
    command.add_argument("--T", dest="length", type=lengths, help="override the program's length T")
    command.add_argument("--d-model", type=counts, default=(32,) if grid else 32, help="residual width (32)")
    command.add_argument("--d-head", type=positive_int, default=8, help="query/key/value width per head (8)")
    command.add_argument("--d-mlp", type=positive_int, default=32, help="FFN hidden units, every layer (32)")
    command.add_argument("--steps", type=counts, default=(1000,) if grid else 1000, help="steps (1000)")
    command.add_argument("--batch", type=positive_int, default=256, help="inputs per step (256)")
    command.add_argument("--lr", type=positive_float, default=1e-3, help="peak learning rate (1e-3)")
    command.add_argument("--weight-decay", type=nonnegative_float, default=1e-2, help="AdamW weight decay (1e-2)")
    command.add_argument("--seed", type=nonnegative_int, default=0, help="the (first) seed (0)")
    command.add_argument("--dist", default="uniform", help="uniform (the declared domain) or normal[:σ] (uniform)")
    command.add_argument("--validation", type=positive_int, default=4096, help="held-out inputs (4096)")
    command.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    command.add_argument("--init", type=Path, metavar="MODEL",
                         help="start from this model (added units read at random and write 0)")


def _elsewhere(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A command whose code lives in ``module`` (relative to this package), imported when it
    runs; a command returning nothing exits 0."""
    def command(arguments: argparse.Namespace) -> int:
        code = getattr(importlib.import_module(module, __package__), name)(arguments)
        return EXIT_OK if code is None else int(code)

    return command


#: each command: (the module under this package that defines it, the function's name)
_COMMAND_FUNCTIONS = {
    "parse": (".program", "command_parse"), "analyze": (".program", "command_analyze"),
    "compile": (".program", "command_compile"), "check": (".check", "command_check"),
    "circuit": (".circuit", "command_circuit"), "disguise": (".circuit", "command_disguise"),
    "discover": (".discover", "command_discover"), "benchmark": (".discover", "command_benchmark"),
    "export": (".export", "command_export"), "run": (".run", "command_run"),
    "from-rasp": (".from_rasp", "command_from_rasp"), "report": (".report", "command_report"),
    "train": (".train", "command_train"), "sweep": (".train", "command_sweep"), "sae": (".sae", "command_sae"),
}
COMMANDS = {name: _elsewhere(module, function) for name, (module, function) in _COMMAND_FUNCTIONS.items()}


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
            return COMMANDS[command](arguments)
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
