"""What a syntax error says beyond "unexpected X": labels for common mistakes, found by the
parser state they leave it in (lark's ``match_examples``: each bad example is registered as a
first statement and after another one, since labels match only at the same parser depth), and
the hint for a reduction that does not exist (``mx_<s>``)."""

from __future__ import annotations

import difflib
import re

from lark import Token

#: the words a declaration starts with
KEYWORDS = ("input", "length", "const", "let", "margin", "target", "table")

#: Common mistakes, labelled by the parser state they leave it in (lark's match_examples).
SYNTAX_EXAMPLES: dict[str, list[str]] = {
    "a declaration starts with one of: " + ", ".join(KEYWORDS): [
        "x = 1",
        "min_<t> x(t)[1]",
        "1 + 2",
    ],
    "the input needs a space: input x : R^d": ["input x", "input x R^4", "input : R^4"],
    "a space is written R, R^n or R^{m x n}": ["input x : R4", "input x : Q^4", "const c : R^ = 1"],
    "a domain is written in [a, b] or in ball(r)": [
        "input x : R^2 in",
        "input x : R^2 in (0, 1)",
        "input x : R^2 in [0 1]",
        "input x : R^2 in [0, 1",
    ],
    "an expression is missing": ["target", "target 1 +", "target <x(1), >", "let f(a) ="],
    "a target for the whole sequence is written target EXPR (no '='); one per token target(t) = EXPR": [
        "target = 1",
    ],
    "a reduction's variables are closed with '>' before its body": [
        "target min_<t x(t)[1]",
        "target min_<t, s <x(t), x(s)>",
    ],
    "a condition compares two positions: s != t, s < 3, t == T": [
        "target min_<t : t> x(t)[1]",
        "target min_<t : > x(t)[1]",
        "target min_<t : t != > x(t)[1]",
    ],
    'a vocabulary is written token {"a", "b", "c"} (quoted names) or token {1, 2, 3} (numbers)': [
        'input x : token {"a" "b"}',
        "input x : token {a, b}",
        'input x : token "a", "b"',
        'input x : token {"a", }',
    ],
    'a bracket holds a comparison: [x(t) == "a"], [a < b and not c >= 1]': [
        "target [x(1)]",
        "target [x(1) == ]",
        "target [x(1) < 2 and]",
        "target [x(1) < 2 and 3]",
        "target []",
        "target(t) = [x(t)]",
        "target(t) = [x(t) == ]",
        "target(t) = [x(t) < 2 or 1]",
    ],
}


#: the reductions a name written ``NAME_<`` may have meant (the grammar's REDUCER terminal)
REDUCTIONS = ("min_", "max_", "sum_", "mean_", "argmin_", "argmax_", "top(k)_")


def unknown_reduction(text: str, token: Token) -> str | None:
    """For ``mx_<s, t>``: the '<' follows a name ending in ``_`` that is no reduction. The hint
    names the reductions and the closest one."""
    if str(token) != "<" or token.start_pos is None:
        return None
    written = re.search(r"([A-Za-z][A-Za-z0-9_]*_)$", text[:token.start_pos])
    if written is None:
        return None
    name = written.group(1)
    closest = difflib.get_close_matches(name, REDUCTIONS, n=1, cutoff=0.5)
    guess = f"; did you mean {closest[0]}?" if closest else ""
    return f"`{name}` is not a reduction (the reductions are {', '.join(REDUCTIONS)}){guess}"
