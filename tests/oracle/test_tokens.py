"""Token programs in the reference (oracle/tokens.py, evaluate.py): ids in, values or ids out,
any length 1..T, against the brute force of tests/bruteforce.py; encode, decode, sample_inputs,
and the faults they refuse."""

from __future__ import annotations

import math

import bruteforce as bf
import pytest
import torch
from programs import TOKENS

import infoflow_dsl as ifl

LENGTH_CASES = [pytest.param(example, id=example.name) for example in TOKENS]


def _agree(got: object, want: object) -> bool:
    if want is None:
        return got is None or (isinstance(got, float) and math.isnan(got)) or got == -1
    if isinstance(got, list):
        return isinstance(want, list) and all(_agree(g, w) for g, w in zip(got, want, strict=True))
    return math.isclose(float(got), float(want), rel_tol=1e-12, abs_tol=1e-12)  # type: ignore[arg-type]


@pytest.mark.parametrize("example", LENGTH_CASES)
def test_every_token_program_agrees_with_the_brute_force_at_every_length(example) -> None:
    program = ifl.parse_program(example.source, example.path, length=min(6, ifl.parse_program(
        example.source, example.path).length))
    for length in range(1, program.length + 1):
        ids = ifl.sample_inputs(program, 12, seed=length, length=length)
        got = ifl.evaluate(program, ids)
        assert got.shape[0] == 12 and (got.shape[1:] == (length,)) == program.per_token
        assert got.dtype == (torch.int64 if program.token_output else torch.float64)
        for row, sequence in zip(got.tolist(), ids.tolist(), strict=True):
            want = bf.evaluate_tokens_one(program, sequence)
            assert _agree(row, want), (sequence, row, want)


def test_ties_go_to_the_smallest_position() -> None:
    """argmax/argmin as a number (a token program's position is a number): the first best position."""
    header = "input x : token {1, 2, 3}\nlength T = 6\n"
    ids = torch.tensor([[0, 2, 1, 2], [2, 2, 2, 2], [1, 0, 1, 0]])
    assert ifl.evaluate(ifl.parse_program(header + "target argmax_<s> x(s)\n"), ids).tolist() == [2.0, 1.0, 1.0]
    assert ifl.evaluate(ifl.parse_program(header + "target argmin_<s> x(s)\n"), ids).tolist() == [1.0, 1.0, 2.0]
    retrieved = ifl.parse_program(header + "target(t) = x(argmax_<s : s <= t> x(s))\n")
    assert ifl.evaluate(retrieved, ids).tolist() == [[0, 2, 2, 2], [2, 2, 2, 2], [1, 1, 1, 1]]


def test_encode_and_decode_round_trip_categorical_and_numeric_tokens() -> None:
    reverse = ifl.parse_program('input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = x(len + 1 - t)\n')
    ids = ifl.encode(reverse, ["a", "b", "c", "c"])
    assert ids.tolist() == [[0, 1, 2, 2]] and ids.dtype == torch.int64
    assert ifl.decode(reverse, ifl.evaluate(reverse, ids)) == [["c", "c", "b", "a"]]
    assert ifl.encode(reverse, [["a", "b"], ["c", "a"]]).tolist() == [[0, 1], [2, 0]]
    numeric = ifl.parse_program("input x : token {1, 2.5, 4}\nlength T = 3\ntarget(t) = x(t)\n")
    assert ifl.encode(numeric, [2.5, 1, "4"]).tolist() == [[1, 0, 2]]
    assert ifl.decode(numeric, ifl.evaluate(numeric, ifl.encode(numeric, [4, 2.5]))) == [[4, 2.5]]
    shifted = ifl.parse_program('input x : token {"a", "b"}\nlength T = 4\ntarget(t : t >= 2) = x(t - 1)\n')
    assert ifl.decode(shifted, ifl.evaluate(shifted, ifl.encode(shifted, list("abb")))) == [[None, "a", "b"]]
    mean = ifl.parse_program('input x : token {"a", "b"}\nlength T = 4\ntarget(t : t >= 2) = [x(t) == "a"]\n')
    assert ifl.decode(mean, ifl.evaluate(mean, ifl.encode(mean, list("aa")))) == [[None, 1.0]]


