"""Training that keeps a compiled circuit: ``infoflowc train --init MODEL --keep-circuit``.

The model starts from a compiled (or disguised) model padded to the requested sizes
(:func:`~.train.build_model`), and the weights move toward a trained model's statistics while
every circuit node keeps computing its program value. Its **graph** is the init model's edge
graph over the trained model's nodes (:func:`kept_graph`: every head and MLP of the trained
model is a node; the added ones carry no edge of the graph). Each step draws a batch x of one
length L (uniform on 1..T for a token program, T otherwise) and its partner x' (the batch
permuted), and minimises

    task + λ_IIT · IIT + λ_SIIT · SIIT,

on standardised targets z (``train``'s :class:`~.train.Standardisation`), each term a mean
squared error over the defined sites:

- **task**: the model's output on x against the reference's z (a token output: the one-hot of
  the reference's token, as ``train`` learns it);
- **IIT** (interchange intervention training, Geiger et al. 2022): for each of ``nodes`` circuit
  nodes n drawn at random (a head or an MLP sending an edge of the graph), n's output on x is
  replaced by its output on x' (every edge out of n patched: ``circuits/patching.py``), and the
  output must be what the init model gives under the same swap (its patched output: a token
  output's one-hot answer, a number itself). The compiled model computes the program with n's
  value swapped, so it is the exact target of that counterfactual;
- **SIIT** (the strict term, Gupta et al. 2024, InterpBench): every (sender, receiver, channel)
  pair outside the graph ablated at once, under zero, mean and resample ablation in turn (the
  stand-ins of ``patching.stand_ins``: 0, the batch mean, the output on x'), must leave the
  output at the task's z. This is what the certificate measures (``circuits/certify.py``).

What moves the weights toward trained statistics: relative Gaussian **noise** at the start
(:func:`add_noise`: each tensor W gets noise·s(W)·N(0, 1), s(W) = rms(W) over its entries, or
1/√fan-in where W is all zeros), AdamW's **weight decay**, and **no exact zero kept** at the end
(:func:`fill_zeros`). AdamW with ``train``'s schedule (warm-up, cosine decay).

The result is only a candidate: :func:`~infoflow_dsl.circuits.certify.certify` measures the
trained weights themselves (the function on the whole finite domain, the truth of every pair,
the certificate) and the command refuses a model that fails. :func:`train_until_certified` trains
at each (noise, learning rate) of a schedule in turn and keeps the first model the certification
admits (the command's default schedule, the corpus's trained tiers, the realism benchmark).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..circuits import ABLATIONS
from ..circuits.certify import Certification, certify
from ..circuits.graph import INPUT, OUTPUT, EdgeGraph, GraphNode
from ..circuits.patching import EdgeForward, EdgeKey
from ..circuits.truth import SAMPLES, outside_pairs
from ..errors import TrainError
from ..language import typed as ir
from ..oracle.tokens import random_ids
from ..transformer.card import KeptCircuit
from ..transformer.model import CompiledTransformer
from .rebalance import PASSES, Rebalancing, rebalance
from .settings import MAX_SEED, MAX_STEPS, TrainSettings, batch_seed
from .train import (
    Standardisation,
    build_model,
    draw_inputs,
    estimate_standardisation,
    learning_rate_factor,
    reference_target,
    squared_error,
    trainable_parameter_count,
)

Tensor = torch.Tensor
ADDED = "added by training: outside the circuit"


@dataclass(frozen=True)
class KeepSettings:
    """The circuit-keeping terms: the relative noise at the start, the weights of the
    interchange (IIT) and strict (SIIT) terms, the circuit nodes swapped per step, the
    ablations the strict term resamples the outside pairs with, and the exact rewrites made
    before training (:mod:`.rebalance`; every pass by default, as ``train --keep-circuit``:
    without them a compiled model's sharp weights admit a noise of 1e-4 at most, and its
    statistics stay a compiled model's; ``rebalance=()`` trains the weights as they are)."""

    noise: float = 1e-3
    interchange: float = 1.0
    strict: float = 1.0
    nodes: int = 2
    ablations: tuple[str, ...] = ABLATIONS
    rebalance: tuple[str, ...] = PASSES

    def __post_init__(self) -> None:
        if not (math.isfinite(self.noise) and self.noise >= 0) or self.interchange < 0 or self.strict < 0:
            raise TrainError("--noise and the loss weights must be finite and ≥ 0")
        if self.nodes < 1 or not set(self.ablations) <= set(ABLATIONS) or not self.ablations:
            raise TrainError(f"nodes ≥ 1 and ablations among {', '.join(ABLATIONS)}")
        Rebalancing(self.rebalance)  # the passes are known ones


    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ablations": list(self.ablations), "rebalance": list(self.rebalance)}


# ---------------------------------------------------------------------------- the graph


def kept_graph(init_graph: EdgeGraph, model: CompiledTransformer) -> EdgeGraph:
    """The init model's graph over ``model``'s nodes: every head a{l}.h{i} and MLP m{l} of the
    trained model (the init's node where it had one, else an added node writing nothing of the
    circuit), the init's edges unchanged (the padded model keeps the init's heads at their
    indices), the output after the last block."""
    old = init_graph.by_name
    nodes: list[GraphNode] = [old[INPUT]]
    for layer, block in enumerate(model.blocks):
        for index in range(int(block.attn.W_Q.shape[0])):
            name = f"a{layer}.h{index}"
            nodes.append(old.get(name) or GraphNode(name, "head", layer, index, ADDED, ()))
        if int(block.mlp.W_in.shape[1]):
            nodes.append(old.get(f"m{layer}") or GraphNode(f"m{layer}", "mlp", layer, None, ADDED, ()))
    layers = len(model.blocks)
    nodes.append(dataclasses.replace(old[OUTPUT], layer=layers))
    return EdgeGraph(nodes=tuple(nodes), edges=init_graph.edges, layers=layers, eps=init_graph.eps)


def circuit_nodes(graph: EdgeGraph) -> list[str]:
    """The heads and MLPs that send an edge of the graph (the IIT term swaps them)."""
    senders = {e.sender for e in graph.edges}
    return [n.name for n in graph.nodes if n.name in senders and n.kind in ("head", "mlp")]


def swap_pairs(graph: EdgeGraph, node: str) -> list[EdgeKey]:
    """Every pair out of ``node``: patching them all replaces its output everywhere it is read."""
    return [pair for pair in graph.pairs() if pair[0] == node]


def covering_settings(init: CompiledTransformer, settings: TrainSettings) -> TrainSettings:
    """``settings`` widened to hold ``init``: at least its layers (a single head count repeats over
    them), its heads per layer, d_model, query/key/value widths and FFN units, so that the padded
    model's shape is exactly the settings' (a scratch model of the same settings has it too)."""
    compiled = init.card.heads_per_layer
    base = settings.heads
    layers = max(len(compiled), len(base))
    heads = tuple(max(compiled[i] if i < len(compiled) else 0, base[i] if i < len(base) else base[-1])
                  for i in range(layers))
    widths = [int(w.shape[2]) for b in init.blocks for w in (b.attn.W_Q, b.attn.W_V)]
    units = [int(b.mlp.W_in.shape[1]) for b in init.blocks] + [int(init.d_mlp_embedding)]
    return dataclasses.replace(settings, heads=heads, d_model=max(settings.d_model, init.d_model),
                               d_head=max([settings.d_head, *widths]), d_mlp=max([settings.d_mlp, *units]))


# ---------------------------------------------------------------------------- the weights


def _scale(tensor: Tensor) -> float:
    """rms over the entries, or 1/√fan-in for an all-zero tensor (the fan-in its second-to-last
    dimension, a vector's length)."""
    rms = float(tensor.detach().to(torch.float64).square().mean().sqrt()) if tensor.numel() else 0.0
    if rms > 0:
        return rms
    fan_in = tensor.shape[-2] if tensor.dim() >= 2 else tensor.shape[-1]
    return 1.0 / math.sqrt(max(int(fan_in), 1))


def add_noise(tensors: list[Tensor], relative: float, generator: torch.Generator) -> None:
    """W ← W + relative·s(W)·N(0, 1) for each tensor (:func:`_scale`), in place."""
    with torch.no_grad():
        for tensor in tensors:
            if tensor.numel() and relative > 0:
                noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float64)
                tensor.add_((relative * _scale(tensor) * noise).to(tensor.dtype))


