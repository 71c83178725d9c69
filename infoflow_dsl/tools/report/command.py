"""``infoflowc report MODEL [-o OUT.html]``: a compiled model's page (``report``'s docstring).

Faults of the user's (a file that is not a model, a trained model, a program that no longer
checks, an output that cannot be written) exit 2 with one line on stderr, before anything is
written; the page is written through a temporary file and a rename, never half.
"""

from __future__ import annotations

import argparse

from ..cli import EXIT_OK, UsageError, check_writable, write_atomically


def command_report(arguments: argparse.Namespace) -> int:
    from ...errors import ModelFileError
    from ...pipeline import StoredProgramError
    from ...transformer.io import load
    from . import model_page

    output = arguments.output or arguments.model.with_suffix(".html")
    check_writable(output)
    try:
        model = load(arguments.model, device="cpu")
        if "trained" in model.config:
            raise UsageError(f"{arguments.model}: a trained model has no circuit to show (only compiled ones do)")
        page = model_page(model)
    except ModelFileError as error:
        raise UsageError(str(error)) from None
    except StoredProgramError as error:
        raise UsageError(f"{arguments.model}: {error}") from None
    write_atomically(output, page.encode("utf-8"))
    print(f"{arguments.model}: wrote {output} ({len(page.encode('utf-8')):,} bytes)")
    return EXIT_OK
