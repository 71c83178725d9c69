"""Stage 6, measure: a compiled model's ``measured_error`` as its config stores it (over vectors
:func:`~.vectors.measure_vectors`, over tokens :func:`~.tokens.measure_tokens`), how compile
prints it, and whether it keeps the guarantee."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..language import typed as ir
from ..oracle.tokens import token_names
from ..transformer.card import Measurement as StoredMeasurement
from ..transformer.model import CompiledTransformer
from .tokens import measure_tokens
from .vectors import DEFAULT_SAMPLES, vector_measurement

#: What a measured error may exceed the a-priori bound by and still keep it: the reference's
#: own float64 rounding, relative (2⁻³⁰ of the bound) and absolute (2⁻⁴⁰ at outputs of size ~1).
BOUND_SLACK = (2.0**-30, 2.0**-40)


@dataclass(frozen=True)
class Measurement:
    """A model measured against the oracle: ``record`` what its config stores as
    ``measured_error``, ``worst`` its largest error unrounded (a token output: 1 where an answer
    is wrong), and ``witness`` the input that shows it, as text."""

    record: dict[str, Any]
    worst: float
    witness: str


def measure(model: CompiledTransformer, program: ir.Program, samples: int = DEFAULT_SAMPLES,
            seed: int = 0) -> Measurement:
    """The worst error on random inputs and corners. A token model is measured on random ids of
    every length and every short sequence instead (:func:`~infoflow_dsl.measure.tokens.measure_tokens`)."""
    if program.over_tokens:
        measured = measure_tokens(model, program, samples, seed)
        at = f" at position {measured.worst_position}" if measured.worst_position is not None else ""
        witness = (f"the tokens {' '.join(token_names(program, measured.worst_ids))}{at} (the model "
                   f"{measured.worst_answer:.6g}, the reference {measured.worst_reference:.6g})")
        return Measurement(measured.to_json(), measured.max_error, witness)
    record, worst, x = vector_measurement(model, program, samples, seed)
    rows = "; ".join(f"x({t + 1}) = [{', '.join(f'{v:.17g}' for v in row)}]" for t, row in enumerate(x.tolist()))
    return Measurement(record, worst, rows)


def measure_error(model: CompiledTransformer, program: ir.Program, samples: int = DEFAULT_SAMPLES,
                  seed: int = 0) -> dict[str, Any]:
    """:func:`measure`'s record, as stored in a model's config."""
    return measure(model, program, samples, seed).record


def above_bound(worst: float, bound: float | None) -> bool:
    """Whether a measured error exceeds the a-priori bound beyond the reference's own rounding
    (:data:`BOUND_SLACK`). The bound is a proof (docs/design.md, "The bound"): a model above it is
    a compiler bug, whatever its ε."""
    if bound is None or not math.isfinite(bound):
        return False
    relative, absolute = BOUND_SLACK
    return not worst <= bound * (1 + relative) + absolute


def uncertified_reason(worst: float, token_output: bool, wrong: int, eps: float, bound: float | None) -> str | None:
    """Why a compiled model's measurement breaks its certificate (None: it keeps it): a wrong
    token answer, an error above ε, or an error above the a-priori bound."""
    if token_output and wrong:
        return f"{wrong} token answer{'s' if wrong != 1 else ''} wrong"
    if not worst <= eps:
        return f"the measured error {worst:.3g} exceeds ε = {eps:g}"
    if above_bound(worst, bound):
        return f"the measured error {worst:.3g} exceeds the a-priori bound {bound:.3g}"
    return None


def describe_measurement(measured: StoredMeasurement | Mapping[str, Any]) -> str:
    """What a stored ``measured_error`` (the card's, or a record :func:`measure` made) covers, as
    compile prints it after the error: "max over N random inputs and M corners" and how many
    inputs the margin left out (a token model: "over N inputs: S random ids of random lengths,
    all E of lengths ≤ L, C constant sequences", and a token output's wrong answers and smallest
    margin)."""
    m = _stored(measured)
    if m.exhaustive is not None:
        short = f", all {m.exhaustive} of lengths ≤ {m.exhaustive_length}" if m.exhaustive else ""
        constant = f", {m.corners} constant sequences" if m.corners else ""
        text = f"over {m.inputs} inputs: {m.samples} random ids of random lengths{short}{constant}"
        if m.wrong is not None:
            text += f"; {m.wrong} of {m.sites} token answers wrong, smallest score margin {m.min_margin}"
        return text
    excluded = f", {m.excluded_by_margin} under the margin left out" if m.excluded_by_margin else ""
    return f"max over {m.samples} random inputs and {m.corners} corners{excluded}"


def measurement_passes(measured: StoredMeasurement | Mapping[str, Any], eps: float) -> bool:
    """Whether a stored ``measured_error`` is within the guarantee: a token output's answers all
    right (``wrong`` 0, whatever ε), any other output's ``max_error`` ≤ ε."""
    m = _stored(measured)
    return m.wrong == 0 if m.wrong is not None else m.max_error <= eps


def _stored(measured: StoredMeasurement | Mapping[str, Any]) -> StoredMeasurement:
    """A measurement as the card types it (a record read and checked)."""
    return measured if isinstance(measured, StoredMeasurement) else StoredMeasurement.from_record(dict(measured))
