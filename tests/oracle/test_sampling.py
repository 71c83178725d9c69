"""``sample_inputs`` draws from the declared domain, deterministically; ``evaluate`` checks shapes."""

from __future__ import annotations

import math

import pytest
import torch
from programs import ALL

import infoflow_dsl as ifl
from infoflow_dsl.language import typed as ir


def program(domain: str, d: int = 3, length: int = 6) -> ir.Program:
    source = f"input x : R^{d} {domain}\nlength T = {length}\ntarget sum_<t> ||x(t)||\n"
    return ifl.parse_program(source.replace("  ", " "), "sampling.iflow")


@pytest.mark.parametrize(("domain", "low", "high"), [
    ("", -1.0, 1.0), ("in [0, 1]", 0.0, 1.0), ("in [-2, 1]", -2.0, 1.0), ("in [-0.5, 3.25]", -0.5, 3.25),
    ("in [2, 2]", 2.0, 2.0),
])
def test_box_samples_lie_in_the_box_and_fill_it(domain: str, low: float, high: float) -> None:
    prog = program(domain)
    assert prog.domain == ir.Box(low, high)
    x = ifl.sample_inputs(prog, 4000, seed=3)
    assert x.shape == (4000, 6, 3) and x.dtype == torch.float64
    assert low <= x.min().item() and x.max().item() <= high
    if high > low:  # uniform: mean (a+b)/2, variance (b-a)^2/12, every coordinate independently
        width = high - low
        samples = x.numel()
        assert abs(x.mean().item() - (low + high) / 2) < 5 * width / math.sqrt(12 * samples)
        assert abs(x.var().item() / (width**2 / 12) - 1) < 0.05
        assert x.min().item() < low + 0.01 * width and x.max().item() > high - 0.01 * width
        assert abs(torch.corrcoef(x.reshape(-1, 3).T)[0, 1].item()) < 0.05


@pytest.mark.parametrize(("radius", "d"), [(1.0, 1), (2.0, 3), (4.0, 2), (0.5, 5)])
def test_ball_samples_lie_in_the_ball_and_are_uniform(radius: float, d: int) -> None:
    prog = program(f"in ball({radius})", d=d)
    assert prog.domain == ir.Ball(radius)
    x = ifl.sample_inputs(prog, 4000, seed=4)
    assert x.shape == (4000, 6, d) and x.dtype == torch.float64
    norms = torch.linalg.vector_norm(x, dim=-1)
    assert norms.max().item() <= radius
    # uniform in the ball: P(||x|| <= r/2) = 2^-d, and the mean is 0
    count = norms.numel()
    fraction = (norms <= radius / 2).double().mean().item()
    assert abs(fraction - 2.0**-d) < 5 * math.sqrt(2.0**-d * (1 - 2.0**-d) / count)
    assert x.mean(dim=(0, 1)).abs().max().item() < 5 * radius / math.sqrt(count)
    assert norms.max().item() > 0.99 * radius


def test_every_table_program_samples_inside_its_domain() -> None:
    for example in ALL:
        prog = ifl.parse_program(example.source, example.path)
        x = ifl.sample_inputs(prog, 50, seed=1)
        assert x.shape == (50, prog.length, prog.dimension), example.name
        if isinstance(prog.domain, ir.Box):
            assert prog.domain.low <= x.min().item() and x.max().item() <= prog.domain.high, example.name
        else:
            assert torch.linalg.vector_norm(x, dim=-1).max().item() <= prog.domain.radius, example.name


def test_shapes_and_length_override() -> None:
    prog = program("in [0, 1]", d=2, length=6)
    assert ifl.sample_inputs(prog, 5).shape == (5, 6, 2)
    assert ifl.sample_inputs(prog, 5, seed=1, length=9).shape == (5, 9, 2)
    assert ifl.sample_inputs(prog, 5, length=1).shape == (5, 1, 2)
    assert ifl.sample_inputs(prog, 0).shape == (0, 6, 2)
    assert ifl.sample_inputs(program("in ball(1)", d=2), 3, length=4).shape == (3, 4, 2)


@pytest.mark.parametrize("domain", ["in [-1, 1]", "in ball(2)"])
def test_same_seed_same_samples_other_seed_other_samples(domain: str) -> None:
    prog = program(domain)
    first = ifl.sample_inputs(prog, 20, seed=7)
    assert torch.equal(first, ifl.sample_inputs(prog, 20, seed=7))
    assert not torch.equal(first, ifl.sample_inputs(prog, 20, seed=8))
    torch.manual_seed(0)  # the global generator plays no part
    again = ifl.sample_inputs(prog, 20, seed=7)
    torch.rand(5)
    assert torch.equal(again, first)


@pytest.mark.parametrize("shape", [(4, 3), (4, 6, 2), (4, 6, 4), (4, 0, 3), (2, 4, 6, 3), (3,)])
def test_evaluate_rejects_x_of_the_wrong_shape(shape: tuple[int, ...]) -> None:
    prog = program("", d=3)
    with pytest.raises(ValueError, match="shape"):
        ifl.evaluate(prog, torch.zeros(shape, dtype=torch.float64))


def test_evaluate_accepts_any_length_up_to_t_and_float32() -> None:
    prog = program("", d=3)
    assert prog.length > 5
    x = ifl.sample_inputs(prog, 4, seed=2, length=5)
    y = ifl.evaluate(prog, x)
    assert y.shape == (4,) and y.dtype == torch.float64
    y32 = ifl.evaluate(prog, x.float())
    assert y32.dtype == torch.float64
    assert torch.allclose(y32, y, atol=1e-5)
