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

from .annotations import DEFAULT_ANNOTATORS, Annotator
from .comparisons import VT, Comparison, NumericValue, Predicate, SelectorValue, T, Value
from .encodings import (
    Encoding,
    categorical,
    default_encoding,
    default_name,
    get_encoding,
    is_categorical,
    is_numerical,
    numerical,
)
from .evaluation import DefaultRASPEvaluator, RASPEvaluator, evaluate
from .expressions import (
    Aggregate,
    ConstantSelector,
    ConstantSOp,
    Full,
    IndicesType,
    LengthType,
    LinearSequenceMap,
    Map,
    RASPExpr,
    RASPExprT,
    Select,
    Selector,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    SelectorWidth,
    SequenceMap,
    SOp,
    SOpT,
    TokensType,
    annotate,
    indices,
    length,
    selector_and,
    selector_not,
    selector_or,
    sop_not,
    tokens,
)

#: Every public name of Tracr's ``tracr.rasp.rasp`` (the names it defines), with the same meaning.
__all__ = [
    "DEFAULT_ANNOTATORS", "VT", "Aggregate", "Annotator", "Comparison", "ConstantSOp", "ConstantSelector",
    "DefaultRASPEvaluator", "Encoding", "Full", "IndicesType", "LengthType", "LinearSequenceMap", "Map",
    "NumericValue", "Predicate", "RASPEvaluator", "RASPExpr", "RASPExprT", "SOp", "SOpT", "Select", "Selector",
    "SelectorAnd", "SelectorNot", "SelectorOr", "SelectorValue", "SelectorWidth", "SequenceMap", "T", "TokensType",
    "Value", "annotate", "categorical", "default_encoding", "default_name", "evaluate", "get_encoding", "indices",
    "is_categorical", "is_numerical", "length", "numerical", "selector_and", "selector_not", "selector_or", "sop_not",
    "tokens",
]
