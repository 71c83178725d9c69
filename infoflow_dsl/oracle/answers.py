"""A model's output read as the program's answers: a token output's scores as ids
(:func:`answers`), and ids or numbers as the vocabulary's tokens (:func:`decode`, ``ifl.decode``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ..language import typed as ir
from ..language.load import program_argument
from .evaluate import defined_positions
from .tokens import UNDEFINED_ID

if TYPE_CHECKING:
    from ..language.load import ProgramSource


def answers(program: ir.Program, scores: Tensor) -> Tensor:
    """A token output's ids from a model's scores (B, V) or (B, T', V): the argmax over the V
    scores (the first, i.e. the smallest id, on a tie), ``UNDEFINED_ID`` where a per-token
    target is undefined at that length: (B,) or (B, T') int64."""
    size = program.output_vocabulary.size
    scores = torch.as_tensor(scores)
    if scores.dim() != (3 if program.per_token else 2) or scores.shape[-1] != size:
        want = "(batch, length, V)" if program.per_token else "(batch, V)"
        raise ValueError(f"a token output's scores have shape {want} with V = {size}, got {tuple(scores.shape)}")
    ids = scores.argmax(dim=-1)  # (B,) or (B, T')
    if not program.per_token:
        return ids
    defined = defined_positions(program, scores.shape[1]).to(ids.device)  # (T',)
    return torch.where(defined, ids, UNDEFINED_ID)


def decode(program: ProgramSource, values: Tensor) -> list[Any]:
    """Outputs as Python values, nested as the tensor is: a token output's ids become the
    vocabulary's tokens (names, or numbers for a numeric vocabulary), and None where the
    target is undefined; numeric outputs become floats (None for NaN).

    A token output may also be given as a model's **scores**, a floating tensor (B, V) or
    (B, T', V) (the reference's ids are int64): each site's token is the argmax of its V
    scores (the smallest id on a tie), None where a per-token target is undefined.

    Args:
        program: the token program (or its path) whose vocabulary names the ids.
        values: ids (int64), numbers, or a token output's scores (float, last axis V).

    Returns:
        Nested lists of tokens, numbers and None, shaped as ``values`` (less the scores' axis).

    Raises:
        ValueError: ids outside the vocabulary, or scores of the wrong shape.
    """
    program = program_argument(program, "decode")
    values = torch.as_tensor(values).detach().cpu()
    if program.token_output and values.dtype.is_floating_point:
        values = answers(program, values)
    if program.token_output:
        vocabulary = program.output_vocabulary  # the input's, or a table of tokens' values
        tokens = vocabulary.names if vocabulary.values is None else vocabulary.values
        return _nested(values.tolist(), lambda i: None if i == UNDEFINED_ID else _number(tokens[int(i)]))
    return _nested(values.to(torch.float64).tolist(), lambda v: None if math.isnan(v) else v)


def _number(value: Any) -> Any:
    """Whole floats as ints (a numeric vocabulary's 3.0 reads 3); names unchanged."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _nested(items: Any, leaf: Any) -> Any:
    return [_nested(item, leaf) for item in items] if isinstance(items, list) else leaf(items)
