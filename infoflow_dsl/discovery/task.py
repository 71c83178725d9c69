"""What a discovery method works on: a model, its candidate edges, the inputs and each
ablation's stand-ins, and the cost it spends (forwards and backwards over the inputs).

The inputs are the truth's (``circuits.truth.measured_inputs``, with the same ``samples``,
``seed`` and ``length``), so that a method and the truth it is scored against see the same
inputs. The candidate edges are every (sender, receiver, channel) pair that can carry something
(``EdgeGraph.pairs``), the graph's edges among them, as a method that does not know the circuit
must consider them: the pairs outside the graph carry exactly 0 through the weights.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..circuits.graph import INPUT, EdgeGraph
from ..circuits.patching import EdgeForward, EdgeKey, PatchedRun
from ..circuits.truth import SAMPLES, MeasuredBatch, TruthMeasurement, leaves_certificate
from ..language import typed as ir
from .metrics import per_input

Tensor = torch.Tensor


@dataclass(frozen=True)
class AblatedBatch:
    """Inputs of one length (``x`` as the model reads them), every sender's stand-in under the
    ablation, each sender's change Δ_s = ô_s − o_s (stand-in minus clean output, (B, T'+1, D)),
    and the clean run (its outputs and output)."""

    batch: MeasuredBatch
    x: Tensor
    stand_ins: dict[str, Tensor]
    differences: dict[str, Tensor]
    run: PatchedRun  # the clean run (every sender's output), for the patched runs to start from

    @property
    def clean(self) -> Tensor:
        """The clean run's output."""
        return self.run.y


@dataclass
class Cost:
    """Passes over the task's inputs: forwards and backwards, and the seconds spent."""

    forwards: int = 0
    backwards: int = 0
    seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter, repr=False)

    def stop(self) -> Cost:
        self.seconds = round(time.perf_counter() - self.started, 3)
        return self

    def to_json(self) -> dict[str, Any]:
        return {"forwards": self.forwards, "backwards": self.backwards, "seconds": self.seconds}


class DiscoveryTask:
    """A model's candidate edges and inputs under one ablation, measured with one metric."""

    def __init__(self, forward: EdgeForward, program: ir.Program, ablation: str, metric: str,
                 samples: int = SAMPLES, seed: int = 0, length: int | None = None) -> None:
        self.forward, self.program, self.ablation, self.metric = forward, program, ablation, metric
        self.measurement = TruthMeasurement(forward, program, samples, seed, length)
        self.data = []
        for batch, x, stands in self.measurement.prepared(ablation):
            clean = forward.run(x)
            changes = {name: stands[name] - out for name, out in clean.outputs.items()}
            self.data.append(AblatedBatch(batch, x, stands, changes, clean))
        self.inputs = sum(d.x.shape[0] for d in self.data)
        self.cost = Cost()

    @property
    def graph(self) -> EdgeGraph:
        return self.forward.graph

    @property
    def pairs(self) -> list[EdgeKey]:
        return self.graph.pairs()

    def effect(self, ablated: Collection[EdgeKey], metric: str | None = None) -> float:
        """mean_b |m_b(patched) − m_b(clean)| with ``ablated`` edges ablated (one forward)."""
        return self.measured(ablated, metric)[0]

    def measured(self, ablated: Collection[EdgeKey], metric: str | None = None) -> tuple[float, bool]:
        """The effect of ablating ``ablated`` (as :meth:`effect`) and whether every output stays
        in the certificate, from one forward."""
        self.cost.forwards += 1
        total, within = 0.0, True
        for d in self.data:
            y = self.forward.run(d.x, ablated, d.stand_ins, clean=d.run).y
            total += float(self.change(y, d, metric).abs().sum())
            within = within and not bool(leaves_certificate(self.program, y, d.batch, self.graph.eps).any())
        return total / self.inputs, within

    def change(self, y: Tensor, d: AblatedBatch, metric: str | None = None) -> Tensor:
        """m_b(y) − m_b(clean), (B,)."""
        name = metric or self.metric
        return per_input(name, y, d.clean, d.batch) - per_input(name, d.clean, d.clean, d.batch).detach()

    def within_certificate(self, ablated: Collection[EdgeKey]) -> bool:
        """Whether every output stays in the certificate with ``ablated`` edges ablated."""
        self.cost.forwards += 1
        runs = (self.forward.run(d.x, ablated, d.stand_ins, clean=d.run).y for d in self.data)
        return not any(bool(leaves_certificate(self.program, y, d.batch, self.graph.eps).any())
                       for y, d in zip(runs, self.data, strict=True))

    def gradients(self, alpha: float, embedding_at: float | None = None) -> Iterator[Tensor]:
        """Per batch, ∂m_b/∂α_e (B, E) (one forward and one backward), every candidate edge's
        change fixed to the clean run's Δ_s = ô_s − o_s: each receiver reads Σ o_s + α Δ_s
        (α = ``alpha`` on every edge; the path of EAP-IG on the activations), and with
        ``embedding_at`` = t the input's output is e + t·Δ_input, the edges at α (EAP-IG on the
        inputs)."""
        pairs = self.pairs
        self.cost.forwards += 1
        self.cost.backwards += 1
        for d in self.data:
            count = d.x.shape[0]
            coefficient = torch.full((count, len(pairs)), alpha, dtype=torch.float64, device=d.x.device,
                                     requires_grad=True)
            coefficients: Mapping[EdgeKey, Tensor] = {
                pair: coefficient[:, i].view(count, 1, 1) for i, pair in enumerate(pairs)}
            embedding = None
            if embedding_at is not None:  # the clean embedding plus t·Δ_input
                embedding = d.stand_ins[INPUT] - (1.0 - embedding_at) * d.differences[INPUT]
            y = self.forward.run(d.x, (), d.stand_ins, coefficients=coefficients, differences=d.differences,
                                 embedding=embedding).y
            (gradient,) = torch.autograd.grad(self.change(y, d).sum(), coefficient)
            yield gradient  # (B, E)
