"""BENCHMARKS.md holds one section per benchmark script; each script rewrites only its own."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
HEADER = ("# Benchmarks\n\n"
          "Each section is written by the script it names, in one run; ratios, not times, carry over.\n")


def write_section(title: str, body: str) -> None:
    """Replace (or append) the section ``## title`` of BENCHMARKS.md with ``body``."""
    text = BENCHMARKS.read_text(encoding="utf-8") if BENCHMARKS.exists() else HEADER
    if not text.startswith(HEADER):
        text = HEADER
    section = f"\n## {title}\n\n{body.strip()}\n"
    pattern = re.compile(rf"\n## {re.escape(title)}\n.*?(?=\n## |\Z)", re.DOTALL)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text + section
    BENCHMARKS.write_text(text, encoding="utf-8")
    print(section)
