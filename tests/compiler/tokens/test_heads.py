"""compiler/tokens/heads.py on the circuit it builds alone (tests/token_circuits.simulate, no
weights): a uniform mean over a mask, a sharp retrieval, and len from 1/len."""

from __future__ import annotations

import pytest
from token_circuits import assert_exact_on_short_inputs

AB = 'input x : token {"a", "b"}\nlength T = 6\n'
NUMBERS = "input x : token {1, 2, 3}\nlength T = 6\n"


@pytest.mark.parametrize("target", [
    'target(t) = mean_<s : s <= t> [x(s) == "a"]',  # a uniform head over the prefix
    'target(t : t < len) = mean_<s : s > t> [x(s) == "b"]',  # over the suffix
    "target mean_<s> [x(s) == \"a\"]",  # at the readout
])
def test_a_uniform_head_averages_its_values_over_the_keys_its_mask_admits(target: str) -> None:
    circuit = assert_exact_on_short_inputs(AB + target + "\n")
    assert all(h.beta == 0.0 for h in circuit.heads if h.kind == "uniform")


def test_len_is_one_length_head_decoded_by_the_ffn() -> None:
    circuit = assert_exact_on_short_inputs(AB + "target(t) = len + t\n")
    (head,) = [h for h in circuit.heads if h.kind == "length"]
    assert head.name == "len" and head.layer == 1 and head.beta == 0.0


def test_a_sharp_retrieval_picks_the_winning_key() -> None:
    circuit = assert_exact_on_short_inputs(NUMBERS + "target(t) = max_<s : s <= t> x(s)\n")
    (head,) = circuit.heads
    assert head.kind == "score retrieval" and head.beta > 0 and head.reads == "s"


def test_a_mean_over_every_key_adds_its_constant_after_the_head() -> None:
    """mean_<s> (1 − [x(s) == "a"]) over every key (never empty) is 1 − mean [x(s) == "a"]: the
    head averages the indicator alone and W_V reads no `one`."""
    circuit = assert_exact_on_short_inputs(AB + 'target mean_<s> 1 - [x(s) == "a"]\n')
    (head,) = [h for h in circuit.heads if h.kind == "uniform"]
    assert all(value.constant == 0.0 for value in head.value)
