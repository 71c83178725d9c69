"""Which edges each ablation needs: the certified truth a discovery method is scored against.

For an ablation (zero, mean or resample; ``patching``), an edge is **necessary** when ablating it
alone puts the model's output out of its certificate on some input: a token output answers a
wrong token at some defined site, a numeric output leaves the reference by more than the model's
ε. The input where it does (the first one found) is stored as the **witness** (with its
corrupted partner under resample ablation). The measured inputs:

- a token program: every sequence of lengths 1..4 (1..T if T < 4; the exhaustive lengths of
  ``check``, with a limit of :data:`EXHAUSTIVE_LIMIT` sequences), the constant sequences of the
  longer lengths and ``samples`` random sequences of random lengths (``check``'s
  ``token_inputs``);
- a program over vectors: ``samples`` random inputs of the domain and as many of its corners
  (at most 256), at T (or a length asked for). Where
  the program has a retrieval margin δ, the certificate covers the inputs (per-token targets:
  the sites) whose retrieval clears it, as ``check`` measures; the others count for nothing.

Mean ablation averages each sender's output over the inputs of the same length, position by
position; resample ablation pairs each input with another of the same length (a seeded
permutation without fixed points where the length has two inputs or more).

The **certificate**: ablating every (sender, receiver, channel) pair outside the graph at once
leaves every output within ε (token outputs: the same tokens). The graph holds every pair the
weights connect (``graph.check_against_weights``), so this holds exactly; it is measured anyway
on the same inputs, as ``outside_error``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..language import typed as ir
from ..measure.tokens import token_inputs
from ..measure.vectors import CORNERS, wrong_answers
from ..oracle.evaluate import evaluate, retrieval_margin
from ..oracle.sampling import domain_corners, sample_inputs
from ..oracle.tokens import token_names
from . import ABLATIONS
from .graph import EdgeGraph
from .patching import EdgeForward, EdgeKey, PatchedRun, edge_key, stand_ins

Tensor = torch.Tensor
EXHAUSTIVE_LENGTH = 4  # every token sequence up to this length is measured
EXHAUSTIVE_LIMIT = 20_000  # ... while they are at most this many
SAMPLES = 2_000


@dataclass(frozen=True)
class EdgeTruth:
    """One edge under one ablation: necessary or not, the largest departure measured (token
    outputs: the fraction of inputs answered wrong; numbers: the largest |y − reference|), and
    the witness input (and its corrupted partner) where it leaves the certificate."""

    edge: str
    necessary: bool
    departure: float
    witness: Any = None
    corrupted: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"edge": self.edge, "necessary": self.necessary, "departure": self.departure}
        if self.witness is not None:
            out["witness"] = self.witness
        if self.corrupted is not None:
            out["corrupted"] = self.corrupted
        return out


@dataclass(frozen=True)
class AblationTruth:
    """Every edge's truth under ``ablation``, measured on ``inputs`` inputs, and the certificate:
    ``outside_error`` (the largest error with every pair outside the graph ablated) ≤ ε."""

    ablation: str
    inputs: int
    edges: tuple[EdgeTruth, ...]
    outside_error: float

    @property
    def necessary(self) -> tuple[str, ...]:
        return tuple(e.edge for e in self.edges if e.necessary)

    def to_json(self) -> dict[str, Any]:
        return {"ablation": self.ablation, "inputs": self.inputs, "necessary": list(self.necessary),
                "outside_error": self.outside_error, "edges": [e.to_json() for e in self.edges]}


@dataclass(frozen=True)
class MeasuredBatch:
    """Inputs of one length, their reference outputs and their resampling partners."""

    x: Tensor
    truth: Tensor
    partner: Tensor
    covered: Tensor | None  # where a margin program's guarantee holds (its retrieval clears δ), else None


def measured_inputs(program: ir.Program, samples: int = SAMPLES, seed: int = 0,
                    length: int | None = None) -> Iterator[Tensor]:
    """The inputs of the truth (see the module docstring), one tensor per length (a program over
    vectors: at ``length``, T by default)."""
    if not program.over_tokens:
        if samples < 1:
            raise ValueError("a program over vectors needs samples ≥ 1 (its inputs: that many and as many corners)")
        length = program.length if length is None else length
        yield torch.cat([sample_inputs(program, samples, seed=seed, length=length),
                         domain_corners(program, min(CORNERS, samples), seed=seed + 1, length=length)])
        return
    size = program.token_vocabulary.size
    limit = min(EXHAUSTIVE_LIMIT, sum(size**length for length in range(1, min(EXHAUSTIVE_LENGTH, program.length) + 1)))
    by_length: dict[int, list[Tensor]] = {}
    for part in token_inputs(program, samples, seed, limit=max(limit, size)):
        by_length.setdefault(part.ids.shape[1], []).append(part.ids)
    for length in sorted(by_length):
        yield torch.cat(by_length[length])


def _partners(count: int, seed: int) -> Tensor:
    """A seeded permutation of 0..count−1 with no fixed point when count ≥ 2."""
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
    partner = torch.empty_like(order)
    partner[order] = order.roll(1)  # each input is paired with the next one of a random cycle
    return partner


def numeric_error(y: Tensor, batch: MeasuredBatch) -> Tensor:
    """|y − reference| where the guarantee covers the site (defined, and clearing a margin), else 0."""
    truth, covered = batch.truth, batch.covered
    error = torch.where(truth.isnan(), 0.0, (y - truth).abs().nan_to_num(nan=torch.inf))
    if covered is not None:
        error = torch.where(covered.reshape(covered.shape + (1,) * (error.dim() - covered.dim())), error, 0.0)
    return error


def leaves_certificate(program: ir.Program, y: Tensor, batch: MeasuredBatch, eps: float) -> Tensor:
    """Per input: whether the output left the certificate (bool (N,)) — a wrong token at a defined
    site, or a number more than ε from the reference where the guarantee covers it."""
    if program.token_output:
        wrong, _ = wrong_answers(y, batch.truth)
        return wrong.reshape(wrong.shape[0], -1).any(dim=1)
    return (numeric_error(y, batch).reshape(y.shape[0], -1) > eps).any(dim=1)


def _departure(program: ir.Program, y: Tensor, batch: MeasuredBatch, left: Tensor) -> float:
    if program.token_output:
        return float(left.to(torch.float64).mean())
    return float(numeric_error(y, batch).max())


def _shown(program: ir.Program, x: Tensor) -> Any:
    return token_names(program, x) if program.over_tokens else x.tolist()


class TruthMeasurement:
    """The truth of ``graph``'s edges on ``model`` for ``program`` (its stored program)."""

    def __init__(self, forward: EdgeForward, program: ir.Program, samples: int = SAMPLES, seed: int = 0,
                 length: int | None = None) -> None:
        self.forward, self.program = forward, program
        self.eps = forward.graph.eps
        self.batches = []
        device = forward.model.device  # the inputs, the reference's values and the patched runs all there
        for index, drawn in enumerate(measured_inputs(program, samples, seed, length)):
            x = drawn.to(device)
            exact = x if program.over_tokens else x.to(torch.float64)
            with torch.no_grad():
                truth = evaluate(program, exact)
            covered = None if program.margin is None else retrieval_margin(program, exact) >= program.margin
            partner = _partners(x.shape[0], seed + 7_919 * index).to(device)
            self.batches.append(MeasuredBatch(x, truth, partner, covered))

    @property
    def inputs(self) -> int:
        return sum(b.x.shape[0] for b in self.batches)

    def _inputs(self, x: Tensor) -> Tensor:
        model = self.forward.model
        return x if self.program.over_tokens else x.to(model.dtype)

    def prepared(self, ablation: str) -> list[tuple[MeasuredBatch, Tensor, dict[str, Tensor]]]:
        """Each batch with its model inputs and its senders' stand-ins under ``ablation``."""
        if ablation not in ABLATIONS:
            raise ValueError(f"unknown ablation {ablation!r}: one of {', '.join(ABLATIONS)}")
        prepared = []
        for batch in self.batches:
            x = self._inputs(batch.x)
            corrupted = x[batch.partner] if ablation == "resample" else None
            prepared.append((batch, x, stand_ins(self.forward, x, ablation, corrupted)))
        return prepared

    def certificate(self, ablation: str,
                    prepared: list[tuple[MeasuredBatch, Tensor, dict[str, Tensor]]] | None = None) -> float:
        """The largest error with every pair outside the graph ablated at once (a token output,
        as ``check`` counts it: 1 if any answer is wrong, else 0): at most ε where the
        certificate holds."""
        outside, worst = outside_pairs(self.forward.graph), 0.0
        for batch, x, stands in prepared or self.prepared(ablation):
            y = self.forward.run(x, outside, stands).y
            left = leaves_certificate(self.program, y, batch, self.eps)
            worst = max(worst, float(left.any()) if self.program.token_output else _departure(
                self.program, y, batch, left))
        return worst

    def ablation(self, ablation: str, pairs: Sequence[EdgeKey] | None = None) -> AblationTruth:
        """Every edge's truth under ``ablation`` (or every pair of ``pairs``, the graph's edges
        and others alike: a trained model's candidates), and the certificate."""
        prepared = self.prepared(ablation)
        resample = ablation == "resample"
        clean = [self.forward.run(x) for _, x, _ in prepared]
        names = {edge_key(e): e.name for e in self.forward.graph.edges}
        keys = list(names) if pairs is None else list(pairs)
        truths = [self._edge(key, names.get(key) or pair_name(key), prepared, clean, resample) for key in keys]
        return AblationTruth(ablation, self.inputs, tuple(truths), self.certificate(ablation, prepared))

    def _edge(self, key: EdgeKey, name: str, prepared: list[tuple[MeasuredBatch, Tensor, dict[str, Tensor]]],
              clean: list[PatchedRun], resample: bool) -> EdgeTruth:
        departure, witness, corrupted = 0.0, None, None
        for (batch, x, stands), run in zip(prepared, clean, strict=True):
            y = self.forward.run(x, [key], stands, clean=run).y
            left = leaves_certificate(self.program, y, batch, self.eps)
            departure = max(departure, _departure(self.program, y, batch, left))
            if witness is None and bool(left.any()):
                first = int(torch.nonzero(left)[0])
                witness = _shown(self.program, batch.x[first])
                corrupted = _shown(self.program, batch.x[batch.partner[first]]) if resample else None
        return EdgeTruth(name, witness is not None, departure, witness, corrupted)


