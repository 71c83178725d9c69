"""Random well-typed token programs (language v3/v4) as hypothesis strategies, for the
differential fuzz campaign (``bench/fuzz.py``, ``tests/test_fuzz.py``).

Every construct of docs/language.md over a finite vocabulary: numeric and categorical
vocabularies (decimals that are not dyadic among them), lets (macros with a parameter), tables
(one and two arguments, numbers, booleans and tokens as values), reductions (sum, mean, min,
max, top(k)) with conditions, argmin/argmax retrievals, offsets (``t - 1``), ``len``, Iverson
brackets joined with and/or/not, per-token and sequence targets, token outputs, and the
constants users write (0.3, 0.1, 1e-14, ``1 / 3``) in keys that mix tokens and positions
(``x(t) + 0.3 * (t - 1)``: the stable-sort idiom). The text is all hypothesis draws, so a
failing program shrinks to a small one.
"""

from __future__ import annotations

import typing

from hypothesis import strategies as st
from random_programs import DYADIC, NON_DYADIC

#: numeric vocabularies: whole numbers, dyadic and non-dyadic decimals, negatives
NUMERIC_VOCABULARIES = ("0, 1, 2, 3", "1, 2, 3", "0, 0.5, 1", "0.1, 0.2, 0.3", "-1, 0, 1", "0, 0.3, 1", "1, 2")
CATEGORICAL_VOCABULARIES = (("a", "b", "c"), ("a", "b"), ("x", "y", "z", "w"))
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
#: a let's parameter, and the only name a let's body binds (no call can capture it)
PARAMETER, LET_BINDER = "p", "r"
BINDERS = ("s", "u")
#: the method that draws each operator's expression
OPERATOR_METHODS = {"+": "binary", "-": "binary", "*": "binary", "/": "divide"}
#: the stable-sort idioms: a key that mixes a token and its position, and what is done with it
KEYS = ("x(p) + {c} * (p - 1)", "x(p) - {c} * p", "{c} * x(p) + p / 10", "x(p) + p * {c}")
KEY_TARGETS = ("sum_<s> [key(s) < key(t)]", "x(argmin_<s> |(sum_<u> [key(u) < key(s)]) - (t - 1)|)",
               "x(argmax_<s> key(s))", "sum_<s : s <= t> [key(s) <= key(t)]", "min_<s> key(s)")


def constant_texts(draw: typing.Callable) -> str:
    """A scalar literal as a user writes it: dyadic or not (``1 / 3`` in parentheses)."""
    text = draw(st.sampled_from(DYADIC[:-1] + NON_DYADIC))
    return f"({text})" if " " in text else text


