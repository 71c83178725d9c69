"""``infoflowc``: the command line.

Exit codes (DESIGN.md): 0 success; 2 the user's fault (a bad program, a bad flag, an
unreadable file), with a message on stderr and no traceback; 3 a compiled model measured above
ε; 1 only for a bug; 141 (128 + SIGPIPE, what a shell reports for ``yes | head``) when stdout
was closed before everything was written (``infoflowc ... | head``), quietly.

A flag's value is checked here, against the same limits as the checker's (``--T`` at most
``check.MAX_LENGTH``), and reported as the flag's fault before any work.

Start-up: this module and ``infoflow_dsl`` import no torch; each command imports what it needs.
``--help``, ``parse`` and ``analyze`` import neither torch nor matplotlib (analyze imports
matplotlib only for ``--plot``, torch only to compile an inefficient target's gather route,
whose parameters it reports).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ProgramError, UsageError
from .console import EXIT_INTERRUPTED
from .paths import check_writable, read_program_text, write_atomically

EXIT_OK, EXIT_BUG, EXIT_USER, EXIT_ABOVE_EPS = 0, 1, 2, 3
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


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


_positive_int = _number(int, "a whole number", 1, False, "a whole number ≥ 1")
_nonnegative_int = _number(int, "a whole number", 0, False, "a whole number ≥ 0")
_positive_float = _number(float, "a number", 0.0, True, "a positive number")
_nonnegative_float = _number(float, "a number", 0.0, False, "a number ≥ 0")


def _length(text: str) -> int:
    """``--T``: a whole number from 1 to the checker's MAX_LENGTH (a bad value is the flag's
    fault, reported before the program is read)."""
    from ..language.declarations import MAX_LENGTH

    length = _positive_int(text)
    if length > MAX_LENGTH:
        raise argparse.ArgumentTypeError(f"T = {length} is too large (at most {MAX_LENGTH})")
    return length


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The command line's parser, built once a process: parsing leaves it unchanged (list
    defaults are tuples, and argparse copies ``--merge``'s before appending), and building it
    (every subcommand's arguments) took 14 ms, which every in-process :func:`run` paid (the
    fuzz tests' 1,400 runs spent 40% of their time there)."""
    parser = _Parser(prog="infoflowc", description="The infoflow compiler: .iflow targets to transformer weights.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parse_cmd = commands.add_parser("parse", help="check a program and print it with macros expanded")
    parse_cmd.add_argument("file", type=Path)
    parse_cmd.add_argument("--T", dest="length", type=_length, help="override the program's length T")
    analyze_cmd = commands.add_parser("analyze", help="how hard the target is for a transformer, and why")
    analyze_cmd.add_argument("file", type=Path)
    analyze_cmd.add_argument("--T", dest="length", type=_length, help="override the program's length T")
    analyze_cmd.add_argument("--heads", type=_head_budget, help="a head budget per layer, e.g. 2,2")
    analyze_cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    analyze_cmd.add_argument("--plot", type=Path, metavar="OUT.png", help="draw tokens × layers with the flow")
    analyze_cmd.add_argument("--html", type=Path, metavar="OUT.html", help="write the analysis as an HTML page")
    compile_cmd = commands.add_parser("compile", help="explicit transformer weights within ε, as .safetensors")
    compile_cmd.add_argument("file", type=Path)
    compile_cmd.add_argument("--eps", type=_positive_float, default=1e-3, help="the error bound ε (default 1e-3)")
    compile_cmd.add_argument("--T", dest="length", type=_length, help="override the program's length T")
    compile_cmd.add_argument("--margin", type=_positive_float, help="override the program's margin δ")
    compile_cmd.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                             help="the weights' floating type (float32; float64 reaches smaller ε)")
    compile_cmd.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    compile_cmd.add_argument("--ffn", choices=["wide", "deep", "auto"], default=None,
                             help="squares by one wide hidden layer (the default), by tent maps over extra "
                                  "attention-free layers (deep), or per function the one with fewer parameters "
                                  "(auto, the default with --allow-inefficient)")
    compile_cmd.add_argument("--samples", type=_nonnegative_int, default=None,
                             help="random inputs to measure the error on (default: as many as fit a few seconds "
                                  "of work, at least 256 and at most 10000)")
    compile_cmd.add_argument("-o", "--output", type=Path, help="the model file (default: FILE with .safetensors)")
    compile_cmd.add_argument("--dense", action="store_true",
                             help="store every tensor dense (default: tensors under 10%% nonzero in the sparse "
                                  "layout, see the README)")
    compile_cmd.add_argument("--allow-inefficient", action="store_true",
                             help="compile a target the verdict calls inefficient through the gather route, whose "
                                  "size grows with T (analyze's cost.fallback gives its law)")
    check_cmd = commands.add_parser("check", help="verify a compiled model against its target")
    check_cmd.add_argument("model", type=Path)
    check_cmd.add_argument("--samples", type=_nonnegative_int, default=10_000, help="random inputs (default 10000)")
    check_cmd.add_argument("--eps", type=_positive_float, help="the ε to check against (default: the model's)")
    check_cmd.add_argument("--seed", type=_nonnegative_int, default=0,
                           help="the seed of the random inputs and of the search (0): the same seed, the same check")
    check_cmd.add_argument("--adversarial", type=_nonnegative_int, nargs="?", const=300, default=0, metavar="N",
                           help="then search for larger errors with hypothesis (N examples, default 300)")
    check_cmd.add_argument("--trace", action="store_true",
                           help="name the first residual direction, layer and token where the model leaves its circuit")
    circuit_cmd = commands.add_parser("circuit", help="where each comparison and FFN function of a model lives "
                                      "(TransformerLens hook, residual index, bound)")
    circuit_cmd.add_argument("model", type=Path)
    circuit_cmd.add_argument("--json", action="store_true", help="print the records as JSON")
    from .circuits.command import add_edge_flags

    add_edge_flags(circuit_cmd, _nonnegative_int)
    report_cmd = commands.add_parser("report", help="a self-contained HTML page of a compiled model")
    report_cmd.add_argument("model", type=Path)
    report_cmd.add_argument("-o", "--output", type=Path, help="the page (default: MODEL with .html)")

    from .circuits.command import add_disguise_parser
    from .export.command import add_export_parser
    from .from_rasp import add_from_rasp_parser
    from .run import add_run_parser

    add_export_parser(commands)
    add_run_parser(commands)
    add_from_rasp_parser(commands, _positive_int)
    add_disguise_parser(commands, _positive_int, _nonnegative_int)
    from .discovery.command import add_discovery_parsers

    add_discovery_parsers(commands, _positive_int, _nonnegative_int)
    train_cmd = commands.add_parser("train", help="train a model of the compiled family on the target")
    _training_flags(train_cmd, grid=False)
    train_cmd.add_argument("-o", "--output", type=Path, help="the model file (default: FILE with .trained.safetensors)")
    sweep_cmd = commands.add_parser("sweep", help="a grid of train runs, in-process or on Ray, resumable")
    _training_flags(sweep_cmd, grid=True)
    sweep_cmd.add_argument("--seeds", type=_positive_int, default=1, help="seeds per configuration (default 1)")
    sweep_cmd.add_argument("--workers", type=_positive_int, default=2,
                           help="parallel runs: 1 runs in this process, more start a local Ray (default 2)")
    sweep_cmd.add_argument("--address", type=_ray_address,
                           help="join this Ray cluster: auto, HOST:6379 (a head's GCS port) or ray://HOST:10001 "
                                "(Ray Client); refused in seconds when no head answers")
    sweep_cmd.add_argument("--compare-eps", type=_positive_float, default=1e-2,
                           help="ε of the compiled model shown for reference (default 1e-2)")
    sweep_cmd.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="the sweep's folder")
    return parser


