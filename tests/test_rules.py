"""The completeness test: every node class of the typed IR, and every row of the table of
pointwise functions, has a rule in every stage that can meet it.

Each stage dispatches on the node's class through a table. A new node class (or a new
pointwise function) that one stage forgets fails here, naming the stage and the class,
instead of failing on the first program that happens to use it.
"""

from __future__ import annotations

import pytest

from infoflow_dsl.analysis.comparisons import NodeResult
from infoflow_dsl.analysis.features import EXPAND_RULES
from infoflow_dsl.analysis.finite import VALUE_SET_RULES
from infoflow_dsl.analysis.ranges import RANGE_RULES
from infoflow_dsl.analysis.schedule import STAGE_RULES
from infoflow_dsl.compiler.tokens import lower as token_lowering
from infoflow_dsl.compiler.vectors import values as lowering
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.functions import POINTWISE
from infoflow_dsl.language.printer import DESCRIBE_RULES, PRINT_RULES
from infoflow_dsl.language.typing_rules import TYPING_RULES
from infoflow_dsl.oracle.evaluate import POSITION_RULES, VALUE_RULES

#: After the comparisons stage, every reduction and argmin/argmax is a comparison node's result.
AFTER_COMPARISONS = (*(n for n in ir.VALUE_NODES if n is not ir.Reduce), NodeResult)
REFERENCE_VALUES = tuple(n for n in ir.VALUE_NODES if n not in ir.COMPILE_ONLY_NODES)

#: The expression classes of the source AST (what the checker types).
AST_EXPRESSIONS = tuple(ast.Expr.__args__)

#: The lowering of programs over vectors builds no language-v3 construct: ``compile`` refuses a
#: bracket over continuous values (pipeline.lowering.refuse_v3), so its table leaves them out on purpose,
#: and test_v3_constructs_over_vectors_are_refused_with_a_located_reason checks the refusal.
#: Token programs have their own lowering (compiler/tokens), whose table covers every value node
#: a token program can hold: a token is one value, so no vector operation, and no gather node.
LOWERING_REFUSES = ir.V3_NODES
LOWERED = tuple(n for n in AFTER_COMPARISONS if n not in LOWERING_REFUSES)
TOKEN_LOWERED = tuple(n for n in ir.VALUE_NODES
                      if n not in (ir.Component, ir.Inner, ir.Norm, ir.MatVec, *ir.COMPILE_ONLY_NODES))

#: (stage, its table, the node classes it must handle).
STAGE_TABLES = [
    ("checker (language/typing_rules.py TYPING_RULES)", TYPING_RULES, AST_EXPRESSIONS),
    ("printer (language/printer.py DESCRIBE_RULES)", DESCRIBE_RULES, (*ir.POSITION_NODES, *ir.VALUE_NODES)),
    ("source printer (language/printer.py PRINT_RULES)", PRINT_RULES, AST_EXPRESSIONS),
    ("feature expansion (analysis/features.py EXPAND_RULES)", EXPAND_RULES, AFTER_COMPARISONS),
    ("ranges (analysis/ranges.py RANGE_RULES)", RANGE_RULES, ir.VALUE_NODES),
    ("reference values (oracle/evaluate.py VALUE_RULES)", VALUE_RULES, REFERENCE_VALUES),
    ("reference positions (oracle/evaluate.py POSITION_RULES)", POSITION_RULES, ir.POSITION_NODES),
    ("schedule stages (analysis/schedule.py STAGE_RULES)", STAGE_RULES, AFTER_COMPARISONS),
    ("value sets (analysis/finite.py VALUE_SET_RULES)", VALUE_SET_RULES, (*ir.VALUE_NODES, NodeResult)),
    ("lowering (compiler/vectors/values.py RULES)", lowering.RULES, LOWERED),
    ("token lowering (compiler/tokens/lower.py RULES)", token_lowering.RULES, TOKEN_LOWERED),
]

#: (stage, the rule every pointwise function needs there).
FUNCTION_RULES = [
    ("reference and circuit map (apply)", lambda row: callable(row.apply)),
    ("ranges (bounds)", lambda row: callable(row.bounds)),
    ("printer (text)", lambda row: row.text.count("{") == row.arity),
    ("lowering (compiler/vectors/values.py POINTWISE)", lambda row: row.name in lowering.POINTWISE),
]


def missing_rules() -> list[str]:
    """One line per (stage, node class or function) without a rule."""
    lines = [f"{stage}: no rule for {node.__name__}"
             for stage, table, nodes in STAGE_TABLES for node in nodes if node not in table]
    lines += [f"{stage}: no rule for pointwise function {name!r}"
              for stage, has_rule in FUNCTION_RULES for name, row in POINTWISE.items() if not has_rule(row)]
    return lines


def test_every_stage_has_a_rule_for_every_node_class_and_function() -> None:
    missing = missing_rules()
    assert not missing, "stages without a rule:\n" + "\n".join(missing)


def test_no_stage_keeps_a_rule_for_a_class_it_cannot_meet() -> None:
    stale = [f"{stage}: a rule for {node.__name__}, which never reaches it"
             for stage, table, nodes in STAGE_TABLES for node in table if node not in nodes]
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize("stage, table, nodes", STAGE_TABLES, ids=[s for s, _, _ in STAGE_TABLES])
def test_removing_a_rule_is_caught_and_named(stage: str, table: dict, nodes: tuple, monkeypatch) -> None:
    """The test above can fail: drop one rule from a stage and it names that stage and class."""
    victim = nodes[0]
    monkeypatch.delitem(table, victim)
    assert f"{stage}: no rule for {victim.__name__}" in missing_rules()


def test_the_typed_ir_partition_covers_every_expression_class() -> None:
    assert set(ir.VALUE_NODES) | set(ir.POSITION_NODES) == set(ir.Expr.__args__)
    assert AST_EXPRESSIONS
    assert not set(ir.VALUE_NODES) & set(ir.POSITION_NODES)


def test_v3_constructs_over_vectors_are_refused_with_a_located_reason(tmp_path) -> None:
    """A bracket over continuous values has no finite gap: compile refuses it, located, exit 2."""
    from cli_runner import run_cli

    path = tmp_path / "v3.iflow"
    path.write_text("input x : R^2\nlength T = 4\nmargin 0.1\ntarget sum_<s> [x(s)[1] < 0]\n", encoding="utf-8")
    code, _out, err = run_cli(["compile", str(path), "-o", str(tmp_path / "m.safetensors")])
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"{path}:4:16: error: ")  # the bracket
    assert "is not compiled yet" in err
    assert not (tmp_path / "m.safetensors").exists()
