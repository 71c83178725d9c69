"""compiler/tokens/scores.py on the circuit it builds alone: a sharp head's score as a sum of
products of per-position factors (a token's value, an indicator, a count), and the sort
family's argmin |A(s) − B(t)| scored by cuts."""

from __future__ import annotations

import pytest
from token_circuits import assert_exact_on_short_inputs

NUMBERS = "input x : token {1, 2, 3}\nlength T = 6\n"


@pytest.mark.parametrize("target", [
    "target(t : t >= 2) = max_<s : s < t> x(s) * x(t)",  # a product of the two positions' values
    "target(t) = min_<s> [x(s) == x(t)] + x(s)",  # an indicator of both positions plus a key value
    "target(t) = x(argmin_<s> |x(s) - x(t)|)",  # |A(s) − B(t)| by cuts
    "let rank(s) = sum_<r> [x(r) < x(s) or (x(r) == x(s) and r < s)]\n"
    "target(t) = x(argmin_<s> |rank(s) - (t - 1)|)",  # a count against a position (sort)
])
def test_a_scored_head_is_exact_on_every_short_input(target: str) -> None:
    circuit = assert_exact_on_short_inputs(NUMBERS + target + "\n")
    assert any(h.beta > 0 for h in circuit.heads)
