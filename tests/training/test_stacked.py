"""stacked: R runs' weights in one θ compute each run's own model, padded heads are masked (their
outputs and their gradients), and the stacked AdamW is torch's AdamW row by row."""

from __future__ import annotations

from dataclasses import replace

import compiled
import pytest
import torch

from infoflow_dsl.errors import TrainError
from infoflow_dsl.training.stacked import StackedAdamW, StackedRuns
from infoflow_dsl.training.train import Distribution, TrainSettings, draw_inputs, reference_target, squared_errors

BASE = TrainSettings(heads=(2, 2), d_model=12, d_head=4, d_mlp=8, steps=5, batch=16, validation=32)
#: seeds, learning rates and heads per layer differ: (1, 2) and (2, 1) are padded to (2, 2)
RUNS = (BASE, replace(BASE, seed=1, heads=(1, 2)), replace(BASE, seed=2, lr=1e-2, heads=(2, 1)))


def inputs(program, runs: int, count: int, device: str) -> torch.Tensor:
    x = torch.stack([draw_inputs(program, Distribution("normal", 1.0), count, seed=40 + r, device=device)
                     for r in range(runs)])
    return x.float() if x.dtype.is_floating_point else x


@pytest.mark.parametrize("name, length", [("intrinsic_2", 4), ("previous_token", 5), ("last_plus_first", 4)])
def test_the_stacked_forward_is_each_runs_own_model(name: str, length: int, device: str) -> None:
    program = compiled.program(name, length)
    settings = [replace(s, device=device) for s in RUNS]
    stack = StackedRuns(program, settings)
    assert stack.heads == (2, 2) and stack.theta.shape[0] == 3 and stack.theta.device.type == device
    x = inputs(program, 3, 9, device)
    with torch.no_grad():
        stacked = stack.forward(stack.theta, x)
        for r, model in enumerate(stack.models):
            assert [len(layer["heads"]) for layer in model.config["layers"]] == list(settings[r].heads)
            torch.testing.assert_close(stacked[r], model(x[r]), rtol=1e-5, atol=1e-5)


def test_a_token_program_stacks_its_embedding_tables(device: str) -> None:
    from programs import TRACR_DIR

    import infoflow_dsl as ifl

    program = ifl.load_program(TRACR_DIR / "reverse.iflow", length=5)
    settings = [replace(s, device=device) for s in RUNS]
    stack = StackedRuns(program, settings)
    x = inputs(program, 3, 7, device)
    with torch.no_grad():
        stacked = stack.forward(stack.theta, x)
        for r, model in enumerate(stack.models):
            torch.testing.assert_close(stacked[r], model(x[r]), rtol=1e-5, atol=1e-5)


def test_padded_heads_are_masked_in_the_output_and_the_gradient(device: str) -> None:
    program = compiled.program("intrinsic_2", 4)
    stack = StackedRuns(program, [replace(s, device=device) for s in RUNS])
    assert stack.mask is not None and stack.head_mask[0] is not None and stack.head_mask[1] is not None
    assert stack.head_mask[0].tolist() == [[1, 1], [1, 0], [1, 1]]
    assert stack.head_mask[1].tolist() == [[1, 1], [1, 1], [1, 0]]
    padded = stack.mask == 0
    assert not bool(stack.theta[padded].any())  # run 1's second layer-0 head, run 2's second layer-1 head
    x = inputs(program, 3, 9, device)
    with torch.no_grad():
        before = stack.forward(stack.theta, x)
        stack.theta[padded] = 7.0  # garbage in every padded entry: the head mask keeps it out of the output
        torch.testing.assert_close(stack.forward(stack.theta, x), before, rtol=0, atol=0)
        stack.theta[padded] = 0.0
    target = reference_target(program, x.double().flatten(0, 1)).view(3, 9).float()
    optimizer = StackedAdamW(stack.theta, [s.lr for s in RUNS], weight_decay=1e-2)
    for _ in range(3):
        stack.theta.grad = None
        squared_errors(stack.forward(stack.theta, x), target)[0].sum().backward()
        grad = stack.theta.grad
        assert grad is not None and bool(grad[stack.mask == 1].any())
        grad.mul_(stack.mask)
        optimizer.step(grad, 1.0)
    assert not bool(stack.theta[padded].any())  # the padded heads never move
    assert bool((stack.theta[~padded] != 0).any())


def test_the_stacked_adamw_is_torchs_adamw_row_by_row(device: str) -> None:
    generator = torch.Generator().manual_seed(3)
    theta = torch.randn(3, 50, generator=generator).to(device)
    grads = [torch.randn(3, 50, generator=generator).to(device) for _ in range(6)]
    lrs, factors = [1e-3, 3e-3, 1e-2], [0.2, 0.6, 1.0, 0.9, 0.5, 0.1]
    stacked = StackedAdamW(theta.clone(), lrs, weight_decay=1e-2)
    for grad, factor in zip(grads, factors, strict=True):
        stacked.step(grad, factor)
    for r, lr in enumerate(lrs):
        alone = theta[r].clone().requires_grad_(True)
        optimizer = torch.optim.AdamW([alone], lr=lr, weight_decay=1e-2)
        for grad, factor in zip(grads, factors, strict=True):
            optimizer.param_groups[0]["lr"] = lr * factor
            alone.grad = grad[r].clone()
            optimizer.step()
        torch.testing.assert_close(stacked.theta[r], alone.detach(), rtol=1e-6, atol=1e-7)


def test_runs_from_an_init_model_are_refused() -> None:
    with pytest.raises(TrainError, match="--init"):
        StackedRuns(compiled.program("intrinsic_2", 4), [replace(BASE, init="model.safetensors")])
