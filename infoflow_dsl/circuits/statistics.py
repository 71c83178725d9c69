"""Weight and activation statistics: "looks trained" as numbers (``infoflowc disguise --stats``).

A compiled model is recognisable at a glance: most weights exactly 0, a handful of distinct
values, one-hot directions, units that fire on few inputs. For each model these statistics say
how far a disguise moved it toward a trained model of the same shape (``infoflowc train``):

- ``zeros``: the fraction of weight entries exactly 0 (the residual stream's matrices);
- ``distinct``: distinct values over entries (a trained matrix: about 1; a compiled one: ±1 and a
  few slopes);
- ``kurtosis``: the entries' excess kurtosis E[(w − μ)⁴]/σ⁴ − 3, the mean over matrices
  (Gaussian: 0; a sparse matrix: large). It is undefined for a constant matrix (σ = 0: an
  all-zero W_V of a per-token program, say): such matrices are left out of the mean and counted
  (``constant``, said under the table); NaN when every matrix is constant;
- ``stable_rank``: ‖W‖_F² / ‖W‖₂² over min(rows, columns), the mean over matrices (how spread
  the spectrum is; 1/min for a rank-one matrix);
- ``active``: the fraction of FFN units with relu > 0, over tokens of random inputs.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..transformer.model import CompiledTransformer

Tensor = torch.Tensor
MATRICES = ("attn.W_Q", "attn.W_K", "attn.W_V", "attn.W_O", "mlp.W_in", "mlp.W_out")
STATISTICS = ("zeros", "distinct", "kurtosis", "stable_rank", "active")


def _matrices(model: CompiledTransformer) -> list[Tensor]:
    """The residual stream's matrices as 2-D float64 tensors (a layer's heads one by one)."""
    state = model.state_dict()
    out = [state["embed.W_E"], state["unembed.W_U"]]
    for name, tensor in state.items():
        if any(name.endswith(m) for m in MATRICES):
            dense = tensor.to_dense() if tensor.is_sparse else tensor
            out.extend(dense if dense.dim() == 3 else [dense])
    return [(m.to_dense() if m.is_sparse else m).detach().to(torch.float64) for m in out if m.numel()]


def excess_kurtosis(values: Tensor) -> float | None:
    """E[(v − μ)⁴]/σ⁴ − 3 over the entries; None for constant entries (σ = 0: undefined)."""
    centred = values - values.mean()
    variance = float((centred**2).mean())
    return float((centred**4).mean()) / variance**2 - 3.0 if variance > 0 else None


def mean_kurtosis(matrices: list[Tensor]) -> tuple[float, int]:
    """(the mean excess kurtosis over the matrices that are not constant (NaN if none is), the
    number of constant ones left out)."""
    defined = [k for k in (excess_kurtosis(m.flatten()) for m in matrices) if k is not None]
    return (sum(defined) / len(defined) if defined else math.nan), len(matrices) - len(defined)


def _stable_rank(matrix: Tensor) -> float:
    spectral = float(torch.linalg.matrix_norm(matrix, ord=2))
    return float(matrix.square().sum()) / spectral**2 / min(matrix.shape) if spectral > 0 else 0.0


def active_fraction(model: CompiledTransformer, x: Tensor) -> float:
    """The fraction of FFN units (every layer's) with relu > 0 over the input tokens' rows of x.
    "> 0" up to rounding: a unit whose pre-activation is 0 in exact arithmetic (a gate at its
    corner) computes ±ϱ·scale once the weights are rotated, so an output within 16ϱ of the
    layer's largest is counted as 0 (ϱ the dtype's epsilon)."""
    counts = [0, 0]

    def tap(name: str, value: Tensor) -> Tensor:
        if name.endswith("mlp.hook_post") and value.shape[-1]:
            rows = value[:, :-1]  # the input tokens, not the readout row
            rounding = 16 * torch.finfo(rows.dtype).eps * float(rows.abs().amax())
            counts[0] += int((rows > rounding).sum())
            counts[1] += rows.numel()
        return value

    tap.listens = lambda name: name.endswith("mlp.hook_post")  # type: ignore[attr-defined]
    with torch.no_grad():
        model.run(x, tap)
    return counts[0] / counts[1] if counts[1] else 0.0


def weight_statistics(model: CompiledTransformer, x: Tensor) -> dict[str, float]:
    """The statistics of the module docstring for ``model``, its units' activity on inputs ``x``
    (and ``matrices``, how many matrices there are, ``constant``, how many are constant)."""
    matrices = _matrices(model)
    entries = torch.cat([m.flatten() for m in matrices])
    kurtosis, constant = mean_kurtosis(matrices)
    return {
        "zeros": float((entries == 0).to(torch.float64).mean()),
        "distinct": torch.unique(entries).numel() / entries.numel(),
        "kurtosis": kurtosis,
        "stable_rank": sum(_stable_rank(m) for m in matrices) / len(matrices),
        "active": active_fraction(model, x),
        "matrices": len(matrices),
        "constant": constant,
    }


def statistics_table(rows: dict[str, dict[str, Any]]) -> str:
    """The statistics of several models side by side, a line each."""
    lines = [f"  {'model':<12}" + "".join(f"{s:>13}" for s in STATISTICS)]
    for name, stats in rows.items():
        lines.append(f"  {name:<12}" + "".join(f"{stats[s]:>13.4g}" for s in STATISTICS))
    lines += [f"  {name}: kurtosis over {stats['matrices'] - stats['constant']} of {stats['matrices']} matrices "
              f"({stats['constant']} constant, where it is undefined)"
              for name, stats in rows.items() if stats["constant"]]
    return "\n".join(lines)
