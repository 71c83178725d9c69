"""rasp/__init__.py: the module has every public name of Tracr's ``tracr.rasp.rasp`` with the
same meaning, and a program written against Tracr's module that uses each of them runs and
compiles after its one import is changed."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import torch

import infoflow_dsl as ifl
from infoflow_dsl import rasp
from infoflow_dsl.rasp.agreement import agreement, every_input

torch.set_num_threads(1)

#: The names ``tracr/rasp/rasp.py`` defines at google-deepmind/tracr commit
#: 9ce2b8c82b6ba10e62e86cf6f390e7536d4fd2cd (2024-02-05), read from that file: its classes,
#: functions, constants and type aliases (not its imports, not its underscored names).
TRACR_NAMES = (
    "SelectorValue", "NumericValue", "Value", "VT", "RASPExprT", "SOpT", "T", "DEFAULT_ANNOTATORS", "Annotator",
    "RASPExpr", "annotate", "SOp", "TokensType", "IndicesType", "LengthType", "tokens", "indices", "length", "Map",
    "SequenceMap", "LinearSequenceMap", "Full", "sop_not", "ConstantSOp", "Predicate", "Comparison", "Selector",
    "Select", "ConstantSelector", "SelectorWidth", "SelectorAnd", "SelectorOr", "SelectorNot", "selector_not",
    "selector_and", "selector_or", "Aggregate", "Encoding", "numerical", "categorical", "get_encoding", "is_numerical",
    "is_categorical", "default_encoding", "default_name", "RASPEvaluator", "DefaultRASPEvaluator", "evaluate",
)


def test_every_public_name_of_tracrs_module_is_here() -> None:
    assert not [name for name in TRACR_NAMES if not hasattr(rasp, name)]
    assert set(rasp.__all__) == set(TRACR_NAMES)


def test_comparisons_have_tracrs_values_and_the_encodings_their_defaults() -> None:
    assert [c.value for c in rasp.Comparison] == ["==", "<", "<=", ">", ">=", "!=", "True", "False"]
    assert rasp.default_encoding(rasp.Map(abs, rasp.tokens)) is rasp.Encoding.CATEGORICAL
    assert rasp.default_name(rasp.Map(abs, rasp.tokens)) == "map"
    assert rasp.default_name(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)) == "select"


def test_annotations_are_copies_with_lazy_defaults() -> None:
    """Tracr's ``annotate`` makes a new expression; a missing key comes from DEFAULT_ANNOTATORS
    when first read."""
    base = rasp.Map(lambda x: x + 1, rasp.indices)
    named = rasp.annotate(base, name="plus_one", colour="red")
    assert named is not base and named.name == "plus_one" and named.annotations["colour"] == "red"
    assert base.name == "map" and base.label == f"map_{base.unique_id}" and "colour" not in base.annotations
    assert base.annotations["encoding"] is rasp.Encoding.CATEGORICAL
    rasp.DEFAULT_ANNOTATORS["colour"] = lambda expr: "blue"
    try:
        assert base.annotations["colour"] == "blue" and named.annotations["colour"] == "red"
    finally:
        del rasp.DEFAULT_ANNOTATORS["colour"]
    replaced = rasp.Map(abs, rasp.tokens)
    replaced.annotations = {"name": "absolute"}
    assert replaced.label == "absolute" and rasp.is_categorical(replaced)


def test_selector_logic_merges_selects_of_the_same_sops_as_tracr() -> None:
    earlier = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    later = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.GT)
    same = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    assert isinstance(earlier | later, rasp.Select) and isinstance(~same, rasp.Select)
    assert isinstance(earlier & same, rasp.SelectorAnd)
    assert isinstance(rasp.selector_or(earlier, later, simplify=False), rasp.SelectorOr)
    assert not isinstance(rasp.selector_or(earlier, later, simplify=False), rasp.SelectorAnd)
    assert isinstance(rasp.selector_not(same, simplify=False), rasp.SelectorNot)
    pinned = rasp.Select(rasp.Full(1), rasp.indices, rasp.Comparison.LEQ) & earlier  # a Full matches any keys
    assert isinstance(pinned, rasp.Select) and pinned.keys is rasp.indices
    xs = ["a", "b", "a"]
    for built, unmerged in [(earlier | later, rasp.SelectorOr(earlier, later)), (~same, rasp.SelectorNot(same)),
                            (pinned, rasp.SelectorAnd(rasp.Select(rasp.Full(1), rasp.indices, rasp.Comparison.LEQ),
                                                      earlier))]:
        assert rasp.evaluate(built, xs) == rasp.evaluate(unmerged, xs)


class Doubling(rasp.DefaultRASPEvaluator):
    """A subclass of the default evaluator that overrides one rule (Maps apply f twice)."""

    def eval_map(self, sop: Any, xs: Sequence[rasp.Value]) -> list[rasp.Value]:
        return [None if x is None else sop.f(sop.f(x)) for x in self.evaluate(sop.inner, xs)]


class Constant(rasp.RASPEvaluator):
    def evaluate(self, expr: rasp.RASPExpr, xs: Sequence[rasp.Value]) -> Any:
        return [0] * len(xs)


def test_evaluators_are_classes_with_a_rule_per_kind() -> None:
    plus = rasp.Map(lambda x: x + 1, rasp.indices)
    assert rasp.DefaultRASPEvaluator().evaluate(plus, "abc") == rasp.evaluate(plus, "abc") == [1, 2, 3]
    assert Doubling().evaluate(plus, "abc") == [2, 3, 4] and Constant().evaluate(plus, "ab") == [0, 0]


# ----------------------------------------------------------------------------- a program of every name


def count_of(token: rasp.Value, sop: rasp.SOp = rasp.tokens) -> rasp.SOp:
    """Written as a Tracr user types it: annotations of rasp.Value, rasp.SOp, rasp.NumericValue."""
    return rasp.SelectorWidth(rasp.Select(sop, sop, lambda k, q: k == token))


def fraction(flags: rasp.SOpT, default: rasp.NumericValue = 0) -> rasp.SOpT:
    prevs: rasp.Selector = rasp.selector_or(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT),
                                            rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ))
    return rasp.numerical(rasp.Aggregate(prevs, rasp.numerical(flags), default=default))


def every_name_program() -> rasp.SOp:
    is_a = rasp.annotate(rasp.Map(lambda t: 1 if t == "a" else 0, rasp.tokens), encoding=rasp.Encoding.NUMERICAL)
    not_a = rasp.categorical(rasp.sop_not(rasp.tokens == "a"))
    other = rasp.selector_and(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.NEQ),
                              rasp.selector_not(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.GT)))
    before_other = rasp.SelectorWidth(other)
    count = count_of("a") + rasp.LinearSequenceMap(fraction(is_a), rasp.Map(int, not_a), 2, 1)
    return rasp.SequenceMap(lambda c, w: c + w, count, before_other).named(rasp.default_name(count) + "_total")


@cache
def compiled() -> tuple[rasp.SOp, ifl.Program, ifl.CompiledTransformer]:
    program = every_name_program()
    checked = ifl.from_rasp(program, ["a", "b", "c"], 5)
    return program, checked, ifl.compile(checked, eps=1e-3, samples=0)


def test_a_program_of_tracrs_names_runs_and_compiles_exact() -> None:
    program, checked, model = compiled()
    assert program(["a", "b", "a"]) == rasp.evaluate(program, ["a", "b", "a"])
    found = agreement(program, model, checked, list(every_input(["a", "b", "c"], 5)))
    assert found.positions > 0 and found.exact(1e-3), found
