"""How the model card (:mod:`.card`) reads and writes its JSON: value kinds and records.

A **record** is a frozen dataclass (:class:`Record`) whose fields each declare, with
:func:`entry`, the JSON key it is stored under, the :class:`Kind` of its value, and whether the
key may be absent (``optional``: the field is then None) or hold null (``nullable``).
:meth:`Record.from_json` checks a JSON object against those declarations and raises
:class:`CardError` (a ValueError) naming the first fault by its path in the config
(``config['layers'][0]['heads'][1]['beta'] must be a number, got 'x'``; ``config['program']
lacks 'source'``; ``config has an unknown field 'x'``); :meth:`Record.to_json` gives back
the same object: a value is kept as JSON gave it (an int stays an int where a number is
expected), a list becomes a tuple and back, and a record that declares a ``nulls`` field
remembers which of its optional keys held null, so that reading then writing a config is the
identity (the file's bytes do not change).

A record that declares an ``extra`` field is **open**: keys it does not declare are kept there
(a training run's settings, which :mod:`~infoflow_dsl.training` owns); any other record refuses
them. Values owned by a higher layer (a circuit graph's JSON, a superposition feature's record)
are opaque JSON here (:data:`OBJECT`, :data:`JSON_LIST`): their own modules read them.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R", bound="Record")

#: Where a value sits in the config: the keys and list indices leading to it.
Path = tuple[str | int, ...]


class CardError(ValueError):
    """A config field that is missing, unknown or of the wrong kind; the message names it."""


def where(path: Path) -> str:
    """``config['layers'][0]['heads']`` for the path ('layers', 0, 'heads')."""
    return "config" + "".join(f"[{step!r}]" for step in path)


def shown(value: Any) -> str:
    """A value as an error message quotes it: its repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _same(value: T) -> T:
    return value