def _training_flags(command: argparse.ArgumentParser, grid: bool) -> None:
    """The flags of ``train``; in a sweep ``--heads``/``--layers`` repeat and ``--T``, ``--d-model``
    and ``--steps`` take comma lists (grid axes)."""
    counts = _comma_list(_positive_int) if grid else _positive_int
    lengths = _comma_list(_length) if grid else _length
    repeat: dict[str, Any] = {"action": "append"} if grid else {}
    command.add_argument("file", type=Path)
    command.add_argument("--heads", type=_head_budget, required=True, help="heads per layer, e.g. 2,2", **repeat)
    command.add_argument("--layers", type=_positive_int, help="layers (a single --heads count repeats)", **repeat)
    command.add_argument("--T", dest="length", type=lengths, help="override the program's length T")
    command.add_argument("--d-model", type=counts, default=(32,) if grid else 32, help="residual width (32)")
    command.add_argument("--d-head", type=_positive_int, default=8, help="query/key/value width per head (8)")
    command.add_argument("--d-mlp", type=_positive_int, default=32, help="FFN hidden units, every layer (32)")
    command.add_argument("--steps", type=counts, default=(1000,) if grid else 1000, help="steps (1000)")
    command.add_argument("--batch", type=_positive_int, default=256, help="inputs per step (256)")
    command.add_argument("--lr", type=_positive_float, default=1e-3, help="peak learning rate (1e-3)")
    command.add_argument("--weight-decay", type=_nonnegative_float, default=1e-2, help="AdamW weight decay (1e-2)")
    command.add_argument("--seed", type=_nonnegative_int, default=0, help="the (first) seed (0)")
    command.add_argument("--dist", default="uniform", help="uniform (the declared domain) or normal[:σ] (uniform)")
    command.add_argument("--validation", type=_positive_int, default=4096, help="held-out inputs (4096)")
    command.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    command.add_argument("--init", type=Path, metavar="MODEL",
                         help="start from this model (added units read at random and write 0)")


