"""The command line: exit codes (docs/design.md: 0 ok, 2 the user's fault, 1 only for a bug), the
fuzz test that no input makes ``infoflowc parse`` crash, the console script, and the wheel.

The fuzz tests feed 1,400 inputs in all (``RANDOM_TEXT_EXAMPLES + MUTATION_EXAMPLES +
WELL_FORMED_EXAMPLES``) through :func:`infoflow_dsl.cli.main.run`, in process: random text drawn
from the language's own characters and keywords; token-level mutations (deleted, duplicated,
swapped, inserted, replaced tokens) of the canonical programs; and printed random ASTs, which
are syntactically valid and so exercise the checker. Each must end with exit 0 or a clean
exit-2 diagnostic (``FILE:LINE:COL: error: ...``), never exit 1 or a traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cli_runner import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import CANONICAL, by_name
from strategies import MUTATIONS, declaration_strategy, expression_strategy, join_tokens, mutate_tokens

import infoflow_dsl as ifl
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language.printer import print_program

ROOT = Path(__file__).resolve().parents[2]
RANDOM_TEXT_EXAMPLES = 500
MUTATION_EXAMPLES = 600
WELL_FORMED_EXAMPLES = 300
HEADLINE = re.compile(r"^(?P<path>.+):(?P<line>[0-9]+):(?P<column>[0-9]+): error: .+")


def run_file(path: Path, text: str | bytes, *flags: str) -> tuple[int, str, str]:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return run_cli(["parse", str(path), *flags])


def assert_clean(code: int, out: str, err: str, path: Path) -> None:
    """Exit 0 with nothing on stderr, or exit 2 with ``FILE:LINE:COL: error:`` diagnostics."""
    assert "Traceback" not in out + err
    assert code in (0, 2), (code, err)
    if code == 0:
        assert err == ""
        return
    headlines = [line for line in err.splitlines() if HEADLINE.match(line)]
    assert headlines, err
    assert err.startswith(f"{path}:")
    for headline in headlines:
        match = HEADLINE.match(headline)
        assert match is not None
        assert int(match["line"]) >= 1 and int(match["column"]) >= 1


# ----------------------------------------------------------------------------- exit codes


GOOD = by_name("min_pairwise").source


def test_good_file_exits_0_and_prints_the_program(tmp_path: Path) -> None:
    code, out, err = run_file(tmp_path / "good.iflow", GOOD)
    assert (code, err) == (0, "")
    assert "target min_<t1, t2> <x(t1), x(t2)>" in out


def test_length_override_is_accepted(tmp_path: Path) -> None:
    code, out, _ = run_file(tmp_path / "good.iflow", GOOD, "--T", "5")
    assert code == 0
    assert "length T = 32" in out  # the flag overrides the checked length, not the source text


def test_bad_program_exits_2_with_the_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "bad.iflow"
    code, out, err = run_file(path, "input x : R^2\nlength T = 4\ntarget y\n")
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == f"{path}:3:8: error: unknown name 'y'"
    assert err.splitlines()[1:] == ["    target y", "           ^"]


def test_missing_file_exits_2(tmp_path: Path) -> None:
    code, out, err = run_cli(["parse", str(tmp_path / "nowhere.iflow")])
    assert (code, out) == (2, "")
    assert "nowhere.iflow: cannot read" in err
    assert "Traceback" not in err


def test_directory_exits_2(tmp_path: Path) -> None:
    code, _, err = run_cli(["parse", str(tmp_path)])
    assert code == 2
    assert f"{tmp_path}: cannot read" in err


def test_non_utf8_file_exits_2(tmp_path: Path) -> None:
    code, _, err = run_file(tmp_path / "latin1.iflow", "# caf\xe9\ninput x : R^2\n".encode("latin-1"))
    assert code == 2
    assert "latin1.iflow:1:6: error: not a UTF-8 text file: byte 0xe9" in err and "# caf\ufffd" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--T", "0"], "expected a whole number ≥ 1, got 0"),
        (["--T", "-3"], "expected a whole number ≥ 1, got -3"),
        (["--T", "abc"], "expected a whole number, got 'abc'"),
        (["--T"], "expected one argument"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_bad_flags_exit_2(tmp_path: Path, flags: list[str], message: str) -> None:
    code, out, err = run_file(tmp_path / "good.iflow", GOOD, *flags)
    assert (code, out) == (2, "")
    assert message in err
    assert err.startswith("infoflowc")


def test_no_subcommand_exits_2() -> None:
    code, _, err = run_cli([])
    assert code == 2
    assert "required" in err


def test_unknown_subcommand_exits_2() -> None:
    code, _, err = run_cli(["frobnicate", "x.iflow"])
    assert code == 2
    assert "invalid choice" in err


@pytest.mark.parametrize("argv", [["--help"], ["parse", "--help"]])
def test_help_exits_0(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_cli(argv)
    assert exit_.value.code == 0


def test_main_turns_help_into_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    from infoflow_dsl.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert "parse" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the real console script


def console_command() -> list[str]:
    """The installed ``infoflowc`` script beside this Python, else ``python -m infoflow_dsl.cli.main``."""
    script = Path(sys.executable).parent / "infoflowc"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "infoflow_dsl.cli.main"]


def test_console_script_exits_2_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.iflow"
    path.write_text("input x : R^2\nlength T = 4\ntarget <x(1), 3>\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [*console_command(), "parse", str(path)], capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(
        f"{path}:3:8: error: the inner product needs two vectors of equal length, got a vector[2] and a scalar"
    )


# ----------------------------------------------------------------------------- fuzz

#: Fragments the random text is drawn from: heavy in the language's own characters and words.
FRAGMENTS = [
    *"xtsTwAcabf0123456789.,:;()[]{}<>|+-*/@^=!_#eE \t",
    "\n", "\n", "\n", "\r\n", " ", " ", "  ",
    "input", "length", "const", "let", "margin", "target", "in", "ball", "randn", "and", "R", "R^",
    "min_<", "max_<", "sum_<", "mean_<", "argmin_<", "argmax_<", "top(2)_<", "top(0)_<", "top(",
    "relu", "min", "max", "x(", "x(t)", "x(1)", "x(T)", "||", "!=", "<=", ">=", "==", "^2", "1e3", ".5", "0.25",
    "input x : R^2\n", "length T = 4\n", "target ", "const w : R^2 = [1, 2]\n", "const A : R^{2 x 2} = ",
    "let f(a) = ", "{2 x 2}", "é", "‖", "\x00", "\x0c", "\u2028",
    "token", "len", "or", "not", '"a"', '"("', '"', "[x(t) == ", 'input x : token {"a", "b"}\n', "len + 1 - t",
]


@st.composite
def random_programs(draw: st.DrawFn) -> str:
    """Random text, two times in three after a valid header, so that later lines are reached."""
    body = "".join(draw(st.lists(st.sampled_from(FRAGMENTS), max_size=40)))
    if draw(st.booleans()):
        body += draw(st.text(st.characters(exclude_categories=("Cs",)), max_size=10))
    header = draw(st.sampled_from(["", "input x : R^2\nlength T = 4\n", "input x : R^3 in ball(2)\nlength T = 3\n"]))
    return header + body


TOKEN = re.compile(
    r"#[^\n]*|\n|top\([0-9]+\)_<|(?:argmin|argmax|min|max|sum|mean)_<|\|\||!=|<=|>=|=="
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*|\{[^}\n]*\}|\S"
)


def tokens_of(source: str) -> list[str]:
    return TOKEN.findall(source)


CANONICAL_TOKENS = [tokens_of(example.source) for example in CANONICAL]
VOCABULARY = sorted({token for tokens in CANONICAL_TOKENS for token in tokens if not token.startswith("#")})
#: Replacements of the same kind keep a mutant parseable more often, so the checker is fuzzed too.
SAME_KIND = {
    "name": ["x", "t", "s", "t1", "t2", "T", "w", "a1", "A1", "relu", "min", "max", "in", "R", "y"],
    "number": ["0", "1", "2", "3", "4", "5", "17", "64", "999", "0.5", "-1", "1e3", "2.5"],
    "operator": ["+", "-", "*", "/", "@", "^", "<", ">", ",", "!=", "==", "<=", "||", "|"],
}


def kind_of(token: str) -> str:
    if token[0].isalpha() or token[0] == "_":
        return "name"
    if token[0].isdigit() or token[0] == ".":
        return "number"
    return "operator"


def test_tokenizer_round_trips_the_canonical_programs() -> None:
    from infoflow_dsl.language.parse import parse

    assert len(CANONICAL) >= 7
    for example, tokens in zip(CANONICAL, CANONICAL_TOKENS, strict=True):
        assert "".join(example.source.split()) == "".join("".join(tokens).split())
        assert parse(join_tokens(tokens)) == parse(example.source)


@st.composite
def mutated_programs(draw: st.DrawFn) -> str:
    """A canonical program with 1-4 token mutations: delete, duplicate, swap, insert or replace."""
    return mutate_tokens(draw, draw(st.sampled_from(CANONICAL_TOKENS)), draw(st.integers(1, 4)),
                         inserted=lambda: draw(st.sampled_from(VOCABULARY)),
                         replaced=lambda token: draw(st.sampled_from(SAME_KIND[kind_of(token)])),
                         kinds=(*MUTATIONS, "replace"))


FUZZ = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@settings(FUZZ, max_examples=RANDOM_TEXT_EXAMPLES)
@given(text=random_programs())
def test_fuzz_random_text_never_crashes(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz_text.iflow"
    assert_clean(*run_file(path, text), path)


@settings(FUZZ, max_examples=MUTATION_EXAMPLES)
@given(text=mutated_programs())
def test_fuzz_mutated_canonical_programs_never_crash(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz_mutation.iflow"
    assert_clean(*run_file(path, text), path)


#: Syntactically valid programs over a few names, so that most inputs reach the checker.
SMALL_NAMES = st.sampled_from(["x", "t", "s", "u", "T", "w", "A", "c", "a", "b", "f", "g", "relu", "min", "max"])
SMALL_NUMBERS = st.sampled_from(["0", "1", "2", "3", "5", "0.5", "2.0", "1e9", "99999999999"])
SMALL_WHOLE = st.sampled_from(["1", "2", "3", "4", "5", "9"])
SMALL_EXPRESSIONS = expression_strategy(SMALL_NAMES, SMALL_NUMBERS, SMALL_WHOLE, max_leaves=12)
SMALL_DECLARATIONS = declaration_strategy(SMALL_NAMES, SMALL_NUMBERS, SMALL_EXPRESSIONS, sizes=st.integers(0, 4))
MACRO_PARAMETERS = st.none() | st.lists(st.sampled_from(["a", "b", "t"]), max_size=2).map(tuple)
MACROS = st.builds(ast.LetDecl, st.sampled_from(["f", "g"]), MACRO_PARAMETERS, SMALL_EXPRESSIONS)
CHECK_HEADER = (
    "input x : R^2 in [-1, 1]\nlength T = {T}\n"
    "const w : R^2 = [1, -1]\nconst c = 0.5\nconst A : R^{{2 x 2}} = randn(1)\n"
)


@st.composite
def well_formed_programs(draw: st.DrawFn) -> str:
    """The header above (or random declarations), macros, and a target: all syntactically valid."""
    header = CHECK_HEADER.format(T=draw(st.sampled_from([1, 2, 4]))) if draw(st.integers(0, 4)) else ""
    declarations = draw(st.lists(SMALL_DECLARATIONS, max_size=1 if header else 4))
    declarations += draw(st.lists(MACROS, max_size=2))
    declarations.append(ast.TargetDecl(draw(SMALL_EXPRESSIONS)))
    return header + print_program(ast.SourceProgram(tuple(declarations)))


@settings(FUZZ, max_examples=WELL_FORMED_EXAMPLES)
@given(text=well_formed_programs())
def test_fuzz_well_formed_programs_never_crash_the_checker(
    tmp_path_factory: pytest.TempPathFactory, text: str,
) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz_checker.iflow"
    code, out, err = run_file(path, text)
    assert_clean(code, out, err, path)
    assert "unexpected" not in err  # the printer wrote valid syntax: every error is the checker's


def test_fuzz_feeds_at_least_1000_inputs() -> None:
    assert RANDOM_TEXT_EXAMPLES + MUTATION_EXAMPLES + WELL_FORMED_EXAMPLES >= 1000


# ----------------------------------------------------------------------------- the wheel


def test_wheel_ships_the_grammar(tmp_path: Path) -> None:
    """Build the wheel offline with hatchling's own API and look inside."""
    from hatchling.builders.wheel import WheelBuilder

    builder = WheelBuilder(str(ROOT))
    wheel = Path(next(iter(builder.build(directory=str(tmp_path), versions=["standard"]))))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        grammar = archive.read("infoflow_dsl/grammar/iflow.lark").decode("utf-8")
    assert "infoflow_dsl/grammar/iflow.lark" in names
    assert "infoflow_dsl/language/parse.py" in names
    assert grammar == (ROOT / "grammar" / "iflow.lark").read_text(encoding="utf-8")
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "infoflowc = infoflow_dsl.cli.console:main" in archive.read(entry_points).decode("utf-8")


