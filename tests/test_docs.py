"""The user documentation: every ```iflow example in docs/*.md parses and checks, every relative link
of the README and docs/ leads to a file of the repository, nothing points into ``../shared`` (a
clone does not have it), the README stays an overview (at most 400 lines), and the command tables
of the README and docs/design.md name every command of ``infoflowc`` and no other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import infoflow_dsl as ifl

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLE = re.compile(r"^```iflow\n(.*?)^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


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


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_link_into_the_spec_folder(path: Path) -> None:
    assert "../shared" not in path.read_text(encoding="utf-8"), path


def leads_into_the_repository(page: Path, target: str) -> bool:
    """Whether a relative link of ``page`` names a file or folder inside the repository."""
    resolved = (page.parent / target).resolve()
    return resolved.is_relative_to(ROOT) and resolved.exists()


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_of_the_repository(path: Path) -> None:
    targets = [t.split("#")[0] for t in LINK.findall(path.read_text(encoding="utf-8")) if "://" not in t]
    assert [t for t in targets if t and not leads_into_the_repository(path, t)] == []


def test_the_readme_is_an_overview() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400 and "](docs/language.md)" in text


#: (page, the heading of the section whose table lists the commands)
COMMAND_TABLES = [("README.md", "## The commands"), ("docs/design.md", "## The command line")]


@pytest.mark.parametrize(("page", "heading"), COMMAND_TABLES, ids=[page for page, _ in COMMAND_TABLES])
def test_the_command_table_names_every_command(page: str, heading: str) -> None:
    """Each row's first cell names its commands in backticks (`` `train FILE ..` ``, `` `check`, `run` ``);
    together they are :data:`infoflow_dsl.cli.main.COMMANDS`."""
    from infoflow_dsl.cli.main import COMMANDS

    section = (ROOT / page).read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ", 1)[0] for line in section.splitlines() if line.startswith("| `")]
    named = [name for cell in rows for name in re.findall(r"`([a-z][a-z-]*)", cell)]
    assert sorted(named) == sorted(command.name for command in COMMANDS)