def pair_name(key: EdgeKey) -> str:
    """sender->receiver<channel>, as :attr:`~.graph.CircuitEdge.name` names an edge."""
    sender, receiver, channel = key
    return f"{sender}->{receiver}<{channel}>"


def outside_pairs(graph: EdgeGraph) -> list[EdgeKey]:
    """Every (sender, receiver, channel) pair that can carry something (the sender runs before the
    receiver) and is not an edge of the graph."""
    inside = {edge_key(e) for e in graph.edges}
    return [pair for pair in graph.pairs() if pair not in inside]


def edge_truth(model: Any, ablations: tuple[str, ...] = ABLATIONS, samples: int = SAMPLES,
               seed: int = 0, length: int | None = None,
               device: str | torch.device | None = None) -> tuple[EdgeGraph, dict[str, AblationTruth]]:
    """The edge graph of a compiled model (or its file) and each ablation's truth on it (a model
    over vectors: on inputs of ``length`` tokens, its T by default; any length up to T is one
    its certificate covers), the patched forwards run on ``device`` (None: where the model is).

    Args:
        model: a compiled (or disguised) model, or the path of its file.
        ablations: any of ``zero``, ``mean``, ``resample``.
        samples: random inputs the truth is measured on (plus every short sequence of a token model).
        seed: their seed.
        length: the sequence length of a model over vectors (default its T).
        device: where the patched forwards run (cpu, cuda; None: where the model is).

    Returns:
        (the :class:`EdgeGraph`, each ablation's truth: necessary edges with witnesses, certificate).

    Raises:
        UsageError: an unknown ablation or a length outside 1..T.
        ModelFileError: a path that is not a model file.
    """
    from ..pipeline.devices import on_device
    from ..pipeline.reading import program_of
    from ..transformer.arguments import model_argument
    from .graph import circuit_graph

    compiled = on_device(model_argument(model, "edge_truth"), device)
    graph = circuit_graph(compiled)
    measurement = TruthMeasurement(EdgeForward(compiled, graph), program_of(compiled), samples, seed, length)
    return graph, {a: measurement.ablation(a) for a in ablations}

