"""``infoflowc train`` and ``infoflowc sweep``: the shared training flags as TrainSettings, a bad
combination a UsageError (exit 2) before any run, the trained model written atomically, the
sweep's runs through Ray (``training.sweep``)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..files import check_writable, check_writable_folder, write_atomically
from .common import (
    EXIT_ABOVE_EPS,
    EXIT_OK,
    Command,
    add_device_flag,
    add_length_flag,
    add_output_flag,
    add_program_argument,
    add_samples_flag,
    add_seed_flag,
    add_workers_flag,
    comma_list,
    head_budget,
    length_flag,
    nonnegative_float,
    positive_float,
    positive_int,
    ray_address,
    read_program_text,
    resolved_device,
)


def _training_program(arguments: argparse.Namespace, length: int | None) -> Any:
    from ..language.load import parse_program

    return parse_program(read_program_text(arguments.file), str(arguments.file), length=length)


def _training_settings(arguments: argparse.Namespace, heads: tuple[int, ...], layers: int | None) -> Any:
    """TrainSettings from the shared flags; a bad combination is a UsageError."""
    from ..training.train import TrainError, TrainSettings, head_budget, parse_distribution

    try:
        return TrainSettings(heads=head_budget(heads, layers), d_head=arguments.d_head, d_mlp=arguments.d_mlp,
                             batch=arguments.batch, lr=arguments.lr, weight_decay=arguments.weight_decay,
                             seed=arguments.seed, dist=parse_distribution(arguments.dist),
                             validation=arguments.validation, device=str(resolved_device(arguments.device)),
                             init=str(arguments.init) if arguments.init else None)
    except TrainError as error:
        raise UsageError(f"infoflowc {arguments.command}: {error}") from None


def _init_model(arguments: argparse.Namespace) -> Any:
    from ..errors import ModelFileError
    from ..transformer.io import load

    if arguments.init is None:
        return None
    try:
        return load(arguments.init, device="cpu")
    except ModelFileError as error:
        raise UsageError(f"--init: {error}") from None


def command_train(arguments: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..training.train import TrainError, train
    from ..transformer.io import model_to_bytes

    program = _training_program(arguments, arguments.length)
    settings = _training_settings(arguments, arguments.heads, arguments.layers)
    settings = replace(settings, d_model=arguments.d_model, steps=arguments.steps)
    output = arguments.output or arguments.file.with_suffix(".trained.safetensors")
    check_writable(output, arguments.file)
    if arguments.keep_circuit:
        return train_keeping(arguments, program, settings, output)
    try:
        result = train(program, settings, _init_model(arguments))
    except TrainError as error:
        raise UsageError(f"infoflowc train: {error}") from None
    print(f"{arguments.file}: trained {settings.steps} steps (T = {program.length}, heads {list(settings.heads)}, "
          f"d_model {settings.d_model}, inputs {settings.dist})")
    print(f"  parameters       {result.parameters}")
    print(f"  validation NMSE  {result.final_nmse:.3g} at the last step, best {result.best_nmse:.3g} at step "
          f"{result.best_step} (on {settings.validation} held-out inputs)")
    print(f"  time             {result.seconds:.1f} s")
    write_atomically(output, model_to_bytes(result.model))
    print(f"  wrote            {output}")
    return EXIT_OK


def command_sweep(arguments: argparse.Namespace) -> int:
    from functools import cache

    from ..training import sweep
    from ..training.train import TrainError

    check_writable_folder(arguments.output)
    base = _training_settings(arguments, arguments.heads[0], None)
    source = read_program_text(arguments.file)
    program_at = cache(lambda length: _training_program(arguments, length))
    lengths = tuple(arguments.length or [program_at(None).length])
    for length in lengths:
        program_at(length)  # a bad program or T fails here, before any run
    grid = sweep.Grid(tuple(arguments.heads), tuple(arguments.layers or [None]), lengths,
                      tuple(arguments.d_model), tuple(arguments.steps), arguments.seeds, base)
    init = arguments.init.read_bytes() if _init_model(arguments) is not None else None
    try:
        runs = sweep.expand(grid, str(arguments.file), source, init)
        folder = arguments.output
        rows = sweep.execute(runs, folder, arguments.workers, arguments.address,
                             on_finished=lambda row: print(f"  {row['run']}: NMSE best {row['best_nmse']}, "
                                                                 f"last {row['final_nmse']}", flush=True),
                             batch=arguments.batch_runs, compile=arguments.compile)
        configs = sweep.finish(folder, arguments.file.name, grid, runs, rows, program_at, arguments.compare_eps)
    except (TrainError, sweep.SweepError) as error:
        raise UsageError(f"infoflowc sweep: {error}") from None
    except OSError as error:  # a write in the folder failed mid-sweep (a full disk): the rows so far are kept
        raise UsageError(f"{arguments.output}: cannot write: {error.strerror or error}") from None
    print(f"{arguments.file}: {len(rows)} of {len(runs)} runs finished; best NMSE per configuration:")
    for c in configs:
        print(f"  heads {c.heads:<8} T {c.length:<5} d_model {c.d_model:<5} steps {c.steps:<7} "
              f"{c.best:.3g}  ({c.verdict})")
    print(f"  wrote            {folder / 'results.csv'}, {folder / 'summary.md'}, {folder / 'nmse.png'}")
    return EXIT_OK


#: ``train --keep-circuit``'s default (noise, learning rate) pairs, rebalanced or not: the
#: default, then a tenth of both
DEFAULT_ADMISSION = {True: [(1e-3, 1e-5), (1e-4, 1e-6)], False: [(1e-4, 1e-5), (1e-5, 1e-6)]}


def admission_schedule(noise: float | None, lr: float | None, rebalance: bool) -> list[tuple[float, float]]:
    """The (noise, learning rate) pairs ``train --keep-circuit`` tries in turn, the first model the
    certification admits kept: :data:`DEFAULT_ADMISSION` when neither is given (the corpus's
    trained tier does the same: the certification, not the settings, decides what is admitted),
    else the user's pair alone, the other one at its default."""
    default = DEFAULT_ADMISSION[rebalance]
    if noise is None and lr is None:
        return list(default)
    return [(noise if noise is not None else default[0][0], lr if lr is not None else default[0][1])]