# ----------------------------------------------------------------------------- flags and paths before any work


def _compile_must_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import infoflow_dsl.pipeline.compiling as compiling

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("compile ran although a flag or a path was bad")

    monkeypatch.setattr(compiling, "compile_program", refuse)


@pytest.mark.parametrize("device", ["tpu", "gpu", "", "meta", "cuda:99"])
def test_an_unknown_device_exits_2_before_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     device: str) -> None:
    _compile_must_not_run(monkeypatch)
    source = tmp_path / "good.iflow"
    source.write_text(GOOD, encoding="utf-8")
    code, out, err = run_cli(["compile", str(source), "--device", device])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "device" in err and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["good.iflow"]


@pytest.mark.parametrize("where", ["missing/folder/out.safetensors", "a_folder"])
def test_an_output_that_cannot_be_written_exits_2_before_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    where: str) -> None:
    _compile_must_not_run(monkeypatch)
    source = tmp_path / "good.iflow"
    source.write_text(GOOD, encoding="utf-8")
    (tmp_path / "a_folder").mkdir()
    code, out, err = run_cli(["compile", str(source), "-o", str(tmp_path / where)])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(tmp_path / where) in err


#: every command that writes, with ``{in}`` its input and ``{out}`` its output (a file or, for
#: sweep and export, a folder)
WRITERS = {
    "compile": ["compile", "{in}", "-o", "{out}"],
    "train": ["train", "{in}", "--heads", "1", "--steps", "1", "-o", "{out}"],
    "analyze --plot": ["analyze", "{in}", "--plot", "{out}"],
    "analyze --html": ["analyze", "{in}", "--html", "{out}"],
    "report": ["report", "{model}", "-o", "{out}"],
    "sweep": ["sweep", "{in}", "--heads", "1", "--steps", "1", "-o", "{out}"],
    "export": ["export", "{model}", "-o", "{out}"],
}


