"""rasp/library.py: Tracr's 14 library programs, written in RASP, compiled through from_rasp:
exact against RASP's evaluator on every input of lengths 1..4 (and random ones at the longest
length), and answering as the hand translation in ``compiled_examples/tracr/`` does wherever
the RASP program's output is defined. (The parameter counts of both, at T = 10 and 40, are in
BENCHMARKS.md, measured by ``bench/bench_rasp.py``.)"""

from __future__ import annotations

from functools import cache

import pytest
from programs import TRACR_DIR
from rasp_programs import TRACR

import infoflow_dsl as ifl
from infoflow_dsl.rasp.agreement import agreement, every_input, random_inputs
from infoflow_dsl.rasp.translate import from_rasp

LENGTH, EPS = 5, 1e-3
BY_NAME = {example.name: example for example in TRACR}


@cache
def models(name: str) -> tuple[object, ifl.Program, ifl.CompiledTransformer, ifl.Program, ifl.CompiledTransformer]:
    example = BY_NAME[name]
    program = example.build(LENGTH)
    checked = from_rasp(program, example.vocab, LENGTH)
    hand = ifl.load_program(TRACR_DIR / f"{name}.iflow", length=LENGTH)
    return (program, checked, ifl.compile(checked, eps=EPS, dtype="float64", samples=0),
            hand, ifl.compile(hand, eps=EPS, dtype="float64", samples=0))


def test_the_library_is_tracrs_fourteen_with_a_hand_translation_each() -> None:
    assert len(TRACR) == 14
    assert {e.name for e in TRACR} == {path.stem for path in TRACR_DIR.glob("*.iflow")}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_is_exact_against_rasps_evaluator(name: str) -> None:
    program, checked, model, _, _ = models(name)
    vocab = list(BY_NAME[name].vocab)
    longest = 4 if len(vocab) <= 6 else 3  # sort_unique's 10 tokens: 1,110 inputs up to length 3
    found = agreement(program, model, checked, [*every_input(vocab, longest), *random_inputs(vocab, LENGTH, 200)])
    assert found.raised == 0 and found.positions > 0
    assert found.exact(EPS), found


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_answers_as_its_hand_translation_where_rasp_defines_the_output(name: str) -> None:
    program, checked, model, hand, hand_model = models(name)
    inputs = random_inputs(list(BY_NAME[name].vocab), LENGTH, 100, seed=3)
    rows = [list(s) for s in inputs]  # each model reads its own ids (a vocabulary's order is its own)
    ours = ifl.decode(checked, model(ifl.encode(checked, rows)))
    theirs = ifl.decode(hand, hand_model(ifl.encode(hand, rows)))
    for sequence, mine, handmade in zip(inputs, ours, theirs, strict=True):
        for position, (expected, a, b) in enumerate(zip(program(list(sequence)), mine, handmade, strict=True)):
            if expected is None:
                continue
            if checked.token_output:
                assert a == b == expected, (sequence, position)
            else:
                assert abs(a - b) <= 2 * EPS and abs(a - float(expected)) <= EPS, (sequence, position)


#: Every program's RASP form compiles to at most the hand translation's size (at T = 5).
AS_SMALL_AS_BY_HAND = [entry.name for entry in TRACR]


@pytest.mark.parametrize("name", AS_SMALL_AS_BY_HAND)
def test_no_more_parameters_than_the_hand_translation(name: str) -> None:
    _, _, model, _, hand_model = models(name)
    assert model.nonzero_parameter_count() <= hand_model.nonzero_parameter_count()
