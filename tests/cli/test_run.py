"""``infoflowc run MODEL TOKEN...`` (infoflow_dsl/cli/run.py) on hand-built token models: one
line per position beside the reference (values derived from the reference evaluator), and every
fault a clean exit 2 with one line on stderr."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli
from handmade_models import token_model, token_program
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.cli.run import decimals_for, format_number
from infoflow_dsl.transformer.card import ProgramRecord


def saved(tmp_path: Path, name: str, **kwargs) -> Path:
    path = tmp_path / f"{name}.safetensors"
    ifl.save(token_model(name, **kwargs), path)
    return path


def table(out: str) -> list[list[str]]:
    """The rows of run's table (after its header lines), split into columns."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["t", "token"])
    return [line.split() for line in lines[start + 1:-1]]


def test_a_per_token_numeric_model_prints_each_position_beside_the_reference(tmp_path: Path) -> None:
    path = saved(tmp_path, "fraction")
    tokens = ["a", "b", "a", "c", "a"]
    code, out, err = run_cli(["run", str(path), *tokens])
    assert (code, err) == (0, "")
    want = ifl.evaluate(token_program("fraction"), ifl.encode(token_program("fraction"), tokens))[0].tolist()
    rows = table(out)
    assert [r[:2] for r in rows] == [[str(t + 1), tok] for t, tok in enumerate(tokens)]
    decimals = decimals_for(1e-9)
    assert [r[2:] for r in rows] == [[format_number(v, decimals)] * 2 for v in want]
    assert out.splitlines()[0] == f"{path}: fraction.iflow, T = 5, tokens {{\"a\", \"b\", \"c\"}}, 5 tokens"
    assert out.splitlines()[-1] == "  agrees with the reference at every output"


def test_a_sequence_token_output_prints_the_tokens_then_the_decoded_answer(tmp_path: Path) -> None:
    code, out, _ = run_cli(["run", str(saved(tmp_path, "first")), "c", "a", "b"])
    assert code == 0
    rows = table(out)
    assert rows[:3] == [["1", "c"], ["2", "a"], ["3", "b"]]
    want = ifl.decode(token_program("first"), ifl.evaluate(token_program("first"), torch.tensor([[2, 0, 1]])))[0]
    assert rows[3] == ["output", want, want]


def test_numeric_tokens_are_read_as_numbers(tmp_path: Path) -> None:
    code, out, _ = run_cli(["run", str(saved(tmp_path, "numeric")), "2.5", "1", "4.0"])
    assert code == 0
    program = token_program("numeric")
    want = ifl.evaluate(program, ifl.encode(program, [2.5, 1, 4]))[0].tolist()
    shown = [format_number(v, decimals_for(1e-9)) for v in want]
    assert [r[1:] for r in table(out)] == [[tok, v, v] for tok, v in zip(["2.5", "1", "4"], shown, strict=True)]


def test_an_undefined_position_shows_a_dash(tmp_path: Path) -> None:
    """A per-token target defined for t >= 2 only: position 1 reads "-" for both."""
    model = token_model("identity")
    program = ifl.parse_program('input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t : t >= 2) = x(t - 1)\n',
                                "shifted.iflow")
    model.card = dataclasses.replace(model.card, program=ProgramRecord(name="shifted.iflow", source=program.source,
                                                                       margin=None))
    path = tmp_path / "shifted.safetensors"
    ifl.save(model, path)
    code, out, _ = run_cli(["run", str(path), "a", "b", "c"])
    rows = table(out)
    assert code == 3 and rows[0] == ["1", "a", "-", "-"]  # 3: the model differs, as check says
    # the identity model answers x(t), the target is x(t - 1): positions 2 and 3 differ
    assert rows[1] == ["2", "b", "b", "a"] and rows[2] == ["3", "c", "c", "b"]
    assert out.splitlines()[-1] == "  DIFFERS from the reference at 2, 3"


def test_a_wrong_model_is_shown_differing(tmp_path: Path) -> None:
    code, out, _ = run_cli(["run", str(saved(tmp_path, "identity", shuffle_output=True)), "a", "b"])
    assert code == 3 and out.splitlines()[-1] == "  DIFFERS from the reference at 1, 2"


@pytest.mark.parametrize(("arguments", "message"), [
    (["identity", "a", "d"], r"'d' is not a token of the vocabulary \{\"a\", \"b\", \"c\"\}"),
    (["identity", "a", "b", "c", "a", "b", "c"], "6 tokens, but the model takes at most T = 5"),
    (["numeric", "3"], r"'3' is not a token of the vocabulary \{1, 2.5, 4\}"),
    (["missing", "a"], "no such file"),
    (["vectors", "a"], "a model over vectors .*infoflowc run takes a token model"),
    (["identity"], "the following arguments are required: TOKEN"),
])
def test_faults_exit_2_with_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    import re

    name, *tokens = arguments
    if name in ("identity", "numeric"):
        path = saved(tmp_path, name)
    elif name == "vectors":
        path = EXAMPLES_DIR / "previous_token.safetensors"
    else:
        path = tmp_path / "missing.safetensors"
    code, out, err = run_cli(["run", str(path), *tokens])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and re.search(message, err), err


@pytest.mark.parametrize(("value", "decimals", "shown"), [
    (0.5, 4, "0.5"), (2 / 3, 4, "0.6667"), (-1e-9, 4, "0"), (3.0, 4, "3"), (float("nan"), 4, "-"),
    (2 / 3, None, "0.666667"), (12345.678, 0, "12346"),
])
def test_numbers_are_rounded_to_the_models_eps(value: float, decimals: int | None, shown: str) -> None:
    assert format_number(value, decimals) == shown


def test_decimals_follow_eps() -> None:
    assert [decimals_for(e) for e in (1e-3, 0.05, 1e-30, None, float("inf"), 0.0)] == [4, 3, 12, None, None, None]
