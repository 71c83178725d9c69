"""How RASP's Python values are written in ``.iflow`` text: vocabulary entries, numbers, table
keys and values. A value the language cannot hold (a string with a quote, NaN, a tuple) is a
:class:`TranslationError` naming the node."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import Any, cast

from ..errors import CompileError
from .origins import Origin, origin_of


class TranslationError(CompileError):
    """A RASP program (or a node of it) that ``from_rasp`` cannot write as an ``.iflow`` program:
    ``reason``, and ``origin``, where the offending node was built in its author's Python
    (:mod:`.origins`; None where unknown), which ``str()`` puts first: ``prog.py:12:5: Aggregate
    'shifted': ...``."""

    def __init__(self, reason: str, node: object | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.origin: Origin | None = origin_of(node)

    def at(self, node: object) -> TranslationError:
        """This refusal, located where ``node`` was built when it has no place yet (raised
        through the rules of nested nodes, the innermost one's place is kept)."""
        if self.origin is None:
            self.origin = origin_of(node)
        return self

    def __str__(self) -> str:
        return self.reason if self.origin is None else f"{self.origin}: {self.reason}"


def is_number(value: Any) -> bool:
    """A number the language holds (booleans are 1 and 0, as Tracr's numerical SOps treat them)."""
    return isinstance(value, bool | int | float) and math.isfinite(value)


def number_text(value: Any) -> str:
    """A literal for a number: ``3``, ``-0.5``, ``0.3333333333333333`` (repr round-trips the float)."""
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def operand(value: Any) -> str:
    """A number as an operand of an expression (a negative one parenthesised)."""
    text = number_text(value)
    return f"({text})" if text.startswith("-") else text


def token_text(token: Hashable, where: str) -> str:
    """A categorical token as a quoted literal."""
    text = str(token)
    if not isinstance(token, str) or '"' in text or "\n" in text or not text:
        raise TranslationError(f"{where}: the token {token!r} cannot be written as a quoted name of a vocabulary")
    return f'"{text}"'


def vocabulary_text(vocabulary: Iterable[Hashable], where: str = "the vocabulary") -> tuple[str, bool]:
    """``{"a", "b"}`` (categorical, in sorted order) or ``{1, 2, 3}`` (numeric), and whether it
    is categorical. Mixed strings and numbers are refused."""
    tokens = list(dict.fromkeys(vocabulary))
    if not tokens:
        raise TranslationError(f"{where} is empty")
    if any(isinstance(t, bool) for t in tokens):  # ifl.encode reads a token by its value, never a bool's
        raise TranslationError(f"{where} holds booleans: write them as the numbers 0 and 1")
    if all(is_number(t) for t in tokens):
        numbers = sorted({float(cast(float, t)) for t in tokens})
        return "{" + ", ".join(number_text(n) for n in numbers) + "}", False
    if all(isinstance(t, str) for t in tokens):
        return "{" + ", ".join(token_text(t, where) for t in sorted(cast(list[str], tokens))) + "}", True
    raise TranslationError(f"{where} mixes strings and numbers ({sorted(map(repr, tokens))}): a vocabulary is "
                           f"all names or all numbers")


def table_value(value: Any, where: str) -> str:
    """A table's value: a number, or true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not is_number(value):
        raise TranslationError(f"{where}: its value {value!r} is not a number or a boolean (a table of new tokens "
                               f"is not compiled yet)")
    return number_text(value)
