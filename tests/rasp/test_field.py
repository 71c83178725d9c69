"""The field's kinds of RASP programs (bench/rasp_suite.py FIELD, issue 50), each compiled with
the default settings, ``ifl.compile(ifl.from_rasp(p, vocab, N), eps=1e-3)``, and brute-forced
against RASP's evaluator; each of these was refused, crashed or answered wrong before: Tracr's
module-level names, values past float32's reach (float64 chosen and said), None, tables of
means (values one float apart), products of numbers, and functions of two numbers past a
table's 20,000 entries (max, of u ± v, of u and v apart)."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import pytest
import torch

import infoflow_dsl as ifl
from infoflow_dsl.rasp.agreement import agreement, every_input, random_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from rasp_suite import FIELD, SuiteProgram

torch.set_num_threads(1)
EPS = 1e-3
BY_NAME = {entry.name: entry for entry in FIELD}
#: A few of each kind, the cheapest (the bench runs them all, at N and 2N).
CHECKED = ("annotated_share", "count_with_values", "not_same_width", "not_b", "earlier_than_first",
           "mean_times_length", "token_times_index", "mean_of_smaller_thousands", "prefix_mean_squares",
           "drop_a", "twelve_over", "upper_unless_a", "none_times_index", "reverse_undefined", "same_defined_count",
           "share_and_token", "largest_share", "smaller_mean_rounded", "same_mean_index", "fractions_max",
           "fractions_both_high")


@cache
def compiled(name: str, length: int) -> tuple[object, ifl.Program, ifl.CompiledTransformer]:
    entry = BY_NAME[name]
    program = entry.build()
    checked = ifl.from_rasp(program, entry.vocab, length)
    return program, checked, ifl.compile(checked, eps=EPS, samples=0)


def inputs(entry: SuiteProgram, length: int) -> list[tuple[object, ...]]:
    return [*every_input(list(entry.vocab), min(3, length)), *random_inputs(list(entry.vocab), length, 60)]


def test_every_kind_has_five_programs_of_its_own() -> None:
    families = {entry.family for entry in FIELD}
    assert len(families) >= 4 and all(sum(e.family == f for e in FIELD) >= 5 for f in families)


@pytest.mark.parametrize("name", CHECKED)
def test_a_program_of_the_field_compiles_exact_by_default(name: str) -> None:
    entry = BY_NAME[name]
    program, checked, model = compiled(name, entry.length)
    found = agreement(program, model, checked, inputs(entry, entry.length))
    assert found.positions > 0 and found.exact(EPS), found


def test_float64_is_chosen_where_float32_cannot_certify_and_said() -> None:
    *_, model = compiled("mean_of_smaller_thousands", 9)
    assert model.config["dtype"] == "float64" and "float32 does not certify ε = 0.001" in model.config["dtype_rule"]
    *_, small = compiled("token_times_index", 9)  # a product, not a table: float32 certifies it
    assert small.config["dtype"] == "float32" and "dtype_rule" not in small.config
    with pytest.raises(ifl.CompileError, match=r"in float32 is above ε = 0\.001"):
        ifl.compile(compiled("mean_of_smaller_thousands", 9)[1], eps=EPS, samples=0, dtype="float32")


def test_none_is_undefined_and_the_program_says_where() -> None:
    program, checked, _ = compiled("drop_a", 6)
    found = agreement(program, compiled("drop_a", 6)[2], checked, inputs(BY_NAME["drop_a"], 6))
    assert found.undefined > 0 and found.positions > 0
    assert "where its function gives None" in checked.source
    assert any("None" in where for where in checked.undefined_in_rasp)


def test_a_function_of_two_large_value_sets_is_written_by_its_structure() -> None:
    """32,761 pairs (181 fractions each): a table was refused; max(u, v) and g(u) + h(v) are a few units."""
    _, checked, model = compiled("fractions_max", 24)
    assert "= max(frac_prevs(t), frac_prevs_2(t))" in checked.source and "sequence_map_table" not in checked.source
    assert model.nonzero_parameter_count() < 181 * 181  # Tracr's MLP: a hidden unit per pair