def _print_try(arguments: argparse.Namespace, steps: int, attempt: Any, following: tuple[float, float] | None) -> None:
    """One try of the admission schedule: its run, its certification, and what comes next if refused."""
    result, certification = attempt.result, attempt.certification
    losses = ", ".join(f"{name} {value:.3g}" for name, value in result.losses.items())
    print(f"{arguments.file}: trained {steps} steps from {arguments.init} keeping its circuit "
          f"({len(result.graph.edges)} edges) at noise {attempt.noise:g}, learning rate {attempt.lr:g}; last losses: "
          f"{losses}; {result.seconds:.1f} s")
    _print_certification(certification)
    if certification.holds:
        return
    for line in certification.failures():
        print(f"  refused: {line}", file=sys.stderr)
    if following is not None:
        print(f"  refused at noise {attempt.noise:g}, learning rate {attempt.lr:g}: training again at "
              f"{following[0]:g}, {following[1]:g}")


def _print_certification(certification: Any) -> None:
    print(f"  function         {certification.function}")
    for ablation, truth in certification.truths.items():
        print(f"  {ablation:<16} {len(truth.necessary)} of {len(truth.edges)} pairs needed on {truth.inputs} inputs; "
              f"every pair outside the graph ablated at once: error {certification.certificate[ablation]:.3g}")


def train_keeping(arguments: argparse.Namespace, program: Any, settings: Any, output: Any) -> int:
    """Train keeping the circuit, certify the trained weights, write the model only if certified
    (trying :func:`admission_schedule`'s settings in turn)."""
    from ..training.circuit_keeping import KeepSettings, covering_settings, train_until_certified
    from ..training.rebalance import PASSES
    from ..training.train import TrainError
    from ..transformer.io import model_to_bytes

    init = _init_model(arguments)
    if init is not None:
        settings = covering_settings(init, settings)  # at least the init's heads and widths
    schedule = admission_schedule(arguments.noise, arguments.keep_lr, arguments.rebalance)

    def report(attempt: Any) -> None:
        at = schedule.index((attempt.noise, attempt.lr))
        _print_try(arguments, settings.steps, attempt, schedule[at + 1] if at + 1 < len(schedule) else None)

    try:
        admitted = train_until_certified(program, settings, init, schedule,
                                         KeepSettings(rebalance=PASSES if arguments.rebalance else ()),
                                         samples=arguments.samples, seed=arguments.seed, on_try=report)
    except TrainError as error:
        raise UsageError(f"infoflowc train: {error}") from None
    if not admitted.certification.holds:
        return EXIT_ABOVE_EPS
    model = admitted.result.model
    kept = model.card.kept_circuit
    assert kept is not None  # trained keeping its circuit
    model.card = dataclasses.replace(model.card, kept_circuit=dataclasses.replace(
        kept, certified=admitted.certification.to_json()))
    write_atomically(output, model_to_bytes(model))
    print(f"  certified; wrote {output}")
    return EXIT_OK


