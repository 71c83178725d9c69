"""``infoflowc check MODEL``: a compiled or trained model against the reference evaluator.

A model over vectors is checked by :func:`~infoflow_dsl.verify.check.check_model` (random
inputs, corners, near ties, ``--adversarial`` search, ``--trace``). A token model (language v3):
the model against the reference on random ids of random lengths 1..T, every short sequence and the constant sequences
(:func:`~infoflow_dsl.measure.tokens.measure_tokens`).

A numeric output passes within ε (max |model − reference| over the defined positions); a token
output passes only when every answer is right ("exact on N inputs", with the smallest score
margin); otherwise the failures are counted and the first one shown. Exit 0 when it passes, 3
when not. ``--adversarial`` searches continuous inputs and does not apply to token inputs (exit 2).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from ..errors import UsageError
from .common import (
    EXIT_ABOVE_EPS,
    EXIT_OK,
    Command,
    add_device_flag,
    add_eps_flag,
    add_model_argument,
    add_samples_flag,
    add_seed_flag,
    model_on,
    nonnegative_int,
)


def command_check_tokens(arguments: argparse.Namespace, model: Any, program: Any) -> int:
    from ..measure.tokens import measure_tokens
    from ..measure.workload import measurement_workload, unless_fixed

    if arguments.adversarial:
        raise UsageError(f"{arguments.model}: --adversarial perturbs continuous inputs; a token model's inputs are "
                         f"finite sequences of ids: raise --samples instead")
    trained = model.card.trained is not None
    eps = float("inf") if trained and arguments.eps is None else float(
        arguments.eps if arguments.eps is not None else model.card.eps or 0.0)
    unless_fixed(measurement_workload(model, program, arguments.samples, "lower --samples"),
                 measurement_workload(model, program, 0, ""),  # the short and constant sequences: always measured
                 "even with --samples 0 the short and constant sequences of every length are measured: check a "
                 "model compiled for a smaller T").refuse_if_unaffordable()
    result = measure_tokens(model, program, arguments.samples, arguments.seed)
    print(header(arguments, model, program, eps, trained))
    every = " (every input)" if result.exhaustive_length == program.length else ""
    short = (f", all {result.exhaustive} of lengths 1..{result.exhaustive_length}{every}"
             if result.exhaustive else "")
    short += f", {result.constant} constant sequences" if result.constant else ""
    print(f"  evaluated        {result.inputs} inputs ({result.samples} random ids of random lengths 1.."
          f"{program.length}{short}), {result.sites} outputs")
    for line in (answer_lines(result, program) if result.token_output else error_lines(result, program)):
        print(line)
    within = result.passes(eps)
    broken = within and above_its_bound(model, result.max_error)
    passed = within and not broken
    print(f"  verdict          {BROKEN if broken else verdict(result, passed, trained and arguments.eps is None)}")
    if arguments.trace and result.worst_ids.numel():
        from ..verify.check import trace

        found = trace(model, program, result.worst_ids[None])
        print(f"  trace            {found.describe() if found else 'the model follows its circuit at every layer'}")
    return EXIT_OK if passed else EXIT_ABOVE_EPS


#: the verdict on a compiled model within ε whose measured error exceeds its a-priori bound
BROKEN = "ABOVE ITS A-PRIORI BOUND (within ε, but not what its file certifies)"


def above_its_bound(model: Any, worst: float) -> bool:
    """Whether a compiled model's measured error exceeds the bound its file states (a trained
    model states none): the bound is a proof, so this fails ``check`` whatever ε is."""
    from ..measure.measurement import above_bound

    return model.card.trained is None and above_bound(worst, model.card.a_priori_bound)


def header(arguments: argparse.Namespace, model: Any, program: Any, eps: float, trained: bool) -> str:
    """The first line: the file, its program, T, the vocabulary, ε and the bound."""
    bound = "none (a trained model)" if trained else f"{_bound(model):.3g}"
    shown_eps = "none" if eps == math.inf else f"{eps:g}"
    return (f"{arguments.model}: {program.path}, T = {program.length}, tokens {program.token_vocabulary.describe()}, "
            f"ε = {shown_eps}, a-priori bound {bound}")


def _bound(model: Any) -> float:
    """The a-priori bound the model's file states (NaN: none stated)."""
    bound = model.card.a_priori_bound
    return math.nan if bound is None else float(bound)


def shown_input(program: Any, result: Any) -> str:
    """The worst input as its tokens, with the position of its worst output."""
    from ..oracle.tokens import token_names

    at = f" at position {result.worst_position}" if result.worst_position is not None else ""
    return f"{' '.join(token_names(program, result.worst_ids))}{at}"


def answer_lines(result: Any, program: Any) -> list[str]:
    """A token output's report: exact, or how many answers are wrong and the first worst one."""
    from ..oracle.tokens import token_names

    margin = "none" if result.min_margin is None or not math.isfinite(result.min_margin) else f"{result.min_margin:.3g}"
    if result.wrong == 0:
        return [f"  answers          exact on {result.inputs} inputs (every one of {result.sites} outputs the "
                f"reference's token)", f"  smallest margin  {margin} (the right token's score minus the best other's)",
                f"  closest input    {shown_input(program, result)}"]
    said, want = token_names(program, [int(result.worst_answer), int(result.worst_reference)], answers=True)
    return [f"  answers          WRONG at {result.wrong} of {result.sites} outputs, on {result.wrong_inputs} of "
            f"{result.inputs} inputs (accuracy {result.accuracy:.6g})",
            f"  smallest margin  {margin}",
            f"  failure          {shown_input(program, result)}: the model answers {said!r}, the reference {want!r}"]


