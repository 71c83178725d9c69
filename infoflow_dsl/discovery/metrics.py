"""The metrics a discovery method measures a patched output with: one number per input, m_b(y).

An edge's effect under a patch is mean_b |m_b(patched) − m_b(clean)| over the task's inputs
(ACDC's and EAP's convention: the change of the metric, input by input). For a token output,
over the sites where the reference is defined (the task's labels):

- ``logit-diff``: Σ_sites (y[label] − max_(v ≠ label) y[v]), the answer's margin (differentiable:
  the gradient methods' default);
- ``kl``: Σ_sites KL(softmax(y_clean) ‖ softmax(y)), ACDC's metric (0, with zero gradient, at the
  clean output: attribution patching cannot use it);
- ``accuracy``: the number of wrong answers (the certificate's own count; no gradient).

For a numeric output:

- ``output``: Σ_sites y (the score itself; the gradient methods' default);
- ``l2``: ‖y − y_clean‖₂ (ACDC's metric on Tracr's proportion task; zero gradient at clean);
- ``error``: max_sites |y − reference| where the guarantee covers the site (the certificate's own).
"""

from __future__ import annotations

import torch

from ..circuits.truth import MeasuredBatch, numeric_error
from ..language import typed as ir
from ..oracle.tokens import UNDEFINED_ID
from . import NUMBER_METRICS, TOKEN_METRICS

Tensor = torch.Tensor


def metrics_of(program: ir.Program) -> tuple[str, ...]:
    return TOKEN_METRICS if program.token_output else NUMBER_METRICS


def default_metric(program: ir.Program, method: str) -> str:
    """A gradient method's default: the answer's margin or the output; the others': ACDC's
    (KL on tokens, L2 on numbers)."""
    from . import GRADIENT_METHODS

    names = metrics_of(program)
    return names[0] if method in GRADIENT_METHODS else names[1]


def _sites(values: Tensor) -> Tensor:
    """(B, ...) → (B,): the sum over every site of an input."""
    return values.reshape(values.shape[0], -1).sum(dim=1)


def per_input(metric: str, y: Tensor, clean: Tensor, batch: MeasuredBatch) -> Tensor:
    """m_b(y), (B,), for outputs y and the clean run's ``clean`` ((B, ...) or (B, ..., V))."""
    tokens = not batch.truth.is_floating_point()
    if metric in (NUMBER_METRICS if tokens else TOKEN_METRICS):
        raise ValueError(f"unknown metric {metric!r} for a {'token' if tokens else 'numeric'} output: one of "
                         f"{', '.join(TOKEN_METRICS if tokens else NUMBER_METRICS)}")
    if metric in TOKEN_METRICS:
        defined = batch.truth != UNDEFINED_ID  # (B, ...)
        label = batch.truth.clamp_min(0).unsqueeze(-1)  # (B, ..., 1)
        if metric == "logit-diff":
            right = y.gather(-1, label).squeeze(-1)
            others = y.scatter(-1, label, -torch.inf).amax(dim=-1)
            return _sites(torch.where(defined, right - others, 0.0))
        if metric == "kl":
            p, log_q = clean.log_softmax(-1), y.log_softmax(-1)
            return _sites(torch.where(defined, (p.exp() * (p - log_q)).sum(-1), 0.0))
        if metric == "accuracy":
            return _sites(defined & (y.argmax(-1) != batch.truth)).to(torch.float64)
    elif metric in NUMBER_METRICS:
        if metric == "output":
            return _sites(y.nan_to_num(nan=0.0))
        if metric == "l2":
            return _sites((y - clean).nan_to_num(nan=0.0) ** 2).sqrt()
        if metric == "error":
            error = numeric_error(y.detach(), batch)
            return error.reshape(error.shape[0], -1).amax(dim=1) if error.dim() > 1 else error
    raise ValueError(f"unknown metric {metric!r}")
