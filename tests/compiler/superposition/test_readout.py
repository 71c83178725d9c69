"""A token answer decoded by argmax from one number: the token maps of F = k compile at D = 1,
exact; one unit short of the lines' gap, a named input is answered wrong."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition.readout import decoded, plan
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

#: a permutation of four tokens (its plain model: one indicator per token, all read by W_U alone)
NEXT = ('input x : token {"a", "b", "c", "d"}\nlength T = 5\n'
        'table nx = {"a": "b", "b": "c", "c": "d", "d": "a"}\ntarget(t) = nx(x(t))\n')
#: five tokens onto three answers, two of them shared
CLASSES = ('input x : token {"a", "b", "c", "d", "e"}\nlength T = 4\n'
           'table kind = {"a": "v", "b": "c", "c": "n", "d": "c", "e": "v"}\ntarget(t) = kind(x(t))\n')
#: reverse: W_U reads a head's fetched one-hot
REVERSE = 'input x : token {"a", "b", "c"}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n'


def _dense(model: CompiledTransformer) -> dict[str, torch.Tensor]:
    return {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}


def _answers(model: CompiledTransformer, program: object, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the model's answers, the reference's) on every input up to length 4 and 300 random ones."""
    got, want = [], []
    batches = [torch.tensor(list(itertools.product(range(tokens), repeat=n))) for n in range(1, 5)]
    for x in [*batches, ifl.sample_inputs(program, 300, seed=3)]:
        with torch.no_grad():
            got.append(model(x).argmax(-1).flatten())
        want.append(ifl.evaluate(program, x).flatten())
    return torch.cat(got), torch.cat(want)


@pytest.mark.parametrize(("source", "tokens"), [(NEXT, 4), (CLASSES, 5)])
def test_a_token_map_compiles_at_one_dimension_exact_with_its_lines_recorded(source: str, tokens: int) -> None:
    """F = the map's indicators (4; 5 tokens over 3 answers: what the spans leave); D = 1, every
    answer right; the certificate's lines are 2j·n − j² over the answers, n per token the index
    of its answer (tokens of one answer share it)."""
    program = ifl.parse_program(source, "map.iflow")
    model = ifl.compile(program, samples=0, residual=1)
    record = model.config["superposition"]
    assert model.d_model == 1 < record["features_alive"]
    got, want = _answers(model, program, tokens)
    assert torch.equal(got, want.long())
    readout = record["readout"]
    assert [(line["slope"], line["intercept"]) for line in readout["lines"]] == [
        (2 * j, -j * j) for j in range(len(readout["lines"]))]
    answer_of = {line["token"]: j for j, line in enumerate(readout["lines"])}
    names = model.config["vocabulary"]["names"]
    held = model.residual_stream(torch.arange(tokens)[:, None])[0][:, 0, 0]  # (tokens,): n(v) at the token's row
    truth = ifl.evaluate(program, torch.arange(tokens)[:, None]).flatten().long().tolist()
    outputs = model.config["output_vocabulary"]["names"]
    assert held.tolist() == [answer_of[outputs[truth[v]]] for v in range(len(names))]


def test_one_unit_short_of_the_gap_a_named_input_is_answered_wrong() -> None:
    """The lines lead by (i − j)² ≥ 1 at n = i: lowering the answer of token "c" (n = 2) by one
    unit ties it with its neighbour's line at n = 2, and by a little more loses it: the input
    ("c",) is then answered wrong, every other token still right."""
    program = ifl.parse_program(NEXT, "next.iflow")
    plain = ifl.compile(program, samples=0, dtype="float64")
    tensors, _, readout = decoded(_dense(plain), {}, plain.card)
    assert readout is not None and readout.values == (0, 1, 2, 3)
    answer = readout.answers[readout.values[2]]  # token "c"'s answer
    config = dict(plain.config)
    for short, wrong in ((0.0, False), (1.0 + 1e-6, True)):
        shifted = dict(tensors)
        shifted["unembed.b_U"] = tensors["unembed.b_U"].clone()
        shifted["unembed.b_U"][answer] -= short
        model = CompiledTransformer(config, shifted, dtype=torch.float64)
        with torch.no_grad():
            got = model(torch.arange(4)[:, None]).argmax(-1).flatten()  # (4,): the tokens a..d alone
        truth = ifl.evaluate(program, torch.arange(4)[:, None]).flatten().long()
        assert (got != truth).tolist() == [False, False, wrong, False]


def test_the_host_holds_the_indicators_sum_and_nothing_else_is_decoded() -> None:
    """The host's sum is Σ n(v)·[x = v] over the map's indicators (the dictionary's record);
    reverse's W_U reads a head's fetched one-hot, a group it decodes too, but not once W_U also
    reads a direction outside the group (``one``)."""
    plain = ifl.compile(ifl.parse_program(NEXT, "next.iflow"), samples=0, dtype="float64")
    labels = plain.config["residual_labels"]
    _, sums, readout = decoded(_dense(plain), {}, plain.card)
    assert readout is not None
    held = {labels[i]: w for i, w in sums[readout.host]}
    assert held == {f"x={v}": float(n) for v, n in zip("abcd", readout.values, strict=True)}
    reverse = ifl.compile(ifl.parse_program(REVERSE, "reverse.iflow"), samples=0, dtype="float64")
    tensors = _dense(reverse)
    assert plan(tensors, reverse.card, {}) is not None
    tensors["unembed.W_U"][reverse.config["residual_labels"].index("one"), 0] = 1.0
    assert plan(tensors, reverse.card, {}) is None


def test_compile_and_circuit_features_print_the_lines(tmp_path: Path) -> None:
    """compile --residual 1 prints the argmax readout beside the certificate; circuit --features
    prints the lines and the host's sum."""
    source = tmp_path / "next.iflow"
    source.write_text(NEXT)
    code, out, err = run_cli(["compile", str(source), "--residual", "1", "--samples", "64"])
    assert code == 0, err
    assert "in D = 1 dimensions" in out and "argmax readout   the answer from n = x=" in out and "by 4 lines" in out
    code, out, err = run_cli(["circuit", str(source.with_suffix(".safetensors")), "--features"])
    assert code == 0, err
    assert "the answer is argmax over lines of n = x=" in out and "its coordinate holds" in out
