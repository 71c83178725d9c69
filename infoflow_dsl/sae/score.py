"""A dictionary of directions scored against a compiled model's true features at one hook.

Given the true features alive at the hook (their directions u_f from ``ifl.features``, unit
length, and their activity a_f(row) = [value_f(row) ≠ 0]) and a candidate dictionary (rows
d_j, unit length, with activity b_j(row)), the scores are the field's:

- **mean max cosine**: the mean over true features of max_j cos(u_f, d_j);
- **recovered**: the share of true features with max_j cos(u_f, d_j) ≥ 0.9;
- **F1**: per true feature, the F1 of the best-matching latent's activity b_j (j the argmax of
  the cosine) against a_f over the rows; its mean.

Baselines (the field's): the residual basis (the d_model coordinates, a coordinate active where
it is nonzero), PCA (the principal directions of the activations, as many as the dictionary,
active where the centred projection is nonzero) and a random dictionary (seeded unit vectors,
active where the projection is positive).

Where true features share one direction at the hook (packed numbers: their unit directions'
cosine is ≥ 1 − 1e-9), one dictionary row matching that direction gives every member of the
group cosine 1, so cosine cannot tell them apart there: for them the mean max cosine and the
share recovered are an upper bound (the residual basis scores 1.000 / 100% on a model that packs
18 features into 9 dimensions). :func:`shared_directions` lists such groups; the F1 of activity
still separates the members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

Tensor = torch.Tensor

RECOVERED = 0.9
ACTIVE = 1e-6
SAME = 1e-9


@dataclass(frozen=True)
class Truth:
    """The true features at a hook: ``names``, unit ``directions`` (F, D), ``active`` (rows, F)."""

    names: tuple[str, ...]
    directions: Tensor
    active: Tensor


def _f1(predicted: Tensor, actual: Tensor) -> Tensor:
    """Per column F1 of bool (rows, F) predictions against bool (rows, F) truth (0 where both are empty)."""
    hits = (predicted & actual).sum(0).double()
    denominator = predicted.sum(0).double() + actual.sum(0).double()
    return torch.where(denominator > 0, 2 * hits / denominator.clamp(min=1), torch.zeros_like(hits))


def shared_directions(truth: Truth) -> list[tuple[str, ...]]:
    """The groups of two or more true features whose unit directions coincide (cosine ≥ 1 − 1e-9,
    :data:`SAME`), each in the truth's order, the groups in the order of their first member."""
    cosine = truth.directions @ truth.directions.T
    groups: list[tuple[str, ...]] = []
    grouped: set[int] = set()
    for i in range(len(truth.names)):
        if i in grouped:
            continue
        members = [j for j in range(i, len(truth.names)) if j not in grouped and cosine[i, j] >= 1 - SAME]
        grouped.update(members)
        if len(members) > 1:
            groups.append(tuple(truth.names[j] for j in members))
    return groups


def score(truth: Truth, dictionary: Tensor, active: Tensor) -> dict[str, Any]:
    """The module docstring's scores of a dictionary (K, D) whose latents are ``active`` (rows, K)."""
    rows = dictionary / dictionary.norm(dim=1, keepdim=True).clamp(min=1e-12)
    cosine = truth.directions @ rows.T  # (F, K)
    best, match = cosine.max(dim=1)
    f1 = _f1(active[:, match], truth.active)
    return {"mean_max_cosine": float(best.mean()), "recovered": float((best >= RECOVERED).double().mean()),
            "mean_f1": float(f1.mean()), "latents": int(dictionary.shape[0]),
            "features": {name: {"max_cosine": float(c), "f1": float(f)}
                         for name, c, f in zip(truth.names, best, f1, strict=True)}}


def baselines(truth: Truth, activations: Tensor, size: int, seed: int = 0) -> dict[str, dict[str, Any]]:
    """The residual basis, PCA with ``size`` components (at most D) and ``size`` random directions."""
    width = activations.shape[1]
    basis = torch.eye(width, dtype=activations.dtype)
    centred = activations - activations.mean(0)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)
    pca = v[:min(size, width)]
    generator = torch.Generator().manual_seed(seed)
    random = torch.randn(size, width, generator=generator, dtype=activations.dtype)
    return {
        "residual_basis": score(truth, basis, activations.abs() > ACTIVE),
        "pca": score(truth, pca, (centred @ pca.T).abs() > ACTIVE),
        "random": score(truth, random, activations @ random.T > 0),
    }
