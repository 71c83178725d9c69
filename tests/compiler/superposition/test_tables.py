"""A step table of a packed direction: out(v) exactly at every value and within a quarter of its
gap, and nothing more than its jumps."""

from __future__ import annotations

import itertools
from fractions import Fraction

import torch

from infoflow_dsl.compiler.superposition.tables import Table, table

torch.set_num_threads(1)


def _run(built: Table, v: torch.Tensor) -> torch.Tensor:
    slope, bias, coefficient = (torch.tensor(c, dtype=torch.float64) for c in
                                (built.slopes, built.biases, built.coefficients))
    return torch.relu(v[:, None] * slope + bias) @ coefficient + built.constant


def test_a_table_is_exact_within_a_quarter_of_each_gap_and_steps_only_where_the_value_changes() -> None:
    values = {Fraction(0): Fraction(3), Fraction(1): Fraction(3), Fraction(5, 2): Fraction(-1),
              Fraction(4): Fraction(7), Fraction(9): Fraction(7)}
    built = table(0, values)
    assert len(built.slopes) == 2 * 2  # two jumps (at 5/2 and 4), two units each
    grid = sorted(values)
    gaps = [min([b - a for a, b in itertools.pairwise(grid) if a == v or b == v]) for v in grid]
    for v, g in zip(grid, gaps, strict=True):
        for drift in (-0.2499, 0.0, 0.2499):
            got = _run(built, torch.tensor([float(v) + drift * float(g)], dtype=torch.float64))
            assert abs(float(got[0]) - float(values[v])) < 1e-12
    assert 0.0 < built.rounding < 1e-4
