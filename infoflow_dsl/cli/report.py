"""``infoflowc report MODEL [-o OUT.html]``: a compiled model's page (``report``'s docstring).

Faults of the user's (a file that is not a model, a trained model, a token model, which has no
page yet, a program that no longer checks, an output that cannot be written) exit 2 with one
line on stderr, before anything is written; the page is written through a temporary file and a
rename, never half.
"""

from __future__ import annotations

import argparse

from ..files import check_writable, write_atomically
from .common import EXIT_OK, Command, add_model_argument, add_output_flag, with_compiled_model


def command_report(arguments: argparse.Namespace) -> int:
    from ..page import model_page

    output = arguments.output or arguments.model.with_suffix(".html")
    check_writable(output, arguments.model)

    _, page = with_compiled_model(arguments.model, model_page, "show")
    data = page.encode("utf-8")
    write_atomically(output, data)
    print(f"{arguments.model}: wrote {output} ({len(data):,} bytes)")
    return EXIT_OK


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    """``report MODEL [-o PAGE]``."""
    add_model_argument(parser)
    add_output_flag(parser, "the page (default: MODEL with .html)")


REPORT = Command("report", "a self-contained HTML page of a compiled model", _report_arguments, command_report)
