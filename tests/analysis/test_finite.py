"""Finite value sets, smallest gaps and the separation of finite-valued pairwise functions
(analysis/finite.py), checked against enumeration."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import torch
from programs import TOKENS

import infoflow_dsl as ifl
from infoflow_dsl.analysis.finite import comparison_gaps, finite_domain, smallest_gap, value_set
from infoflow_dsl.analysis.schedule import build_schedule
from infoflow_dsl.analysis.tree import build_tree


def categorical(length: int) -> str:
    return f'input x : token {{"a", "b", "c"}}\nlength T = {length}\n'


def _target_set(source: str):
    program = ifl.parse_program(source)
    return value_set(program.target, finite_domain(program)), program  # type: ignore[arg-type]


def test_a_count_takes_every_whole_number_up_to_T() -> None:
    values, _ = _target_set(categorical(5) + 'target sum_<s> [x(s) == "a"]\n')
    assert values == frozenset(Fraction(k) for k in range(6))


@pytest.mark.parametrize("length", [2, 3, 5, 8])
def test_prefix_means_of_brackets_are_at_least_one_over_T_times_T_minus_1_apart(length: int) -> None:
    """k/m for m ≤ T: the closest distinct pair is 1/(T(T−1)) (Farey neighbours), as docs/language.md states."""
    values, _ = _target_set(categorical(length) + 'target(t) = mean_<s : s <= t> [x(s) == "a"]\n')
    assert values == frozenset(Fraction(k, m) for m in range(1, length + 1) for k in range(m + 1))
    assert smallest_gap(values, values) == Fraction(1, length * (length - 1))


def test_sums_and_means_of_a_sparse_body_are_its_sumsets_not_a_lattice() -> None:
    """A body of few values far apart (997·x + 13): m terms sum to 9m + 1 values, not the
    quantum's whole lattice between the extremes (which passed the cap: no value set at all)."""
    digits = "input x : token {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}\nlength T = 9\n"
    body = {997 * x + 13 for x in range(10)}
    sums, _ = _target_set(digits + "target(t) = sum_<s> (997 * x(s) + 13)\n")
    assert sums == frozenset(Fraction(sum(c)) for m in range(10)  # a sum of 0..T terms (a range may be shorter)
                             for c in itertools.combinations_with_replacement(sorted(body), m))
    means, _ = _target_set(digits + "target(t) = mean_<s : s <= t> (997 * x(s) + 13)\n")
    assert means is not None and Fraction(13) in means and Fraction(997 * 9 + 13) in means
    assert Fraction(997 * 4 + 13 + 997 * 5 + 13, 2) in means and Fraction(14) not in means


def test_the_sets_contain_every_value_the_reference_takes() -> None:
    """Soundness by enumeration: every input of every length at T = 4."""
    for example in TOKENS:
        program = ifl.parse_program(example.source, example.path, length=4)
        if program.token_output:
            continue
        values = value_set(program.target, finite_domain(program))  # type: ignore[arg-type]
        if values is None:
            continue
        size = program.vocabulary.size  # type: ignore[union-attr]
        for length in range(1, 5):
            batch = [list(p) for p in itertools.product(range(size), repeat=length)]
            got = ifl.evaluate(program, torch.tensor(batch)).flatten()
            seen = {Fraction(float(v)).limit_denominator(10**6) for v in got.tolist() if v == v}
            assert seen <= values, (example.name, sorted(seen - values)[:5])


def test_gaps_of_numeric_tokens_and_of_sort() -> None:
    program = ifl.parse_program("input x : token {1, 2.5, 4}\nlength T = 3\ntarget(t) = [x(t) < 2]\n")
    (pair,) = comparison_gaps(program)
    assert (pair.text, pair.gap, pair.left_values, pair.right_values) == ("x(t) < 2", Fraction(1, 2), 3, 1)
    program = ifl.parse_program(next(e for e in TOKENS if e.name == "sort").source)
    gaps = {p.text: p.gap for p in comparison_gaps(program)}
    assert gaps == {"x(r) < x(s)": 1, "x(r) == x(s)": 1, "r < s": 1}


def test_no_gap_for_a_program_over_vectors() -> None:
    program = ifl.parse_program("input x : R^2\nlength T = 3\nmargin 0.1\ntarget [x(1)[1] < 0]\n")
    assert finite_domain(program) is None and comparison_gaps(program) == ()


@pytest.mark.parametrize(("name", "ranks"), [("hist", [(4, False)]), ("sort_unique", [(10, False), (10, True)])])
def test_pairwise_functions_of_finite_features_separate_with_rank_V_or_T(name: str, ranks) -> None:
    program = ifl.parse_program(next(e for e in TOKENS if e.name == name).source)
    schedule = build_schedule(build_tree(program))
    assert schedule.verdict == "efficient"
    assert [(split.rank, split.grows_with_length) for _, _, split in schedule.finite_ranks] == ranks


@pytest.mark.parametrize("key", ["a", "u"])  # a key named before the query t, and one after
def test_a_tied_split_enumerates_the_query_side_in_analysis_and_compiler_alike(key: str) -> None:
    """[x(k) == x(t)]: both sides take V values; the split reads the query's indicators whatever
    the key is called (analysis: the schedule's split; compiler: the term's bracket side)."""
    from infoflow_dsl.compiler.tokens.separate import separated_terms
    from infoflow_dsl.language import typed as ir

    program = ifl.parse_program(f'input x : token {{"a", "b", "c"}}\nlength T = 4\n'
                                f'target(t) = sum_<{key}> [x({key}) == x(t)]\n')
    ((_, _, split),) = build_schedule(build_tree(program)).finite_ranks
    assert split.source == "t"
    body = program.target.body  # the bracket under the sum
    terms = separated_terms(body.condition, key, "t", finite_domain(program))
    assert terms and all(isinstance(query, ir.Bracket) for _, query, _ in terms)
