"""analyze --plot and the page's flow (analysis/plot.py): every head of the schedule drawn, and no
arrow that the head's mask forbids (query t or T+1 at the readout, key s, at the full length T)."""

from __future__ import annotations

import pytest
from programs import ALL, TOKENS, ExampleProgram

import infoflow_dsl as ifl
from infoflow_dsl.analysis.plot import flow
from infoflow_dsl.transformer.masks import admits


@pytest.mark.parametrize("example", ALL + TOKENS, ids=lambda e: e.name)
def test_every_head_is_drawn_and_no_arrow_crosses_its_mask(example: ExampleProgram) -> None:
    report = ifl.analyze(ifl.parse_program(example.source, example.path))
    columns, heads = flow(report)
    assert sorted(h.name for h in heads) == sorted(h.name for h in report.schedule.heads)
    length = report.program.length
    masks = {h.name: h.mask_conditions for h in report.schedule.heads}
    for head in heads:
        for source, target in head.arrows:
            query = length + 1 if columns[target] == "T+1" else int(columns[target])
            assert admits(masks[head.name], query, int(columns[source]), length), (head.name, source, target)


def test_a_strict_order_mask_draws_arrows_from_later_keys_only() -> None:
    """The inner node retrieves t for each query s with s < t: every arrow comes from a later token
    (before masks were read, token 1 got an arrow from token 1 + shift wrapped around to earlier ones)."""
    program = ifl.parse_program("input x : R^2\nlength T = 8\ntarget max_<s, t : s < t> x(s)[1] * x(t)[2]\n",
                                "ordered.iflow")
    columns, heads = flow(ifl.analyze(program))
    inner = next(h for h in heads if h.kind == "retrieval")
    assert inner.arrows and all(int(columns[s]) > int(columns[t]) for s, t in inner.arrows)
    assert all(columns[t] != "8" for _, t in inner.arrows)  # the last token has no later key
