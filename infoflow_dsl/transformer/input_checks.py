"""What a compiled model takes as input: the checks ``model(x)`` runs first, from its config.

A model over vectors takes x (B, T', d) of a floating dtype; a token model ids (B, T') of an
integer dtype with every id in 0..V−1; both any length its config allows (1..T, at least
``min_length``, exactly T with ``exact_length_only``). Each fault is a TypeError or ValueError
that names it.
"""

from __future__ import annotations

from typing import Any

import torch

from .config import ModelConfig

Tensor = torch.Tensor


def check_length(spec: ModelConfig, length: int) -> None:
    """ValueError unless ``length`` is one the model takes (1..T, min_length, exactly T)."""
    if length == 0:
        raise ValueError("input length is 0; the model needs at least one token")
    if length > spec.T:
        raise ValueError(f"input length {length} exceeds the compiled maximum T = {spec.T}")
    if spec.exact_length_only and length != spec.T:
        raise ValueError(f"this model was compiled for inputs of length exactly T = {spec.T}, got {length}")
    if length < spec.min_length:
        raise ValueError(f"input length {length} is below the minimum length {spec.min_length} of this model")


def checked_ids(spec: ModelConfig, ids: Any, device: torch.device) -> Tensor:
    """A token model's input: ids (B, T') of an integer dtype, 1 <= T' <= T, every id in 0..V−1;
    returned as int64 on ``device``."""
    assert spec.vocabulary is not None
    size = spec.d
    if not isinstance(ids, Tensor):
        raise TypeError(f"input must be a torch.Tensor of token ids (batch, length), got {type(ids).__name__}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"a token model takes token ids of an integer dtype (int64), got {ids.dtype}")
    if ids.dim() != 2:
        raise ValueError(f"input must be token ids of shape (batch, length), got rank {ids.dim()} "
                         f"{tuple(ids.shape)}")
    check_length(spec, ids.shape[1])
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= size):
        raise ValueError(f"token ids must lie in 0..{size - 1} (the vocabulary {spec.vocabulary.describe()}), "
                         f"got ids from {int(ids.min())} to {int(ids.max())}")
    return ids.to(device=device, dtype=torch.int64)


def checked_input(spec: ModelConfig, x: Any, device: torch.device, dtype: torch.dtype) -> Tensor:
    """x (B, T', d) in ``dtype`` on ``device``, or a token model's ids (:func:`checked_ids`)."""
    if spec.token_input:
        return checked_ids(spec, x, device)
    if not isinstance(x, Tensor):
        raise TypeError(f"input must be a torch.Tensor of shape (batch, length, {spec.d}), got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must have a floating dtype, got {x.dtype}")
    if x.dim() != 3:
        raise ValueError(f"input must have shape (batch, length, {spec.d}), got rank {x.dim()} {tuple(x.shape)}")
    _, length, d = x.shape
    if d != spec.d:
        raise ValueError(f"input token dimension is {d}, the model expects d = {spec.d}")
    check_length(spec, length)
    return x.to(device=device, dtype=dtype)
