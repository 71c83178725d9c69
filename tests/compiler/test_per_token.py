"""Per-token targets (docs/language.md, v2) through analyze and compile: what only they promise.

The within-ε checks of every per-token program share tests/pipeline/test_compiling.py's table-driven test (the
per-token programs are in ``EXTRA_COMPILED``); this file checks the rest of issue 8:

- layers and heads as analyze predicted, and a parameter count that does not depend on T;
- causality: for every causal program, changing x(t+1..T') changes no output at positions ≤ t
  (float64, bitwise), and the output on each prefix equals the prefix of the full output (up
  to rounding: a shorter row is summed in another order); the
  analysis's ``causal`` flag is confirmed against the reference itself (a causal target's
  reference never moves, a non-causal one's does);
- the induction circuit: 2 layers, its layer-1 head attends from every t ≥ 2 to t − 1 and its
  layer-2 head from t to the position the reference picks, each with weight ≥ 0.99 (patterns
  recomputed here from the stored weights and masks, by docs/design.md's formula);
- ``check`` names the position of the worst error.
"""

from __future__ import annotations

import operator
import re
from pathlib import Path

import pytest
import torch
from compiled import CANONICAL_EFFICIENT, PER_TOKEN_COMPILED, model, program

import infoflow_dsl as ifl
from infoflow_dsl.cli.main import run
from infoflow_dsl.oracle.evaluate import retrieval_margin

PER_TOKEN = [n for n in CANONICAL_EFFICIENT if program(n).per_token] + PER_TOKEN_COMPILED
CAUSAL = [n for n in PER_TOKEN if ifl.analyze(program(n)).to_dict()["causal"]]
NOT_CAUSAL = [n for n in PER_TOKEN if n not in CAUSAL]


def test_the_table_has_causal_and_non_causal_programs() -> None:
    assert len(PER_TOKEN_COMPILED) >= 15
    assert len(CAUSAL) >= 10 and len(NOT_CAUSAL) >= 5


@pytest.mark.parametrize("name", PER_TOKEN)
def test_layers_and_heads_as_analyze_predicted(name: str) -> None:
    report = ifl.analyze(program(name))
    config = model(name, 1e-3, "float64").config
    assert config["output"] == "token"
    assert len(config["layers"]) == report.layers
    assert [len(layer["heads"]) for layer in config["layers"]] == report.heads


@pytest.mark.parametrize("name", [n for n in PER_TOKEN
                                  if ifl.analyze(program(n)).to_dict()["cost"]["independent_of_T"]])
def test_parameter_count_does_not_depend_on_t(name: str) -> None:
    """Where analyze says the parameters do not grow with T (tests/analysis/test_growth.py holds
    the claim both ways on the whole table)."""
    short = ifl.compile(program(name, 8), eps=1e-3, dtype="float64", samples=0)
    long = ifl.compile(program(name, 1024), eps=1e-3, dtype="float64", samples=0)
    assert short.nonzero_parameter_count() == long.nonzero_parameter_count()
    # only the positional code (a buffer, not a parameter) has a row per position
    assert short.parameter_count() == long.parameter_count()


def _inputs(name: str, count: int, seed: int) -> torch.Tensor:
    return ifl.sample_inputs(program(name), count, seed=seed)


