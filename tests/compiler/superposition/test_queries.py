"""A sharp head's constant query moved off ``one`` (compiler/superposition/queries.py): every
query's scores scaled by c·g(t) ≥ 1, so the head's output stays within the error the plain model
states for it; checked on the head's output at every input up to length 4, against the query
read without its scale (which fails on a named input), and through ``compile --residual`` below what
``disguise --compress`` reaches, exact against the reference."""

from __future__ import annotations

import torch
from compiled import dense_float64, every_input, plain_float64

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition import features_alive
from infoflow_dsl.compiler.superposition.queries import least_values, liftable, moved_queries
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

VOCABULARY = (0.25, 0.5, 1.0, 2.0)
#: a running maximum: one sharp head, its query the constant ``one``, its key and value x; at the
#: head's stage ``one``, x and the maximum are alive (F = 3)
RUNNING_MAX = ("input x : token {0.25, 0.5, 1, 2}\nlength T = 5\n"
               "target(t) = max_<s : s <= t> x(s)\n")
#: the same over tokens that can be negative: no direction is positive at every row
SIGNED_MAX = ("input x : token {-1, 1, 2}\nlength T = 4\n"
              "target(t) = max_<s : s <= t> x(s)\n")
#: a sequence target: two sharp heads with constant queries, the second's query at the readout
#: row, where x (the class token is no token) holds 0
RANGE = ("input x : token {1, 2, 3, 4}\nlength T = 6\n"
         "target max_<s> x(s) - min_<s> x(s)\n")


def _head_deviation(model: CompiledTransformer, x: torch.Tensor) -> torch.Tensor:
    """(B, n) float64: |the head's output − the running maximum| at every token row."""
    out = model.config["residual_labels"].index("h1:retrieval[1]")
    values = torch.tensor(VOCABULARY, dtype=torch.float64)[x]  # (B, n)
    with torch.no_grad():
        after = model.residual_stream(x)[1]  # (B, n + 1, D): after layer 0
    return (after[:, :-1, out] - values.cummax(dim=1).values).abs()


def test_the_moved_query_keeps_the_head_within_its_stated_error_and_fails_without_its_scale() -> None:
    """The query reads 4·x (x ≥ 1/4): on every input up to length 4 the head's output is within
    the plain model's stated error of the maximum. Read as 1·x, the query row x(t) = 1/4 scales
    every gap by 1/4 (past the factor 2 the lowering's β keeps for the score's own error), and
    the input (1/2, 1/4) breaks the stated error at t = 2."""
    plain = plain_float64(RUNNING_MAX)
    tensors, config = dense_float64(plain), plain.card
    moved, moves = moved_queries(tensors, config)
    labels = list(config.labels)
    assert [(m.layer, m.head, labels[m.source], m.scale) for m in moves] == [(0, 0, "x", 4.0)]
    stated = float(config.layers[0].heads[0].error) * max(VOCABULARY)
    model = CompiledTransformer(config, moved, dtype=torch.float64)
    for n in range(1, 5):
        assert float(_head_deviation(model, every_input(4, n)).max()) <= stated
    short = dict(moved)
    short["blocks.0.attn.W_Q"] = moved["blocks.0.attn.W_Q"] / 4
    named = torch.tensor([[VOCABULARY.index(0.5), VOCABULARY.index(0.25)]])
    assert float(_head_deviation(CompiledTransformer(config, short, dtype=torch.float64), named)[0, 1]) > stated


def test_least_values_bound_every_row_the_embedding_writes() -> None:
    """Each direction's least value is at most its value at every token row (and, for a
    sequence model, the readout row) of every input up to length 4, and reached by one."""
    plain = plain_float64(RUNNING_MAX)
    least = least_values(dense_float64(plain), per_token=True)
    rows = torch.cat([plain.residual_stream(every_input(4, n))[0][:, :-1].reshape(-1, plain.d_model)
                      for n in range(1, 5)])  # (rows, D): the embedding at the token rows
    assert torch.equal(rows.min(dim=0).values, least)


def test_no_positive_direction_leaves_the_query_on_one() -> None:
    plain = plain_float64(SIGNED_MAX)
    _, moves = moved_queries(dense_float64(plain), plain.card)
    assert moves == []


def test_a_running_max_compiles_below_what_compress_reaches_exactly() -> None:
    """F = 3 (one, x, the maximum); with the query moved ``one`` is never read, and compile
    --residual 2 is exact on every input up to length 4, the certificate naming the move."""
    plain = plain_float64(RUNNING_MAX)
    alive = features_alive(dense_float64(plain), plain.card)
    assert alive == 3
    program = ifl.parse_program(RUNNING_MAX, "running_max.iflow")
    model = ifl.compile(program, samples=0, dtype="float64", residual=alive - 1)
    record = model.config["superposition"]
    assert model.d_model == 2 and record["queries"] == [["h1", "x", 4.0, False]]
    assert "one" not in model.config["residual_labels"]
    bound = float(model.config["error_budget"]["bound"])
    for n in range(1, 5):
        x = every_input(4, n)
        with torch.no_grad():
            assert float((model(x) - ifl.evaluate(program, x)).abs().max()) <= bound


def test_a_readout_row_nothing_reads_is_raised_and_a_range_compiles_below_compress() -> None:
    """The readout row's x is 0, read by nothing there: it is raised to 1 (x's least at a token
    row) and both heads' queries read x; ``one`` goes, and compile --residual F − 1 is exact on
    every input up to length 4. A direction the unembedding reads is never raised."""
    plain = plain_float64(RANGE)
    tensors, config = dense_float64(plain), plain.card
    labels = list(config.labels)
    assert [labels[g] for g in liftable(tensors, len(config.layers))] == ["x"]
    read = dict(tensors)
    read["unembed.W_U"] = tensors["unembed.W_U"].clone()
    read["unembed.W_U"][labels.index("x")] = 1.0
    assert liftable(read, len(config.layers)) == []
    alive = features_alive(tensors, config)
    program = ifl.parse_program(RANGE, "range.iflow")
    model = ifl.compile(program, samples=0, dtype="float64", residual=alive - 1)
    assert model.config["superposition"]["queries"] == [["h1", "x", 1.0, True], ["h2", "x", 1.0, True]]
    bound = float(model.config["error_budget"]["bound"])
    for n in range(1, 5):
        x = every_input(4, n)
        with torch.no_grad():
            assert float((model(x) - ifl.evaluate(program, x)).abs().max()) <= bound
