"""Categorical groups read off a compiled token model (compiler/superposition/categorical.py): a
token table's scores, one FFN block per output token, form a group (at most one is 1 at a row),
which compile --residual superposes below what ``disguise --compress`` reaches, every score read
from storage with its margin and exact against the reference."""

from __future__ import annotations

import torch
from compiled import dense_float64, every_input, plain_float64, smallest_residual

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition import features_alive
from infoflow_dsl.compiler.superposition.categorical import usage

torch.set_num_threads(1)

#: a table of token pairs into new tokens, over the row's token and the last one (fetched): its
#: scores [join(x(t), x(len)) = w] are FFN tables of two arguments, all alive at the output
JOIN = ('input x : token {"p", "q", "r"}\nlength T = 5\n'
        'table join = {("p", "p"): "same", ("q", "q"): "same", ("r", "r"): "same", ("p", "q"): "up", '
        '("q", "r"): "up", ("r", "p"): "up", ("p", "r"): "on", ("q", "p"): "on", _: "down"}\n'
        "target(t) = join(x(t), x(len))\n")


def test_a_token_tables_scores_are_one_ffn_group_whose_directions_hold_indicators() -> None:
    """Every score's block is tagged with the table's group and holds the indicator itself (the
    first score's table starts at 1 and steps down: its constant is written by the block), so on
    every input up to length 4 each direction is 0 or 1 and at most one of them is 1 at a token
    row."""
    plain = plain_float64(JOIN)
    tensors, config = dense_float64(plain), plain.card
    (group,) = [g for g in usage(tensors, config).groups if g.writer.startswith("ffn:")]
    labels = list(config.labels)
    tagged = [b.output for layer in config.layers for b in layer.blocks if b.group]
    assert sorted(labels[m] for m in group.members) == sorted(tagged)
    assert len(group.members) == len(config.output_vocabulary.names)
    for n in range(1, 5):
        with torch.no_grad():
            final = plain.residual_stream(every_input(3, n))[-1][:, :-1]  # (B, n, D) at the token rows
        held = final[..., list(group.members)]
        assert float((held - held.round()).abs().max()) <= group.tail + 1e-12
        assert set(held.round().unique().tolist()) <= {0.0, 1.0} and float(held.round().sum(-1).max()) <= 1.0


def test_the_scores_superpose_below_what_compress_reaches_exactly() -> None:
    """At the smallest D the scores share storage (fewer storage dimensions than scores), every
    answer right on every input up to length 5."""
    plain = plain_float64(JOIN)
    alive = features_alive(dense_float64(plain), plain.card)
    program = ifl.parse_program(JOIN, "join.iflow")
    model = ifl.compile(program, samples=0, dtype="float64", residual=smallest_residual(program))
    record = model.config["superposition"]
    assert model.d_model < alive == record["features_alive"] and record["holds"]
    scored = {r["feature"] for r in record["reads"] if r["kind"] == "score"}
    assert len(scored) == len(model.config["output_vocabulary"]["names"]) and record["storage"] < len(scored)
    for n in range(1, 6):
        x = every_input(3, n)
        with torch.no_grad():
            assert torch.equal(model(x).argmax(-1).double(), ifl.evaluate(program, x))