def error_lines(result: Any, program: Any) -> list[str]:
    """A numeric output's report: the worst error and where."""
    return [f"  worst error      {result.max_error:.3g}",
            f"  worst input      {shown_input(program, result)}: the model {result.worst_answer:.6g}, the reference "
            f"{result.worst_reference:.6g}"]


def verdict(result: Any, passed: bool, measured_only: bool) -> str:
    if result.token_output:
        return "exact (every answer right)" if passed else "WRONG answers"
    if measured_only:
        return "measured only (a trained model has no ε; pass --eps to test one)"
    return "within ε" if passed else "ABOVE ε"


def command_check(arguments: argparse.Namespace) -> int:
    from ..errors import StoredProgramError
    from ..pipeline.reading import program_of
    from ..verify.check import check_model, format_input, trace
    from .export import load_checked

    model = model_on(load_checked(arguments.model), arguments.device)  # a model file, or an exported directory
    try:
        program = program_of(model)
    except StoredProgramError as error:
        raise UsageError(f"{arguments.model}: {error}") from None
    if program.over_tokens:
        return command_check_tokens(arguments, model, program)
    trained = model.card.trained is not None
    if trained and arguments.trace:
        raise UsageError(f"{arguments.model}: --trace needs a compiled model, this one was trained")
    if arguments.trace and arguments.model.is_dir():
        raise UsageError(f"{arguments.model}: --trace needs a compiled model file, not an exported directory")
    eps = float("inf") if trained and arguments.eps is None else arguments.eps  # a trained model has no ε
    result = check_model(model, program, arguments.samples, eps, arguments.seed, arguments.adversarial)
    excluded = f", {result.excluded_by_margin} under the margin left out" if result.excluded_by_margin else ""
    bound = "none (a trained model)" if trained else f"{_bound(model):.3g}"
    shown_eps = "none" if result.eps == float("inf") else f"{result.eps:g}"
    print(f"{arguments.model}: {program.path}, T = {program.length}, ε = {shown_eps}, a-priori bound {bound}")
    if trained:
        from ..measure.vectors import model_inputs
        from ..training.train import model_nmse

        inputs = model_inputs(program, max(arguments.samples, 1), arguments.seed, corners=0)
        print(f"  NMSE             {model_nmse(model, program, inputs):.3g} (on {inputs.shape[0]} random inputs "
              f"from the declared domain; trained to {model.card.trained.final_nmse} on "
              f"{model.card.trained.dist})")
    print(f"  evaluated        {result.evaluated} inputs (random, corners, near ties{excluded})")
    broken = "" if math.isfinite(result.worst_error) else " (the model's output is NaN or infinite there)"
    print(f"  worst error      {result.random_worst:.3g}{broken if not math.isfinite(result.random_worst) else ''}")
    if result.adversarial_worst is not None:
        print(f"  adversarial      {result.adversarial_worst:.3g} after {result.adversarial_examples} examples")
    at = f" at position {result.worst_position}" if result.worst_position is not None else ""
    print(f"  worst input      (error {result.worst_error:.3g}{at}){broken}")
    print(format_input(result.worst_input))
    uncertified = result.within and above_its_bound(model, result.worst_error)
    verdict = "ABOVE ε" if not result.within else BROKEN if uncertified else "within ε"
    if trained and arguments.eps is None:
        verdict = "measured only (a trained model has no ε; pass --eps to test one)"
    print(f"  verdict          {verdict}")
    if arguments.trace:
        worst = result.worst_input[None]
        found = trace(model, program, worst)
        if found is None:
            from ..measure.vectors import model_inputs

            found = trace(model, program, model_inputs(program, 64, arguments.seed + 11))
        print(f"  trace            {found.describe() if found else 'the model follows its circuit at every layer'}")
    return EXIT_OK if result.within and not uncertified else EXIT_ABOVE_EPS


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    """``check MODEL [--samples N] [--eps E] [--seed S] [--adversarial [N]] [--trace] [--device D]``."""
    add_model_argument(parser)
    add_samples_flag(parser, 10_000, "random inputs (default 10000)")
    add_eps_flag(parser, "the ε to check against (default: the model's)")
    add_seed_flag(parser, "the seed of the random inputs and of the search (0): the same seed, the same check")
    parser.add_argument("--adversarial", type=nonnegative_int, nargs="?", const=300, default=0, metavar="N",
                        help="then search for larger errors with hypothesis (N examples, default 300)")
    parser.add_argument("--trace", action="store_true",
                        help="name the first residual direction, layer and token where the model leaves its circuit")
    add_device_flag(parser, "the model runs")


CHECK = Command("check", "verify a compiled model against its target", _check_arguments, command_check)
