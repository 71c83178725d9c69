"""compiler/tokens/counts.py on the circuit it builds alone: how many keys a mask leaves, an exact
integer of the query's position and len, as the count of a sum."""

from __future__ import annotations

import pytest
from token_circuits import assert_exact_on_short_inputs

AB = 'input x : token {"a", "b"}\nlength T = 6\n'


@pytest.mark.parametrize(("defined", "condition"), [
    ("", "s <= t"), (" : t >= 2", "s < t"), (" : t < len", "s > t"), (" : len >= 2", "s != t"),
    ("", "s >= t - 2 and s <= t + 1"), (" : len >= 3", "s == 3"), (" : len >= 2", "s >= 2"),
])
def test_a_count_of_keys_is_exact_at_every_position_and_length(defined: str, condition: str) -> None:
    """(the checker refuses a range that can be empty where the target is defined: ``defined`` keeps it not)"""
    assert_exact_on_short_inputs(AB + f"target(t{defined}) = sum_<s : {condition}> 1\n")
