"""Random RASP programs over infoflow's Tracr-compatible API, as the text of a runnable ``.py``
file (hypothesis draws every part, so a failing program shrinks): Map and SequenceMap (lambdas
on numbers and strings, non-dyadic constants among them), Select with every Comparison and
selector logic (&, |, ~), categorical and numerical Aggregate, SelectorWidth, numerical and
categorical encodings, and shifts (``library.shift_by``). The file defines ``program``, ``VOCAB``
and ``MAX_SEQ_LEN`` (:func:`fuzz_property.rasp_program` reads them)."""

from __future__ import annotations

import typing

from hypothesis import strategies as st

VOCABULARIES = ((0, 1, 2), (1, 2, 3), (0.1, 0.3, 1), ("a", "b", "c"), ("a", "b"))
LEAVES = {"rasp.tokens": None, "rasp.indices": "num", "rasp.length": "num"}  # None: the vocabulary's kind
#: a Map's functions by (argument kind, value kind)
MAPS = {
    ("num", "num"): ("lambda x: x + 1", "lambda x: 2 * x", "lambda x: x % 3", "lambda x: x / 3",
                     "lambda x: 0.3 * x", "lambda x: x - 0.1", "lambda x: round(x / 3, 2)"),
    ("num", "bool"): ("lambda x: x > 1", "lambda x: x == 0"),
    ("str", "str"): ("lambda x: x.upper()", 'lambda x: x + "!"'),
    ("str", "num"): ("lambda x: len(x)", 'lambda x: 0.3 if x == "a" else 1'),
    ("str", "bool"): ('lambda x: x == "a"',),
}
#: a SequenceMap's functions by the kinds of its two arguments
PAIRS = {
    ("num", "num"): ("lambda x, y: x + y", "lambda x, y: x - y", "lambda x, y: x * y", "lambda x, y: x + 0.3 * y",
                     "lambda x, y: x + y / 3", "lambda x, y: x < y"),
    ("str", "str"): ("lambda x, y: x + y", "lambda x, y: x == y"),
    ("str", "num"): ('lambda x, y: f"{x}{y}"',),
    ("num", "str"): ('lambda x, y: f"{x}{y}"',),
}
COMPARISONS = ("EQ", "LT", "LEQ", "GT", "GEQ", "NEQ", "TRUE", "FALSE")
#: a value kind as a number ("num"), a bool (also a number) or a string
KIND_OF = {"num": "num", "bool": "num", "str": "str"}


class RaspText:
    """The statements of one program: ``sops`` are (name, kind) of the SOps defined so far."""

    def __init__(self, draw: typing.Callable, token_kind: str) -> None:
        self.draw = draw
        self.sops: list[tuple[str, str]] = [(name, kind or token_kind) for name, kind in LEAVES.items()]
        self.lines: list[str] = []

    def pick(self, options: typing.Sequence) -> typing.Any:
        return self.draw(st.sampled_from(options))

    def define(self, expression: str, kind: str) -> None:
        name = f"v{len(self.lines) + 1}"
        self.lines.append(f"{name} = {expression}")
        self.sops.append((name, kind))

    def sop(self, kind: str | None = None) -> tuple[str, str]:
        options = [s for s in self.sops if kind is None or s[1] == kind]
        return self.pick(options or self.sops)

    def selector(self, depth: int = 1) -> str:
        """A Select with any comparison, or &, |, ~ of selectors."""
        if depth > 0 and self.draw(st.integers(0, 4)) == 0:
            op = self.pick(("&", "|", "~"))
            return f"~{self.selector(0)}" if op == "~" else f"({self.selector(0)} {op} {self.selector(0)})"
        keys, queries = self.sop(), self.sop()
        if keys[1] != queries[1] and self.draw(st.booleans()):
            queries = self.sop(keys[1])
        return f"rasp.Select({keys[0]}, {queries[0]}, rasp.Comparison.{self.pick(COMPARISONS)})"

    def step(self) -> None:
        """One more SOp, of a construct drawn."""
        kind = self.pick(("map", "map", "sequence_map", "aggregate", "numerical", "width", "shift"))
        getattr(self, f"_{kind}")()

    def _map(self) -> None:
        argument, kind = self.sop()
        value = self.pick([v for (a, v) in MAPS if a == kind])
        expression = f"rasp.Map({self.pick(MAPS[(kind, value)])}, {argument})"
        if KIND_OF[value] == "num" and self.draw(st.booleans()):
            expression = f"rasp.numerical({expression})"
        self.define(expression, KIND_OF[value])

    def _sequence_map(self) -> None:
        (left, a), (right, b) = self.sop(), self.sop()
        function = self.pick(PAIRS[(a, b)])
        self.define(f"rasp.SequenceMap({function}, {left}, {right})", "str" if 'f"' in function or (
            a == "str" and "+" in function) else "num")

    def _aggregate(self) -> None:
        values, kind = self.sop()
        self.define(f"rasp.Aggregate({self.selector()}, {values})", kind)

    def _numerical(self) -> None:
        values, _ = self.sop("num")
        wrapped = f"rasp.numerical({values})" if self.draw(st.booleans()) else (
            f"rasp.numerical(rasp.Map(lambda x: x, {values}))")
        self.define(f"rasp.numerical(rasp.Aggregate({self.selector()}, {wrapped}, default=0))", "num")

    def _width(self) -> None:
        self.define(f"rasp.SelectorWidth({self.selector()})", "num")

    def _shift(self) -> None:
        values, kind = self.sop()
        self.define(f"library.shift_by({self.pick((1, 2))}, {values})", kind)


@st.composite
def rasp_programs(draw: typing.Callable) -> str:
    """The text of a ``.py`` file defining a random RASP ``program``, ``VOCAB`` and ``MAX_SEQ_LEN``."""
    vocab = draw(st.sampled_from(VOCABULARIES))
    text = RaspText(draw, "str" if isinstance(vocab[0], str) else "num")
    for _ in range(draw(st.integers(1, 4))):
        text.step()
    header = ["from infoflow_dsl import rasp", "from infoflow_dsl.rasp import library", "",
              f"VOCAB = {vocab!r}", f"MAX_SEQ_LEN = {draw(st.integers(3, 4))}"]
    return "\n".join([*header, *text.lines, f"program = {text.lines[-1].split(' = ')[0]}", ""])
