"""language/tables.py: tables (v4) checked, printed, evaluated and compiled exactly.

The programs of the shared table that hold tables (``tok_table_*`` in ``programs.py``) run
through every stage's table-driven tests; here, what is particular to tables: each construct
of the lowering against the reference on every input of lengths 1..4 (a lookup keyed by a
token, by a count, by a pair), the key-coverage check, and every refusal located.
"""

from __future__ import annotations

import pytest
import torch
from diagnostics import diagnostics_of
from token_circuits import assert_exact_on_short_inputs

import infoflow_dsl as ifl
from infoflow_dsl.language.parse import parse
from infoflow_dsl.language.printer import print_program

HEADER = 'input x : token {"a", "b", "c"}\nlength T = 5\n'


@pytest.mark.parametrize("body", [
    'table f = {"a": 2, "b": -1, "c": 0.5}\ntarget(t) = f(x(t))',                        # the row's token: a column
    'table f = {"a": 2, "b": -1, _: 3}\ntarget(t : t >= 2) = f(x(t - 1))',              # a fetched token: indicators
    'table f = {0: 1, 1: 4, 2: 9, _: -2}\ntarget(t) = f(sum_<s : s <= t> [x(s) == "a"])',  # a count: robust steps
    'table g = {("a", "b"): 1, ("b", "a"): 2, _: 0}\ntarget(t : t >= 2) = g(x(t - 1), x(t))',  # two tokens
    'table g = {(0, 1): 1, (1, 0): 0.25, (2, 2): -3, _: 0}\n'
    'target(t) = g((sum_<s : s <= t> [x(s) == "a"]) - 1, sum_<s> [x(s) == x(t)])',             # two counts
    'table inv = {1: 1, 2: 0.5, 3: 0.3333333333333333, 4: 0.25, 5: 0.2, 6: 0}\n'
    'target(t) = inv(t) - inv((sum_<s : s <= t> [x(s) == "b"]) + 1)',                    # positions, counts
    'table g = {("a", "a"): 1, ("b", "b"): 1, ("c", "c"): 1, _: 0}\n'
    'target(t) = sum_<s> [g(x(len + 1 - s), x(len + 1 - t)) == 1]',  # two fetched tokens: split on the query's
])
def test_every_kind_of_lookup_is_exact_on_every_short_input(body: str) -> None:
    assert_exact_on_short_inputs(HEADER + body + "\n")


def test_a_table_evaluates_as_written_and_its_default_elsewhere() -> None:
    program = ifl.parse_program(HEADER + 'table f = {"a": 2, "b": -1, _: 7}\ntarget(t) = f(x(t))\n', "f.iflow")
    assert ifl.evaluate(program, torch.tensor([[0, 1, 2, 0]])).tolist() == [[2.0, -1.0, 7.0, 2.0]]


def test_a_table_of_tokens_answers_with_tokens_the_input_never_had() -> None:
    """A Map from words to reversed words: the model's output vocabulary is the table's."""
    source = ('input x : token {"apple", "pear", "fig"}\nlength T = 5\n'
              'table flip = {"apple": "elppa", "pear": "raep", "fig": "gif"}\ntarget(t : t >= 2) = flip(x(t - 1))\n')
    program = ifl.parse_program(source, "flip.iflow")
    assert program.token_output and program.output_vocabulary.names == ("elppa", "raep", "gif")
    ids = ifl.encode(program, ["fig", "apple", "pear"])
    assert ifl.decode(program, ifl.evaluate(program, ids)) == [[None, "gif", "elppa"]]
    model = ifl.compile(program, eps=1e-3, samples=0)
    assert model.config["output_vocabulary"] == {"names": ["elppa", "raep", "gif"]}
    assert ifl.decode(program, model(ids)) == [[None, "gif", "elppa"]]
    assert_exact_on_short_inputs(source)


def test_a_table_program_prints_back_to_itself() -> None:
    source = (HEADER + 'table g = {("a", "b"): true, (1, 2.5): false, _: -1}\n'
              'table f = {\n  "a": 1,\n  "b": 2\n}\ntarget(t) = f(x(t))\n')
    printed = print_program(parse(source))
    assert 'table f = {"a": 1, "b": 2}' in printed  # a table over several lines is one statement
    assert parse(printed) == parse(source)


@pytest.mark.parametrize(("body", "expected"), [
    ('table f = {"a": 1}\ntarget(t) = f(x(t))',
     (4, 13, 'table f has no entry for ("b"), a value its argument can take here, and no default `_: value`')),
    ('table f = {"a": "b", "b": 2}\ntarget(t) = 1',
     (3, 27, "a table's values are all numbers (true, false) or all quoted tokens")),
    ('table f = {"a": "yes", _: "no"}\ntarget(t) = sum_<s> [f(x(s)) == 1]',
     (4, 22, "table f gives tokens: it is the target's value only (target(t) = f(...)), not a part of an "
             "expression yet")),
    ('table f = {(1, 2): 1, 3: 2}\ntarget(t) = 1', (3, 23, "every key of table 'f' has 2 part(s), as its first")),
    ('table f = {"z": 1}\ntarget(t) = 1', (3, 12, 'token "z" is not in the vocabulary {"a", "b", "c"}')),
    ('table f = {_: 1, "a": 2}\ntarget(t) = 1', (3, 12, "the default `_: value` is the last entry of a table")),
    ('table f = {"a": 1, "a": 2}\ntarget(t) = 1', (3, 20, "this key is already in the table (line 3, column 12)")),
    ('table f = {"a": 1, 2: 2}\ntarget(t) = 1',
     (3, 20, "a table's keys are all tokens or all numbers in each position, as its first entry's")),
    ('table f = {"a": 1, _: 0}\ntarget(t) = f(t)',
     (4, 15, "table f is keyed by tokens: its argument must be a token x(...), got a position")),
    ('table f = {"a": 1, _: 0}\ntarget(t) = f(x(t), x(t))', (4, 13, "table f takes 1 argument, got 2")),
    ('table f = {1: 1, _: 0}\ntarget(t) = f(x(t))',
     (4, 15, 'a categorical token (one of {"a", "b", "c"}) is not a number: compare it with == or != inside '
             '[...], e.g. [x(t) == "a"]')),
])
def test_bad_tables_are_reported_at_their_text(body: str, expected: tuple[int, int, str]) -> None:
    assert diagnostics_of(HEADER + body + "\n") == [expected]


def test_a_table_in_a_program_over_vectors_is_refused_at_its_use() -> None:
    source = "input x : R^2 in [0, 1]\nlength T = 4\ntable f = {1: 1}\ntarget f(3)\n"
    assert diagnostics_of(source) == [(4, 8, "table f maps finitely many values: tables apply in a program over "
                                             "tokens (input x : token {...}), whose values are finite")]
