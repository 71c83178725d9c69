"""rasp/origins.py: a refusal of a RASP program names the file and line of its author's Python
where the offending node was built, and the node's label, whether ``from_rasp`` refuses it
(writing it, or checking the text it wrote) or ``ifl.compile`` does; ``infoflowc from-rasp``
reports it with exit 2 and no traceback. The translated ``.iflow`` text, which the author never
saw, is named after it only."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cli_runner import run_cli

import infoflow_dsl as ifl
import infoflow_dsl.pipeline.lowering as lowering
from infoflow_dsl import rasp
from infoflow_dsl.errors import NoConstruction
from infoflow_dsl.rasp.literals import TranslationError
from infoflow_dsl.rasp.translator import Translation, Translator

PROGRAM = '''\
from infoflow_dsl import rasp

vocab = {"a", "b"}
max_seq_len = 4
doubled = rasp.Map(lambda t: t + t, rasp.tokens)
constant = rasp.ConstantSOp([1, 2]).named("constant")
mixed = rasp.SequenceMap(lambda a, b: a, doubled, constant).named("mixed")
broken = rasp.numerical(rasp.Map(lambda t: 1 / (t == "b"), rasp.tokens)).named("broken")
summed = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                       broken, default=0)).named("summed")
previous = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, lambda k, q: q == k + 1),
                          rasp.tokens).named("previous")
matched = rasp.Select(previous, rasp.tokens, lambda k, q: k == q).named("matched")
repeats = rasp.SelectorWidth(matched).named("repeats")
same = rasp.Map(lambda t: t == "a", rasp.tokens).named("same")
average = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                        rasp.numerical(same), default=0)).named("average")
'''


def line_of(text: str) -> int:
    """The line (from 1) of PROGRAM that starts with ``text``."""
    return next(n for n, line in enumerate(PROGRAM.splitlines(), start=1) if line.startswith(text))


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "located.py"
    path.write_text(PROGRAM, encoding="utf-8")
    return path


@pytest.fixture
def programs(source: Path) -> dict[str, Any]:
    return runpy.run_path(str(source))


def refusal(program: Any) -> str:
    with pytest.raises(TranslationError) as raised:
        ifl.from_rasp(program, {"a", "b"}, 4)
    return str(raised.value)


def test_each_expression_records_where_it_was_built(programs: dict[str, Any], source: Path) -> None:
    constant = programs["constant"]
    assert (constant.origin.file, constant.origin.line) == (str(source), line_of("constant ="))
    assert rasp.tokens.origin is None  # built by the package's own import: no author's line


@pytest.mark.parametrize(("name", "built", "label", "why"), [
    ("mixed", "constant =", "ConstantSOp 'constant'", "a constant sequence"),
    ("summed", "broken =", "Map 'broken'", "its function raises ZeroDivisionError"),
    ("repeats", "matched =", "Select 'matched'", "None at the first positions"),
])
def test_a_refusal_names_the_file_and_line_where_the_offending_node_was_built(
        programs: dict[str, Any], source: Path, name: str, built: str, label: str, why: str) -> None:
    message = refusal(programs[name])
    assert message.startswith(f"{source}:{line_of(built)}:"), message
    assert label in message and why in message


def test_the_origin_takes_no_part_in_identity_or_hashing(programs: dict[str, Any]) -> None:
    same = programs["same"]
    assert hash(same) == object.__hash__(same)
    assert same.copy().origin == same.origin and same.copy() is not same


def test_a_translation_that_does_not_check_is_located_at_the_node_its_faulty_line_was_written_for(
        programs: dict[str, Any], source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A translator's fault (the text reads before position 1) names the node, its author's line,
    and the text's place after them."""
    written = Translator.translation

    def reading_too_early(self: Translator, program: Any) -> Translation:
        translation = written(self, program)
        return Translation(translation.text.replace("x(t)", "x(t - 1)"), translation.written_for)

    monkeypatch.setattr(Translator, "translation", reading_too_early)
    message = refusal(programs["same"])
    assert message.startswith(f"{source}:{line_of('same =')}:"), message
    assert "Map 'same': its .iflow translation does not check" in message and "position t - 1" in message


def test_a_compile_refusal_names_the_rasp_node_before_the_translated_text(
        programs: dict[str, Any], source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The token lowering refuses a node located on the line the Aggregate ``average`` was written
    on: the message starts with the author's file and line and the Aggregate's label."""
    program = ifl.from_rasp(programs["average"], {"a", "b"}, 4)
    line = next(n for n, text in enumerate(program.source.splitlines(), start=1) if text.startswith("let average"))

    def refusing(*arguments: Any) -> None:
        error = NoConstruction("no construction for this node")
        error.span = SimpleNamespace(line=line, column=15)
        raise error

    monkeypatch.setattr(lowering, "lower_tokens", refusing)
    with pytest.raises(NoConstruction) as raised:
        ifl.compile(program, eps=1e-3, samples=0)
    message = str(raised.value)
    assert message.startswith(f"{source}:{line_of('average =')}:"), message
    assert "Aggregate 'average'" in message and f"line {line}, column 15 of its .iflow translation" in message


def test_from_rasp_on_the_command_line_exits_2_naming_the_authors_line(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.iflow"
    code, printed, err = run_cli(["from-rasp", f"{source}:repeats", "-o", str(out)])
    assert code == 2 and printed == "" and "Traceback" not in err
    assert f"{source}:{line_of('matched =')}:" in err and "Select 'matched'" in err
    assert not out.exists()
