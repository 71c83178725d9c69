"""compiler/tokens/scores.py on the circuit it builds alone: a sharp head's score as a sum of
products of per-position factors (a token's value, an indicator, a count), and the sort
family's argmin |A(s) − B(t)| scored by cuts."""

from __future__ import annotations

import pytest
import torch
from token_circuits import assert_exact_on_short_inputs

import infoflow_dsl as ifl
from infoflow_dsl.compiler.tokens import lower_tokens, scores
from infoflow_dsl.compiler.tokens.lower import TokenLowering
from infoflow_dsl.errors import NoConstruction

torch.set_num_threads(1)

LENGTH = 6
NUMBERS = f"input x : token {{1, 2, 3}}\nlength T = {LENGTH}\n"


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


SORT_UNIQUE = NUMBERS + "let rank(s) = sum_<r> [x(r) < x(s)]\ntarget(t) = x(argmin_<s> |rank(s) - (t - 1)|)\n"


def _compiled(source: str) -> ifl.CompiledTransformer:
    return ifl.compile(ifl.parse_program(source, "score.iflow"), eps=1e-3, dtype=torch.float64, samples=0)


def _no_scaled_square(*arguments: object) -> None:
    raise NoConstruction("the scaled square switched off")


def test_a_width_over_every_key_is_scored_by_its_scaled_square(monkeypatch: pytest.MonkeyPatch) -> None:
    """sort_unique: the count A = m/u over every key is never decoded. u·(2A·B − A²) is linear in m
    and in the hinges relu(m − v·u) of A's inner values (u = 1/len at every key), so the FFN
    between the count and the retrieval has one unit per inner value of A (0..T − 1: T − 2 units)
    and writes one direction; the model is exact on every short input, with fewer weights than
    the count's steps and their square."""
    circuit = assert_exact_on_short_inputs(SORT_UNIQUE, longest=5)
    (retrieval,) = [h for h in circuit.heads if h.beta > 0]
    assert circuit.layers == 3 and retrieval.layer == 3 and len(retrieval.query) == 2
    (hinges,) = [b for b in circuit.blocks if b.layer == 2]
    assert len(hinges.units) == LENGTH - 2 and {u.output for u in hinges.units} == {hinges.output}
    assert hinges.formula.startswith("u·")
    scaled = _compiled(SORT_UNIQUE).nonzero_parameter_count()
    monkeypatch.setattr(scores, "scaled_square", _no_scaled_square)
    assert scaled < _compiled(SORT_UNIQUE).nonzero_parameter_count()


def test_a_width_over_some_keys_is_not_scaled() -> None:
    """A count over s ≤ t has u = 1/t, a different factor at each key: scaling by it would move
    winners, so the score is the count's steps' square, not the scaled one."""
    causal = NUMBERS + "let rank(s) = sum_<r : r <= s> [x(r) < x(s)]\ntarget(t) = x(argmin_<s> |rank(s) - (t - 1)|)\n"
    circuit = assert_exact_on_short_inputs(causal)
    assert not [b for b in circuit.blocks if b.formula.startswith("u·")]


def test_a_spread_count_is_scored_by_its_square_with_no_step_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """sort_unique without the scaled square: the count's steps are its own directions, so
    −(A − B)² + B² = 2A·B − A² is linear in them; the retrieval reads them one layer after the
    count (3 layers, not a fourth that re-cuts A), and its score has two dimensions (the
    tie-break joins the constant query's), not one per cut."""
    monkeypatch.setattr(scores, "scaled_square", _no_scaled_square)
    circuit = assert_exact_on_short_inputs(SORT_UNIQUE)
    (retrieval,) = [h for h in circuit.heads if h.beta > 0]
    assert circuit.layers == 3 and retrieval.layer == 3 and len(retrieval.query) == 2
    assert not [b for b in circuit.blocks if b.layer == 3]
    squared = _compiled(SORT_UNIQUE).nonzero_parameter_count()
    monkeypatch.setattr(scores, "squared_distance", lambda *arguments: None)
    cuts = _compiled(SORT_UNIQUE).nonzero_parameter_count()
    monkeypatch.setattr(TokenLowering, "stepped", TokenLowering.feature)
    recut = _compiled(SORT_UNIQUE)
    assert squared < cuts < recut.nonzero_parameter_count() and recut.n_layers == 4


def test_steps_of_a_position_and_of_a_token_are_columns() -> None:
    """|x(s) − t| by cuts: [x(s) ≥ c] is a column of the embedding and [t ≥ c] one of the
    positional code, so the retrieval needs no FFN at all."""
    circuit = assert_exact_on_short_inputs(NUMBERS + "target(t) = x(argmin_<s> |x(s) - t|)\n")
    assert not circuit.blocks and circuit.layers == 1
    assert any(name.startswith("pos:[t") for name, _ in circuit.position_columns)


def test_in_float32_at_length_40_the_square_gives_way_to_cuts() -> None:
    """2A·B − A² multiplies the steps' rounding by up to 2(|A| + |B|): at T = 40 in float32 that
    is past the tie-break's budget, so the score is cut (rounding ~ϱ·T), on the same steps."""
    source = SORT_UNIQUE.replace("length T = 6", "length T = 40")
    program = ifl.parse_program(source, "sort40.iflow")
    cut = lower_tokens(program, 1e-3, torch.float32)
    (retrieval,) = [h for h in cut.heads if h.beta > 0]
    assert cut.layers == 3 and len(retrieval.query) > 2
    (squared,) = [h for h in lower_tokens(program, 1e-3, torch.float64).heads if h.beta > 0]
    assert len(squared.query) == 2
