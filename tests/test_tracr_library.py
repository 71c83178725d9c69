"""compiled_examples/tracr/: Tracr's library in .iflow, checked by brute force.

Every program is evaluated by the reference on every input of every length 1..4 (T = 5) and
compared with a plain Python implementation of what Tracr's program computes (the table of
issue 20); sort_unique is compared on the inputs whose tokens are distinct, as Tracr states it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
import torch
from programs import TRACR, TRACR_DIR

import infoflow_dsl as ifl

Tokens = list
Column = Callable[[Tokens], list]


def _balanced(tokens: Tokens, pairs: tuple[str, ...]) -> int:
    """1 if ``tokens`` is a shuffle of balanced words of each pair, else 0."""
    for open_, close in pairs:
        depth = 0
        for token in tokens:
            depth += (token == open_) - (token == close)
            if depth < 0:
                return 0
        if depth != 0:
            return 0
    return 1


def _same(tokens: Tokens, value: object) -> list:
    return [value] * len(tokens)


#: NAME -> what Tracr's program gives at every position t (1-based), as plain Python.
COLUMNS: dict[str, Column] = {
    "length": lambda x: _same(x, len(x)),
    "count_a": lambda x: _same(x, x.count("a")),
    "reverse": lambda x: [x[len(x) - t] for t in range(1, len(x) + 1)],
    "hist": lambda x: [x.count(token) for token in x],
    "sort_unique": lambda x: sorted(x),
    "sort": lambda x: sorted(x),
    "sort_freq": lambda x: sorted(x, key=lambda token: -x.count(token)),  # stable: ties in input order
    "frac_prevs": lambda x: [x[:t].count("l") / t for t in range(1, len(x) + 1)],
    "pair_balance": lambda x: [(x[:t].count("(") - x[:t].count(")")) / t for t in range(1, len(x) + 1)],
    "shuffle_dyck2": lambda x: _same(x, _balanced(x, ("()", "{}"))),
    "shuffle_dyck3": lambda x: _same(x, _balanced(x, ("()", "[]", "{}"))),
    "shift_by_2": lambda x: [x[t - 3] if t >= 3 else None for t in range(1, len(x) + 1)],
    "detect_pattern_abc": lambda x: [float(x[t - 3:t] == ["a", "b", "c"]) if t >= 3 else None
                                     for t in range(1, len(x) + 1)],
    "nary_add": lambda x: [2 * x[t - 1] - (t - 1) for t in range(1, len(x) + 1)],
}

#: Tracr's own programs, with the vocabulary its tests use (issue 20's table).
VOCABULARIES = {
    "length": "abcd", "count_a": "abc", "reverse": "abcd", "hist": "abcd", "sort_unique": list(range(1, 11)),
    "sort": [1, 2, 3, 4], "sort_freq": [1, 2, 3, 4], "frac_prevs": "helo", "pair_balance": "()abc",
    "shuffle_dyck2": "(){}", "shuffle_dyck3": "()[]{}", "shift_by_2": "abcd", "detect_pattern_abc": "abc",
    "nary_add": [1, 2, 3],
}

CAUSAL = {"frac_prevs", "pair_balance", "shift_by_2", "detect_pattern_abc", "nary_add"}


def test_the_library_is_shipped_whole() -> None:
    assert sorted(e.name for e in TRACR) == sorted(COLUMNS) == sorted(VOCABULARIES)


@pytest.mark.parametrize("example", TRACR, ids=lambda e: e.name)
def test_each_file_says_what_tracrs_program_computes(example) -> None:
    first = example.source.splitlines()[0]
    assert first.startswith(f"# {example.name}: Tracr's ")
    program = ifl.load_program(TRACR_DIR / f"{example.name}.iflow")
    assert program.length == 10
    vocabulary = VOCABULARIES[example.name]
    expected = [str(v) for v in vocabulary]
    assert list(program.vocabulary.names) == expected  # type: ignore[union-attr]
    assert program.vocabulary.categorical == isinstance(vocabulary, str)  # type: ignore[union-attr]


def _inputs(name: str, length: int) -> list[Tokens]:
    every = [list(p) for p in itertools.product(list(VOCABULARIES[name]), repeat=length)]
    if name == "sort_unique":
        return [x for x in every if len(set(x)) == len(x)]
    return every


def _agrees(got: object, want: object) -> bool:
    if want is None:
        return got is None
    if isinstance(want, float | int) and not isinstance(want, bool) and isinstance(got, float | int):
        return math.isclose(got, want, rel_tol=0, abs_tol=1e-12)
    return got == want


@pytest.mark.parametrize("example", TRACR, ids=lambda e: e.name)
def test_the_reference_computes_tracrs_column_on_every_input_up_to_length_4(example) -> None:
    program = ifl.parse_program(example.source, example.path, length=5)
    column = COLUMNS[example.name]
    for length in range(1, 5):
        inputs = _inputs(example.name, length)
        ids = ifl.encode(program, inputs)
        assert ids.shape == (len(inputs), length) and ids.dtype == torch.int64
        values = ifl.evaluate(program, ids)
        assert values.shape == (len(inputs), length)
        assert values.dtype == (torch.int64 if program.token_output else torch.float64)
        decoded = ifl.decode(program, values)
        wrong = [(x, got, column(x)) for x, got in zip(inputs, decoded, strict=True)
                 if not all(_agrees(g, w) for g, w in zip(got, column(x), strict=True))]
        assert not wrong, f"{len(wrong)} of {len(inputs)} inputs of length {length}, e.g. {wrong[:3]}"


@pytest.mark.parametrize("example", TRACR, ids=lambda e: e.name)
def test_causal_programs_are_causal_and_the_others_are_not(example) -> None:
    program = ifl.parse_program(example.source, example.path)
    assert ifl.analyze(program).to_dict()["causal"] == (example.name in CAUSAL)


@pytest.mark.parametrize("name", sorted(CAUSAL))
def test_no_output_of_a_causal_program_changes_when_later_tokens_change(name) -> None:
    """float64, not one bit: the output at t on x(1..T) is the output at t on every prefix x(1..t)."""
    example = next(e for e in TRACR if e.name == name)
    program = ifl.parse_program(example.source, example.path)
    ids = ifl.sample_inputs(program, 200, seed=3)
    full = ifl.evaluate(program, ids)
    for length in range(1, program.length + 1):
        prefix = ifl.evaluate(program, ids[:, :length])
        assert torch.equal(prefix.isnan(), full[:, :length].isnan()) if prefix.is_floating_point() else True
        assert torch.equal(torch.nan_to_num(prefix, nan=-7.0), torch.nan_to_num(full[:, :length], nan=-7.0))


@pytest.mark.parametrize("example", TRACR, ids=lambda e: e.name)
def test_analyze_gives_every_program_a_verdict_without_a_margin(example) -> None:
    report = ifl.analyze(ifl.parse_program(example.source, example.path)).to_dict()
    assert report["verdict"] == "efficient"
    assert report["exactness"]["exact"]
    assert all(entry["gap"] is not None for entry in report["exactness"]["comparisons"])
