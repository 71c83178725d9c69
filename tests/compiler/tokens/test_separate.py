"""compiler/tokens/separate.py: bodies split into products of per-position features, and the
key classes on which a comparison of the two positions is constant."""

from __future__ import annotations

import torch
from programs import TRACR_DIR

import infoflow_dsl as ifl
from infoflow_dsl.analysis.finite import finite_domain
from infoflow_dsl.compiler.tokens.separate import key_classes, polynomial_terms, separated_terms
from infoflow_dsl.language import typed as ir
from infoflow_dsl.oracle.evaluate import ReferenceEvaluator
from infoflow_dsl.oracle.tokens import random_ids, token_values


def _body(source: str) -> tuple[ir.Program, ir.Expr]:
    program = ifl.parse_program(source, "body.iflow")
    target = program.target
    assert isinstance(target, ir.Reduce)
    return program, target.body


def _separated_value(program: ir.Program, terms, key: str, row: str, ids: torch.Tensor) -> torch.Tensor:
    """Σ c·a(row)·b(key) on a batch, (B, T_row, T_key), by the reference evaluator."""
    evaluator = ReferenceEvaluator(token_values(program, ids), last=program.length)
    total = torch.zeros(())
    for coefficient, query, key_part in terms:
        a = evaluator.value(query, (row, key)) if query is not None else torch.ones(())
        b = evaluator.value(key_part, (row, key)) if key_part is not None else torch.ones(())
        total = total + float(coefficient) * a * b
    return total


def test_separations_reproduce_the_body() -> None:
    for source in ('input x : token {1, 2, 3}\nlength T = 5\ntarget(t) = sum_<s> (x(s) - 2 * t) ^ 2\n',
                   'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = sum_<s> [x(s) == x(t)]\n',
                   'input x : token {1, 2, 3}\nlength T = 5\ntarget(t) = sum_<s> [x(s) < x(t)]\n'):
        program, body = _body(source)
        terms = separated_terms(body, "s", "t", finite_domain(program))
        assert terms is not None
        ids = random_ids(program, 50, seed=1, length=5)
        evaluator = ReferenceEvaluator(token_values(program, ids), last=program.length)
        exact = evaluator.value(body, ("t", "s"))
        assert torch.allclose(_separated_value(program, terms, "s", "t", ids).expand_as(exact), exact)


def test_a_bracket_does_not_expand_as_a_polynomial() -> None:
    _, body = _body('input x : token {1, 2}\nlength T = 4\ntarget(t) = sum_<s> [x(s) < x(t)]\n')
    assert polynomial_terms(body, "s", "t") is None


def test_sorts_rank_splits_into_three_key_classes() -> None:
    program = ifl.load_program(TRACR_DIR / "sort.iflow")
    rank = program.target.position.body.arguments[0].left  # type: ignore[union-attr]
    classes = key_classes(rank.body, "r", "s")
    assert [(c.low, c.high) for c in classes] == [(None, -1), (0, 0), (1, None)]
    assert [c.mask() for c in classes] == [(("key", "<=", "query-1"),), (("key", "==", "query"),),
                                           (("key", ">=", "query+1"),)]
