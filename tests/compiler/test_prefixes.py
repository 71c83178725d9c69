"""``compiler.prefixes``: which gather-route models take a prefix x(1..T'), and that those give the
reference's values on it.

Seen (issue 69): a causal per-token target compiled with ``--allow-inefficient`` refused every
input shorter than T (``input length 8 is below the minimum length 16``), where docs/language.md
promises the first T' outputs of any prefix. Now such a model takes every prefix where that is
proved, and its outputs there are within its a-priori bound of ``ifl.evaluate`` on the prefix
itself (5,000 random inputs); the gathered models it is not proved for keep length T, and a
non-causal one shows why: on a prefix its output is far from the target's.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import infoflow_dsl as ifl
from infoflow_dsl.compiler.prefixes import serves_prefixes
from infoflow_dsl.pipeline.lowering import build_circuit

#: causal per-token targets the gather route compiles (order 3, or top(2) over a prefix)
CAUSAL = {
    "top2": "input x : R^2\nlength T = 8\ntarget(t : t >= 2) = top(2)_<s : s <= t> x(s)[1]\n",
    "triple": "input x : R^2 in ball(1)\nlength T = 6\n"
              "target(t) = max_<s, r : s <= t and r <= t> x(s)[1] * x(r)[2] * x(t)[2]\n",
    "reads_x2": "input x : R^2\nlength T = 6\n"
                "target(t : t >= 2) = max_<s, r : s <= t and r <= t> x(s)[1] * x(r)[2] * x(2)[2]\n",
}
#: gathered targets that keep length T, and why
KEPT_AT_T = {
    "not causal": "input x : R^2\nlength T = 6\ntarget(t) = max_<s, r> x(s)[1] * x(r)[2] * x(t)[2]\n",
    "no zero token": "input x : R^2 in [0.5, 1]\nlength T = 6\n"
                     "target(t) = max_<s, r : s <= t and r <= t> x(s)[1] * x(r)[2] * x(t)[2]\n",
    "names T": "input x : R^2\nlength T = 6\n"
               "target(t) = max_<s, r : s <= t and r <= t and r < T> x(s)[1] * x(r)[2] * x(t)[2]\n",
}


def gathered(source: str) -> ifl.CompiledTransformer:
    return ifl.compile(ifl.parse_program(source, "prefix.iflow"), eps=1e-2, dtype="float64", samples=0,
                       allow_inefficient=True)


@pytest.mark.parametrize("name", sorted(CAUSAL))
def test_a_causal_gathered_model_gives_the_targets_values_on_every_prefix(name: str) -> None:
    model = gathered(CAUSAL[name])
    program = ifl.parse_program(CAUSAL[name], "prefix.iflow")
    assert model.config["route"] == "gather"
    assert model.min_length == (2 if name == "reads_x2" else 1)  # its own x(2), else any length
    x = ifl.sample_inputs(program, 5_000, seed=3)
    bound = model.config["a_priori_bound"]
    for length in range(2, model.T):
        prefix = x[:, :length]
        reference = ifl.evaluate(program, prefix)  # the program read at T = length
        errors = (model(prefix).double() - reference).abs()
        assert float(errors[~reference.isnan()].max()) <= bound, length


@pytest.mark.parametrize("why", sorted(KEPT_AT_T))
def test_a_gathered_model_not_proved_on_prefixes_keeps_length_t(why: str) -> None:
    program = ifl.parse_program(KEPT_AT_T[why], "prefix.iflow")
    circuit = build_circuit(program, 1e-2, torch.float64, allow_inefficient=True).circuit
    assert not serves_prefixes(program, circuit) and circuit.min_length == program.length
    with pytest.raises(ValueError, match="below the minimum length 6"):
        gathered(KEPT_AT_T[why])(ifl.sample_inputs(program, 1, seed=0)[:, :4])


def test_a_non_causal_gathered_model_is_wrong_on_a_prefix_which_is_why_it_keeps_length_t() -> None:
    """Its slots past T' have no guard: an absent slot counts as the zero token."""
    model = gathered(KEPT_AT_T["not causal"])
    program = ifl.parse_program(KEPT_AT_T["not causal"], "prefix.iflow")
    x = ifl.sample_inputs(program, 2_000, seed=3)[:, :3]
    model.spec = dataclasses.replace(model.spec, min_length=1)  # past the refusal, as a test only
    assert float((model(x).double() - ifl.evaluate(program, x)).abs().max()) > 10 * model.config["eps"]
