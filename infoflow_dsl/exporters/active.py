"""The active LayerNorm: the standard ε_LN and gain 1, made a near-constant scale by a ±C pair.

The residual is balanced (mean 0) and carries the constant pair ±C on every position but the
sink, so h = (C, −C, r) and, W = n_embd,

    LayerNorm(h) = h / √((2C² + ‖r‖²)/W + ε_LN).

Every reader is multiplied by √(2C²/W + ε_LN), so it gets its compiled input u times
(1 + ‖r‖²/(2C² + W ε_LN))^(-1/2) = 1 − δ, 0 ≤ δ ≤ ‖r‖²/(4C²): the error this adds at the output
is K/C² to first order, K a property of the circuit (how the output feels a relative error of
every reader's input at every position). K is measured, not derived: on PROBES random inputs
and the domain's corners, at a probe C0 = 100·max‖r‖ (δ ≤ 2.5e-5, the first-order regime),
K = max |y(C0) − model(x)| · C0². C is then chosen so that SAFETY · K/C² is the share of ε that
the compiled a-priori bound leaves (ε − bound): the stored bound is the compiled bound plus that
share, of which the LayerNorm's measured first-order error uses 1/SAFETY.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..measure.vectors import model_inputs
from ..measure.workload import continuous_workload
from ..pipeline.reading import program_of
from ..transformer.model import CompiledTransformer
from .hf import forward_in_batches, in_memory
from .inputs import ExportIO
from .layout import ExportLayout
from .weights import EXACT_LN_GAIN, gpt2_state_dict

STANDARD_LN_EPS = 1e-5
PROBES = 256
SAFETY = 4.0
PROBE_MARGIN = 100.0
#: a trained model has no ε: its LayerNorm share is this fraction of its outputs' largest magnitude
TRAINED_SHARE = 1e-6


@dataclass(frozen=True)
class ActiveLayerNorm:
    """The active LayerNorm of one export: ε_LN, the constant C, the measured K, the share of ε
    it was given and ``reader_scale`` = √(2C²/W + ε_LN)."""

    eps: float
    constant: float
    k: float
    share: float
    reader_scale: float

    def json(self) -> dict[str, float | str]:
        return {"mode": "active", "eps": self.eps, "gain": 1.0, "constant": self.constant, "K": self.k,
                "share": self.share, "reader_scale": self.reader_scale,
                "error": f"K/C^2 = {self.k / self.constant**2:.3g} measured at first order on {PROBES} random "
                         f"inputs and 256 corners; the bound adds {SAFETY:g} times that"}


def reader_scale(layout: ExportLayout, constant: float, eps: float) -> float:
    return math.sqrt(2 * constant**2 / layout.width + eps)


def outputs_at(model: CompiledTransformer, layout: ExportLayout, x: torch.Tensor, constant: float | None,
               eps: float, hidden: bool = False) -> torch.Tensor | tuple[torch.Tensor, float]:
    """The float64 export's outputs on x: with the active LayerNorm at ``constant``, or exact (None)."""
    dtype = torch.float64
    if constant is None:
        tensors, w_x, cls = gpt2_state_dict(model, layout, dtype, EXACT_LN_GAIN)
        hf = in_memory(layout, tensors, dtype, 2.0**80)
    else:
        tensors, w_x, cls = gpt2_state_dict(model, layout, dtype, 1.0, constant, reader_scale(layout, constant, eps))
        hf = in_memory(layout, tensors, dtype, eps)
    io = ExportIO.of(model, layout.slot_masks, w_x, cls, layout.penalties is not None)
    return forward_in_batches(hf, io, x, hidden)


def choose(model: CompiledTransformer, layout: ExportLayout, eps: float = STANDARD_LN_EPS,
           constant: float | None = None) -> ActiveLayerNorm:
    """C from the share of ε the compiled bound leaves (module docstring), or ``constant`` as given."""
    model64 = model if model.dtype == torch.float64 else CompiledTransformer(model.card, model.state_dict(),
                                                                             dtype=torch.float64)
    program = program_of(model)
    continuous_workload(model64, program, PROBES, PROBES, f"probing the LayerNorm's constant on {PROBES} inputs",
                        "export a model of a smaller T").refuse_if_unaffordable()
    x = model_inputs(program, PROBES, seed=23)
    with torch.no_grad():
        y = model64(x)
    _, largest = outputs_at(model64, layout, x, None, eps, hidden=True)
    rest = math.sqrt(max(largest - 2.0, 1e-12))  # max ‖r‖: the exact export's pair is ±1
    probe = PROBE_MARGIN * rest
    moved = float((outputs_at(model64, layout, x, probe, eps) - y).abs().nan_to_num().max())
    k = moved * probe**2
    card = model.card
    if card.trained is not None:
        share = TRAINED_SHARE * max(float(y.abs().nan_to_num().max()), 1.0)
    else:
        share = float(card.eps or 0.0) - float(card.a_priori_bound or 0.0)
        if share <= 0:
            raise ValueError("the compiled bound leaves no share of ε for an active LayerNorm")
    if constant is None:
        constant = max(probe, math.sqrt(SAFETY * k / share)) if k > 0 else probe
    return ActiveLayerNorm(eps=eps, constant=constant, k=k, share=share,
                           reader_scale=reader_scale(layout, constant, eps))
