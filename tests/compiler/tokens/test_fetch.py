"""compiler/tokens/fetch.py on the circuit it builds alone: a token by a mask (t − k, a fixed
position), by a score (a position computed from len) and by a sharp head (argmax, ties to the
smallest position), the same head reading the winner's position as a number."""

from __future__ import annotations

import pytest
from token_circuits import assert_exact_on_short_inputs

AB = 'input x : token {"a", "b", "c"}\nlength T = 6\n'


@pytest.mark.parametrize(("target", "kind", "masked"), [
    ("target(t : t >= 2) = x(t - 1)", "position", True),
    ("target(t : t >= 3) = x(3)", "position", True),
    ("target(t : t <= len) = x(len + 1 - t)", "position", False),
    ("target x(len)", "position", False),
])
def test_a_fetch_by_mask_or_by_score_reads_the_right_position(target: str, kind: str, masked: bool) -> None:
    circuit = assert_exact_on_short_inputs(AB + target + "\n")
    fetches = [h for h in circuit.heads if h.kind == kind]
    assert fetches and all(bool(h.mask) == masked for h in fetches)
    assert all(h.fetches is not None for h in fetches)


def test_an_argmax_fetch_breaks_ties_to_the_smallest_position() -> None:
    source = "input x : token {1, 2, 3}\nlength T = 6\ntarget x(argmax_<s> x(s))\n"
    circuit = assert_exact_on_short_inputs(source)
    (head,) = [h for h in circuit.heads if h.kind == "token retrieval"]
    assert head.reads == "s" and head.beta > 0


@pytest.mark.parametrize("target", [
    "target argmax_<s> x(s)",
    "target(t) = t - argmin_<s : s <= t> x(s)",
    "target(t) = argmax_<s : s >= t> [x(s) == x(t)] * x(s)",
])
def test_the_position_of_an_argmax_as_a_number_is_one_sharp_head(target: str) -> None:
    """The arg head with the key's position number as its value: exact, ties to the smallest
    position, one head (no min over s + T·[s is not a best key])."""
    circuit = assert_exact_on_short_inputs("input x : token {1, 2, 3}\nlength T = 6\n" + target + "\n")
    (head,) = [h for h in circuit.heads if h.reads == "s"]
    assert head.formula.startswith("arg")