def fill_zeros(tensors: list[Tensor], relative: float, generator: torch.Generator) -> int:
    """Entries exactly 0 become ±10⁻³·relative·s(W) (random signs; 10⁻⁹·s(W) without noise): no
    compiled zero is kept. Returns how many were filled."""
    filled = 0
    with torch.no_grad():
        for tensor in tensors:
            zero = tensor == 0
            count = int(zero.sum())
            if count:
                signs = torch.randint(0, 2, (count,), generator=generator).to(tensor.dtype) * 2 - 1
                tensor[zero] = signs * (1e-3 * relative if relative > 0 else 1e-9) * _scale(tensor)
                filled += count
    return filled


# ---------------------------------------------------------------------------- the losses


@dataclass(frozen=True)
class StepBatch:
    """One step's inputs x, partners x', the task target z and the defined sites' mask."""

    x: Tensor
    partner: Tensor
    z: Tensor


class CircuitLosses:
    """The three terms on a batch (see the module docstring) for ``model`` with ``graph``, the
    init model (with its own graph) giving the interchange targets."""

    def __init__(self, model: CompiledTransformer, graph: EdgeGraph, init: CompiledTransformer,
                 init_graph: EdgeGraph, program: ir.Program, standard: Standardisation) -> None:
        self.forward = EdgeForward(model, graph, differentiable=True)
        self.target_forward = EdgeForward(init, init_graph)
        self.program, self.standard = program, standard
        self.components = bool(program.output_shape) or program.token_output
        self.nodes = circuit_nodes(graph)
        self.outside = outside_pairs(graph)

    def _inputs(self, x: Tensor, model: CompiledTransformer) -> Tensor:
        return x if self.program.over_tokens else x.to(model.dtype)

    def task(self, batch: StepBatch) -> Tensor:
        return squared_error(self.forward.run(self._inputs(batch.x, self.forward.model)).y, batch.z)[0]

    def interchange_target(self, batch: StepBatch, node: str) -> Tensor:
        """What the init model outputs on x with ``node``'s output taken from x' (standardised; a
        token output's one-hot answer), NaN where the task's target is undefined."""
        init = self.target_forward.model
        x, x_prime = self._inputs(batch.x, init), self._inputs(batch.partner, init)
        with torch.no_grad():
            source = self.target_forward.run(x_prime).outputs[node]
            y = self.target_forward.run(x, swap_pairs(self.target_forward.graph, node), {node: source}).y
        if self.program.token_output:
            y = torch.nn.functional.one_hot(y.argmax(dim=-1), y.shape[-1]).to(torch.float64)
        return torch.where(batch.z.isnan(), torch.nan, self.standard.forward(y, self.components))

    def interchange(self, batch: StepBatch, nodes: list[str]) -> Tensor:
        """The mean over ``nodes`` of the swapped output's squared error to its target."""
        model = self.forward.model
        x, x_prime = self._inputs(batch.x, model), self._inputs(batch.partner, model)
        with torch.no_grad():
            sources = self.forward.run(x_prime).outputs
        losses = [squared_error(self.forward.run(x, swap_pairs(self.forward.graph, n), {n: sources[n]}).y,
                                self.interchange_target(batch, n))[0] for n in nodes]
        return torch.stack(losses).mean()

    def strict(self, batch: StepBatch, ablations: tuple[str, ...]) -> Tensor:
        """The mean over ``ablations`` of the output's squared error to z with every pair outside
        the graph ablated at once."""
        if not self.outside:
            return torch.zeros((), dtype=torch.float64)
        model = self.forward.model
        x, x_prime = self._inputs(batch.x, model), self._inputs(batch.partner, model)
        with torch.no_grad():
            clean, corrupted = self.forward.run(x).outputs, self.forward.run(x_prime).outputs
        stand = {"zero": {n: torch.zeros((), dtype=torch.float64) for n in clean},
                 "mean": {n: out.mean(dim=0, keepdim=True) for n, out in clean.items()},
                 "resample": corrupted}
        losses = [squared_error(self.forward.run(x, self.outside, stand[a]).y, batch.z)[0] for a in ablations]
        return torch.stack(losses).mean()


