"""The user documentation: every ```iflow example in docs/*.md parses and checks, and nothing the
repository ships points into ``../shared`` (a clone does not have it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import infoflow_dsl as ifl

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLE = re.compile(r"^```iflow\n(.*?)^```", re.DOTALL | re.MULTILINE)


def iflow_examples() -> list[tuple[str, int, str]]:
    """(file, line of the fence, program text) for every ```iflow block of docs/*.md."""
    found = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for block in EXAMPLE.finditer(text):
            found.append((path.name, text.count("\n", 0, block.start()) + 1, block.group(1)))
    return found


EXAMPLES = iflow_examples()


def test_the_docs_have_iflow_examples() -> None:
    assert len(EXAMPLES) >= 20 and any(name == "language.md" for name, _, _ in EXAMPLES)


@pytest.mark.parametrize(("name", "line", "text"), EXAMPLES, ids=[f"{n}:{line}" for n, line, _ in EXAMPLES])
def test_every_iflow_example_is_a_whole_program_that_checks(name: str, line: int, text: str) -> None:
    program = ifl.parse_program(text, f"docs/{name}:{line}")
    assert program is not None


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_no_link_into_the_spec_folder(path: Path) -> None:
    assert "../shared" not in path.read_text(encoding="utf-8"), path
