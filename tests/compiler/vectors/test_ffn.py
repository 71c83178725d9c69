"""relu, |u|, min, max (exact) and √u (within its share), alone on a builder, as one-layer
per-token models measured against numpy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from lowered import builder, grid, model, program, run

from infoflow_dsl.compiler.vectors.ffn import absolute, maximum, minimum, relu, square_root
from infoflow_dsl.compiler.vectors.quantity import ErrorVec

SIGNED = program("""
input x : R^2 in [-1, 2]
length T = 4
target(t) = x(t)[1]
""")
EXACT = [
    (relu, lambda a, b: np.maximum(a, 0.0), (0.0, 2.0)),
    (absolute, lambda a, b: np.abs(a), (0.0, 2.0)),
    (minimum, np.minimum, (-1.0, 2.0)),
    (maximum, np.maximum, (-1.0, 2.0)),
]


@pytest.mark.parametrize(("construction", "reference", "interval"), EXACT, ids=["relu", "abs", "min", "max"])
def test_relu_abs_min_and_max_are_exact_up_to_rounding(construction, reference, interval):
    built = builder(SIGNED)
    a, b = built.own_token()
    arguments = (a,) if construction in (relu, absolute) else (a, b)
    result = construction(built, *arguments)
    compiled = model(built, [result], site="token")
    assert compiled.n_layers == 1 and [block.layer for block in built.blocks] == [0]
    x = grid(-1.0, 2.0, 301, 4, 2)
    expected = reference(x[..., 0].numpy(), x[..., 1].numpy())
    error = np.abs(run(compiled, x).numpy() - expected)
    assert error.max() <= built.error(result.error) <= 1e-14
    assert not result.error.linear and (result.low, result.high) == interval


def test_min_of_approximate_values_adds_their_errors_and_the_gather_route_takes_the_larger():
    bounds = {}
    for gathered in (False, True):
        built = builder(SIGNED, gathered=gathered)
        a, b = built.own_token()
        a = dataclasses.replace(a, error=ErrorVec((("s1", 2.0),)))
        b = dataclasses.replace(b, error=ErrorVec((("s1", 3.0), ("s2", 1.0))))
        bounds[gathered] = dict(minimum(built, a, b).error.linear)
    assert bounds == {False: {"s1": 5.0, "s2": 1.0}, True: {"s1": 3.0, "s2": 1.0}}


POSITIVE = program("""
input x : R^2 in [0, 4]
length T = 4
target(t) = x(t)[1]
""")


@pytest.mark.parametrize("share", [1e-2, 1e-3])
def test_a_square_root_lies_below_sqrt_u_within_half_its_share(share):
    built = builder(POSITIVE, share=share)
    u, _ = built.own_token()
    result = square_root(built, u)
    x = grid(0.0, 4.0, 2001, 4, 2)
    error = run(model(built, [result], site="token"), x).numpy() - np.sqrt(x[..., 0].numpy())
    assert error.max() <= 1e-12  # chords of a concave function lie below it
    assert -share / 2 - 1e-12 <= error.min() <= -share / 8
    assert -error.min() <= built.error(result.error)
    (block,) = built.blocks
    assert block.function == "sqrt" and block.error == pytest.approx(-error.min(), rel=0.05)
    # the input can reach 0, where √ is not Lipschitz: its error is held below (e/2)²
    (constraint,) = built.constraints
    assert constraint.limit == pytest.approx((share / 2) ** 2)
