"""Diagnostics: a source line longer than QUOTED characters is quoted around its span, the caret
still under the span's characters."""

from __future__ import annotations

from infoflow_dsl.errors import QUOTED, Diagnostic
from infoflow_dsl.language.syntax import Span


def test_a_long_line_is_quoted_around_the_span_with_the_caret_under_it() -> None:
    line = "a" * 5000 + "WRONG" + "b" * 5000
    start = line.index("WRONG") + 1
    _, quoted, caret = Diagnostic("p.iflow", Span(1, start, 1, start + 5), "bad").render(line).split("\n")
    quoted, caret = quoted[4:], caret[4:]
    assert len(quoted) <= QUOTED + 2 and quoted.startswith("…") and quoted.endswith("…")
    column = caret.index("^")
    assert quoted[column:column + 5] == "WRONG" and caret.strip() == "^~~~~"


def test_a_short_line_is_quoted_whole() -> None:
    text = "target y = x(t) +"
    rendered = Diagnostic("p.iflow", Span(1, 17, 1, 18), "expected an expression").render(text)
    assert rendered.split("\n")[1:] == ["    " + text, "    " + " " * 16 + "^"]
