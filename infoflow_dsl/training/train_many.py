"""Many runs of one shape trained as one (:mod:`.stacked`): the same runs as ``train`` alone.

Runs that may share a model (:func:`batch_key`: the same program, T, widths, layers, steps,
batch, weight decay, distribution, validation size and device, no ``--init``) differ in seed, peak
learning rate and heads per layer. :func:`train_many` trains them together: each step draws every
run's own batch (run seed s, step k: the generator seed ``batch_seed(s, k)``, on the device, as
alone), computes all targets in one call of the reference evaluator on the device (float64; it is
row by row, so the rows are each run's own targets), and takes one forward, one backward (the
sum of the runs' losses: run r's gradient is its own loss's) and one AdamW step for all of them.
Nothing in the step reads a value back to the host: the validation points (the same as alone:
step 0 and every ``steps // EVALUATIONS`` steps, each run on its own held-out set) read the R
NMSEs at once. Each run's :class:`~.train.TrainResult` is then what ``train`` gives alone, to
float rounding (tests/tools/test_train_many.py); its ``seconds`` is the group's time over R.

``compile`` wraps the step's forward and loss in ``torch.compile`` (opt-in: the first steps pay
its compilation; kept out of the tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import TrainError
from ..language import typed as ir
from .stacked import StackedAdamW, StackedRuns
from .train import (
    EVALUATIONS,
    MAX_SEED,
    MAX_STEPS,
    TrainResult,
    TrainSettings,
    batch_seed,
    draw_inputs,
    estimate_standardisation,
    finished_run,
    learning_rate_factor,
    nmse,
    reference_target,
    squared_errors,
    validation_seed,
)

Tensor = torch.Tensor
#: the residual entries (runs × inputs × rows × d_model) of one validation forward: about 1 MB of
#: float32, so that the stream stays in the cache (at 9 runs of T' = 8, d_model 32: 101 inputs a
#: run; 1,024 a run took 1.5× the CPU time)
VALIDATION_ENTRIES = 2 ** 18


def validation_chunk(runs: int, rows: int, d_model: int) -> int:
    """Held-out inputs per run in one validation forward (at least one)."""
    return max(1, VALIDATION_ENTRIES // (runs * rows * d_model))


def batch_key(settings: TrainSettings) -> tuple[Any, ...] | None:
    """What runs of one model must share (every setting but the seed, the learning rate and the
    heads per layer; the number of layers stays); None for a run that trains alone (``--init``)."""
    if settings.init is not None:
        return None
    s = settings
    return (len(s.heads), s.d_model, s.d_head, s.d_mlp, s.steps, s.batch, s.weight_decay, str(s.dist),
            s.validation, s.device)


def stacked_inputs(program: ir.Program, settings: Sequence[TrainSettings], count: int, seeds: Sequence[int],
                   device: str) -> tuple[Tensor, Tensor]:
    """Every run's inputs (R, count, ...) drawn with its own seed on ``device``, and their
    reference targets (R, count, ...) float64, computed on the device in one call."""
    x = torch.stack([draw_inputs(program, s.dist, count, seed, device) for s, seed in zip(settings, seeds,
                                                                                           strict=True)])
    y = reference_target(program, x.flatten(0, 1))
    return x, y.view(len(settings), count, *y.shape[1:])


def _model_input(x: Tensor, dtype: torch.dtype) -> Tensor:
    return x.to(dtype) if x.dtype.is_floating_point else x


def train_many(program: ir.Program, settings: Sequence[TrainSettings], quiet: bool = False,
               compile: bool = False) -> list[TrainResult]:
    """Train the runs ``settings`` (one :func:`batch_key`) as one stacked model; their results in order."""
    keys = {batch_key(s) for s in settings}
    if len(keys) != 1 or None in keys:
        raise TrainError("train_many: the runs differ in more than seed, learning rate and heads per layer")
    if any(not 0 <= s.seed <= MAX_SEED or s.steps > MAX_STEPS for s in settings):
        raise TrainError(f"seeds go from 0 to {MAX_SEED:,} and runs up to {MAX_STEPS:,} steps (the seed layout)")
    start = time.monotonic()
    first = settings[0]
    device, steps, runs = first.device, first.steps, len(settings)
    components = bool(program.output_shape) or program.token_output
    stack = StackedRuns(program, settings)
    standard = estimate_standardisation(program, first.dist, device)
    optimizer = StackedAdamW(stack.theta, [s.lr for s in settings], first.weight_decay)
    x_val, y_val = stacked_inputs(program, settings, first.validation, [validation_seed(s.seed) for s in settings],
                                  device)
    histories: list[list[tuple[int, float]]] = [[] for _ in settings]

    def losses(theta: Tensor, x: Tensor, z: Tensor) -> Tensor:
        return squared_errors(stack.forward(theta, x), z)[0]  # (R,)

    step_losses: Callable[[Tensor, Tensor, Tensor], Tensor] = torch.compile(losses) if compile else losses

    chunk = validation_chunk(runs, x_val.shape[2] + 1, first.d_model)

    def validate(step: int) -> list[float]:
        with torch.no_grad():
            predicted = torch.cat([stack.forward(stack.theta, _model_input(x_val[:, i:i + chunk], stack.dtype))
                                   for i in range(0, x_val.shape[1], chunk)], dim=1)
        values = [nmse(standard.inverse(predicted[r].to(torch.float64), components), y_val[r], components)
                  for r in range(runs)]
        for history, value in zip(histories, values, strict=True):
            history.append((step, value))
        return values

    every = max(1, steps // EVALUATIONS)
    last = validate(0)
    bar = _progress(steps, quiet, runs)
    for step in range(steps):
        x, y = stacked_inputs(program, settings, first.batch, [batch_seed(s.seed, step) for s in settings], device)
        z = standard.forward(y, components).to(stack.dtype)
        total = step_losses(stack.theta, _model_input(x, stack.dtype), z).sum()
        stack.theta.grad = None
        total.backward()
        grad = stack.theta.grad
        assert grad is not None
        if stack.mask is not None:
            grad.mul_(stack.mask)
        optimizer.step(grad, learning_rate_factor(step, steps))
        if (step + 1) % every == 0 or step + 1 == steps:
            last = validate(step + 1)
        bar.update(1)
    bar.close()
    seconds = (time.monotonic() - start) / runs
    return [finished_run(model, history, final, seconds, standard)
            for model, history, final in zip(stack.unstack(), histories, last, strict=True)]


def _progress(steps: int, quiet: bool, runs: int) -> Any:
    from ..progress import bar

    return bar(total=steps, desc=f"training {runs} runs as one", unit="step", disable=quiet, leave=False)
