"""RASP, the language of Tracr's programs, with Tracr's API: a program written for Tracr runs
here after changing one import (``from tracr.rasp import rasp`` → ``from infoflow_dsl import
rasp``). The expressions are in :mod:`.expressions`, the evaluator (Tracr's semantics) in
:mod:`.evaluation`, the value set of every SOp (Tracr's basis inference) in :mod:`.values`.

>>> from infoflow_dsl import rasp
>>> reverse = rasp.Aggregate(rasp.Select(rasp.indices, rasp.length - rasp.indices - 1, rasp.Comparison.EQ),
...                          rasp.tokens).named("reverse")
>>> reverse(["a", "b", "c"])
['c', 'b', 'a']
"""

from .evaluation import evaluate
from .expressions import (
    Aggregate,
    Comparison,
    ConstantSelector,
    ConstantSOp,
    Encoding,
    Full,
    IndicesType,
    LengthType,
    LinearSequenceMap,
    Map,
    RASPExpr,
    Select,
    Selector,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    SelectorWidth,
    SequenceMap,
    SOp,
    TokensType,
    categorical,
    get_encoding,
    indices,
    is_categorical,
    is_numerical,
    length,
    numerical,
    tokens,
)

__all__ = [
    "Aggregate", "Comparison", "ConstantSOp", "ConstantSelector", "Encoding", "Full", "IndicesType", "LengthType",
    "LinearSequenceMap", "Map", "RASPExpr", "SOp", "Select", "Selector", "SelectorAnd", "SelectorNot", "SelectorOr",
    "SelectorWidth", "SequenceMap", "TokensType", "categorical", "evaluate", "get_encoding", "indices",
    "is_categorical", "is_numerical", "length", "numerical", "tokens",
]