def _comma_list(item: Callable[[str], int]) -> Callable[[str], list[int]]:
    """An argparse type for a grid axis: ``16,32`` -> [16, 32], each part read by ``item``."""

    def parse(text: str) -> list[int]:
        return [item(part) for part in text.split(",")]

    return parse


def _head_budget(text: str) -> tuple[int, ...]:
    try:
        budget = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected heads per layer such as 2,2, got {text!r}") from None
    if not budget or any(h < 0 for h in budget) or sum(budget) == 0:
        raise argparse.ArgumentTypeError(f"expected heads per layer (≥ 0, not all 0), got {text!r}")
    return budget


def _ray_address(text: str) -> str:
    """A Ray address of a form ``ray.init`` takes (:mod:`.cluster`), checked as a flag."""
    from ..errors import SweepError
    from .cluster import address_endpoint

    try:
        address_endpoint(text)
    except SweepError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def command_parse(arguments: argparse.Namespace) -> int:
    from .. import parse_program
    from ..language.printer import print_program

    source = read_program_text(arguments.file)
    program = parse_program(source, str(arguments.file), length=arguments.length)
    sys.stdout.write(print_program(program.expanded))
    return EXIT_OK


def command_analyze(arguments: argparse.Namespace) -> int:
    import io

    from .. import parse_program
    from ..plan import analyze

    for output in (arguments.plot, arguments.html):
        if output is not None:
            check_writable(output, arguments.file)
    source = read_program_text(arguments.file)
    program = parse_program(source, str(arguments.file), length=arguments.length)
    report = analyze(program, arguments.heads)
    if arguments.plot is not None:
        from ..analysis.plot import plot_report

        buffer = io.BytesIO()
        plot_report(report, buffer)
        write_atomically(arguments.plot, buffer.getvalue())
    if arguments.html is not None:
        from .report import analysis_page

        write_atomically(arguments.html, analysis_page(report).encode("utf-8"))
    sys.stdout.write(report.to_json() if arguments.json else report.to_text())
    return EXIT_OK


