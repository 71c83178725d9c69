"""from_rasp reads a RASP program by its classes' names and attributes, so Tracr's own objects
(``tracr.rasp.rasp``) translate without being this package's classes. Tracr is not a test
dependency: this stand-in has Tracr's class names, attribute names, label and annotation
conventions (an ``encoding`` annotation of an Enum whose values are "categorical" and
"numerical") and nothing of this package's classes."""

from __future__ import annotations

import enum
import itertools
from typing import Any

import infoflow_dsl as ifl
from infoflow_dsl import rasp
from infoflow_dsl.rasp.agreement import agreement, every_input
from infoflow_dsl.rasp.translate import rasp_source

_ids = itertools.count()


class Encoding(enum.Enum):  # Tracr's rasp.Encoding
    CATEGORICAL = "categorical"
    NUMERICAL = "numerical"


class Comparison(enum.Enum):  # Tracr's rasp.Comparison (called with key, query)
    LEQ = "LEQ"

    def __call__(self, key: Any, query: Any) -> bool:
        return key <= query


class RASPExpr:
    def __init__(self, name: str) -> None:
        self.unique_id = next(_ids)
        self.annotations: dict[str, Any] = {"name": f"{name}_{self.unique_id}"}

    @property
    def label(self) -> str:
        return self.annotations["name"]

    def named(self, name: str) -> Any:
        self.annotations["name"] = name
        return self

    @property
    def children(self) -> list[Any]:
        return []


class TokensType(RASPExpr):
    def __init__(self) -> None:
        super().__init__("tokens")
        self.annotations["name"] = "tokens"


class IndicesType(RASPExpr):
    def __init__(self) -> None:
        super().__init__("indices")
        self.annotations["name"] = "indices"


class Map(RASPExpr):
    def __init__(self, f: Any, inner: Any) -> None:
        super().__init__("map")
        self.f, self.inner = f, inner

    @property
    def children(self) -> list[Any]:
        return [self.inner]


class Select(RASPExpr):
    def __init__(self, keys: Any, queries: Any, predicate: Any) -> None:
        super().__init__("select")
        self.keys, self.queries, self.predicate = keys, queries, predicate

    @property
    def children(self) -> list[Any]:
        return [self.keys, self.queries]


class Aggregate(RASPExpr):
    def __init__(self, selector: Any, sop: Any, default: Any = None) -> None:
        super().__init__("aggregate")
        self.selector, self.sop, self.default = selector, sop, default

    @property
    def children(self) -> list[Any]:
        return [self.selector, self.sop]


def numerical(expr: Any) -> Any:
    expr.annotations["encoding"] = Encoding.NUMERICAL
    return expr


def test_a_program_of_look_alike_classes_translates_as_ours_does_and_compiles_exact() -> None:
    tokens, indices = TokensType(), IndicesType()
    is_x = numerical(Map(lambda t: t == "x", tokens))
    theirs = numerical(Aggregate(Select(indices, indices, Comparison.LEQ), is_x, default=0)).named("frac")
    ours = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                         rasp.numerical(rasp.Map(lambda t: t == "x", rasp.tokens)),
                                         default=0)).named("frac")
    assert rasp_source(theirs, ["x", "y"], 5) == rasp_source(ours, ["x", "y"], 5)
    program = ifl.from_rasp(theirs, ["x", "y"], 5)
    model = ifl.compile(program, eps=1e-3, dtype="float64", samples=0)
    assert agreement(theirs, model, program, list(every_input(["x", "y"], 4))).exact(1e-3)
    assert not isinstance(theirs, rasp.RASPExpr)
