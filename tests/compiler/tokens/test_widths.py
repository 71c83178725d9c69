"""compiler/tokens/widths.py: a sum of a 0/1 body over a range's keys (RASP's SelectorWidth),
decoded from its mean and 1/count by steps, with no len and no product count × mean."""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from token_circuits import assert_exact_on_short_inputs, outputs

import infoflow_dsl as ifl
from infoflow_dsl.compiler.circuit import Circuit
from infoflow_dsl.compiler.tokens import lower_tokens, reductions
from infoflow_dsl.compiler.vectors import UNIT_ROUNDOFF

torch.set_num_threads(1)

T = 7
ABC = f'input x : token {{"a", "b", "c"}}\nlength T = {T}\n'
DIGITS = f"input x : token {{1, 2, 3, 4}}\nlength T = {T}\n"

#: (program, how many values its count takes): each a RASP SelectorWidth as from-rasp writes it.
WIDTHS = [
    (ABC + "target(t) = sum_<s> [x(s) == x(t)]\n", T),  # hist: the query selects itself, so 1..T
    (ABC + "target(t) = sum_<s> [not (x(s) == x(t))]\n", T),  # never itself: 0..T − 1
    (DIGITS + "target(t) = sum_<s> [x(s) < x(t)]\n", T),  # sort_unique's order
    (ABC + 'target(t) = sum_<s> [x(s) == "a"]\n', T + 1),  # count_a: the key alone
    (ABC + "target(t) = sum_<s : s <= t> [x(s) == x(t)]\n", T + 1),  # a prefix: 1/count = 1/t
    (ABC + "target(t : t >= 2) = sum_<s : s < t> [not (x(s) == x(t))]\n", T + 1),
    (DIGITS + "target(t) = sum_<s> [x(s) <= x(t) and s != t]\n", None),  # key classes s < t, s > t
    (ABC + "table other = {" + ", ".join(f'("{a}", "{b}"): {str(a != b).lower()}' for a in "abc" for b in "abc")
     + "}\ntarget(t) = sum_<s> [other(x(s), x(t)) == 1]\n", T),  # Tracr's ~Select, a table: never itself
]
SOURCES = [source for source, _ in WIDTHS]


@functools.cache
def _circuit(source: str) -> tuple[ifl.Program, Circuit]:
    program = ifl.parse_program(source, "width.iflow")
    return program, lower_tokens(program, 1e-3, torch.float64)


def _staircases(circuit: Circuit) -> list[int]:
    return [len(b.units) for b in circuit.blocks if "by steps on (mean, 1/count)" in b.formula]


@pytest.mark.parametrize("source", SOURCES)
def test_a_width_is_exact_on_every_short_input(source: str) -> None:
    circuit = assert_exact_on_short_inputs(source, longest=4)
    assert _staircases(circuit), "the count is built by steps on its mean and 1/count"


@pytest.mark.parametrize("source", SOURCES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_width_agrees_with_the_reference_on_long_inputs(source: str, data: st.DataObject) -> None:
    program, circuit = _circuit(source)
    assert program.vocabulary is not None
    ids = tuple(data.draw(st.lists(st.integers(0, program.vocabulary.size - 1), min_size=1, max_size=T)))
    got = outputs(circuit, ids)[:, 0]
    want = ifl.evaluate(program, torch.tensor([ids]))[0].numpy()
    defined = want == want  # NaN: undefined there (a position the target excludes)
    assert (abs(got[defined] - want[defined]) <= 1e-9).all(), (ids, got, want)


@pytest.mark.parametrize(("source", "values"), [w for w in WIDTHS if w[1] is not None])
def test_a_width_needs_no_len_and_two_units_per_value(source: str, values: int) -> None:
    """No len head nor its table, and 2 units per value of the count past the least: at most
    Tracr's SelectorWidth MLP, whose discretising layer has a start unit and 2 units per threshold
    between its T + 1 input values 1/(w + 1), plus one unit that cleans BOS: 2T + 2."""
    _, circuit = _circuit(source)
    assert not [h for h in circuit.heads if h.kind == "length"]
    assert _staircases(circuit) == [2 * (values - 1)]
    tracr_hidden = 1 + 2 * T + 1
    assert 2 * (values - 1) < tracr_hidden


@pytest.mark.parametrize("source", SOURCES[:4])
def test_a_width_has_fewer_nonzero_weights_than_count_times_mean(source: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    program = ifl.parse_program(source, "width.iflow")
    steps = ifl.compile(program, eps=1e-3, dtype=torch.float64, samples=0).nonzero_parameter_count()
    monkeypatch.setattr(reductions, "indicator_sum", lambda *arguments, **options: None)  # the construction before
    product = ifl.compile(program, eps=1e-3, dtype=torch.float64, samples=0).nonzero_parameter_count()
    assert steps < product


@functools.cache
def _float32_model(source: str) -> tuple[ifl.Program, ifl.CompiledTransformer]:
    program = ifl.parse_program(source, "width.iflow")
    return program, ifl.compile(program, eps=1e-3, dtype=torch.float32, samples=0)


@pytest.mark.parametrize("source", SOURCES[:3])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_float32_width_is_within_its_a_priori_bound(source: str, data: st.DataObject) -> None:
    """The model's float32 forward (its assembled weights), not the circuit in float64."""
    program, model = _float32_model(source)
    assert program.vocabulary is not None
    ids = torch.tensor([data.draw(st.lists(st.integers(0, program.vocabulary.size - 1), min_size=1, max_size=T))])
    got, want = model(ids).double(), ifl.evaluate(program, ids)
    assert (got - want).abs().max() <= model.config["a_priori_bound"]


def test_a_width_whose_steps_do_not_certify_gives_way_to_count_times_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    """A count of [h(r) == h(s)] over hist values at T = 40, with a unit roundoff of 2⁻¹⁸ (a dtype
    coarser than float32, whose widths certify here since a mean of [s = 1] rounds once): its
    mean's error is past a quarter of the steps' gap 1/(2T), so the sum is count × mean, which
    certifies; with float64's roundoff the same sum is a width."""
    source = ('input x : token {"a", "b"}\nlength T = 40\nlet h(s) = sum_<u> [x(u) == x(s)]\n'
              "target(t : t >= 2) = sum_<r : r < t> [h(r) == h(t)]\n")
    program = ifl.parse_program(source, "width40.iflow")
    outer = "sum_<r : r < t>"  # h itself is a width in both

    def widths(dtype: torch.dtype) -> list[str]:
        blocks = lower_tokens(program, 1.0, dtype).blocks  # ε = 1: the route, not the output's bound
        return [b.formula for b in blocks if b.formula.startswith(outer) and "by steps on" in b.formula]

    assert widths(torch.float64)
    monkeypatch.setitem(UNIT_ROUNDOFF, torch.float64, 2.0 ** -18)
    assert not widths(torch.float64)
