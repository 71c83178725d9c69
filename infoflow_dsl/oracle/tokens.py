"""Token programs' inputs and outputs: tokens to ids (:func:`encode`), ids to the values the
reference evaluator reads (:func:`token_values`), and outputs back to tokens (:func:`decode`).

A token input is a batch of ids, (B, T') int64 in 0..V−1 in the vocabulary's declared order,
for any T' in 1..T. A categorical vocabulary's token is its quoted name (``"a"``, given as the
string ``a``); a numeric vocabulary's token is its number (``3`` or ``"3"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..language import typed as ir
from ..language.load import program_argument

if TYPE_CHECKING:
    from ..language.load import ProgramSource

Tensor = torch.Tensor

#: The id a token output holds where a per-token target is undefined (decoded as None).
UNDEFINED_ID = -1


def _vocabulary(program: ir.Program) -> ir.Vocabulary:
    if program.vocabulary is None:
        raise ValueError("this program's input is a sequence of vectors, not of tokens: pass x (batch, T, d)")
    return program.vocabulary


def _token_id(vocabulary: ir.Vocabulary, token: Any) -> int:
    """The id of one token: a name of a categorical vocabulary, or a number (or its text) of a numeric one."""
    if vocabulary.values is None:
        if isinstance(token, str) and token in vocabulary.names:
            return vocabulary.names.index(token)
    elif not isinstance(token, bool):
        try:
            value = float(token)
        except (TypeError, ValueError):
            value = math.nan
        if value in vocabulary.values:
            return vocabulary.values.index(value)
    raise ValueError(f"{token!r} is not a token of the vocabulary {vocabulary.describe()}")


def encode(program: ProgramSource, tokens: Sequence[Any] | Sequence[Sequence[Any]]) -> Tensor:
    """Token ids, int64: a list of tokens gives (1, T'), a list of lists of one length (B, T').
    Raises ValueError for a token not in the vocabulary, ragged lists, or a length outside 1..T.

    Args:
        program: the token program (or its path).
        tokens: a list of tokens, or a list of lists of one length.

    Returns:
        Token ids, int64 (1, T') or (B, T').

    Raises:
        ValueError: a token not in the vocabulary, ragged lists, or a length outside 1..T.
    """
    program = program_argument(program, "encode")
    vocabulary = _vocabulary(program)
    nested = len(tokens) > 0 and isinstance(tokens[0], list | tuple)
    rows = [list(row) for row in tokens] if nested else [list(tokens)]
    lengths = {len(row) for row in rows}
    if len(lengths) != 1:
        raise ValueError(f"every sequence must have one length, got lengths {sorted(lengths)}")
    ids = torch.tensor([[_token_id(vocabulary, t) for t in row] for row in rows], dtype=torch.int64)
    check_ids(program, ids)
    return ids


def check_ids(program: ir.Program, ids: Tensor) -> Tensor:
    """``ids`` as (B, T') int64 on its device; ValueError unless 1 ≤ T' ≤ T and every id is in 0..V−1."""
    vocabulary = _vocabulary(program)
    ids = torch.as_tensor(ids)
    if ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ValueError(f"a token program takes ids (batch, T') of an integer dtype, got {tuple(ids.shape)} "
                         f"{ids.dtype}")
    if not 1 <= ids.shape[1] <= program.length:
        raise ValueError(f"the sequence length must be in 1..{program.length} (T), got {ids.shape[1]}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocabulary.size):
        raise ValueError(f"token ids must lie in 0..{vocabulary.size - 1} (the vocabulary {vocabulary.describe()})")
    return ids.to(torch.int64)


def token_values(program: ir.Program, ids: Tensor) -> Tensor:
    """What the reference reads for each token, (B, T', 1) float64: its number, or its id
    for a categorical vocabulary (compared with == and != only)."""
    vocabulary = _vocabulary(program)
    ids = check_ids(program, ids)
    if vocabulary.values is None:
        return ids.to(torch.float64).unsqueeze(-1)
    table = torch.tensor(vocabulary.values, dtype=torch.float64, device=ids.device)
    return table[ids].unsqueeze(-1)


def token_names(program: ir.Program, ids: Tensor | Sequence[int], answers: bool = False) -> list[str]:
    """The tokens of a sequence of ids (T',), as written in the vocabulary (``a``, ``2.5``);
    ``answers``: ids of a token output (a table of tokens' values, or the input's)."""
    names = (program.output_vocabulary if answers else _vocabulary(program)).names
    return [names[int(i)] for i in torch.as_tensor(ids).reshape(-1).tolist()]


def random_ids(program: ir.Program, count: int, seed: int = 0, length: int | None = None) -> Tensor:
    """``count`` sequences of uniformly random token ids, (count, length or T) int64, seeded."""
    vocabulary = _vocabulary(program)
    length = program.length if length is None else length
    if not 1 <= length <= program.length:
        raise ValueError(f"the sequence length must be in 1..{program.length} (T), got {length}")
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocabulary.size, (count, length), generator=generator, dtype=torch.int64)
