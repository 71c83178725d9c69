"""An expression's annotations, as Tracr holds them (``tracr.rasp.rasp``): a read-only mapping
of key → value that fills a missing key lazily from :data:`DEFAULT_ANNOTATORS` (key → a
function of the expression), the first time the key is read. ``expressions`` registers the two
Tracr has: ``"name"`` (:func:`~.expressions.default_name`) and ``"encoding"``
(:func:`~.expressions.default_encoding`, categorical). A user may add their own, as in Tracr:
``DEFAULT_ANNOTATORS["colour"] = lambda expr: "red"``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol


class Annotator(Protocol):
    """A default annotation: the value of one key for an expression that was not given one."""

    def __call__(self, expr: Any) -> Any:
        """What annotation to add to ``expr``."""


#: Key → the annotator that gives an expression's value for it when none was set.
DEFAULT_ANNOTATORS: dict[str, Annotator] = {}


class Annotations(Mapping[str, Any]):
    """The annotations of one expression: those set, and, read lazily, the defaults."""

    def __init__(self, expr: Any, **annotations: Any) -> None:
        self._expr = expr
        self._set: dict[str, Any] = dict(annotations)

    def __getitem__(self, key: str) -> Any:
        if key not in self._set:
            if key not in DEFAULT_ANNOTATORS:
                raise KeyError(f"no annotation {key!r}; there are {sorted(set(self._set) | set(DEFAULT_ANNOTATORS))}")
            self._set[key] = DEFAULT_ANNOTATORS[key](self._expr)
        return self._set[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._set)

    def __len__(self) -> int:
        return len(self._set)

    def given(self, key: str) -> bool:
        """Whether ``key`` holds a value (set, or a default already read)."""
        return key in self._set
