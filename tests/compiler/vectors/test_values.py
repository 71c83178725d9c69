"""The expression walker: linear nodes folded exactly, and each (expression, site) lowered once (a
repeated square is one block). That it has a rule for every node class that can reach it is
tests/test_rules.py's completeness test, with every other stage's table."""

from __future__ import annotations

import numpy as np
from lowered import builder, grid, model, program, run

from infoflow_dsl.compiler.vectors.values import values


def test_linear_expressions_fold_into_forms_exactly():
    checked = program("""
input x : R^2 in [-1, 1]
length T = 4
const A : R^{2 x 2} = [[1, 2], [-3, 0.5]]
const w : R^2 = [0.25, -1]
target(t) = A @ x(t) - x(t) / 4 + w
""")
    built = builder(checked)
    results = values(built, checked.target, "token")
    assert not built.blocks and not built.sources
    x = grid(-1.0, 1.0, 41, 4, 2)
    y = run(model(built, results, site="token"), x).numpy()
    a, w = np.array([[1, 2], [-3, 0.5]]), np.array([0.25, -1])
    expected = x.numpy() @ a.T - x.numpy() / 4 + w
    assert np.abs(y - expected).max() <= 1e-14


def test_an_expression_is_lowered_once_per_site():
    checked = program("""
input x : R^2 in [-1, 1]
length T = 4
target(t) = x(t)[1]^2 + relu(x(t)[1]^2 - x(t)[2]) + ||x(t)||^2
""")
    built = builder(checked, share=1e-3)
    (result,) = values(built, checked.target, "token")
    # x(t)[1]^2 once though read twice, one relu, then the norm's own squares of its components
    assert [b.function for b in built.blocks] == ["square", "relu", "square", "square"]
    assert len(built.sources) == 3
    x = grid(-1.0, 1.0, 201, 4, 2)
    a, b = x[..., 0].numpy(), x[..., 1].numpy()
    expected = a**2 + np.maximum(a**2 - b, 0.0) + a**2 + b**2
    error = np.abs(run(model(built, [result], site="token"), x).numpy() - expected)
    assert error.max() <= built.error(result.error)
