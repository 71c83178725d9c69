"""BENCHMARKS.md holds one section per benchmark script; each script rewrites only its own."""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
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


def measured_on() -> str:
    """"Measured <time> on <machine>, torch <version>, N thread(s) (load average ...": a section's opening."""
    import torch

    machine = f"{platform.machine()}, {os.cpu_count()} logical cores, Python {platform.python_version()}"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s) (load average {load} at the end: a shared machine)")


def smoke_or_section(argv: Sequence[str] | None, title: str, measure: Callable[[bool], str]) -> str:
    """A bench script's main: one torch thread, ``measure(smoke)`` (``--smoke``: toy sizes), and
    without ``--smoke`` its text written as BENCHMARKS.md's section ``title``; the text returned."""
    import torch

    arguments = list(sys.argv[1:] if argv is None else argv)
    smoke = arguments[:1] == ["--smoke"]
    torch.set_num_threads(1)
    text = measure(smoke)
    if not smoke:
        write_section(title, text)
    return text
