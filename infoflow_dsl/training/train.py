"""``train``: a transformer of the compiled family, learned from the reference evaluator.

The trained model IS a :class:`~infoflow_dsl.transformer.model.CompiledTransformer` whose weights require
gradients: the same embedding (``[x, 1] W_E`` plus its ReLU block), readout token, attention
heads (one β per head, no masks) and FFN blocks, so it saves in the same file format and
``load``, ``check`` and the hooks work on it. The positional code ``pos_embed.W_pos`` is learned
when the target reads positions (a fixed position, ``T`` or a condition between positions) and
is all zeros otherwise (the target is then permutation-invariant, as is the model).

Each step draws a fresh batch x (B, T, d) and its exact target y = evaluate(program, x) (float64),
both on the training device (the reference evaluator is torch code: float64 there too). The model
is trained on standardised targets z = (y − μ_k)/σ, μ_k the mean of output component k and σ² the
variance of :func:`target_variance`, both estimated once from a fixed draw of 4,096 inputs (the
same for every seed: ``STANDARDISATION_SEED``, never a training or validation seed); at the end μ
and σ are folded into the readout (W_U ← σ W_U, b_U ← σ b_U + μ), so the saved model outputs y.
The NMSE is unchanged by the standardisation: ŷ = σ ẑ + μ gives MSE(ŷ, y) = σ² MSE(ẑ, z) and
Var(y) = σ² Var(z), one σ for every component, and the shift μ_k moves neither the error nor the
centred variance.
The loss is the mean squared error over the defined targets (per-token targets are NaN where
undefined). AdamW (lr 1e-3, weight decay 1e-2 by default), linear warm-up over the first 5% of
the steps, then cosine decay to 0. Validation: NMSE = MSE / Var(target) on a fixed held-out set
(the variance taken per output component around its mean), measured on y (the readout mapped
back), at step 0 and ``EVALUATIONS`` times over the run. A run reports the NMSE of its best
validation point after step 0 (``best_nmse``, as the papers report) and that of the last step
(``final_nmse``); the model returned is the last step's. Seeds: run seed s draws training step k
with the generator seed s·2^34 + k + 1 and its held-out set with s·2^34 + 2^33 (``batch_seed``,
``validation_seed``), so no batch of any run shares a seed with any held-out set (runs of up to
2^32 steps).

Inputs: ``uniform`` draws from the declared domain (``sampling.sample_inputs``); ``normal[:σ]``
draws every coordinate from N(0, σ²) (σ = 1 by default), *not* projected into the domain, as in
the papers' experiments (docs/theory.md §2): the reference evaluator is exact for any real input.

**Token programs** (language v3) train the token model family: ``embed.W_E`` is a learned table
[V, d_model] (no ReLU block), the positional code is always learned (positions and ``len`` are
numbers there), and inputs are uniform random ids of length T (``--dist`` does not apply). A
token output is learned as its V scores regressing onto the one-hot of the reference's token
(the compiled models' own scores), so the loss and the NMSE read the same way; the answer is the
scores' argmax (``check`` reports the accuracy).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import TrainError
from ..language import typed as ir
from ..oracle.evaluate import constant, evaluate
from ..oracle.sampling import sample_inputs
from ..oracle.tokens import random_ids
from ..transformer.card import (
    CARD_FORMAT,
    HeadCard,
    LayerCard,
    ModelCard,
    OutputVocabularyCard,
    ProgramRecord,
    Trained,
    VocabularyCard,
)
from ..transformer.model import CompiledTransformer

# The settings, seeds and constants of a run (training/settings.py), re-exported here.
from .settings import EVALUATIONS as EVALUATIONS
from .settings import MAX_SEED as MAX_SEED
from .settings import MAX_STEPS as MAX_STEPS
from .settings import SEED_BLOCK as SEED_BLOCK
from .settings import STANDARDISATION_DRAW as STANDARDISATION_DRAW
from .settings import STANDARDISATION_SEED as STANDARDISATION_SEED
from .settings import WARMUP_FRACTION as WARMUP_FRACTION
from .settings import Distribution as Distribution
from .settings import TrainSettings as TrainSettings
from .settings import batch_seed as batch_seed
from .settings import head_budget as head_budget
from .settings import parse_distribution as parse_distribution
from .settings import validation_seed as validation_seed

Tensor = torch.Tensor


# ---------------------------------------------------------------------------- the model


def reads_positions(program: ir.Program) -> bool:
    """Whether the target depends on where tokens are: a fixed position, ``T``, a condition
    between positions, or a position offset (``x(t - 1)``)."""
    nodes = [program.target, *ir.sub_nodes(program.target), *getattr(program, "token_conditions", ())]
    position_nodes = (ir.FixedPosition, ir.LastPosition, ir.PositionCondition)
    return any(isinstance(node, position_nodes) or getattr(node, "offset", 0) != 0 for node in nodes)


def per_token(program: ir.Program) -> bool:
    """Whether the target is read at every token (docs/language.md, v2); False before that existed."""
    return bool(getattr(program, "per_token", False))


def trained_card(program: ir.Program, settings: TrainSettings,
                 masks: Mapping[tuple[int, int], tuple[Any, ...]] | None = None) -> ModelCard:
    """The model's card: what ``CompiledTransformer``, ``load`` and ``check`` read. Heads have no
    masks unless ``masks`` gives one for (layer, head) (kept from an ``--init`` model)."""
    masks = masks or {}
    layers = tuple(LayerCard(heads=tuple(HeadCard(name=f"L{i + 1}H{h + 1}", mask=masks.get((i, h), ()))
                                         for h in range(count)))
                   for i, count in enumerate(settings.heads))
    card = ModelCard(
        T=program.length, d=program.dimension, d_model=settings.d_model, output_shape=tuple(program.output_shape),
        min_length=1, exact_length_only=False, layers=layers, dtype="float32", format=CARD_FORMAT,
        program=ProgramRecord(name=Path(program.path).name, source=program.source, margin=program.margin),
        trained=Trained.of(settings.to_json()),
    )
    if per_token(program):
        card = dataclasses.replace(card, output="token")
    if program.over_tokens:  # the token model family (transformer.config): ids in, W_E [V, D]
        vocabulary = program.token_vocabulary
        card = dataclasses.replace(
            card, input="tokens", token_output=program.token_output, d=vocabulary.size,
            vocabulary=VocabularyCard.of(vocabulary.names, vocabulary.values),
            output_shape=(program.output_vocabulary.size,) if program.token_output else card.output_shape,
            output_vocabulary=None if program.token_table is None else OutputVocabularyCard(
                names=tuple(program.token_table.tokens)))
    return card


def _widths(settings: TrainSettings) -> dict[str, int]:
    widths = {"M_embed": settings.d_mlp}
    for i in range(len(settings.heads)):
        widths |= {f"E_{i}": settings.d_head, f"V_{i}": settings.d_head, f"M_{i}": settings.d_mlp}
    return widths


def random_tensors(card: ModelCard, widths: Mapping[str, int], learn_positions: bool,
                   generator: torch.Generator) -> dict[str, Tensor]:
    """Initial weights: matrices (fan_in, ...) ~ N(0, 1/fan_in), the heads' W_Q/W_K/W_V likewise
    per head, biases 0, β = 1/√(d_head), readout token N(0, 1/D); W_pos ~ N(0, 1/(T+1)) when the
    positions are learned, else 0. Output projections (W_O, W_out, W_E2) are scaled by 1/√(2L)."""
    layers = max(len(card.layers), 1)
    tensors: dict[str, Tensor] = {}
    for name, symbolic in card.spec.expected_shapes().items():
        shape = tuple(widths[s] if isinstance(s, str) else s for s in symbolic)
        leaf = name.rsplit(".", 1)[1]
        if leaf.startswith("b_") or (leaf == "W_pos" and not learn_positions):
            tensors[name] = torch.zeros(shape, dtype=torch.float64)
        elif leaf == "beta":
            key_width = widths[f"E_{name.split('.')[1]}"]
            tensors[name] = torch.full(shape, 1.0 / math.sqrt(max(key_width, 1)), dtype=torch.float64)
        else:
            fan_in = shape[-2] if len(shape) >= 2 else shape[-1]
            scale = 1.0 / math.sqrt(max(fan_in, 1))
            if leaf in ("W_O", "W_out", "W_E2"):
                scale /= math.sqrt(2 * layers)
            tensors[name] = torch.randn(shape, generator=generator, dtype=torch.float64) * scale
    return tensors


#: Tensors whose padded entries write into the residual stream or the output (the output side of an
#: added unit, head or value direction, or a write into an added residual direction): zero, so the
#: padded model computes what the init model computes. The others (W_E1, W_Q, W_K, W_V, W_in, W_U)
#: read: their padded entries keep their random values, so added units get a gradient.
OUTPUT_SIDE = frozenset({"W_E", "W_E2", "b_E1", "cls", "W_pos", "W_O", "W_out", "b_out", "b_in", "b_U"})


def padded_tensors(init: CompiledTransformer, random: Mapping[str, Tensor], learn: bool = True) -> dict[str, Tensor]:
    """``init``'s weights in the leading corner of tensors shaped like ``random``.

    With ``learn`` the padded entries of input-side tensors (those not in :data:`OUTPUT_SIDE`) keep
    their random values and output-side ones are 0; the new query/key directions of ``init``'s own
    heads are random in W_Q and 0 in W_K (q·k gains q_new·0 = 0). Every added unit, head or
    direction then reads something but writes 0, and every added residual direction holds 0, so
    the model's output is that of the all-zeros padding (``learn=False``) bit for bit, while the
    output-side weights get the gradient a·δ ≠ 0 (a: the added unit's activation) and move. The
    new heads' β is 1/√(d_head) (0 with ``learn=False``; their W_O is 0 either way)."""
    state = {name: (t.to_dense() if t.is_sparse else t).detach().to("cpu", torch.float64)
             for name, t in init.state_dict().items()}  # weights held sparse: made dense, to be trained
    out: dict[str, Tensor] = {}
    for name, like in random.items():
        leaf = name.rsplit(".", 1)[1]
        tensor = like.clone() if learn and leaf not in OUTPUT_SIDE else torch.zeros_like(like)
        if name in state:
            source = state[name]
            if any(s > t for s, t in zip(source.shape, tensor.shape, strict=True)):
                raise TrainError(f"--init: tensor {name} has shape {list(source.shape)}, larger than the "
                                 f"requested {list(tensor.shape)}; ask for sizes at least the init model's")
            if leaf == "W_K":
                tensor[: source.shape[0], :, source.shape[2]:] = 0.0  # the init heads' new key directions
            tensor[tuple(slice(0, s) for s in source.shape)] = source
        out[name] = tensor
    return out


def _init_sizes(init: CompiledTransformer, settings: TrainSettings) -> dict[str, int]:
    """Widths at least the init model's (the requested ones otherwise)."""
    widths = dict(_widths(settings))
    widths["M_embed"] = max(widths["M_embed"], init.d_mlp_embedding)
    for i, block in enumerate(init.blocks):
        a = block.attn
        widths[f"E_{i}"] = max(widths[f"E_{i}"], int(a.W_Q.shape[2]))
        widths[f"V_{i}"] = max(widths[f"V_{i}"], int(a.W_V.shape[2]))
        widths[f"M_{i}"] = max(widths[f"M_{i}"], int(block.mlp.W_in.shape[1]))
    return widths


def build_model(program: ir.Program, settings: TrainSettings, init: CompiledTransformer | None = None,
                learning_padding: bool = True) -> tuple[CompiledTransformer, list[Tensor]]:
    """The trainable model and the tensors to optimise (every parameter; W_pos when learned);
    ``init``'s weights padded by :func:`padded_tensors` (``learn=learning_padding``)."""
    from ..pipeline.lowering import refuse_v3

    refuse_v3(program, "trained")  # brackets over vectors
    learn_positions = reads_positions(program) or program.over_tokens
    masks: dict[tuple[int, int], tuple[Any, ...]] = {}
    widths = _widths(settings)
    if init is not None:
        _check_init(program, settings, init)
        widths = _init_sizes(init, settings)
        masks = {(i, h): head.conditions for i, layer in enumerate(init.card.layers)
                 for h, head in enumerate(layer.heads)}
    card = trained_card(program, settings, masks)
    generator = torch.Generator().manual_seed(settings.seed)
    tensors = random_tensors(card, widths, learn_positions, generator)
    if init is not None:
        tensors = padded_tensors(init, tensors, learn=learning_padding)
    model = CompiledTransformer(card, tensors, device=settings.device, dtype=torch.float32, sparse=False)
    trainable: list[Tensor] = list(model.parameters())
    for p in trainable:
        p.requires_grad_(True)
    if learn_positions:
        model.pos_embed.W_pos.requires_grad_(True)
        trainable.append(model.pos_embed.W_pos)
    return model, trainable


def _check_init(program: ir.Program, settings: TrainSettings, init: CompiledTransformer) -> None:
    expected = trained_card(program, settings)  # a token program's d is its vocabulary, its output V scores
    if (init.d, init.T, tuple(init.output_shape)) != (expected.d, expected.T, expected.output_shape):
        raise TrainError(f"--init: the model has d = {init.d}, T = {init.T}, output {list(init.output_shape)}; "
                         f"the target has d = {expected.d}, T = {expected.T}, "
                         f"output {list(expected.output_shape)}")
    if init.d_model > settings.d_model:
        raise TrainError(f"--init: the model has d_model = {init.d_model}, more than --d-model {settings.d_model}")
    compiled = init.card.heads_per_layer
    if len(compiled) > len(settings.heads) or any(c > h for c, h in zip(compiled, settings.heads, strict=False)):
        raise TrainError(f"--init: the model has heads per layer {compiled}, more than --heads "
                         f"{','.join(map(str, settings.heads))}")


def trainable_parameter_count(model: CompiledTransformer) -> int:
    """Weights trained: every parameter, plus the positional code when it is learned."""
    positions = model.pos_embed.W_pos
    return model.parameter_count() + (positions.numel() if positions.requires_grad else 0)


# ---------------------------------------------------------------------------- data and loss


def draw_inputs(program: ir.Program, dist: Distribution, count: int, seed: int,
                device: str | torch.device = "cpu") -> Tensor:
    """``count`` inputs (count, T, d), float64, from ``dist``, drawn on ``device`` by a generator
    of that device seeded with ``seed``: the same for the same seed and device (on the CPU, the
    host draw of ``sample_inputs``)."""
    if program.over_tokens:  # uniform random ids of length T, drawn on the host (as check draws them)
        return random_ids(program, count, seed=seed, length=program.length).to(device)
    if dist.kind == "uniform":
        return sample_inputs(program, count, seed=seed, device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    return dist.sigma * torch.randn((count, program.length, program.dimension), generator=generator,
                                    dtype=torch.float64, device=device)


def squared_error(predicted: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """(mean squared error over the defined targets, number defined): NaN targets are left out."""
    mse, count = squared_errors(predicted.unsqueeze(0), target.unsqueeze(0))
    return mse[0], count[0]


def squared_errors(predicted: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Per run (the leading axis R): (mean squared error over its defined targets, number defined),
    each (R,); NaN targets are left out."""
    if predicted.shape != target.shape:
        raise TrainError(f"the model outputs {tuple(predicted.shape[1:])}, the target {tuple(target.shape[1:])}")
    defined = ~torch.isnan(target)
    diff = torch.where(defined, predicted - torch.nan_to_num(target), torch.zeros_like(predicted))
    count = defined.flatten(1).sum(dim=1)
    return (diff * diff).flatten(1).sum(dim=1) / count.clamp_min(1), count


def _component_rows(target: Tensor, components: bool) -> Tensor:
    return target.reshape(-1, target.shape[-1]) if components else target.reshape(-1, 1)  # (N, K)


def component_means(target: Tensor, components: bool) -> Tensor:
    """The mean of each output component over the defined entries: (K,), K = 1 for a scalar target."""
    flat = _component_rows(target, components)
    count = (~torch.isnan(flat)).sum(dim=0).clamp_min(1)
    return torch.nan_to_num(flat).sum(dim=0) / count


def target_variance(target: Tensor, components: bool) -> float:
    """Var(target) over the defined entries, per output component (last axis when ``components``)
    around that component's mean, then averaged over the components."""
    flat = _component_rows(target, components)
    defined = ~torch.isnan(flat)
    count = defined.sum(dim=0).clamp_min(1)
    centred = torch.where(defined, flat - component_means(target, components), torch.zeros_like(flat))
    return float(((centred**2).sum(dim=0) / count).mean())


@dataclass(frozen=True)
class Standardisation:
    """z = (y − μ_k)/σ: per-component means μ (K,) and one scale σ (see the module docstring)."""

    mean: tuple[float, ...]
    scale: float

    @staticmethod
    def estimate(target: Tensor, components: bool) -> Standardisation:
        """μ_k and σ = √Var(target) (:func:`target_variance`) of a draw; σ = 1 for a constant target."""
        variance = target_variance(target, components)
        scale = math.sqrt(variance) if variance > 0 and math.isfinite(variance) else 1.0
        return Standardisation(tuple(float(m) for m in component_means(target, components)), scale)

    def _mean(self, like: Tensor, components: bool) -> Tensor:
        mean = constant(self.mean, like.dtype, like.device)  # on a GPU copied once, not every step
        return mean if components else mean.reshape(())

    def forward(self, y: Tensor, components: bool) -> Tensor:
        """z = (y − μ)/σ."""
        return (y - self._mean(y, components)) / self.scale

    def inverse(self, z: Tensor, components: bool) -> Tensor:
        """y = σ z + μ."""
        return z * self.scale + self._mean(z, components)

    def fold_into(self, model: CompiledTransformer) -> None:
        """Make ``model`` output σ z + μ where it output z: W_U ← σ W_U, b_U ← σ b_U + μ."""
        with torch.no_grad():
            model.unembed.W_U.mul_(self.scale)
            b = model.unembed.b_U
            b.copy_(b * self.scale + torch.tensor(self.mean, dtype=b.dtype, device=b.device))

    def unfold_from(self, model: CompiledTransformer) -> None:
        """The inverse of :meth:`fold_into`: W_U ← W_U/σ, b_U ← (b_U − μ)/σ."""
        with torch.no_grad():
            model.unembed.W_U.div_(self.scale)
            b = model.unembed.b_U
            b.copy_((b - torch.tensor(self.mean, dtype=b.dtype, device=b.device)) / self.scale)


def nmse(predicted: Tensor, target: Tensor, components: bool) -> float:
    """MSE / Var(target) (see :func:`target_variance`); inf when the target is constant."""
    mse, _ = squared_error(predicted.to(torch.float64), target)
    variance = target_variance(target, components)
    return float(mse) / variance if variance > 0 else math.inf


def predictions(model: CompiledTransformer, x: Tensor, batch: int = 1024) -> Tensor:
    """The model on inputs x (N, T, d), in batches, without gradients: float64 on x's device."""
    with torch.no_grad():
        return torch.cat([model(as_input(model, x[i:i + batch])).to(x.device, torch.float64)
                          for i in range(0, x.shape[0], batch)])


def as_input(model: CompiledTransformer, x: Tensor) -> Tensor:
    """x on the model's device: vectors in its dtype, token ids as they are (int64)."""
    return x.to(model.device) if not x.dtype.is_floating_point else x.to(model.device, model.dtype)


def reference_target(program: ir.Program, x: Tensor) -> Tensor:
    """What the model is trained towards: the reference's values; for a token output the one-hot
    of the reference's token, (N, [T,] V) float64, NaN where a per-token target is undefined."""
    y = evaluate(program, x)
    if not program.token_output:
        return y
    size = program.output_vocabulary.size
    onehot = torch.nn.functional.one_hot(y.clamp_min(0), size).to(torch.float64)
    return torch.where((y < 0).unsqueeze(-1), torch.nan, onehot)


def model_nmse(model: CompiledTransformer, program: ir.Program, x: Tensor, y: Tensor | None = None,
               batch: int = 1024) -> float:
    """NMSE of ``model`` on inputs x (N, T, d) against the reference (``y`` when already known)."""
    y = reference_target(program, x) if y is None else y
    return nmse(predictions(model, x, batch), y, bool(program.output_shape) or program.token_output)


# ---------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class TrainResult:
    """A finished run: the model of the last step (weights frozen again, outputs on y's scale), the
    NMSE of its last validation point (``final_nmse``) and of the best one after step 0
    (``best_nmse``, at ``best_step``), the validation curve [(step, NMSE)] from step 0, the wall
    time, the number of trained weights and the standardisation of the targets."""

    model: CompiledTransformer
    final_nmse: float
    best_nmse: float
    best_step: int
    history: tuple[tuple[int, float], ...]
    seconds: float
    parameters: int
    standardisation: Standardisation


def learning_rate_factor(step: int, steps: int) -> float:
    """Linear warm-up over the first 5% of the steps, then cosine decay from 1 to 0."""
    warmup = max(1, int(WARMUP_FRACTION * steps))
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def _progress(steps: int, quiet: bool) -> Any:
    from ..progress import bar

    return bar(sys.stderr, total=steps, desc="training", unit="step", disable=quiet, leave=False)


def estimate_standardisation(program: ir.Program, dist: Distribution, device: str) -> Standardisation:
    """μ and σ of the target on the fixed draw of ``STANDARDISATION_DRAW`` inputs from ``dist``."""
    x = draw_inputs(program, dist, STANDARDISATION_DRAW, STANDARDISATION_SEED, device)
    return Standardisation.estimate(reference_target(program, x), bool(program.output_shape) or program.token_output)


def train(program: ir.Program, settings: TrainSettings, init: CompiledTransformer | None = None,
          quiet: bool = False, on_validation: Callable[[int, float], None] | None = None) -> TrainResult:
    """Train a model of the compiled family on ``program`` (see the module docstring)."""
    if not 0 <= settings.seed <= MAX_SEED or settings.steps > MAX_STEPS:
        raise TrainError(f"seeds go from 0 to {MAX_SEED:,} and runs up to {MAX_STEPS:,} steps (the seed layout), "
                         f"got seed {settings.seed} and {settings.steps:,} steps")
    start = time.monotonic()
    torch.manual_seed(settings.seed)
    device = settings.device
    components = bool(program.output_shape) or program.token_output
    model, trainable = build_model(program, settings, init)
    standard = estimate_standardisation(program, settings.dist, device)
    if init is not None:
        standard.unfold_from(model)  # the init model outputs y; trained, the model outputs z
    optimizer = torch.optim.AdamW(trainable, lr=settings.lr, weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: learning_rate_factor(s, settings.steps))
    x_val = draw_inputs(program, settings.dist, settings.validation, validation_seed(settings.seed), device)
    y_val = reference_target(program, x_val)  # (N, ...) float64, on the device
    history: list[tuple[int, float]] = []

    def validate(step: int) -> float:
        value = nmse(standard.inverse(predictions(model, x_val), components), y_val, components)
        history.append((step, value))
        if on_validation is not None:
            on_validation(step, value)
        return value

    every = max(1, settings.steps // EVALUATIONS)
    last = validate(0)
    bar = _progress(settings.steps, quiet)
    for step in range(settings.steps):
        x = draw_inputs(program, settings.dist, settings.batch, batch_seed(settings.seed, step), device)
        z = standard.forward(reference_target(program, x), components).to(dtype=model.dtype)  # (B, ...)
        loss, _ = squared_error(model(as_input(model, x)), z)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if (step + 1) % every == 0 or step + 1 == settings.steps:
            last = validate(step + 1)
            bar.set_postfix(nmse=f"{last:.3g}")
        bar.update(1)
    bar.close()
    return finished_run(model, history, last, time.monotonic() - start, standard)


def finished_run(model: CompiledTransformer, history: list[tuple[int, float]], last: float, seconds: float,
                 standard: Standardisation) -> TrainResult:
    """A run's result: its weights frozen again, the standardisation folded into the readout (the
    model outputs y), the figures written into its card's ``trained`` record."""
    parameters = trainable_parameter_count(model)
    for tensor in [*model.parameters(), model.pos_embed.W_pos]:
        tensor.requires_grad_(False)
    standard.fold_into(model)
    best_step, best = min(history[1:] or history, key=lambda point: (point[1], point[0]))
    assert model.card.trained is not None  # built by trained_card
    model.card = dataclasses.replace(model.card, trained=model.card.trained.updated(
        final_nmse=float(f"{last:.6g}"), best_nmse=float(f"{best:.6g}"), best_step=best_step, parameters=parameters,
        target_mean=list(standard.mean), target_scale=standard.scale))
    return TrainResult(model=model, final_nmse=last, best_nmse=best, best_step=best_step, history=tuple(history),
                       seconds=seconds, parameters=parameters, standardisation=standard)
