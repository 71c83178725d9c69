"""language/syntax.py: spans and the source text they cover."""

from __future__ import annotations

from infoflow_dsl.language.syntax import NO_SPAN, Span, text_at


def test_text_at_folds_white_space_and_spans_lines() -> None:
    source = "target max_<t>\n    x(t)[1]   + 1\n"
    assert text_at(source, Span(1, 8, 2, 18)) == "max_<t> x(t)[1] + 1"
    assert text_at(source, NO_SPAN) == "" and text_at(source, Span(9, 1, 9, 2)) == ""
