"""``infoflowc check MODEL`` for a token model (language v3): the model against the reference on
random ids of random lengths 1..T, every short sequence and the constant sequences
(:func:`~infoflow_dsl.reference.token_check.measure_tokens`).

A numeric output passes within ε (max |model − reference| over the defined positions); a token
output passes only when every answer is right ("exact on N inputs", with the smallest score
margin); otherwise the failures are counted and the first one shown. Exit 0 when it passes, 3
when not. ``--adversarial`` searches continuous inputs and does not apply to token inputs (exit 2).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .cli import EXIT_ABOVE_EPS, EXIT_OK, UsageError


def command_check_tokens(arguments: argparse.Namespace, model: Any, program: Any) -> int:
    from ..reference.token_check import measure_tokens
    from ..reference.workload import measurement_workload, unless_fixed

    if arguments.adversarial:
        raise UsageError(f"{arguments.model}: --adversarial perturbs continuous inputs; a token model's inputs are "
                         f"finite sequences of ids: raise --samples instead")
    trained = "trained" in model.config
    eps = float("inf") if trained and arguments.eps is None else float(
        arguments.eps if arguments.eps is not None else model.config.get("eps", 0.0))
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
    passed = result.passes(eps)
    print(f"  verdict          {verdict(result, passed, trained and arguments.eps is None)}")
    if arguments.trace and result.worst_ids.numel():
        from ..reference.verify import trace

        found = trace(model, program, result.worst_ids[None])
        print(f"  trace            {found.describe() if found else 'the model follows its circuit at every layer'}")
    return EXIT_OK if passed else EXIT_ABOVE_EPS


def header(arguments: argparse.Namespace, model: Any, program: Any, eps: float, trained: bool) -> str:
    """The first line: the file, its program, T, the vocabulary, ε and the bound."""
    bound = "none (a trained model)" if trained else f"{model.config.get('a_priori_bound', math.nan):.3g}"
    shown_eps = "none" if eps == math.inf else f"{eps:g}"
    return (f"{arguments.model}: {program.path}, T = {program.length}, tokens {program.token_vocabulary.describe()}, "
            f"ε = {shown_eps}, a-priori bound {bound}")


def shown_input(program: Any, result: Any) -> str:
    """The worst input as its tokens, with the position of its worst output."""
    from ..reference.tokens import token_names

    at = f" at position {result.worst_position}" if result.worst_position is not None else ""
    return f"{' '.join(token_names(program, result.worst_ids))}{at}"


def answer_lines(result: Any, program: Any) -> list[str]:
    """A token output's report: exact, or how many answers are wrong and the first worst one."""
    from ..reference.tokens import token_names

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
