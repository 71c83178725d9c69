"""``infoflowc run MODEL TOKEN...``: run a token model on one sequence and show, beside each
output, the reference's value.

The tokens are encoded with the program the file stores (:func:`~infoflow_dsl.oracle.tokens.encode`:
names for a categorical vocabulary, numbers for a numeric one). One line per position
``t  token  output  reference``: for a per-token target the output at t (the decoded token for
a token output, the number rounded to the model's ε for a numeric one, ``-`` where the target
is undefined); for a sequence target the tokens, then one ``output`` line. A last line says
whether the model agrees with the reference (a token output: the same token; a numeric one:
within ε). Exit 2, one line on stderr, for a missing or bad file, a model over vectors, a token
not in the vocabulary, or more tokens than T; the run itself always exits 0.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .common import EXIT_ABOVE_EPS, EXIT_OK, Command, add_model_argument

UNDEFINED = "-"
MAX_DECIMALS = 12


def decimals_for(eps: float | None) -> int | None:
    """Decimals that show a value to the model's ε: one more than ε's (ε = 1e-3: 4); None (6
    significant digits) without a usable ε."""
    if eps is None or not math.isfinite(eps) or eps <= 0:
        return None
    return max(0, min(MAX_DECIMALS, math.ceil(-math.log10(eps)) + 1))


def format_number(value: float, decimals: int | None) -> str:
    """``value`` rounded to ``decimals`` (trailing zeros dropped, no ``-0``), or to 6 significant
    digits with ``decimals`` None; ``-`` for NaN (an undefined target)."""
    if math.isnan(value):
        return UNDEFINED
    text = f"{value:.6g}" if decimals is None else f"{value:.{decimals}f}"
    if decimals is not None and "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


@dataclass(frozen=True)
class Row:
    """One output site: its position (None for a sequence target's output), token, and the model's
    and the reference's values as shown, and whether they agree."""

    position: int | None
    token: str
    output: str
    reference: str
    agrees: bool


def output_rows(program: Any, model: Any, ids: Any, eps: float | None) -> list[Row]:
    """The model's and the reference's outputs on ids (1, T') as rows (see the module docstring)."""
    import torch

    from ..oracle.answers import answers
    from ..oracle.evaluate import evaluate
    from ..oracle.tokens import UNDEFINED_ID, token_names

    with torch.no_grad():
        y = model(ids.to(model.device)).to("cpu", torch.float64)  # (1, T'[, K or V]) or (1[, K or V])
    if program.token_output:
        y = answers(program, y)  # (1, T') or (1,) ids: the argmax token, -1 where undefined
    y, reference = y[0], evaluate(program, ids)[0]  # reference: (T'[, K]) or ([K]); a token output's ids
    tokens = token_names(program, ids[0])
    decimals = decimals_for(eps)

    def show_token(i: int) -> str:
        return UNDEFINED if i == UNDEFINED_ID else token_names(program, [i], answers=True)[0]

    def row(position: int | None, token: str, out: Any, want: Any) -> Row:
        if program.token_output:
            shown, expected = show_token(int(out)), show_token(int(want))
            if expected == UNDEFINED:
                return Row(position, token, UNDEFINED, UNDEFINED, True)
            return Row(position, token, shown, expected, shown == expected)
        want, out = want.reshape(-1), out.reshape(-1)
        if bool(want.isnan().any()):
            return Row(position, token, UNDEFINED, UNDEFINED, True)
        tolerance = eps if eps is not None and math.isfinite(eps) else 0.0
        agrees = bool(((out - want).abs() <= tolerance).all())
        return Row(position, token, _values(out, decimals), _values(want, decimals), agrees)

    if program.per_token:
        return [row(t + 1, tokens[t], y[t], reference[t]) for t in range(len(tokens))]
    return [Row(t + 1, tokens[t], "", "", True) for t in range(len(tokens))] + [row(None, "", y, reference)]


def _values(values: Any, decimals: int | None) -> str:
    shown = [format_number(float(v), decimals) for v in values.tolist()]
    return shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"


def render(rows: list[Row]) -> list[str]:
    """The table: ``t  token  output  reference`` with aligned columns, and the verdict line."""
    header = ("t", "token", "output", "reference")
    cells = [(str(r.position) if r.position is not None else "output", r.token, r.output, r.reference) for r in rows]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(4)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip()
             for cell in [header, *cells]]
    differs = [r for r in rows if not r.agrees]
    if not differs:
        lines.append("  agrees with the reference at every output")
    else:
        where = ", ".join("the output" if r.position is None else str(r.position) for r in differs)
        lines.append(f"  DIFFERS from the reference at {where}")
    return lines


def command_run(arguments: argparse.Namespace) -> int:
    from ..errors import ModelFileError, StoredProgramError
    from ..oracle.tokens import encode
    from ..pipeline.reading import program_of
    from ..transformer.io import load

    try:
        model = load(arguments.model, device="cpu")
        program = program_of(model)
    except ModelFileError as error:
        raise UsageError(str(error)) from None
    except StoredProgramError as error:
        raise UsageError(f"{arguments.model}: {error}") from None
    if not model.token_input or not program.over_tokens:
        raise UsageError(f"{arguments.model}: a model over vectors (R^{model.d}); infoflowc run takes a token model "
                         f"(language v3), whose input is a sequence of tokens")
    if len(arguments.tokens) > program.length:
        raise UsageError(f"{arguments.model}: {len(arguments.tokens)} tokens, but the model takes at most "
                         f"T = {program.length}")
    try:
        ids = encode(program, list(arguments.tokens))
    except ValueError as error:
        raise UsageError(f"{arguments.model}: {error}") from None
    eps = model.card.eps
    eps = float(eps) if eps is not None and model.card.trained is None else None
    print(f"{arguments.model}: {program.path}, T = {program.length}, tokens {program.token_vocabulary.describe()}, "
          f"{ids.shape[1]} token{'s' if ids.shape[1] != 1 else ''}")
    rows = output_rows(program, model, ids, eps)
    for line in render(rows):
        print(line)
    return EXIT_OK if all(r.agrees for r in rows) else EXIT_ABOVE_EPS  # as check: 3 when the model is wrong


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    """``run MODEL TOKEN...``."""
    add_model_argument(parser)
    parser.add_argument("tokens", nargs="+", metavar="TOKEN", help="the input's tokens (names, or numbers)")


RUN = Command("run", "run a token model on a sequence of tokens, beside the reference", _run_arguments, command_run)
