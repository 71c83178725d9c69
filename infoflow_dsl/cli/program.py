"""``infoflowc parse``, ``analyze`` and ``compile``: the commands that read a program.

``parse`` prints the checked program with its macros expanded; ``analyze`` prints (or writes as
JSON, a plot or a page) :func:`~infoflow_dsl.pipeline.analyzing.analyze`'s report; ``compile`` runs
:func:`~infoflow_dsl.pipeline.compiling.compile_program` and writes the model only when its measured
error is within ε (else exit 3, nothing written).

Start-up: ``parse`` and ``analyze`` import neither torch nor matplotlib (analyze imports
matplotlib only for ``--plot``, torch only to compile an inefficient target's gather route,
whose parameters it reports).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..files import check_writable, write_atomically
from .common import (
    EXIT_ABOVE_EPS,
    EXIT_OK,
    Command,
    add_device_flag,
    add_dtype_flag,
    add_eps_flag,
    add_json_flag,
    add_length_flag,
    add_output_flag,
    add_program_argument,
    add_samples_flag,
    head_budget,
    nonnegative_int,
    positive_float,
    positive_int,
    read_program_text,
)

if TYPE_CHECKING:
    from ..transformer.card import Superposition


def command_parse(arguments: argparse.Namespace) -> int:
    from ..language.load import parse_program
    from ..language.printer import print_program

    source = read_program_text(arguments.file)
    program = parse_program(source, str(arguments.file), length=arguments.length)
    sys.stdout.write(print_program(program.expanded))
    return EXIT_OK


def command_analyze(arguments: argparse.Namespace) -> int:
    import io

    from ..language.load import parse_program
    from ..pipeline.analyzing import analyze

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
        from ..page import analysis_page

        write_atomically(arguments.html, analysis_page(report).encode("utf-8"))
    sys.stdout.write(report.to_json() if arguments.json else report.to_text())
    return EXIT_OK


def command_compile(arguments: argparse.Namespace) -> int:
    from .. import progress
    from ..errors import CompileError, UncertifiedModel
    from ..language.load import parse_program
    from ..pipeline.compiling import compile_program
    from ..pipeline.devices import resolve_device
    from ..transformer.io import model_to_bytes

    source = read_program_text(arguments.file)  # a model file given for the program is said so, first
    output = arguments.output or arguments.file.with_suffix(".safetensors")
    if arguments.output is None and output.suffix == arguments.file.suffix:
        raise UsageError(f"{arguments.file}: the default output (the input's name with .safetensors) is the input "
                         f"itself; give the model's name with -o")
    check_writable(output, arguments.file)  # flags and paths first: nothing is compiled for an unwritable file
    try:
        device = resolve_device(arguments.device)
    except CompileError as error:
        raise UsageError(f"infoflowc compile: {error}") from None
    program = parse_program(source, str(arguments.file), length=arguments.length, margin=arguments.margin)
    refusal: UncertifiedModel | None = None
    try:
        with progress.shown("compile"):  # on a terminal: the stage that runs and how far it is
            model = compile_program(program, arguments.eps, arguments.dtype, device, arguments.samples,
                                    ffn=arguments.ffn, allow_inefficient=arguments.allow_inefficient,
                                    residual=arguments.residual)
    except UncertifiedModel as error:  # what was built is shown, then refused: exit 3, nothing written
        refusal, model = error, error.model  # type: ignore[assignment]
    except CompileError as error:
        raise UsageError(f"{arguments.file}: cannot compile: {error}") from None
    card = model.card
    measured = card.measured_error
    print(f"{arguments.file}: compiled within ε = {arguments.eps:g} ({card.dtype}, T = {card.T})")
    if card.dtype_rule is not None:
        print(f"  dtype            {card.dtype_rule}")
    print(f"  layers           {len(card.layers)}")
    print(f"  heads per layer  {card.heads_per_layer}")
    print(f"  d_model          {card.d_model}")
    print(f"  d_mlp            {model.d_mlp} (embedding {model.d_mlp_embedding})")
    print(f"  parameters       {model.parameter_count()} total, {model.nonzero_parameter_count()} nonzero")
    print(f"  a-priori bound   {card.a_priori_bound:.3g}")
    _print_lengths(model)
    if card.superposition is not None:
        _print_superposition(card.superposition)
    _print_exactness(program)
    if measured is not None:
        from ..measure.measurement import describe_measurement

        budget = " (the default budget; --samples N for more)" if arguments.samples is None else ""
        print(f"  measured error   {measured.max_error:.3g} ({describe_measurement(measured)}){budget}")
    if refusal is not None:
        print(f"{refusal}; nothing written", file=sys.stderr)
        return EXIT_ABOVE_EPS
    write_atomically(output, model_to_bytes(model, dense=arguments.dense))
    print(f"  wrote            {output}")
    return EXIT_OK


def _print_lengths(model: Any) -> None:
    """The input lengths the model takes, where that is not every length 1..T: ``length 16 only``
    (a sum's scale, or a gather-route model that reads every slot), ``lengths 4..16`` (x(4))."""
    shortest = model.T if model.exact_length_only else model.min_length
    if shortest > 1:
        lengths = f"length {model.T} only" if shortest == model.T else f"lengths {shortest}..{model.T}"
        print(f"  inputs           {lengths}")


def _print_superposition(record: Superposition) -> None:
    """compile --residual's certificate: F, D, F/D and the largest interference against the margin."""
    worst = record.worst
    where = "" if worst is None else f" ({worst['kind']} of {worst['feature']} at stage {worst['stage']})"
    from ..compiler.superposition.dictionary import alive_text

    print(f"  superposition    {alive_text(record)} in D = {record.d_model} "
          f"dimensions: F/D = {record.ratio:.3g}; {record.superposed} categorical features on "
          f"{record.storage} storage dimensions, {record.clean_slots} clean slots")
    packed = record.packed
    if packed is not None:  # numbers sharing a direction, read by step tables (compiler/superposition/packed.py)
        largest = max(r["error"] for p in packed["packs"] for r in p["reads"])
        print(f"  packed numbers   {sum(len(p['members']) for p in packed['packs'])} numbers in "
              f"{len(packed['packs'])} directions read by step tables (+{packed['units_added']} units for "
              f"{packed['units_replaced']}); largest error of v {largest:.3g} against a quarter of its gap 0.25")
    readout = record.readout
    if readout is not None:  # the answer decoded from one number (compiler/superposition/readout.py)
        print(f"  argmax readout   the answer from n = {readout['host']} by {len(readout['lines'])} lines 2j·n − j² "
              f"(lead ≥ 1/2 while n is within 1/4; drift {readout['drift']:.3g})")
    print(f"  interference     largest {record.max_bound:.3g} against the margin {record.margin:g}{where}")


def _print_exactness(program: Any) -> None:
    """A token program's comparisons, each with the smallest gap its step is narrower than, each
    as the program writes it (a ``let``'s body with the let's own names, not the names of the
    place it was inlined at) and its line."""
    from ..analysis.finite import comparison_gaps
    from ..language.syntax import text_at

    for pair in comparison_gaps(program):
        gap = "not derived (the margin stands for it)" if pair.gap is None else f"smallest gap {pair.gap}"
        written = text_at(program.source, pair.span)
        print(f"  exact            {f'{written} (line {pair.span.line})' if written else pair.text}: {gap}")


def _parse_arguments(parser: argparse.ArgumentParser) -> None:
    """``parse FILE [--T N]``."""
    add_program_argument(parser)
    add_length_flag(parser)


def _analyze_arguments(parser: argparse.ArgumentParser) -> None:
    """``analyze FILE [--T N] [--heads H] [--json] [--plot PNG] [--html PAGE]``."""
    add_program_argument(parser)
    add_length_flag(parser)
    parser.add_argument("--heads", type=head_budget, help="a head budget per layer, e.g. 2,2")
    add_json_flag(parser, "print the report as JSON")
    parser.add_argument("--plot", type=Path, metavar="OUT.png", help="draw tokens × layers with the flow")
    parser.add_argument("--html", type=Path, metavar="OUT.html", help="write the analysis as an HTML page")


def _compile_arguments(parser: argparse.ArgumentParser) -> None:
    """``compile FILE [--eps E] [--T N] [--margin M] [--dtype ..] [--ffn ..] [-o OUT] ...``."""
    add_program_argument(parser)
    add_eps_flag(parser, "the error bound ε (default 1e-3)", default=1e-3)
    add_length_flag(parser)
    parser.add_argument("--margin", type=positive_float, help="override the program's margin δ")
    add_dtype_flag(parser, "the weights' floating type (default: float32 where its bound certifies ε, else "
                           "float64, said in the output and the config)")
    add_device_flag(parser)
    parser.add_argument("--ffn", choices=["wide", "deep", "auto"], default=None,
                        help="squares by one wide hidden layer (the default), by tent maps over extra "
                             "attention-free layers (deep), or per function the one with fewer parameters "
                             "(auto, the default with --allow-inefficient)")
    add_samples_flag(parser, None, "random inputs to measure the error on (default: as many as fit a few seconds "
                                   "of work, at least 256 and at most 10000)", nonnegative_int)
    add_output_flag(parser, "the model file (default: FILE with .safetensors)")
    parser.add_argument("--dense", action="store_true",
                        help="store every tensor dense (default: tensors under 10%% nonzero in the sparse "
                             "layout, see the README)")
    parser.add_argument("--allow-inefficient", action="store_true",
                        help="compile a target the verdict calls inefficient through the gather route, whose "
                             "size grows with T (analyze's cost.fallback gives its law)")
    parser.add_argument("--residual", type=positive_int, default=None, metavar="D",
                        help="a residual of at most D dimensions: a token program's categorical features "
                             "superposed, every read certified by a clean-up margin, and every direction "
                             "with tight lifetimes (a program over vectors: those alone); refused, naming "
                             "the smallest D that works, when D is too small")


PARSE = Command("parse", "check a program and print it with macros expanded", _parse_arguments, command_parse)
ANALYZE = Command("analyze", "how hard the target is for a transformer, and why", _analyze_arguments,
                  command_analyze)
COMPILE = Command("compile", "explicit transformer weights within ε, as .safetensors", _compile_arguments,
                  command_compile)