# ---------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class KeepResult:
    """A finished run: the model (weights frozen, outputs on y's scale, its graph stored in
    its card's ``kept_circuit``), the last step's three losses, the wall time and the number of
    trained weights. Not certified yet (``circuits/certify.py``)."""

    model: CompiledTransformer
    graph: EdgeGraph
    losses: dict[str, float]
    seconds: float
    parameters: int


def step_batch(program: ir.Program, settings: TrainSettings, step: int, standard: Standardisation) -> StepBatch:
    """Step ``step``'s batch: token programs at a length uniform on 1..T, others at T (``dist``)."""
    seed = batch_seed(settings.seed, step)
    if program.over_tokens:
        length = int(torch.randint(1, program.length + 1, (1,), generator=torch.Generator().manual_seed(seed)))
        x = random_ids(program, settings.batch, seed=seed, length=length)
    else:
        x = draw_inputs(program, settings.dist, settings.batch, seed)
    partner = x[torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed + 1))]
    components = bool(program.output_shape) or program.token_output
    return StepBatch(x, partner, standard.forward(reference_target(program, x), components))


def _checked(settings: TrainSettings, init: CompiledTransformer | None) -> CompiledTransformer:
    if init is None:
        raise TrainError("--keep-circuit trains from a compiled model: give --init MODEL")
    if not 0 <= settings.seed <= MAX_SEED or settings.steps > MAX_STEPS:
        raise TrainError(f"seeds go from 0 to {MAX_SEED:,} and runs up to {MAX_STEPS:,} steps")
    if settings.device != "cpu":
        raise TrainError("--keep-circuit runs on the CPU (the edge-level forward is float64 on the CPU)")
    return init