@pytest.mark.parametrize("output", ["/sys/infoflow-output", "/dev/null", "its input"])
@pytest.mark.parametrize("command", WRITERS)
def test_every_writer_refuses_an_output_it_cannot_or_must_not_write_before_working(command: str, output: str,
                                                                                    tmp_path: Path) -> None:
    """/sys refuses a file whoever asks (root included, whom permissions never stop); /dev/null is
    a device an output would replace; an output onto the command's own input would destroy it."""
    source, model = tmp_path / "good.iflow", tmp_path / "model.safetensors"
    source.write_text(GOOD, encoding="utf-8")
    model.write_bytes((ROOT / "compiled_examples" / "min_pairwise.safetensors").read_bytes())
    reads = model if command in ("report", "export") else source
    if output == "its input" and command in ("sweep", "export"):
        output = str(reads)  # a folder output onto a file: "not a folder"
    target = str(reads) if output == "its input" else output
    before = reads.read_bytes()
    argv = [part.format(**{"in": str(source), "model": str(model), "out": target}) for part in WRITERS[command]]
    code, out, err = run_cli(argv)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and target in err and "Traceback" not in err, err
    assert reads.read_bytes() == before and Path("/dev/null").is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.iflow", "model.safetensors"]


def test_a_plot_into_a_missing_folder_exits_2_before_analysing(tmp_path: Path) -> None:
    source = tmp_path / "good.iflow"
    source.write_text(GOOD, encoding="utf-8")
    code, out, err = run_cli(["analyze", str(source), "--plot", str(tmp_path / "missing" / "flow.png")])
    assert (code, out) == (2, "")
    assert "does not exist" in err


