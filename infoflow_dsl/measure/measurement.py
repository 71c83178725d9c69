"""Stage 6, measure: a compiled model's ``measured_error`` as its config stores it (over vectors
:func:`~.vectors.measure_vectors`, over tokens :func:`~.tokens.measure_tokens`), how compile
prints it, and whether it keeps the guarantee."""

from __future__ import annotations

from typing import Any

from ..language import typed as ir
from ..transformer.model import CompiledTransformer
from .tokens import measure_tokens
from .vectors import DEFAULT_SAMPLES, measure_vectors


def measure_error(model: CompiledTransformer, program: ir.Program, samples: int = DEFAULT_SAMPLES,
                  seed: int = 0) -> dict[str, Any]:
    """The worst error on random inputs and corners, as stored in a model's config. A token
    model is measured on random ids of every length and every short sequence instead
    (:func:`~infoflow_dsl.measure.tokens.measure_tokens`)."""
    if program.over_tokens:
        return measure_tokens(model, program, samples, seed).to_json()
    return measure_vectors(model, program, samples, seed)


def describe_measurement(measured: dict[str, Any]) -> str:
    """What a stored ``measured_error`` covers, as compile prints it after the error: "max over
    N random inputs and M corners" and how many inputs the margin left out (a token model:
    "over N inputs: S random ids of random lengths, all E of lengths ≤ L, C constant sequences",
    and a token output's wrong answers and smallest margin)."""
    if "exhaustive" in measured:
        short = (f", all {measured['exhaustive']} of lengths ≤ {measured['exhaustive_length']}"
                 if measured["exhaustive"] else "")
        constant = f", {measured['corners']} constant sequences" if measured["corners"] else ""
        text = (f"over {measured['inputs']} inputs: {measured['samples']} random ids of random lengths{short}"
                f"{constant}")
        if "wrong" in measured:
            text += (f"; {measured['wrong']} of {measured['sites']} token answers wrong, smallest score margin "
                     f"{measured['min_margin']}")
        return text
    left_out = measured["excluded_by_margin"]
    excluded = f", {left_out} under the margin left out" if left_out else ""
    return f"max over {measured['samples']} random inputs and {measured['corners']} corners{excluded}"


def measurement_passes(measured: dict[str, Any], eps: float) -> bool:
    """Whether a stored ``measured_error`` is within the guarantee: a token output's answers all
    right (``wrong`` 0, whatever ε), any other output's ``max_error`` ≤ ε."""
    return measured["wrong"] == 0 if "wrong" in measured else measured["max_error"] <= eps
