"""Where and in what a model is built: the dtype (float32 or float64) and the device (``cpu``,
``cuda``, ``cuda:N``) a compile asks for, checked, and a model moved to a device."""

from __future__ import annotations

import copy

import torch

from ..errors import CompileError
from ..transformer.model import CompiledTransformer

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise CompileError(f"dtype must be float32 or float64, got {dtype}")
        return dtype
    if dtype not in DTYPES:
        raise CompileError(f"dtype must be float32 or float64, got {dtype!r}")
    return DTYPES[dtype]


DEVICE_TYPES = ("cpu", "cuda")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to build on: ``cpu``, ``cuda`` or ``cuda:N`` (None: cuda when available).

    Any other name, or cuda on a machine without it, is a CompileError (exit 2 in the CLI)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        resolved = None
    if resolved is None or resolved.type not in DEVICE_TYPES:
        raise CompileError(f"unknown device {str(device)!r} (expected cpu, cuda or cuda:N)")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise CompileError(f"--device {device} was asked for, but no CUDA device is available")
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise CompileError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return resolved


def on_device(model: CompiledTransformer, device: str | torch.device | None) -> CompiledTransformer:
    """``model`` on ``device`` (:func:`resolve_device`; None: where it is): the model itself when it
    is there already, else a copy moved there (the caller's model stays where it was)."""
    if device is None:
        return model
    resolved = resolve_device(device)
    here = model.device
    if here.type == resolved.type and (resolved.index is None or here.index in (None, resolved.index)):
        return model
    return copy.deepcopy(model).to(resolved)
