"""train_many: a run inside a batch is the same run as alone (same batches, the same validation
curve and weights to float rounding), the device-drawn batches are each run's own with the
reference's targets, and runs of different shapes are refused."""

from __future__ import annotations

from dataclasses import replace

import compiled
import pytest
import torch

import infoflow_dsl as ifl
from infoflow_dsl.errors import TrainError
from infoflow_dsl.training.train import Distribution, TrainSettings, batch_seed, draw_inputs, train
from infoflow_dsl.training.train_many import batch_key, stacked_inputs, train_many

BASE = TrainSettings(heads=(2, 2), d_model=12, d_head=4, d_mlp=8, steps=30, batch=32, lr=3e-3, validation=128,
                     dist=Distribution("normal", 1.0))
RUNS = (BASE, replace(BASE, seed=1, heads=(1, 2)), replace(BASE, seed=2, lr=1e-2, heads=(2, 1)))


@pytest.mark.parametrize("name, length", [("intrinsic_2", 4), ("previous_token", 5), ("tracr/reverse", 5)])
def test_a_run_in_a_batch_is_the_same_run_as_alone(name: str, length: int, device: str) -> None:
    """Vectors in, a per-token target, and a token program (ids in, a token output's scores)."""
    from programs import TRACR_DIR

    program = (ifl.load_program(TRACR_DIR / f"{name.split('/')[1]}.iflow", length=length) if name.startswith("tracr/")
               else compiled.program(name, length))
    settings = [replace(s, device=device) for s in RUNS]
    together = train_many(program, settings, quiet=True)
    for s, batched in zip(settings, together, strict=True):
        alone = train(program, s, quiet=True)
        assert [step for step, _ in batched.history] == [step for step, _ in alone.history]
        for (_, a), (_, b) in zip(alone.history, batched.history, strict=True):
            assert b == pytest.approx(a, rel=1e-4)
        assert batched.best_step == alone.best_step and batched.parameters == alone.parameters
        assert batched.standardisation == alone.standardisation
        assert batched.model.state_dict().keys() == alone.model.state_dict().keys()
        x = draw_inputs(program, s.dist, 64, seed=123, device=device)
        x = x.float() if x.dtype.is_floating_point else x
        with torch.no_grad():  # the two final models compute the same function, to float rounding
            torch.testing.assert_close(batched.model(x), alone.model(x), rtol=1e-3, atol=1e-4)
        assert batched.model.config["trained"]["heads"] == list(s.heads)
        assert not any(p.requires_grad for p in batched.model.parameters())


def test_each_runs_batch_is_drawn_on_the_device_with_its_own_seed_and_the_references_targets(device: str) -> None:
    program = compiled.program("intrinsic_2", 8)
    settings = [replace(s, device=device) for s in RUNS]
    seeds = [batch_seed(s.seed, 7) for s in settings]
    x, y = stacked_inputs(program, settings, 64, seeds, device)
    assert x.device.type == device and y.dtype == torch.float64 and y.shape == (3, 64)
    for r, (s, seed) in enumerate(zip(settings, seeds, strict=True)):
        assert torch.equal(x[r], draw_inputs(program, s.dist, 64, seed, device))
        assert torch.equal(y[r], ifl.evaluate(program, x[r]))  # float64, exact: the reference's own values
        torch.testing.assert_close(y[r].cpu(), ifl.evaluate(program, x[r].cpu()), rtol=1e-12, atol=1e-12)
    many = draw_inputs(program, BASE.dist, 20_000, seed=5, device=device).cpu()
    host = draw_inputs(program, BASE.dist, 20_000, seed=5)  # the host's draw: the same distribution
    assert float(many.mean()) == pytest.approx(float(host.mean()), abs=0.01)
    assert float(many.std()) == pytest.approx(float(host.std()), rel=0.01)
    if device == "cpu":
        assert torch.equal(many, host)


def test_runs_of_different_shapes_or_from_an_init_model_do_not_batch() -> None:
    program = compiled.program("intrinsic_2", 4)
    assert batch_key(BASE) == batch_key(replace(BASE, seed=4, lr=1e-2, heads=(3, 1)))
    assert batch_key(BASE) != batch_key(replace(BASE, heads=(2, 2, 2)))
    assert batch_key(replace(BASE, init="m.safetensors")) is None
    for other in (replace(BASE, d_model=16), replace(BASE, steps=31), replace(BASE, init="m.safetensors")):
        with pytest.raises(TrainError):
            train_many(program, [BASE, other], quiet=True)