def test_compile_by_default_measures_what_fits_the_budget_and_says_so(tmp_path: Path) -> None:
    from infoflow_dsl.measure.vectors import DEFAULT_SAMPLES, MIN_SAMPLES

    out = tmp_path / "kth.safetensors"
    source = ROOT / "compiled_examples" / "kth_largest.iflow"
    code, printed, err = run_cli(["compile", str(source), "--eps", "1e-2", "-o", str(out)])
    assert (code, err) == (0, "")
    measured = re.search(r"max over (\d+) random inputs and 256 corners\) \(the default budget", printed)
    assert measured is not None, printed
    assert MIN_SAMPLES <= int(measured.group(1)) <= DEFAULT_SAMPLES
    assert f"{measured.group(1)} random" in printed


# ----------------------------------------------------------------------------- --T beyond the checker's limit


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("parse", ["--T", "10000000"]),
        ("analyze", ["--T", "10000000"]),
        ("compile", ["--T", "10000000"]),
        ("train", ["--heads", "1", "--T", "10000000"]),
        ("sweep", ["--heads", "1", "--T", "16,10000000", "-o", "sweep"]),
    ],
)
def test_a_length_flag_over_the_limit_is_blamed_on_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            command: str, flags: list[str]) -> None:
    """``--T`` above MAX_LENGTH is a bad flag (argparse's ``argument --T:``), not a fault at the
    file's line 1; nothing runs and nothing is written."""
    from infoflow_dsl.language.declarations import MAX_LENGTH

    _compile_must_not_run(monkeypatch)
    monkeypatch.chdir(tmp_path)
    Path("good.iflow").write_text(GOOD, encoding="utf-8")
    code, out, err = run_cli([command, "good.iflow", *flags])
    assert (code, out) == (2, "")
    assert err == f"infoflowc {command}: argument --T: T = 10000000 is too large (at most {MAX_LENGTH})\n"
    assert [p.name for p in tmp_path.iterdir()] == ["good.iflow"]