def command_compile(arguments: argparse.Namespace) -> int:
    from .. import parse_program, progress
    from ..errors import CompileError
    from ..pipeline import compile_program, resolve_device
    from ..transformer.io import model_to_bytes

    output = arguments.output or arguments.file.with_suffix(".safetensors")
    check_writable(output, arguments.file)  # flags and paths first: nothing is compiled for an unwritable file
    try:
        device = resolve_device(arguments.device)
    except CompileError as error:
        raise UsageError(f"infoflowc compile: {error}") from None
    source = read_program_text(arguments.file)
    program = parse_program(source, str(arguments.file), length=arguments.length, margin=arguments.margin)
    try:
        with progress.shown("compile"):  # on a terminal: the stage that runs and how far it is
            model = compile_program(program, arguments.eps, arguments.dtype, device, arguments.samples,
                                    ffn=arguments.ffn, allow_inefficient=arguments.allow_inefficient)
    except CompileError as error:
        raise UsageError(f"{arguments.file}: cannot compile: {error}") from None
    config = model.config
    measured = config["measured_error"]
    print(f"{arguments.file}: compiled within ε = {arguments.eps:g} ({config['dtype']}, T = {config['T']})")
    print(f"  layers           {len(config['layers'])}")
    print(f"  heads per layer  {[len(layer['heads']) for layer in config['layers']]}")
    print(f"  d_model          {config['d_model']}")
    print(f"  d_mlp            {model.d_mlp} (embedding {model.d_mlp_embedding})")
    print(f"  parameters       {model.parameter_count()} total, {model.nonzero_parameter_count()} nonzero")
    print(f"  a-priori bound   {config['a_priori_bound']:.3g}")
    _print_exactness(program)
    if measured is not None:
        from ..reference.measure import describe_measurement, measurement_passes

        budget = " (the default budget; --samples N for more)" if arguments.samples is None else ""
        print(f"  measured error   {measured['max_error']:.3g} ({describe_measurement(measured)}){budget}")
        if not measurement_passes(measured, arguments.eps):
            print(f"{arguments.file}: the measured error exceeds ε (a compiler bug); nothing written", file=sys.stderr)
            return EXIT_ABOVE_EPS
    write_atomically(output, model_to_bytes(model, dense=arguments.dense))
    print(f"  wrote            {output}")
    return EXIT_OK


def _print_exactness(program: Any) -> None:
    """A token program's comparisons, each with the smallest gap its step is narrower than."""
    from ..analysis.finite import comparison_gaps

    for pair in comparison_gaps(program):
        gap = "not derived (the margin stands for it)" if pair.gap is None else f"smallest gap {pair.gap}"
        print(f"  exact            {pair.text}: {gap}")


def command_check(arguments: argparse.Namespace) -> int:
    from ..pipeline import StoredProgramError, program_of
    from ..reference.verify import check_model, format_input, trace
    from .export.command import load_checked

    model = load_checked(arguments.model)  # a model file, or an exported directory
    try:
        program = program_of(model)
    except StoredProgramError as error:
        raise UsageError(f"{arguments.model}: {error}") from None
    if program.over_tokens:
        from .check_tokens import command_check_tokens

        return command_check_tokens(arguments, model, program)
    trained = "trained" in model.config
    if trained and arguments.trace:
        raise UsageError(f"{arguments.model}: --trace needs a compiled model, this one was trained")
    if arguments.trace and arguments.model.is_dir():
        raise UsageError(f"{arguments.model}: --trace needs a compiled model file, not an exported directory")
    eps = float("inf") if trained and arguments.eps is None else arguments.eps  # a trained model has no ε
    result = check_model(model, program, arguments.samples, eps, arguments.seed, arguments.adversarial)
    excluded = f", {result.excluded_by_margin} under the margin left out" if result.excluded_by_margin else ""
    bound = "none (a trained model)" if trained else f"{model.config.get('a_priori_bound', float('nan')):.3g}"
    shown_eps = "none" if result.eps == float("inf") else f"{result.eps:g}"
    print(f"{arguments.model}: {program.path}, T = {program.length}, ε = {shown_eps}, a-priori bound {bound}")
    if trained:
        from ..reference.measure import model_inputs
        from .train import model_nmse

        inputs = model_inputs(program, max(arguments.samples, 1), arguments.seed, corners=0)
        print(f"  NMSE             {model_nmse(model, program, inputs):.3g} (on {inputs.shape[0]} random inputs "
              f"from the declared domain; trained to {model.config['trained'].get('final_nmse')} on "
              f"{model.config['trained'].get('dist')})")
    print(f"  evaluated        {result.evaluated} inputs (random, corners, near ties{excluded})")
    broken = "" if math.isfinite(result.worst_error) else " (the model's output is NaN or infinite there)"
    print(f"  worst error      {result.random_worst:.3g}{broken if not math.isfinite(result.random_worst) else ''}")
    if result.adversarial_worst is not None:
        print(f"  adversarial      {result.adversarial_worst:.3g} after {result.adversarial_examples} examples")
    at = f" at position {result.worst_position}" if result.worst_position is not None else ""
    print(f"  worst input      (error {result.worst_error:.3g}{at}){broken}")
    print(format_input(result.worst_input))
    verdict = "within ε" if result.within else "ABOVE ε"
    if trained and arguments.eps is None:
        verdict = "measured only (a trained model has no ε; pass --eps to test one)"
    print(f"  verdict          {verdict}")
    if arguments.trace:
        worst = result.worst_input[None]
        found = trace(model, program, worst)
        if found is None:
            from ..reference.measure import model_inputs

            found = trace(model, program, model_inputs(program, 64, arguments.seed + 11))
        print(f"  trace            {found.describe() if found else 'the model follows its circuit at every layer'}")
    return EXIT_OK if result.within else EXIT_ABOVE_EPS