@pytest.mark.parametrize(("tokens", "message"), [
    (["a", "z"], "'z' is not a token of the vocabulary"),
    ([["a"], ["a", "b"]], "every sequence must have one length"),
    (["a"] * 6, "the sequence length must be in 1..5"),
    ([], "the sequence length must be in 1..5"),
])
def test_encode_refuses_what_is_not_a_sequence_of_the_vocabulary(tokens, message) -> None:
    program = ifl.parse_program('input x : token {"a", "b"}\nlength T = 5\ntarget(t) = x(t)\n')
    with pytest.raises(ValueError, match=message):
        ifl.encode(program, tokens)


def test_evaluate_refuses_bad_ids_and_vectors_refuse_encode() -> None:
    program = ifl.parse_program('input x : token {"a", "b"}\nlength T = 3\ntarget(t) = x(t)\n')
    with pytest.raises(ValueError, match=r"token ids must lie in 0\.\.1"):
        ifl.evaluate(program, torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match="integer dtype"):
        ifl.evaluate(program, torch.zeros(1, 2))
    with pytest.raises(ValueError, match=r"1\.\.3"):
        ifl.evaluate(program, torch.zeros(1, 4, dtype=torch.int64))
    vectors = ifl.parse_program("input x : R^2\nlength T = 3\ntarget x(1)[1]\n")
    with pytest.raises(ValueError, match="not of tokens"):
        ifl.encode(vectors, ["a"])


def test_sample_inputs_draws_ids_at_any_length() -> None:
    program = ifl.parse_program('input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = len\n')
    ids = ifl.sample_inputs(program, 50, seed=1, length=3)
    assert ids.shape == (50, 3) and ids.dtype == torch.int64 and set(ids.unique().tolist()) == {0, 1, 2}
    assert torch.equal(ids, ifl.sample_inputs(program, 50, seed=1, length=3))
    assert ifl.sample_inputs(program, 2).shape == (2, 5)
    assert ifl.evaluate(program, ids).tolist() == [[3.0] * 3] * 50
    with pytest.raises(ValueError, match=r"1\.\.5"):
        ifl.sample_inputs(program, 2, length=6)


# ---------------------------------------------------------------------------- a model's scores


def test_decode_reads_a_token_outputs_scores_as_their_argmax() -> None:
    """Scores (B, T', V) decode to the argmax token (the first on a tie), None where undefined:
    the same as decoding the ids the argmax gives and the reference's undefined positions."""
    from infoflow_dsl.oracle.answers import answers
    from infoflow_dsl.oracle.tokens import UNDEFINED_ID

    shifted = ifl.parse_program('input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t : t >= 2) = x(t - 1)\n')
    scores = torch.randn(4, 3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    scores[0, 1] = torch.tensor([0.5, 0.5, 0.1])  # a tie between "a" and "b": "a"
    undefined = ifl.evaluate(shifted, torch.zeros(4, 3, dtype=torch.int64)) == UNDEFINED_ID  # (4, 3)
    want = torch.where(undefined, UNDEFINED_ID, scores.argmax(dim=-1))
    assert torch.equal(answers(shifted, scores), want) and int(answers(shifted, scores)[0, 1]) == 0
    assert ifl.decode(shifted, scores) == ifl.decode(shifted, want)
    assert [row[0] for row in ifl.decode(shifted, scores)] == [None] * 4
    first = ifl.parse_program('input x : token {"a", "b", "c"}\nlength T = 5\ntarget x(len)\n')
    assert ifl.decode(first, torch.tensor([[0.1, 0.9, 0.0], [2.0, 0.0, 2.0]])) == ["b", "a"]
    numeric = ifl.parse_program("input x : token {1, 2.5, 4}\nlength T = 3\ntarget(t) = x(t)\n")
    assert ifl.decode(numeric, torch.tensor([[[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]])) == [[4, 2.5]]


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4), (2, 3, 3, 3)])
def test_scores_of_the_wrong_shape_are_refused(shape: tuple[int, ...]) -> None:
    from infoflow_dsl.oracle.answers import answers

    per_token = ifl.parse_program('input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = x(t)\n')
    with pytest.raises(ValueError, match=r"scores have shape \(batch, length, V\) with V = 3"):
        answers(per_token, torch.zeros(shape))


def test_token_names_are_the_vocabularys_as_written() -> None:
    from infoflow_dsl.oracle.tokens import token_names

    numeric = ifl.parse_program("input x : token {1, 2.5, 4}\nlength T = 3\ntarget(t) = x(t)\n")
    assert token_names(numeric, torch.tensor([2, 0, 1])) == ["4", "1", "2.5"]
    assert token_names(numeric, [1]) == ["2.5"]
