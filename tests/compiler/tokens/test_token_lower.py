"""compiler/tokens: every token program of the shared table compiles exactly, checked against
the reference evaluator on every input of lengths 1..4 and on random inputs of every length."""

from __future__ import annotations

from functools import cache, lru_cache

import pytest
import torch
from programs import TOKENS, TRACR_DIR

import infoflow_dsl as ifl
from infoflow_dsl.analysis.causality import is_causal
from infoflow_dsl.errors import CompileError
from infoflow_dsl.language.check import check
from infoflow_dsl.language.parse import parse
from infoflow_dsl.measure.tokens import every_sequence
from infoflow_dsl.oracle.tokens import random_ids
from infoflow_dsl.transformer.io import model_to_bytes

EPS = 1e-3
NAMES = [example.name for example in TOKENS]
SOURCES = {example.name: example.source for example in TOKENS}

#: Tracr's parameter counts at T = 40, compiled with its defaults (issue 20's measurement).
TRACR_AT_40 = {"length": 21_193, "reverse": 3_672_755, "hist": 21_193, "sort": 750_059, "sort_unique": 272_851,
               "sort_freq": 89_556_182, "frac_prevs": 19_413, "pair_balance": 39_732}


@cache
def program(name: str, length: int = 5) -> ifl.Program:
    return check(parse(SOURCES[name], name), name, SOURCES[name], length=length)


@lru_cache(maxsize=64)
def model(name: str, dtype: str, length: int = 5) -> ifl.CompiledTransformer:
    return ifl.compile(program(name, length), eps=EPS, dtype=dtype, samples=0)


def _assert_agrees(name: str, dtype: str, ids: torch.Tensor) -> None:
    prog, compiled = program(name), model(name, dtype)
    reference = ifl.evaluate(prog, ids)
    out = compiled(ids)
    if prog.token_output:
        defined = reference >= 0
        assert torch.equal(out.argmax(-1)[defined], reference[defined]), f"{name}: a wrong token"
        return
    error = torch.where(reference.isnan(), 0.0, (out.double() - reference).abs())
    assert float(error.max()) <= min(EPS, compiled.config["a_priori_bound"]), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", NAMES)
def test_exact_on_every_input_of_length_up_to_4(name: str, dtype: str) -> None:
    """Brute force at T = 5: token outputs the reference's token, numbers within the a-priori
    bound (and ε), on all V + V² + V³ + V⁴ inputs."""
    size = program(name).vocabulary.size
    for length in range(1, 5):
        _assert_agrees(name, dtype, every_sequence(size, length))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", NAMES)
def test_exact_on_random_inputs_of_every_length(name: str, dtype: str) -> None:
    for length in range(1, 6):
        _assert_agrees(name, dtype, random_ids(program(name), 300, seed=length, length=length))


@pytest.mark.parametrize("name", [n for n in NAMES if program(n).per_token and is_causal(program(n))])
def test_causal_programs_never_read_later_tokens(name: str) -> None:
    """float64, not one bit: the output at t is the same whatever follows t."""
    prog, compiled = program(name), model(name, "float64")
    ids = random_ids(prog, 200, seed=7, length=5)
    for t in range(1, 5):
        changed = ids.clone()
        changed[:, t:] = random_ids(prog, 200, seed=100 + t, length=5 - t)
        before, after = compiled(ids), compiled(changed)
        assert torch.equal(before[:, :t], after[:, :t]), (name, t)
    assert model(name, "float64").config["causal"]


@pytest.mark.parametrize("name", ["sort", "hist", "shuffle_dyck2"])
def test_compiling_twice_gives_identical_bytes(name: str) -> None:
    first = ifl.compile(program(name), eps=EPS, dtype="float32", samples=0)
    second = ifl.compile(program(name), eps=EPS, dtype="float32", samples=0)
    assert model_to_bytes(first) == model_to_bytes(second)


@pytest.mark.parametrize("name", sorted(TRACR_AT_40))
def test_fewer_parameters_than_tracr_at_40(name: str) -> None:
    prog = ifl.load_program(TRACR_DIR / f"{name}.iflow", length=40)
    compiled = ifl.compile(prog, eps=EPS, dtype="float64", samples=0)
    assert compiled.parameter_count() < TRACR_AT_40[name]


def test_a_token_model_runs_at_every_length_and_its_heads_say_how() -> None:
    """len from a uniform head over [s = 1]: no mask reads T'; each head names its mechanism."""
    compiled = model("reverse", "float64")
    kinds = [(head["kind"], head["computes"]) for layer in compiled.config["layers"] for head in layer["heads"]]
    assert ("length", "1/len = mean_<s> [s == 1]") in kinds
    assert ("position", "x(len + 1 - t) by score 2p·s − s²") in kinds
    assert all("last" not in str(head["mask"]) for layer in compiled.config["layers"] for head in layer["heads"])
    schedule = compiled.config["schedule"]  # the heads the token lowering built, not the continuous schedule's
    assert schedule["heads"] == [len(layer["heads"]) for layer in compiled.config["layers"]]
    assert [row["head"] for row in schedule["table"]] == [head["name"] for layer in compiled.config["layers"]
                                                           for head in layer["heads"]]


@pytest.mark.parametrize("source, why", [
    ('input x : token {1, 2}\nlength T = 4\ntarget mean_<s : s >= len - 1> x(s)\n', "a condition on len"),
    ('input x : token {1, 2}\nlength T = 4\ntarget(t) = mean_<s> [s < t] * x(s)\n', "compares the two positions"),
])
def test_what_the_token_lowering_cannot_build_is_refused_with_the_reason(source: str, why: str) -> None:
    prog = check(parse(source, "bad.iflow"), "bad.iflow", source)
    with pytest.raises(CompileError, match=why):
        ifl.compile(prog, samples=0)


def test_a_table_of_the_position_undefined_past_t_writes_no_nan() -> None:
    """odd(t) has keys 1..T only: the positional code's row T + 1 (the readout's) is 0, not NaN,
    and the model is exact."""
    source = ("input x : token {1, 2}\nlength T = 4\ntable odd = {1: 1, 2: 0, 3: 1, 4: 0}\n"
              "target(t) = odd(t) * x(t)\n")
    prog = check(parse(source, "odd.iflow"), "odd.iflow", source)
    compiled = ifl.compile(prog, eps=EPS, dtype="float64", samples=0)
    assert all(torch.isfinite(t.to_dense() if t.is_sparse else t).all() for t in compiled.state_dict().values())
    ids = every_sequence(2, 4)
    assert float((compiled(ids) - ifl.evaluate(prog, ids)).abs().max()) <= compiled.config["a_priori_bound"]
