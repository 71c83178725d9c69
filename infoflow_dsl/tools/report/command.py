"""``infoflowc report MODEL [-o OUT.html]``: a compiled model's page (``report``'s docstring).

Faults of the user's (a file that is not a model, a trained model, a token model, which has no
page yet, a program that no longer checks, an output that cannot be written) exit 2 with one
line on stderr, before anything is written; the page is written through a temporary file and a
rename, never half.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..cli import EXIT_OK, UsageError, check_writable, with_compiled_model, write_atomically

#: why a token model (language v3) has no page yet
TOKEN_PAGE_REFUSAL = ("a token model has no page yet: the page's example inputs, patterns and error histogram are "
                      "drawn from a vector domain; infoflowc check and infoflowc run show a token model")


def command_report(arguments: argparse.Namespace) -> int:
    from . import model_page

    output = arguments.output or arguments.model.with_suffix(".html")
    check_writable(output)

    def page_of(model: Any) -> str:
        if model.token_input:
            raise UsageError(f"{arguments.model}: {TOKEN_PAGE_REFUSAL}")
        return model_page(model)

    _, page = with_compiled_model(arguments.model, page_of, "show")
    data = page.encode("utf-8")
    write_atomically(output, data)
    print(f"{arguments.model}: wrote {output} ({len(data):,} bytes)")
    return EXIT_OK