@dataclass(frozen=True)
class Kind(Generic[T]):
    """A kind of JSON value: ``text`` says what it must be; ``test`` accepts a leaf value as it
    is, or ``read`` turns a composite one into its card value (raising CardError itself);
    ``write`` turns a card value back into JSON."""

    text: str
    test: Callable[[Any], bool] | None = None
    read: Callable[[Any, Path], T] | None = None
    write: Callable[[T], Any] = _same

    def parse(self, value: Any, path: Path) -> T:
        """The card value of ``value`` (at ``path``), or CardError."""
        if self.read is not None:
            return self.read(value, path)
        if self.test is None or not self.test(value):
            raise CardError(f"{where(path)} must be {self.text}, got {shown(value)}")
        return value  # a leaf is kept as JSON gave it


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean, not NaN)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def is_count(value: Any) -> bool:
    """A whole number ≥ 0 (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


STRING: Kind[str] = Kind("a string", lambda v: isinstance(v, str))
BOOLEAN: Kind[bool] = Kind("true or false", lambda v: isinstance(v, bool))
NUMBER: Kind[float] = Kind("a number", is_number)
#: a number, NaN and infinities included (what a diverged training run may record)
REAL: Kind[float] = Kind("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool))
NONNEGATIVE: Kind[float] = Kind("a number ≥ 0", lambda v: is_number(v) and v >= 0)
COUNT: Kind[int] = Kind("a whole number ≥ 0", is_count)
POSITIVE: Kind[int] = Kind("a positive integer", lambda v: is_count(v) and v >= 1)


def one_of(*values: str) -> Kind[str]:
    """One of the strings ``values``."""
    text = " or ".join(f'"{v}"' for v in values) if len(values) <= 2 else (
        ", ".join(f'"{v}"' for v in values[:-1]) + f' or "{values[-1]}"')
    return Kind(text, lambda v: isinstance(v, str) and v in values)


def _object(value: Any, path: Path) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise CardError(f"{where(path)} must be an object, got {shown(value)}")
    return copy.deepcopy(dict(value))


def _json_list(value: Any, path: Path) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise CardError(f"{where(path)} must be a list, got {shown(value)}")
    return tuple(copy.deepcopy(list(value)))


#: Opaque JSON objects and lists, read by the module that owns them (kept as copies).
OBJECT: Kind[dict[str, Any]] = Kind("an object", read=_object, write=copy.deepcopy)
JSON_LIST: Kind[tuple[Any, ...]] = Kind("a list", read=_json_list, write=lambda v: copy.deepcopy(list(v)))


def list_of(kind: Kind[T]) -> Kind[tuple[T, ...]]:
    """A list of values of ``kind``, held as a tuple."""
    text = f"a list, each item {kind.text}"

    def read(value: Any, path: Path) -> tuple[T, ...]:
        if not isinstance(value, list | tuple):
            raise CardError(f"{where(path)} must be {text}, got {shown(value)}")
        return tuple(kind.parse(item, (*path, i)) for i, item in enumerate(value))

    return Kind(text, read=read, write=lambda v: [kind.write(x) for x in v])


def record(cls: type[R]) -> Kind[R]:
    """An object read as the record ``cls``."""
    return Kind("an object", read=cls.from_json, write=lambda r: r.to_json())


STRINGS: Kind[tuple[str, ...]] = list_of(STRING)
NUMBERS: Kind[tuple[float, ...]] = list_of(NUMBER)
COUNTS: Kind[tuple[int, ...]] = list_of(COUNT)


@dataclass(frozen=True)
class Spec:
    """One field's declaration: its JSON ``key``, value ``kind``, and whether the key may be
    absent (``optional``) or hold null (``nullable``)."""

    key: str
    kind: Kind[Any]
    optional: bool
    nullable: bool


def entry(kind: Kind[Any], *, key: str | None = None, optional: bool = False, nullable: bool = False) -> Any:
    """A record field of ``kind`` (see :class:`Spec`); an optional field defaults to None (absent)."""
    metadata = {"card": (kind, key, optional, nullable)}
    if optional:
        return dataclasses.field(default=None, metadata=metadata)
    return dataclasses.field(metadata=metadata)


_SPECS: dict[type, tuple[tuple[str, Spec], ...]] = {}


def specs(cls: type) -> tuple[tuple[str, Spec], ...]:
    """(field name, declaration) of every declared field of the record class ``cls`` (kept)."""
    if cls not in _SPECS:
        found = []
        for f in dataclasses.fields(cls):
            if "card" in f.metadata:
                kind, key, optional, nullable = f.metadata["card"]
                found.append((f.name, Spec(key or f.name, kind, optional, nullable)))
        _SPECS[cls] = tuple(found)
    return _SPECS[cls]


class Record:
    """A JSON object of the card as a frozen dataclass (see the module docstring)."""

    @classmethod
    def from_json(cls: type[R], value: Any, path: Path = ()) -> R:
        """The record of the JSON object ``value`` (at ``path`` in the config); CardError naming
        the first missing, unknown or wrong field."""
        if not isinstance(value, Mapping):
            raise CardError(f"{where(path)} must be an object, got {shown(value)}")
        declared = specs(cls)
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # a dataclass
        known = {spec.key for _, spec in declared}
        unknown = [key for key in value if key not in known]
        values: dict[str, Any] = {}
        if unknown and "extra" not in names:
            raise CardError(f"{where(path)} has an unknown field {shown(unknown[0])}{cls._unknown_hint()}")
        if "extra" in names:
            values["extra"] = {key: copy.deepcopy(value[key]) for key in unknown}
        nulls = set()
        for name, spec in declared:
            if spec.key not in value:
                if not spec.optional:
                    raise CardError(f"{where(path)} lacks {spec.key!r} ({spec.kind.text})")
                continue
            item = value[spec.key]
            if item is None and spec.nullable:
                nulls.add(spec.key)
                values[name] = None
                continue
            values[name] = spec.kind.parse(item, (*path, spec.key))
        if "nulls" in names:
            values["nulls"] = frozenset(nulls)
        made = cls(**values)
        made.check(path)
        return made

    @classmethod
    def _unknown_hint(cls) -> str:
        return ""

    def check(self, path: Path) -> None:
        """Rules between fields, once they are read (none by default); CardError naming the fault."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object this record was read from (or, for a record built in memory, the one
        it stands for)."""
        nulls: frozenset[str] = getattr(self, "nulls", frozenset())
        out: dict[str, Any] = {}
        for name, spec in specs(type(self)):
            value = getattr(self, name)
            if value is not None:
                out[spec.key] = spec.kind.write(value)
            elif not spec.optional or spec.key in nulls:
                out[spec.key] = None
        out.update(copy.deepcopy(getattr(self, "extra", None) or {}))
        return out


def require_group(value: Record, path: Path, keys: tuple[str, ...], why: str) -> None:
    """CardError unless the fields ``keys`` (JSON keys) of ``value`` are all present or all
    absent: they are written together (``why``)."""
    present = {spec.key for name, spec in specs(type(value)) if getattr(value, name) is not None}
    present |= getattr(value, "nulls", frozenset())
    given = [key for key in keys if key in present]
    if given and len(given) != len(keys):
        missing = next(key for key in keys if key not in present)
        raise CardError(f"{where(path)} lacks {missing!r}, which {why} always has with {given[0]!r}")
