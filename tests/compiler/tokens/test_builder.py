"""compiler/tokens/builder.py and the columns the lowering writes through it: one column per
value (an indicator of the own token is its one-hot column x=v), a 0/1 column written as its
sparser complement, an affine function of the position read from p itself, and a column no
construction reads not written at all."""

from __future__ import annotations

import torch
from token_circuits import assert_exact_on_short_inputs

import infoflow_dsl as ifl
from infoflow_dsl.compiler.tokens.builder import TokenCircuitBuilder
from infoflow_dsl.errors import CompileError

torch.set_num_threads(1)

ABC = 'input x : token {"a", "b", "c"}\nlength T = 6\n'
DIGITS = "input x : token {1, 2, 3, 4, 5}\nlength T = 6\n"


def test_an_indicator_of_the_own_token_is_its_one_hot_column() -> None:
    circuit = assert_exact_on_short_inputs(ABC + 'target(t) = x(argmax_<s> [x(s) == "b"] + [x(t) == "b"])\n')
    values = [column for _, column in circuit.token_columns]
    assert len(values) == len(set(values))  # no two columns alike
    assert 'tok:[x(t) == "b"]' not in circuit.directions and "x=b" in circuit.directions


def test_a_column_with_more_ones_than_zeros_is_its_complement() -> None:
    circuit = assert_exact_on_short_inputs(DIGITS + "target(t) = mean_<s> [x(s) >= 3]\n")
    ((name, column),) = [(n, c) for n, c in circuit.token_columns if n.startswith("tok:")]
    assert name == "tok:not [x(t) >= 3]" and column == (1.0, 1.0, 0.0, 0.0, 0.0)


def test_an_affine_position_is_read_from_the_position_number() -> None:
    circuit = assert_exact_on_short_inputs(DIGITS + "target(t) = x(argmin_<s> |x(s) - (t - 1)|)\n")
    assert "pos:t - 1" not in circuit.directions


def test_a_column_no_construction_reads_is_not_written() -> None:
    """|x(s) − t| by cuts reads only the steps of t and of x(s), which are columns of their own:
    t itself and x(s)'s value column are read by nothing and are not in the circuit."""
    circuit = assert_exact_on_short_inputs(DIGITS + "target(t) = x(argmin_<s> |x(s) - t|)\n")
    read = {d for h in circuit.heads for f in (*h.query, *h.key, *h.value) for d, _ in f.terms}
    written = {name for name, _ in (*circuit.token_columns, *circuit.position_columns)}
    assert written <= read | {d for f in circuit.output for d, _ in f.terms}


def test_a_construction_given_up_leaves_the_circuit_as_it_was() -> None:
    program = ifl.parse_program(DIGITS + "target(t) = x(t)\n", "tried.iflow")
    builder = TokenCircuitBuilder(program, 2.0**-53)
    builder.token_column("kept", (1.0, 0.0, 0.0, 0.0, 0.0))
    before = (list(builder.directions), dict(builder.token_columns), builder.counter, list(builder.blocks))

    def fails() -> None:
        builder.position_column("dropped", (1.0,) * 7)
        builder.fresh("step")
        builder.add_units(name="b", layer=1, output="b", formula="b", units=[])
        raise CompileError("its steps do not certify")

    assert builder.tried(fails) is None
    assert (builder.directions, builder.token_columns, builder.counter, builder.blocks) == before
    assert "dropped" not in builder.position_columns and builder.tried(lambda: 3) == 3