def _training_flags(parser: argparse.ArgumentParser, grid: bool) -> None:
    """The flags of ``train``; in a sweep ``--heads``/``--layers`` repeat and ``--T``, ``--d-model``
    and ``--steps`` take comma lists (grid axes)."""
    counts = comma_list(positive_int) if grid else positive_int
    repeat: dict[str, Any] = {"action": "append"} if grid else {}
    add_program_argument(parser)
    parser.add_argument("--heads", type=head_budget, required=True, help="heads per layer, e.g. 2,2", **repeat)
    parser.add_argument("--layers", type=positive_int, help="layers (a single --heads count repeats)", **repeat)
    add_length_flag(parser, comma_list(length_flag) if grid else length_flag)
    parser.add_argument("--d-model", type=counts, default=(32,) if grid else 32, help="residual width (32)")
    parser.add_argument("--d-head", type=positive_int, default=8, help="query/key/value width per head (8)")
    parser.add_argument("--d-mlp", type=positive_int, default=32, help="FFN hidden units, every layer (32)")
    parser.add_argument("--steps", type=counts, default=(1000,) if grid else 1000, help="steps (1000)")
    parser.add_argument("--batch", type=positive_int, default=256, help="inputs per step (256)")
    parser.add_argument("--lr", type=positive_float, default=1e-3, help="peak learning rate (1e-3)")
    parser.add_argument("--weight-decay", type=nonnegative_float, default=1e-2, help="AdamW weight decay (1e-2)")
    add_seed_flag(parser, "the (first) seed (0)")
    parser.add_argument("--dist", default="uniform", help="uniform (the declared domain) or normal[:σ] (uniform)")
    parser.add_argument("--validation", type=positive_int, default=4096, help="held-out inputs (4096)")
    add_device_flag(parser, default="cpu")
    parser.add_argument("--init", type=Path, metavar="MODEL",
                        help="start from this model (added units read at random and write 0)")


def _keep_flags(parser: argparse.ArgumentParser) -> None:
    """``train``'s circuit-keeping flags (``training/circuit_keeping.py``)."""
    parser.add_argument("--keep-circuit", action="store_true",
                        help="with --init: keep the init model's circuit (interchange and strict terms), then "
                             "certify the trained weights; a model that fails is refused (exit 3)")
    parser.add_argument("--noise", type=nonnegative_float, default=None,
                        help="with --keep-circuit: the noise at the start, relative to each tensor's rms (1e-3; "
                             "1e-4 with --no-rebalance, where the compiled weights are sharp)")
    parser.add_argument("--keep-lr", type=positive_float, default=None,
                        help="with --keep-circuit: the peak learning rate, in place of --lr (1e-5: AdamW moves "
                             "every weight by about it a step). With neither --noise nor --keep-lr given, a "
                             "refused model is trained once more at a tenth of both")
    parser.add_argument("--rebalance", action=argparse.BooleanOptionalAction, default=True,
                        help="with --keep-circuit: first rewrite the model exactly so that it trains like a "
                             "trained one (flip sparse units, pair the free ones, balance the scales, rotate the "
                             "residual: training/rebalance.py; the default); --no-rebalance trains the compiled "
                             "weights as they are")
    add_samples_flag(parser, 2_000, "with --keep-circuit: random inputs of the certification (2000)", positive_int)


def _train_arguments(parser: argparse.ArgumentParser) -> None:
    """``train FILE --heads H [--layers L] ... [-o OUT] [--init MODEL [--keep-circuit ...]]``."""
    _training_flags(parser, grid=False)
    add_output_flag(parser, "the model file (default: FILE with .trained.safetensors)")
    _keep_flags(parser)


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """``sweep FILE --heads H [--heads H ...] ... [--seeds N] [--workers N] [--address A] -o DIR``."""
    _training_flags(parser, grid=True)
    parser.add_argument("--seeds", type=positive_int, default=1, help="seeds per configuration (default 1)")
    add_workers_flag(parser, "parallel runs: 1 runs in this process, more start a local Ray (default 2)")
    parser.add_argument("--address", type=ray_address,
                        help="join this Ray cluster: auto, HOST:6379 (a head's GCS port) or ray://HOST:10001 "
                             "(Ray Client); refused in seconds when no head answers")
    parser.add_argument("--compare-eps", type=positive_float, default=1e-2,
                        help="ε of the compiled model shown for reference (default 1e-2)")
    parser.add_argument("--no-batch", dest="batch_runs", action="store_false",
                        help="train runs one after another (default: runs of one shape, seeds, learning rates "
                             "and head budgets of the same layers, train as one stacked model)")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the stacked training step (pays its compile time first)")
    add_output_flag(parser, "the sweep's folder", required=True, metavar="DIR")


TRAIN = Command("train", "train a model of the compiled family on the target", _train_arguments, command_train)
SWEEP = Command("sweep", "a grid of train runs, in-process or on Ray, resumable", _sweep_arguments, command_sweep)