# ----------------------------------------------------------------------------- start-up: no torch for light commands

#: What the light commands must leave unimported: torch (a second of start-up), matplotlib
#: (only for --plot) and the optional extras.
HEAVY = ("torch", "matplotlib", "ray", "transformer_lens", "safetensors")


def heavy_modules_after(commands: list[list[str]]) -> list[list[str]]:
    """Run each ``infoflowc`` command in turn in one fresh interpreter; after each, the HEAVY
    modules imported so far (their exit codes must be 0)."""
    script = (
        "import contextlib, io, json, sys\n"
        "from infoflow_dsl.cli.main import run\n"
        "after = []\n"
        f"for argv in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            code = run(argv)\n"
        "        except SystemExit as exit_:\n"
        "            code = exit_.code\n"
        "    assert code == 0, (argv, code)\n"
        f"    after.append(sorted(set({HEAVY!r}) & set(sys.modules)))\n"
        "print(json.dumps(after))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def efficient_examples() -> list[str]:
    """The shipped examples whose analysis reports no fallback (analyze compiles the gather
    route of an inefficient target to count its parameters, which needs torch)."""
    return [str(path.relative_to(ROOT)).replace(".analysis.json", ".iflow")
            for path in sorted((ROOT / "compiled_examples").glob("*.analysis.json"))
            if json.loads(path.read_text(encoding="utf-8"))["verdict"] == "efficient"]


@pytest.mark.parametrize(
    "commands",
    [
        [["--help"]],
        [["parse", "--help"], ["analyze", "--help"], ["compile", "--help"]],
        [["parse", "compiled_examples/min_pairwise.iflow", "--T", "64"]],
        [["analyze", "compiled_examples/induction.iflow", "--json", "--heads", "1,1"]],
    ],
    ids=["help", "subcommand-help", "parse", "analyze-json"],
)
def test_help_parse_and_analyze_import_no_torch(commands: list[list[str]]) -> None:
    assert heavy_modules_after(commands) == [[] for _ in commands]


def test_analyze_of_every_efficient_example_imports_no_torch() -> None:
    examples = efficient_examples()
    assert len(examples) >= 10
    assert heavy_modules_after([["analyze", path] for path in examples]) == [[] for _ in examples]


# ----------------------------------------------------------------------------- a closed stdout


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("command", ["analyze", "compile"])
def test_a_closed_stdout_exits_141_quietly(tmp_path: Path, command: str, buffered: bool) -> None:
    """``infoflowc ... | head`` with the reader gone: exit 141 (128 + SIGPIPE, what a shell reports
    for a process killed by SIGPIPE), nothing on stderr. The pipe's read end is closed before the
    command starts, so its first write meets a reader that has left (deterministically): unbuffered
    in that write, buffered in the last flush."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    env.update({"PYTHONPATH": str(ROOT)} if buffered else {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    flags = ["--samples", "0", "-o", str(tmp_path / "out.safetensors")] if command == "compile" else []
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([*console_command(), command, "compiled_examples/first_three.iflow", *flags],
                                stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                env=env, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize(("command", "flag", "value"), [
    ("compile", "--margin", "0"), ("compile", "--margin", "-1"), ("compile", "--margin", "nan"),
    ("compile", "--eps", "0"), ("compile", "--eps", "inf"),
])
def test_a_bad_margin_or_eps_flag_is_blamed_on_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        command: str, flag: str, value: str) -> None:
    """Like ``--T``: the flag is named, no file position, exit 2, nothing written."""
    _compile_must_not_run(monkeypatch)
    monkeypatch.chdir(tmp_path)
    Path("good.iflow").write_text(GOOD, encoding="utf-8")
    code, out, err = run_cli([command, "good.iflow", flag, value])
    assert (code, out) == (2, "")
    assert err.startswith(f"infoflowc {command}: argument {flag}: ") and "good.iflow:" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["good.iflow"]


def test_the_parser_has_a_subcommand_for_every_command_of_the_table_and_no_other() -> None:
    """``COMMANDS`` is the command table: the parser's subcommands are its names, in its order, each
    with its help line (``sae`` among them), and each runs its declaration's function."""
    import argparse

    from infoflow_dsl.cli.main import COMMANDS, build_parser
    from infoflow_dsl.cli.sae import command_sae

    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    names = [command.name for command in COMMANDS]
    assert list(subparsers.choices) == names and len(set(names)) == len(names)
    assert {a.dest: a.help for a in subparsers._choices_actions} == {c.name: c.help for c in COMMANDS}
    assert "sae" in names and next(c for c in COMMANDS if c.name == "sae").run is command_sae


MODEL_FILE = ROOT / "compiled_examples" / "d_retrieval.safetensors"
PROGRAM_FILE = ROOT / "compiled_examples" / "d_retrieval.iflow"


@pytest.mark.parametrize("command", ["parse", "analyze", "compile"])
def test_a_model_file_where_a_program_is_expected_is_said_to_be_one(command) -> None:
    """Not its binary quoted under a caret (4 KB to 578 KB of stderr): what it is and what reads it."""
    code, out, err = run_cli([command, str(MODEL_FILE)])
    assert code == 2 and out == "" and len(err) < 400, err
    assert f"{MODEL_FILE}: a model file (safetensors), not a .iflow program" in err
    assert f"infoflowc check {MODEL_FILE}" in err and "overwrite" not in err and "this command's input" not in err


def test_compile_without_o_of_a_program_named_like_its_model_says_the_default_output_is_the_input(tmp_path) -> None:
    program = tmp_path / "p.safetensors"
    program.write_text(PROGRAM_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = run_cli(["compile", str(program)])
    assert code == 2 and "the default output (the input's name with .safetensors) is the input itself" in err, err
    assert program.read_text(encoding="utf-8") == PROGRAM_FILE.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", [["check"], ["run", "1"], ["circuit"], ["export", "-o", "x"]])
def test_a_program_where_a_model_is_expected_is_said_to_be_one(command) -> None:
    """Not "a header of 8,097,867,371,717,140,515 bytes": a text file, and the command that makes its model."""
    code, _, err = run_cli([command[0], str(PROGRAM_FILE), *command[1:]])
    assert code == 2, err
    assert f"{PROGRAM_FILE}: a text file, not a safetensors file (a .iflow program? compile it first with " \
           "infoflowc compile" in err
    assert "header of" not in err


def test_a_program_error_on_a_huge_line_is_cut() -> None:
    """A binary file that is not a model: its first "line" is not dumped whole (the README's 2,000 characters)."""
    noise = bytes(range(128, 256)) * 4000  # 512 KB, no newline, not UTF-8
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".iflow") as stream:
        stream.write(noise)
        stream.flush()
        code, _, err = run_cli(["analyze", stream.name])
    assert code == 2 and "not a UTF-8 text file" in err and len(err) < 2_100, len(err)


def test_an_unrecognized_argument_is_reported_by_its_subcommand_with_the_nearest_flag() -> None:
    code, out, err = run_cli(["compile", str(PROGRAM_FILE), "--epsilon", "1e-3"])
    assert (code, out) == (2, "")
    assert err.strip() == "infoflowc compile: unrecognized arguments: --epsilon 1e-3 (did you mean --eps?)"
    code, _, err = run_cli(["parse", str(PROGRAM_FILE), "--frobnicate"])
    assert code == 2 and err.startswith("infoflowc parse: unrecognized arguments: --frobnicate (")


def test_compiles_exactness_lines_quote_the_program_with_its_own_names(tmp_path: Path) -> None:
    """Seen: ``x(s1) < x(s2)`` where the program says something else: the comparison is quoted
    as written (a let's body keeps the let's names), with its line."""
    source = ("input x : token {1, 2, 3}\nlength T = 4\nlet smaller(a, b) = [x(a) < x(b)]\n"
              "target(t) = sum_<s> smaller(s, t)\n")
    (tmp_path / "smaller.iflow").write_text(source, encoding="utf-8")
    code, out, err = run_cli(["compile", str(tmp_path / "smaller.iflow"), "-o", str(tmp_path / "m.safetensors")])
    assert code == 0, err
    assert "  exact            x(a) < x(b) (line 3): smallest gap 1" in out.splitlines()


BIG_VALUES = ("input x : token {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}\nlength T = 9\n"
              "target(t) = sum_<s> [x(s) < x(t)] * (1000 * x(s))\n")


def test_compile_chooses_float64_where_float32_cannot_certify_eps_and_says_so(tmp_path: Path) -> None:
    """The default dtype: float32's bound on sums of thousands is above ε = 1e-3, so float64,
    said on a line of the output and in the config; --dtype float32 still refuses (exit 2)."""
    source = tmp_path / "big.iflow"
    source.write_text(BIG_VALUES, encoding="utf-8")
    code, out, _ = run_cli(["compile", str(source), "--samples", "0", "-o", str(tmp_path / "big.safetensors")])
    assert code == 0 and "(float64, T = 9)" in out and "dtype            float64: float32 does not certify" in out
    assert "float64: float32 does not certify" in ifl.load(tmp_path / "big.safetensors").config["dtype_rule"]
    code, _, err = run_cli(["compile", str(source), "--samples", "0", "--dtype", "float32",
                            "-o", str(tmp_path / "f32.safetensors")])
    assert code == 2 and "in float32 is above ε" in err and "Traceback" not in err