@pytest.mark.parametrize("name", CAUSAL)
def test_later_tokens_change_no_earlier_output_bit(name: str) -> None:
    compiled = model(name, 1e-3, "float64")
    x = _inputs(name, 8, seed=1)
    y = compiled(x)
    length = x.shape[1]
    for t in (1, length // 3, length // 2, length - 1):
        changed = x.clone()
        changed[:, t:] = _inputs(name, 8, seed=100 + t)[:, t:]  # x(t+1..T) replaced (0-based slice from t)
        assert torch.equal(compiled(changed)[:, :t], y[:, :t]), f"{name}: outputs at 1..{t} moved"


#: A prefix runs the same arithmetic on shorter rows, which BLAS and the softmax sum in another
#: order: equal up to rounding, not bitwise. A score rounded differently by u·|score| moves a
#: softmax weight by up to β·u·|score| (relative), so the allowance is a few units in the last
#: place times (1 + β) (measured: 1 ulp for β-free heads, ~20 ulps for induction's β ≈ 87 at
#: near ties, where the retrieval is a soft mix).
PREFIX_ULPS = 4


def _largest_beta(compiled: ifl.CompiledTransformer) -> float:
    return max((float(b.attn.beta.abs().max()) for b in compiled.blocks if b.attn.beta.numel()), default=0.0)


@pytest.mark.parametrize("name", CAUSAL)
def test_the_output_on_a_prefix_is_the_prefix_of_the_output(name: str) -> None:
    compiled = model(name, 1e-3, "float64")
    x = _inputs(name, 8, seed=2)
    y = compiled(x)
    for length in range(max(compiled.min_length, 1), x.shape[1] + 1, 3):
        prefix, full = compiled(x[:, :length]), y[:, :length]
        unit = torch.finfo(torch.float64).eps * (1.0 + _largest_beta(compiled))
        rounding = PREFIX_ULPS * unit * full.abs().clamp_min(1.0)
        assert bool(((prefix - full).abs() <= rounding).all()), f"{name}: prefix of length {length}"


@pytest.mark.parametrize("name", PER_TOKEN)
def test_the_causal_flag_matches_the_reference(name: str) -> None:
    """A causal target's reference at t ignores x(t+1..); a non-causal one's does not (some input moves it)."""
    target = program(name)
    x = _inputs(name, 16, seed=3)
    y = ifl.evaluate(target, x)
    moved = False
    for t in range(1, x.shape[1]):
        changed = x.clone()
        changed[:, t:] = _inputs(name, 16, seed=200 + t)[:, t:]
        before, after = y[:, :t], ifl.evaluate(target, changed)[:, :t]
        moved |= not torch.equal(before.nan_to_num(7.0), after.nan_to_num(7.0))
    assert moved == (name in NOT_CAUSAL)


# ----------------------------------------------------------------------------- induction


_COMPARE = {"!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq}


def _side(term: str | int, query: torch.Tensor, key: torch.Tensor, length: int) -> torch.Tensor | int:
    if isinstance(term, int):
        return term
    base, offset = re.fullmatch(r"(key|query|last)([+-]\d+)?", term).groups()  # type: ignore[union-attr]
    value = {"key": key, "query": query, "last": length}[base]
    return value + int(offset or 0)


def attention_pattern(compiled: ifl.CompiledTransformer, x: torch.Tensor, layer: int, head: int) -> torch.Tensor:
    """softmax_s(β·q(t)·k(s) | mask) of one head, from the weights and the config's mask (docs/design.md):
    (B, T+1, T), rows of queries without any allowed key left at 0."""
    h = compiled.residual_stream(x)[layer]  # (B, T+1, D), the stream the layer reads
    attn = compiled.blocks[layer].attn
    length = x.shape[1]
    q = h @ attn.W_Q[head]  # (B, T+1, E)
    k = h[:, :length] @ attn.W_K[head]  # (B, T, E)
    scores = attn.beta[head] * (q @ k.transpose(1, 2))  # (B, T+1, T)
    query = torch.arange(1, length + 2)[:, None]
    key = torch.arange(1, length + 1)[None, :]
    allowed = torch.ones(length + 1, length, dtype=torch.bool)
    for left, op, right in compiled.config["layers"][layer]["heads"][head]["mask"]:
        allowed &= _COMPARE[op](_side(left, query, key, length), _side(right, query, key, length))
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0)


def test_induction_is_a_previous_token_head_then_a_retrieval() -> None:
    target = program("induction")
    assert (target.dimension, target.length, target.margin) == (8, 32, 0.1)
    compiled = model("induction", 1e-3, "float64")
    heads = [[h["kind"] for h in layer["heads"]] for layer in compiled.config["layers"]]
    assert heads == [["position"], ["token retrieval"]]
    x = _inputs("induction", 128, seed=5)
    previous = attention_pattern(compiled, x, 0, 0)  # (B, T+1, T)
    for t in range(2, 33):
        assert bool((previous[:, t - 1, t - 2] >= 0.99).all()), f"layer 1 at t = {t}"
    # layer 2: from t to argmax_<s : 2 <= s < t> <x(s - 1), x(t)>, computed here independently
    retrieval = attention_pattern(compiled, x, 1, 0)
    margin = retrieval_margin(target, x)  # (B, T): the guarantee holds where it is ≥ δ
    checked = 0
    for t in range(3, 33):
        scores = torch.einsum("bsd,bd->bs", x[:, : t - 2], x[:, t - 1])  # s = 2..t-1: <x(s-1), x(t)>
        best = scores.argmax(dim=1) + 2  # 1-based s
        covered = margin[:, t - 1] >= target.margin
        weights = retrieval[torch.arange(x.shape[0]), t - 1, best - 1]
        assert bool((weights[covered] >= 0.99).all()), f"layer 2 at t = {t}"
        checked += int(covered.sum())
    assert checked >= 1000


def test_check_names_the_worst_position(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "running_max.safetensors"
    ifl.save(model("running_max", 1e-2, "float64"), path)
    assert run(["check", str(path), "--samples", "200"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"worst input +\(error [0-9.e-]+ at position \d+\)", out), out
