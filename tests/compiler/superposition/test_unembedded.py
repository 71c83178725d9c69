"""Numbers only the unembedding reads share a coordinate where W_U's rows allow
(compiler/superposition/unembedded.py): Tracr's nary_add compiles below what ``disguise
--compress`` reaches, exact against the reference, its dictionary holding the sum; a number
another reader needs, or a categorical output, is never folded."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from cli_runner import run_cli
from compiled import dense_float64, every_input, plain_float64

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition import features_alive
from infoflow_dsl.compiler.superposition.dictionary import features, read_value
from infoflow_dsl.compiler.superposition.unembedded import read_by_unembedding_alone, unembedded
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

#: Tracr's nary_add: x + y − z over tokens, tokens, indices (from 0)
NARY_ADD = "input x : token {1, 2, 3}\nlength T = 10\ntarget(t) = 2 * x(t) - (t - 1)\n"
#: a count beside the token: the token's number is read by the output and by nothing else; the
#: count's share [x(s) == 1] by a head
COUNT_PLUS = "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = x(t) + sum_<s> [x(s) == 1]\n"


def test_nary_adds_two_numbers_become_one_coordinate_holding_the_outputs_form(tmp_path: Path) -> None:
    """F = 2 (the token's 2·x(t) and the position's t, alive together to the output); with them
    folded, compile --residual 1 is exact on every input up to length 4 and on random ones at T,
    ``check`` passes, ``sae`` prints JSON, and the dictionary's coordinate holds 2·x(t) − t, the
    plain model's two values so combined, at every hook."""
    plain = plain_float64(NARY_ADD)
    assert features_alive(dense_float64(plain), plain.config) == 2
    program = ifl.parse_program(NARY_ADD, "nary_add.iflow")
    model = ifl.compile(program, samples=200, residual=1, dtype="float64")
    record = model.config["superposition"]
    assert model.d_model == 1 < record["features_alive"] == 2 and record["summed"]
    batches = [every_input(3, n) for n in range(1, 5)] + [ifl.sample_inputs(program, 500, seed=3)]
    for x in batches:
        with torch.no_grad():
            assert float((model(x) - ifl.evaluate(program, x)).abs().max()) <= model.config["eps"]
    found = {f["name"]: f for f in features(model)}
    held = found["tok:2 * x(t)"]
    assert held["sum"] == [["tok:2 * x(t)", 1.0], ["pos:t", -1.0]] and found["pos:t"]["in_sums"] == ["tok:2 * x(t)"]
    assert found["pos:t"]["hooks"] == {}
    x = every_input(3, 4)
    with torch.no_grad():
        wide, narrow = plain.residual_stream(x), model.residual_stream(x)
    index = {label: i for i, label in enumerate(plain.config["residual_labels"])}
    entry = held["hooks"]["blocks.0.hook_resid_pre"]
    want = wide[0][..., index["tok:2 * x(t)"]] - wide[0][..., index["pos:t"]]
    assert torch.equal(read_value(entry, narrow[0]), want)
    path = tmp_path / "nary_add.safetensors"
    ifl.save(model, path)
    assert run_cli(["check", str(path), "--samples", "300"])[0] == 0
    code, out, _ = run_cli(["circuit", str(path), "--features"])
    assert code == 0 and "[its coordinate holds 1·tok:2 * x(t) + -1·pos:t]" in out
    assert "[held only in the sum of tok:2 * x(t)]" in out
    code, out, err = run_cli(["sae", str(path), "--hook", "blocks.0.hook_resid_pre", "--steps", "5", "--json"])
    assert code == 0, err
    assert json.loads(out)["d_model"] == 1


def test_a_number_another_reader_needs_is_not_folded() -> None:
    """COUNT_PLUS: the token's number and the count are read by the output alone, so they fold;
    the token's indicator [x = 1], which the count's head averages, is not among them."""
    plain = plain_float64(COUNT_PLUS)
    tensors, config = dense_float64(plain), plain.config
    labels = config["residual_labels"]
    alone = {labels[i] for i in read_by_unembedding_alone(tensors, config)}
    assert "x" in alone and "x=1" not in alone
    folded, sums = unembedded(tensors, config)
    model = CompiledTransformer(config, folded, dtype=torch.float64)
    x = every_input(3, 4)
    with torch.no_grad():
        assert float((model(x) - plain(x)).abs().max()) <= 1e-12
    named = {labels[n] for terms in sums.values() for n, _ in terms}
    assert named <= alone and len(named) >= 2


def test_a_categorical_output_is_never_folded() -> None:
    """Tracr's reverse: the fetched token's indicators, which the unembedding alone reads, are a
    categorical group (read by clean-ups once superposed): none is folded."""
    source = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = x(len + 1 - t)\n'
    plain = plain_float64(source)
    tensors, config = dense_float64(plain), plain.config
    assert unembedded(tensors, config)[1] == {}
