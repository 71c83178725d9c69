"""cli/from_rasp.py: ``infoflowc from-rasp FILE.py:NAME`` writes the program that compiles to
the model ``ifl.compile(ifl.from_rasp(...))`` gives, byte for byte; every fault is exit 2 with
a message and nothing written."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.rasp.translate import from_rasp
from infoflow_dsl.transformer.io import model_to_bytes

PROGRAM = '''
from infoflow_dsl import rasp

vocab = {"a", "b", "c"}
max_seq_len = 5


def make_frac():
    is_a = rasp.numerical(rasp.Map(lambda t: t == "a", rasp.tokens))
    prevs = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    return rasp.numerical(rasp.Aggregate(prevs, is_a, default=0)).named("frac_a")


reverse = rasp.Aggregate(rasp.Select(rasp.indices, rasp.length - rasp.indices - 1, rasp.Comparison.EQ),
                         rasp.tokens).named("reverse")
constant = rasp.ConstantSOp([1, 2, 3]).named("constant")
same = rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), rasp.tokens).named("same")
not_a_program = 3
'''


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "programs.py"
    path.write_text(PROGRAM, encoding="utf-8")
    return path


def test_the_written_file_compiles_to_the_model_of_from_rasp_byte_for_byte(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "frac.iflow"
    code, printed, err = run_cli(["from-rasp", f"{source}:make_frac", "-o", str(out)])
    assert (code, err) == (0, "") and f"wrote {out}" in printed
    from_file = ifl.compile(ifl.load_program(out), eps=1e-3, samples=0)
    program = runpy.run_path(str(source))["make_frac"]()
    direct = ifl.compile(from_rasp(program, {"a", "b", "c"}, 5, name="frac"), eps=1e-3, samples=0)
    assert model_to_bytes(from_file) == model_to_bytes(direct)


def test_flags_replace_the_files_vocab_and_length_and_the_default_output_is_name_dot_iflow(
        source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["from-rasp", f"{source}:reverse", "--vocab", "1", "2", "--max-seq-len", "3"])
    assert (code, err) == (0, "")
    text = (tmp_path / "reverse.iflow").read_text(encoding="utf-8")
    assert "input x : token {1, 2}" in text and "length T = 3" in text


@pytest.mark.parametrize(("argument", "extra", "message"), [
    ("{source}:nothing", [], "defines no 'nothing'"),
    ("{source}:not_a_program", [], "not_a_program is a int, not a RASP SOp"),
    ("{source}:constant", [], "ConstantSOp 'constant': a constant sequence"),
    ("{source}:reverse", ["--causal"], "Aggregate 'reverse' is not causal"),
    ("{source}", [], "write FILE.py:NAME"),
    ("{missing}:reverse", [], "no such file"),
    ("{raising}:x", [], "running it raised ZeroDivisionError"),
])
def test_bad_requests_exit_2_with_a_message_and_write_nothing(
        source: Path, tmp_path: Path, argument: str, extra: list[str], message: str) -> None:
    raising = tmp_path / "raising.py"
    raising.write_text("x = 1 / 0\n", encoding="utf-8")
    out = tmp_path / "out.iflow"
    target = argument.format(source=source, missing=tmp_path / "missing.py", raising=raising)
    code, printed, err = run_cli(["from-rasp", target, "-o", str(out), *extra])
    assert code == 2 and printed == "" and "Traceback" not in err
    assert message in err
    assert not out.exists()


def test_without_a_vocabulary_anywhere_it_asks_for_one(tmp_path: Path) -> None:
    bare = tmp_path / "bare.py"
    bare.write_text("from infoflow_dsl import rasp\nlength = rasp.length\n", encoding="utf-8")
    code, _, err = run_cli(["from-rasp", f"{bare}:length", "-o", str(tmp_path / "l.iflow")])
    assert code == 2 and "give --vocab" in err


def test_where_rasp_is_undefined_the_written_file_and_its_analysis_say_so(source: Path, tmp_path: Path) -> None:
    """``same`` selects every position holding the query's token: two or more "a"s, and RASP's
    evaluator raises (a mean of strings), so the file and ``analyze`` of it name the Aggregate;
    ``reverse`` selects one position by index and has no such line."""
    out = tmp_path / "same.iflow"
    assert run_cli(["from-rasp", f"{source}:same", "-o", str(out)])[0] == 0
    code, printed, err = run_cli(["analyze", str(out), "--json"])
    assert (code, err) == (0, "")
    (where,) = json.loads(printed)["undefined_in_rasp"]
    assert where.startswith("Aggregate 'same', where its selector selects several positions")
    assert f"# undefined in RASP: {where}" in out.read_text(encoding="utf-8")
    assert "RASP      undefined: Aggregate 'same'" in run_cli(["analyze", str(out)])[1]
    program = runpy.run_path(str(source))
    with pytest.raises(ValueError):  # the evaluator itself, on two "a"s
        program["same"](["a", "a"])
    assert ifl.from_rasp(program["same"], {"a", "b", "c"}, 5).undefined_in_rasp == (where,)
    assert ifl.from_rasp(program["reverse"], {"a", "b", "c"}, 5).undefined_in_rasp == ()


def test_the_file_imports_a_module_beside_it_as_python_file_py_would(tmp_path: Path) -> None:
    """Seen: ModuleNotFoundError for a helper module in FILE.py's own folder."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "rasp_helpers_beside.py").write_text(PROGRAM, encoding="utf-8")
    (folder / "main.py").write_text("from rasp_helpers_beside import make_frac, max_seq_len, vocab\n",
                                    encoding="utf-8")
    import sys

    before = list(sys.path)
    code, _, err = run_cli(["from-rasp", f"{folder / 'main.py'}:make_frac", "-o", str(tmp_path / "frac.iflow")])
    assert code == 0, err
    assert (tmp_path / "frac.iflow").exists() and sys.path == before
