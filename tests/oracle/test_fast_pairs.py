"""The reference's fast path for pair reductions (fast_pairs.py) against its general path.

Acceptance: on every program of the table, ``evaluate`` with the fast path agrees with the
general path (the fast path switched off) to 1e-12 · max(1, |value|), on random inputs and on
the domain's corners (where many pairs tie), also with a min or max reading each side's
distinct rows (repeated_rows.py) at every length; chunks are forced small so that the chunked
reduction is exercised; and the programs with a pair body really take the fast path.
"""

from __future__ import annotations

import sys

import pytest
import torch
from programs import ALL, ExampleProgram

import infoflow_dsl as ifl
import infoflow_dsl.oracle.fast_pairs as fast_pairs
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.transformer import repeated_rows

evaluate_module = sys.modules["infoflow_dsl.oracle.evaluate"]  # the package exports a function of that name

TOLERANCE = 1e-12
PAIR_PROGRAMS = {  # the table's programs whose target holds a pair reduction of a pair form
    "min_pairwise", "intrinsic_2", "intrinsic_3", "intrinsic_4", "intrinsic_5", "intrinsic_6",
    "pairwise_distinct", "ordered_pairs", "equal_positions", "bilinear_randn", "squared_distance_ball",
    "linked_mean",
}
DISTINCT_PROGRAMS = {  # those whose pair reduction is a min or max without position conditions
    "min_pairwise", "intrinsic_2", "intrinsic_3", "intrinsic_4", "intrinsic_5", "intrinsic_6", "bilinear_randn",
}


def _general(program: ifl.Program, x: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> torch.Tensor:
    with monkeypatch.context() as patch:
        patch.setattr(evaluate_module, "reduce_pairs", lambda *_: None)
        return ifl.evaluate(program, x)


@pytest.mark.parametrize("rows", ["every", "distinct"])
@pytest.mark.parametrize("example", ALL, ids=lambda e: e.name)
def test_fast_path_agrees_with_the_general_path(example: ExampleProgram, rows: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``rows="distinct"``: a min or max without conditions reads each side's distinct rows at
    every length (repeated_rows' thresholds lowered), as it does at T ≥ 512."""
    program = ifl.parse_program(example.source, example.path)
    x = model_inputs(program, 12, seed=3, corners=12)  # (24, T, d): random inputs, then corners
    calls: list[bool] = []
    real = fast_pairs.reduce_pairs

    def counted(*arguments: object) -> torch.Tensor | None:
        result = real(*arguments)  # type: ignore[arg-type]
        calls.append(result is not None)
        return result

    distinct: list[bool] = []
    if rows == "distinct":
        monkeypatch.setattr(repeated_rows, "MIN_LENGTH", 1)
        monkeypatch.setattr(repeated_rows, "SPARSITY", 1)
        monkeypatch.setattr(fast_pairs, "distinct_rows",
                            lambda r: distinct.append(True) or repeated_rows.distinct_rows(r))
    monkeypatch.setattr(fast_pairs, "CHUNK_ELEMENTS", 5 * x.shape[0] * x.shape[1])  # 5 rows per chunk
    monkeypatch.setattr(evaluate_module, "reduce_pairs", counted)
    fast = ifl.evaluate(program, x)
    general = _general(program, x, monkeypatch)
    assert fast.shape == general.shape
    assert torch.equal(fast.isnan(), general.isnan())
    gap = (fast - general).abs().nan_to_num(0.0)
    assert bool((gap <= TOLERANCE * general.abs().nan_to_num(0.0).clamp_min(1.0)).all()), float(gap.max())
    assert any(calls) == (example.name in PAIR_PROGRAMS)
    assert any(distinct) == (rows == "distinct" and example.name in DISTINCT_PROGRAMS)


def test_the_table_names_only_its_own_programs() -> None:
    assert DISTINCT_PROGRAMS <= PAIR_PROGRAMS <= {example.name for example in ALL}


def test_masks_and_means_at_a_length_with_a_chunk_remainder(monkeypatch: pytest.MonkeyPatch) -> None:
    program = ifl.parse_program("input x : R^3\nlength T = 11\ntarget mean_<s, t : s < t> ||x(t) - x(s)||^2 "
                                "+ max_<s, t : s != t> <x(s), x(t)>\n")
    x = model_inputs(program, 7, seed=5, corners=3)
    monkeypatch.setattr(fast_pairs, "CHUNK_ELEMENTS", 4 * x.shape[0] * x.shape[1])  # 11 rows: chunks of 4, 4, 3
    fast = ifl.evaluate(program, x)
    general = _general(program, x, monkeypatch)
    assert float((fast - general).abs().max()) <= TOLERANCE * max(1.0, float(general.abs().max()))