def train_keeping_circuit(program: ir.Program, settings: TrainSettings, init: CompiledTransformer | None,
                          keep: KeepSettings | None = None) -> KeepResult:
    """Train from ``init`` with the task, interchange and strict terms (the module docstring).

    Raises:
        TrainError: no init model, or settings the run cannot take.
    """
    from ..circuits.graph import circuit_graph

    start = time.monotonic()
    keep = keep or KeepSettings()
    init = _checked(settings, init)
    init_graph = circuit_graph(init)
    torch.manual_seed(settings.seed)
    model, trainable = build_model(program, settings, init)
    graph = kept_graph(init_graph, model)
    standard = estimate_standardisation(program, settings.dist, "cpu")
    standard.unfold_from(model)  # the model outputs z while it trains
    rebalanced = rebalance(model, init, graph, program, Rebalancing(keep.rebalance, seed=settings.seed)) \
        if keep.rebalance else None
    generator = torch.Generator().manual_seed(settings.seed + 1)
    add_noise(trainable, keep.noise, generator)
    losses = CircuitLosses(model, graph, init, init_graph, program, standard)
    optimizer = torch.optim.AdamW(trainable, lr=settings.lr, weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: learning_rate_factor(s, settings.steps))
    last: dict[str, float] = {}
    for step in range(settings.steps):
        batch = step_batch(program, settings, step, standard)
        picks = torch.randperm(len(losses.nodes), generator=generator)[:keep.nodes].tolist()
        terms = {"task": losses.task(batch)}
        if losses.nodes and keep.interchange > 0:
            terms["interchange"] = losses.interchange(batch, [losses.nodes[i] for i in picks])
        if keep.strict > 0:
            terms["strict"] = losses.strict(batch, keep.ablations)
        total = terms["task"] + keep.interchange * terms.get("interchange", 0.0) + keep.strict * terms.get(
            "strict", 0.0)
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
        schedule.step()
        last = {name: float(value.detach()) for name, value in terms.items()}
    parameters = trainable_parameter_count(model)
    fill_zeros(trainable, keep.noise, generator)
    for tensor in trainable:
        tensor.requires_grad_(False)
    standard.fold_into(model)
    assert model.card.trained is not None  # a trained model's card
    trained = model.card.trained.updated(parameters=parameters, keep_circuit=keep.to_json(),
                                         final_losses={k: float(f"{v:.6g}") for k, v in last.items()},
                                         **({} if rebalanced is None else {"rebalanced": rebalanced}))
    kept = KeptCircuit(graph=graph.to_json(), eps=graph.eps, init=init.card.program_name)
    model.card = dataclasses.replace(model.card, trained=trained, kept_circuit=kept)
    return KeepResult(model, graph, last, time.monotonic() - start, parameters)


@dataclass(frozen=True)
class AdmissionTry:
    """One (noise, learning rate) of an admission schedule: the run and its certification."""

    noise: float
    lr: float
    result: KeepResult
    certification: Certification


def train_until_certified(program: ir.Program, settings: TrainSettings, init: CompiledTransformer | None,
                          tries: Sequence[tuple[float, float]], keep: KeepSettings | None = None,
                          samples: int = SAMPLES, seed: int = 0,
                          on_try: Callable[[AdmissionTry], None] | None = None) -> AdmissionTry:
    """Train keeping the circuit at each (noise, learning rate) of ``tries`` in turn (``keep``'s
    other terms, ``settings``' other settings), certify each trained model on its own weights
    (``samples`` random inputs, ``seed``) and stop at the first the certification admits; that
    try, else the last (refused). ``on_try`` sees each try.

    Raises:
        TrainError: as :func:`train_keeping_circuit`; ValueError: no tries.
    """
    if not tries:
        raise ValueError("train_until_certified: no (noise, learning rate) to try")
    keep = keep or KeepSettings()
    for noise, lr in tries:
        result = train_keeping_circuit(program, dataclasses.replace(settings, lr=lr), init,
                                       dataclasses.replace(keep, noise=noise))
        attempt = AdmissionTry(noise, lr, result, certify(result.model, samples=samples, seed=seed))
        if on_try is not None:
            on_try(attempt)
        if attempt.certification.holds:
            break
    return attempt