def with_compiled_model(path: Path, use: Callable[[Any], Any], verb: str) -> tuple[Any, Any]:
    """(the compiled model in ``path``, ``use(model)``); a file that is not a model, a trained
    model (no circuit to ``verb``) or a stored program that no longer checks is a UsageError."""
    from ..errors import ModelFileError
    from ..pipeline import StoredProgramError
    from ..transformer.io import load

    try:
        model = load(path, device="cpu")
        if "trained" in model.config:
            raise UsageError(f"{path}: a trained model has no circuit to {verb} (only compiled ones do)")
        return model, use(model)
    except ModelFileError as error:
        raise UsageError(str(error)) from None
    except StoredProgramError as error:
        raise UsageError(f"{path}: {error}") from None


def command_circuit(arguments: argparse.Namespace) -> int:
    from ..reference.circuit_map import circuit

    if arguments.edges or arguments.truth:
        from .circuits.command import command_edges

        with_compiled_model(arguments.model, lambda model: command_edges(arguments, model), "map")
        return EXIT_OK
    model, sites = with_compiled_model(arguments.model, circuit, "map")
    if arguments.json:
        print(json.dumps({"model": str(arguments.model), "sites": [s.to_json() for s in sites]}, indent=1))
        return EXIT_OK
    labels = model.config["residual_labels"]
    print(f"{arguments.model}: {len(sites)} sites (value = Σ weight·h[index] + constant at the hook's rows)")
    for s in sites:
        reads = " ".join(f"{w:+.4g}·{labels[i]}[{i}]" for i, w in zip(s.index, s.value.weights, strict=True))
        head = f"  head {s.head[0]}.hook_z[:, :, {s.head[1]}]" if s.head else ""
        print(f"  {s.name:<10} {s.site:<7} {s.hook:<26} bound {s.bound:.3g}  {s.computes}")
        print(f"  {'':<10} = {reads or '0'}{f' {s.value.constant:+.4g}' if s.value.constant else ''}{head}")
    return EXIT_OK


def command_disguise(arguments: argparse.Namespace) -> int:
    from .circuits.command import command_disguise as write_disguised

    with_compiled_model(arguments.model, lambda model: write_disguised(arguments, model), "disguise")
    return EXIT_OK


def command_discover(arguments: argparse.Namespace) -> int:
    from .discovery.command import command_discover as run_discover

    with_compiled_model(arguments.model, lambda model: run_discover(arguments, model), "discover")
    return EXIT_OK


def _elsewhere(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A command whose code lives in ``module`` (relative to this package), imported when it
    runs; a command returning nothing exits 0."""
    def command(arguments: argparse.Namespace) -> int:
        code = getattr(importlib.import_module(module, __package__), name)(arguments)
        return EXIT_OK if code is None else int(code)

    return command


COMMANDS = {"parse": command_parse, "analyze": command_analyze, "compile": command_compile, "check": command_check,
            "circuit": command_circuit, "disguise": command_disguise, "discover": command_discover,
            "export": _elsewhere(".export.command", "command_export"), "run": _elsewhere(".run", "command_run"),
            "from-rasp": _elsewhere(".from_rasp", "command_from_rasp"),
            "report": _elsewhere(".report.command", "command_report"),
            "train": _elsewhere(".training_commands", "command_train"),
            "sweep": _elsewhere(".training_commands", "command_sweep"),
            "benchmark": _elsewhere(".discovery.command", "command_benchmark")}


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (never raises for the user's faults). What it
    prints shows control characters from files as escapes, and cuts an error message of more
    than 2,000 characters (:mod:`.terminal`)."""
    from .terminal import shortened, visible_output

    with visible_output():
        try:
            arguments = build_parser().parse_args(argv)
            return COMMANDS[arguments.command](arguments)
        except ProgramError as error:
            print(error.render(), file=sys.stderr)
            return EXIT_USER
        except UsageError as error:
            print(shortened(str(error)), file=sys.stderr)
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
