"""The page's measured sections for a token model: example ids and their attention patterns, and
|model − reference| on the inputs its compile measured (``measure.tokens``: every
sequence of the short lengths, the constant ones, random ids of random lengths).

A token is shown by its name (``"a"``, ``3``); a token output's value is the token the model's
scores pick (``oracle.answers.decode``), its error 1 where that is not the reference's token
and 0 where it is; a numeric output's error is |model − reference|. Each input's error is its
worst over the sites where the target is defined (inputs with none are left out).
"""

from __future__ import annotations

from typing import Any

import torch

from ..language import typed as ir
from ..measure.tokens import site_keys, token_inputs
from ..measure.vectors import model_and_reference
from ..oracle.answers import decode
from ..oracle.evaluate import evaluate
from ..oracle.tokens import random_ids
from ..transformer.model import CompiledTransformer


def token_examples(program: ir.Program, count: int, seed: int) -> torch.Tensor:
    """``count`` seeded sequences of random ids at the full length T: (count, T) int64."""
    return random_ids(program, count, seed=seed)


def token_names(program: ir.Program, ids: torch.Tensor) -> list[list[list[str]]]:
    """Each sequence's tokens by name, one single-entry row per token (the page joins a row)."""
    assert program.vocabulary is not None
    names = program.token_vocabulary.names
    return [[[names[int(i)]] for i in row] for row in ids]


def _shown(value: Any) -> Any:
    """A decoded output as the page shows it: numbers to 4 significant digits, tokens and None as they are."""
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return float(f"{value:.4g}") if isinstance(value, float) else value


def _outputs(model: CompiledTransformer, program: ir.Program, ids: torch.Tensor) -> dict[str, Any]:
    """The model's and the reference's outputs on ``ids`` (N, T'), decoded (tokens by name)."""
    with torch.no_grad():
        scores = model(ids.to(model.device)).to("cpu", torch.float64)
    return {"model": _shown(decode(program, scores)), "reference": _shown(decode(program, evaluate(program, ids)))}


def per_input_errors(model: CompiledTransformer, program: ir.Program, samples: int,
                     seed: int) -> tuple[list[float], list[torch.Tensor]]:
    """(each measured input's worst error over its defined sites, the inputs), in the order
    :func:`~infoflow_dsl.measure.tokens.token_inputs` runs them."""
    errors: list[float] = []
    inputs: list[torch.Tensor] = []
    for part in token_inputs(program, samples, seed):
        predicted, truth = model_and_reference(model, program, part.ids)
        error, defined, *_ = site_keys(program, predicted, truth)
        rows = torch.where(defined, error, -torch.inf).reshape(part.ids.shape[0], -1).amax(dim=1)  # (N,)
        for row, value in zip(part.ids, rows.tolist(), strict=True):
            if value > -torch.inf:
                errors.append(float(f"{value:.3g}"))
                inputs.append(row)
    return errors, inputs


def token_measured_section(model: CompiledTransformer, program: ir.Program, samples: int, seed: int,
                           examples: torch.Tensor) -> dict[str, Any]:
    """The measured block of a token model's page (module docstring)."""
    errors, inputs = per_input_errors(model, program, samples, seed)
    worst = max(range(len(errors)), key=errors.__getitem__) if errors else 0
    worst_ids = inputs[worst][None] if inputs else examples[:1]
    worst_outputs = _outputs(model, program, worst_ids)
    return {
        "errors": errors,
        "excluded_by_margin": 0,
        "worst": {"index": worst, "error": errors[worst] if errors else 0.0,
                  "input": token_names(program, worst_ids)[0], "model": worst_outputs["model"][0],
                  "reference": worst_outputs["reference"][0]},
        "examples": _outputs(model, program, examples),
    }
