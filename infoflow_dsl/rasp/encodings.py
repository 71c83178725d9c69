"""SOp encodings and the two default annotators, as Tracr's ``tracr.rasp.rasp`` has them: an
SOp is categorical (one direction per value) unless annotated numerical (one direction holding
the number); :func:`numerical` and :func:`categorical` return annotated copies
(:func:`~.expressions.annotate`), and an SOp with no ``encoding`` annotation reads as
categorical (:func:`default_encoding`, registered in ``DEFAULT_ANNOTATORS`` with
:func:`default_name`). Tracr's own Encoding enum in an annotation is read by its value.
"""

from __future__ import annotations

import enum

from .annotations import DEFAULT_ANNOTATORS
from .expressions import RASPExpr, SOp, SOpT, annotate


class Encoding(enum.Enum):
    """How an SOp's values are held in the residual stream: one direction per value
    (categorical) or one direction holding the number (numerical)."""

    CATEGORICAL = "categorical"
    NUMERICAL = "numerical"


def numerical(sop: SOpT) -> SOpT:
    """A copy of ``sop`` annotated numerical (one direction holding its number)."""
    return annotate(sop, encoding=Encoding.NUMERICAL)


def categorical(sop: SOpT) -> SOpT:
    """A copy of ``sop`` annotated categorical (one direction per value; the default)."""
    return annotate(sop, encoding=Encoding.CATEGORICAL)


def get_encoding(sop: RASPExpr) -> Encoding:
    """The SOp's encoding; an annotation of Tracr's own Encoding enum is read by its value."""
    encoding = sop.annotations.get("encoding", Encoding.CATEGORICAL)
    return Encoding(getattr(encoding, "value", encoding))


def is_numerical(sop: RASPExpr) -> bool:
    return get_encoding(sop) is Encoding.NUMERICAL


def is_categorical(sop: RASPExpr) -> bool:
    return get_encoding(sop) is Encoding.CATEGORICAL


def default_encoding(expr: RASPExpr) -> Encoding:
    """The ``encoding`` annotation an SOp has unless one is given: categorical (a selector has none)."""
    if not isinstance(expr, SOp):
        raise TypeError(f"{expr!r} is not an SOp: only SOps have an encoding")
    return Encoding.CATEGORICAL


def default_name(expr: RASPExpr) -> str:
    """The ``name`` annotation an expression has unless one is given: its class's (``map``,
    ``select``, ...; ``sop`` or ``selector`` for a class of the user's)."""
    return type(expr).class_name


DEFAULT_ANNOTATORS["encoding"] = default_encoding
DEFAULT_ANNOTATORS["name"] = default_name
