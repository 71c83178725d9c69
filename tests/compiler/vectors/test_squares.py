"""u² and a·b in FFN blocks, alone on a builder, as one-layer (wide) or deep per-token models:
the measured error against numpy's square and product, within the share and the bound."""

from __future__ import annotations

import numpy as np
import pytest
from lowered import builder, grid, model, program, run

from infoflow_dsl.compiler.vectors.quantity import constant
from infoflow_dsl.compiler.vectors.squares import product, square

PER_TOKEN = program("""
input x : R^2 in [-1, 2]
length T = 4
target(t) = x(t)[1]
""")
SHARE = 1e-3


@pytest.mark.parametrize("route", ["wide", "deep"])
def test_a_square_lies_above_u_squared_within_its_share(route):
    built = builder(PER_TOKEN, share=SHARE, route=route)
    u, _ = built.own_token()
    result = square(built, u)
    compiled = model(built, [result], site="token")
    if route == "wide":
        assert compiled.n_layers == 1 and [b.layer for b in built.blocks] == [0]  # the embedding's ReLU block
    else:
        assert len(built.blocks) > 1 and {b.function for b in built.blocks} == {"tent"}
    x = grid(-1.0, 2.0, 601, 4, 2)
    error = run(compiled, x).numpy() - x[..., 0].numpy() ** 2
    assert error.min() >= -1e-12  # the interpolant of a convex function lies above it
    assert error.max() <= SHARE
    assert error.max() >= SHARE / 8  # a real approximation, not an exact square
    assert error.max() <= built.error(result.error)
    assert list(built.sources) == ["ffn:square#1"] and built.sources["ffn:square#1"].kind == "ffn"
    assert (result.low, result.high) == (0.0, 4.0)


def test_a_product_by_polarisation_errs_by_at_most_its_share():
    built = builder(PER_TOKEN, share=SHARE)
    a, b = built.own_token()
    result = product(built, a, b)
    assert len(built.blocks) == 2  # (λa + b/λ)² and (λa − b/λ)²
    x = grid(-1.0, 2.0, 401, 4, 2)
    expected = x[..., 0].numpy() * x[..., 1].numpy()
    error = np.abs(run(model(built, [result], site="token"), x).numpy() - expected)
    assert error.max() <= SHARE
    assert error.max() <= built.error(result.error)
    assert (result.low, result.high) == (-2.0, 4.0)


def test_the_error_of_a_square_of_an_approximate_input_grows_by_two_u_err_u():
    built = builder(PER_TOKEN, share=SHARE)
    u, _ = built.own_token()
    first = square(built, u)
    second = square(built, first)  # (u²)²: reads an input with error ≤ e
    coefficients = dict(second.error.linear)
    assert coefficients["ffn:square#2"] == 1.0
    assert coefficients["ffn:square#1"] == pytest.approx(2 * first.magnitude)
    assert second.error.extra == pytest.approx(built.error(first.error) ** 2)
    x = grid(-1.0, 2.0, 301, 4, 2)
    error = np.abs(run(model(built, [second], site="token"), x).numpy() - x[..., 0].numpy() ** 4)
    assert error.max() <= built.error(second.error)


def test_products_with_a_constant_or_of_one_form_need_no_polarisation():
    built = builder(PER_TOKEN, share=SHARE)
    a, _ = built.own_token()
    scaled = product(built, constant(3.0), a)
    assert not built.blocks and dict(scaled.form.terms) == {"x[1]": 3.0}
    product(built, a, a)
    assert [b.function for b in built.blocks] == ["square"]