class TokenText:
    """Draws expressions of one token program: ``numeric`` says whether its tokens are numbers;
    ``lets`` are the one-parameter scalar macros and ``tables`` the one-argument number tables
    declared so far; ``shiftable`` are the variables known to be at least 2 (``v - 1`` reads)."""

    def __init__(self, draw: typing.Callable, numeric: bool, vocabulary: tuple[str, ...]) -> None:
        self.draw = draw
        self.numeric = numeric
        self.vocabulary = vocabulary
        self.lets: list[str] = []
        self.tables: list[str] = []
        self.pairs: list[str] = []  # two-argument boolean tables
        self.shiftable: set[str] = set()
        self.binders = BINDERS
        self.bound = 0  # position variables bound so far (at most 3 in all: the order)

    def pick(self, options: typing.Sequence) -> typing.Any:
        return self.draw(st.sampled_from(options))

    def literal(self) -> str:
        """A token literal of the vocabulary."""
        return self.pick(self.vocabulary) if self.numeric else f'"{self.pick(self.vocabulary)}"'

    def position(self, scope: tuple[str, ...], depth: int) -> str:
        """What ``x(...)`` reads: a variable, an offset, a literal, T, len, a mirror, a retrieval."""
        options = ["literal", "len", "len"] + (["variable"] * 4 + ["mirror"] if scope else [])
        options += ["offset"] if self.shiftable & set(scope) else []
        options += ["arg"] * 2 if depth > 0 and self.bound < 3 else []
        kind = self.pick(options)
        if kind == "variable":
            return self.pick(scope)
        if kind == "offset":
            return f"{self.pick(sorted(self.shiftable & set(scope)))} - 1"
        if kind == "mirror":
            return f"len + 1 - {self.pick(scope)}"
        if kind == "len":
            return kind
        if kind == "literal":  # 1 is read at every length; 2 (refused: len may be 1) now and then
            return self.pick(("1", "1", "1", "2"))
        binder, inner = self.reduction_binder(scope)
        return f"{self.pick(('argmin', 'argmax'))}_<{binder}> {self.scalar(inner, depth - 1)}"

    def token(self, scope: tuple[str, ...], depth: int) -> str:
        return f"x({self.position(scope, depth)})"

    def reduction_binder(self, scope: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        """``"s : s <= t"``-style binder text (one variable, 0-2 conditions) and the new scope."""
        name = self.pick([b for b in self.binders if b not in scope] or list(self.binders))
        self.bound += 1
        terms = [*scope, "1", "len", "T", *(f"{v} - 1" for v in sorted(self.shiftable & set(scope)))]
        operators = ("<=", "<=", ">=", ">=", *COMPARISONS)  # the strict ones empty a range more often
        conditions = [f"{name} {self.pick(operators)} {self.pick(terms)}"
                      for _ in range(self.pick((0, 0, 1, 1, 2)))]
        if any(c in (f"{name} >= 2", f"{name} > 1") for c in conditions):
            self.shiftable.add(name)
        return name + (" : " + " and ".join(conditions) if conditions else ""), (*scope, name)

    def condition(self, scope: tuple[str, ...], depth: int) -> str:
        """A bracket's condition: scalars, tokens or positions compared; and, or, not."""
        kind = self.pick(["scalars", "tokens", "tokens", "positions", "joined", "not"] if depth > 0 else ["tokens"])
        if kind == "scalars":
            return f"{self.scalar(scope, depth - 1)} {self.pick(COMPARISONS)} {self.scalar(scope, depth - 1)}"
        if kind == "positions" and scope:
            return f"{self.pick(scope)} {self.pick(COMPARISONS)} {self.pick([*scope, '2', 'len', 'T'])}"
        if kind == "joined":
            return f"{self.condition(scope, depth - 1)} {self.pick(('and', 'or'))} {self.condition(scope, depth - 1)}"
        if kind == "not":
            return f"not ({self.condition(scope, depth - 1)})"
        compared = self.literal() if self.draw(st.booleans()) else self.token(scope, 0)
        operators = COMPARISONS if self.numeric else ("==", "!=")
        return f"{self.token(scope, depth)} {self.pick(operators)} {compared}"

    def scalar(self, scope: tuple[str, ...], depth: int) -> str:
        """A scalar expression over ``scope``'s position variables, ``depth`` levels deep."""
        leaves = ["constant", "bracket"] + (["token", "token"] if self.numeric else [])
        leaves += ["position"] if scope else []
        leaves += ["let"] if self.lets and scope else []
        leaves += ["table"] if self.tables else []
        leaves += ["pair"] if self.pairs and scope else []
        composite = ["+", "-", "*", "scale", "/", "abs", "relu", "min", "max", "neg"]
        reduce = ["reduce"] if self.bound < 3 else []
        category = self.pick(["leaf", "composite", *(["reduce"] * 2 if reduce else [])]) if depth > 0 else "leaf"
        kind = self.pick({"leaf": leaves, "composite": composite, "reduce": reduce}[category])
        return getattr(self, "_" + OPERATOR_METHODS.get(kind, kind))(scope, depth - 1, kind)

    def _constant(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return constant_texts(self.draw)

    def _bracket(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"[{self.condition(scope, max(depth, 0))}]"

    def _token(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return self.token(scope, max(depth, 0))

    def _position(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return self.pick([f"({self.pick(scope)} - 1)", self.pick(scope), "len", "T"])

    def _let(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"{self.pick(self.lets)}({self.pick(scope)})"

    def _table(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"{self.pick(self.tables)}({self.token(scope, max(depth, 0))})"

    def _pair(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"[{self.pick(self.pairs)}({self.token(scope, 0)}, {self.token(scope, 0)}) == 1]"

    def _binary(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"({self.scalar(scope, depth)} {kind} {self.scalar(scope, depth)})"

    def _divide(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"({self.scalar(scope, depth)} / {self.pick(('3', '10', '(1 / 3)', '0.3', '2'))})"

    def _scale(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"{constant_texts(self.draw)} * {self._paren(scope, depth)}"

    def _neg(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"-{self._paren(scope, depth)}"

    def _paren(self, scope: tuple[str, ...], depth: int) -> str:
        return f"({self.scalar(scope, depth)})"

    def _abs(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"|{self.scalar(scope, depth)}|"

    def _relu(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"relu({self.scalar(scope, depth)})"

    def _min(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        return f"{kind}({self.scalar(scope, depth)}, {self.scalar(scope, depth)})"

    _max = _min

    def _reduce(self, scope: tuple[str, ...], depth: int, kind: str) -> str:
        reducer = self.pick(("sum", "mean", "min", "max", "top(1)", "top(2)"))
        binder, inner = self.reduction_binder(scope)
        return f"({reducer}_<{binder}> {self.scalar(inner, depth)})"

    def target(self, scope: tuple[str, ...], depth: int) -> str:
        """The target's value: a scalar, or a token (a retrieval, a mirror, a token table)."""
        kind = self.pick(["scalar", "scalar", "scalar", "retrieval"])
        return self.token(scope, max(depth, 1)) if kind == "retrieval" else self.scalar(scope, depth)


def _vocabulary(draw: typing.Callable) -> tuple[bool, tuple[str, ...], str]:
    """(numeric, the tokens as the generator writes them, the input line)."""
    if draw(st.booleans()):
        text = draw(st.sampled_from(NUMERIC_VOCABULARIES))
        return True, tuple(text.split(", ")), f"input x : token {{{text}}}"
    tokens = draw(st.sampled_from(CATEGORICAL_VOCABULARIES))
    return False, tokens, "input x : token {" + ", ".join(f'"{t}"' for t in tokens) + "}"


def _tables(draw: typing.Callable, text: TokenText, count: int) -> list[str]:
    """``count`` table declarations over the vocabulary: numbers or booleans, one or two keys."""
    lines = []
    keys = [token if text.numeric else f'"{token}"' for token in text.vocabulary]
    for index in range(count):
        if draw(st.booleans()):
            name = f"g{index}"
            entries = [f"({a}, {b}): {draw(st.sampled_from(('true', 'false')))}"
                       for a in keys for b in keys if draw(st.booleans())] or [f"({keys[0]}, {keys[0]}): true"]
            lines.append(f"table {name} = {{{', '.join([*entries, '_: false'])}}}")
            text.pairs.append(name)
            continue
        name = f"f{index}"
        chosen = [key for key in keys if draw(st.booleans())] or keys[:1]
        entries = [f"{key}: {draw(st.sampled_from(DYADIC[:-1] + NON_DYADIC[:4]))}" for key in chosen]
        default = [] if len(chosen) == len(keys) else [f"_: {draw(st.sampled_from(('0', '1', '0.3')))}"]
        lines.append(f"table {name} = {{{', '.join(entries + default)}}}")
        text.tables.append(name)
    return lines


def _lets(draw: typing.Callable, text: TokenText, count: int) -> list[str]:
    """``count`` one-parameter macros; a numeric vocabulary may draw a stable-sort key."""
    lines = []
    text.binders = (LET_BINDER,)  # a let's body binds only r: no call's argument is ever r
    for index in range(count):
        if text.numeric and draw(st.booleans()):
            body = draw(st.sampled_from(KEYS)).format(c=constant_texts(draw))
        else:
            text.bound, text.shiftable = 0, set()
            body = text.scalar((PARAMETER,), draw(st.integers(0, 2)))
        lines.append(f"let k{index}({PARAMETER}) = {body}")
    text.lets.extend(f"k{index}" for index in range(count))
    text.binders, text.bound, text.shiftable = BINDERS, 0, set()
    return lines


@st.composite
def token_programs(draw: typing.Callable) -> tuple[str, int]:
    """(source, T): a random well-typed token program and its length (3..5)."""
    numeric, vocabulary, input_line = _vocabulary(draw)
    length = draw(st.integers(3, 5))
    text = TokenText(draw, numeric, vocabulary)
    lines = [input_line, f"length T = {length}"]
    lines += _tables(draw, text, draw(st.integers(0, 2)))
    lines += _lets(draw, text, draw(st.integers(0, 2)))
    per_token = draw(st.integers(0, 3)) > 0
    condition = draw(st.sampled_from(["", " : t >= 2", " : t <= T - 1"])) if per_token else ""
    scope = ("t",) if per_token else ()
    if "t >= 2" in condition:
        text.shiftable.add("t")
    depth = draw(st.integers(1, 3))
    if numeric and per_token and draw(st.integers(0, 3)) == 0:  # the stable-sort idiom, whole
        lines.append(f"let key({PARAMETER}) = {draw(st.sampled_from(KEYS)).format(c=constant_texts(draw))}")
        value = draw(st.sampled_from(KEY_TARGETS))
    elif not numeric and per_token and draw(st.integers(0, 4)) == 0:  # a table of tokens as the output
        mirrored = {token: draw(st.sampled_from(vocabulary)) + "!" for token in vocabulary}
        lines.append("table flip = {" + ", ".join(f'"{k}": "{v}"' for k, v in mirrored.items()) + "}")
        value = f"flip({text.token(scope, depth)})"
    else:
        value = text.target(scope, depth)
    lines.append(f"target(t{condition}) = {value}" if per_token else f"target {value}")
    return "\n".join(lines) + "\n", length
