"""CircuitBuilder: directions in the order asked for, fresh names, error shares, the unit cap,
and the input token it starts from (a per-token model reading it back exactly)."""

from __future__ import annotations

import numpy as np
import pytest
from lowered import builder, grid, model, program, run
from programs import by_name

import infoflow_dsl as ifl
from infoflow_dsl.compiler.build import MAX_UNITS
from infoflow_dsl.compiler.vectors.builder import layer_after
from infoflow_dsl.compiler.vectors.quantity import ROUNDING_SAFETY, ErrorShares, linear
from infoflow_dsl.errors import CompileError

PER_TOKEN = program("""
input x : R^3 in [-2, 1]
length T = 5
target(t) = x(t)[1]
""")


def test_a_builder_starts_with_one_and_the_input_directions_and_names_each_direction_once():
    built = builder(PER_TOKEN)
    assert built.directions == ["one", "x[1]", "x[2]", "x[3]"]
    assert built.direction("c1:mean[1]") == "c1:mean[1]"
    built.direction("x[2]")
    built.direction("c1:mean[1]")
    assert built.directions == ["one", "x[1]", "x[2]", "x[3]", "c1:mean[1]"]
    assert built.theta == np.pi / 6 and built.length == 5


def test_fresh_names_count_every_name_and_sources_count_sources_alone():
    built = builder(PER_TOKEN)
    assert built.fresh("L0:r") == "L0:r1"
    assert built.fresh_source("ffn:square") == "ffn:square#1"
    assert built.fresh("L1:f") == "L1:f3"
    assert built.fresh_source("ffn:sqrt") == "ffn:sqrt#2"


def test_a_source_gets_its_allocated_share_else_the_default_and_a_head_keeps_room_for_its_rounding():
    built = builder(PER_TOKEN)
    built.shares = ErrorShares(default=0.01, by_source={"head:c1": 0.004})
    assert built.source("ffn:square#1", "ffn", cost=3.0) == 0.01
    assert (built.sources["ffn:square#1"].kind, built.sources["ffn:square#1"].cost) == ("ffn", 3.0)
    share, target = built.head_source("head:c1", rounding=5e-4)
    assert share == 0.004 and target == pytest.approx(0.004 - ROUNDING_SAFETY * 5e-4)
    assert built.head_source("head:c1", rounding=1.0) == (0.004, 0.002)  # never below half the share
    assert built.sources["head:c1"].kind == "head"


def test_units_past_the_cap_are_refused_before_they_are_built():
    built = builder(PER_TOKEN)
    built.units = MAX_UNITS - 10
    built.reserve_units(10)
    with pytest.raises(CompileError, match="more than 1,000,000 hidden units at this ε; raise ε "):
        built.reserve_units(11)


def test_the_unit_cap_names_the_margin_where_the_program_has_one():
    built = builder(ifl.parse_program(by_name("nearest_neighbour").source, "n.iflow", margin=1e-30))
    built.units = MAX_UNITS
    with pytest.raises(CompileError, match="at this ε and margin δ = 1e-30; raise ε or δ "):
        built.reserve_units(1)


def test_the_first_ffn_after_a_stage_is_the_embeddings_relu_block_then_each_layers():
    assert [layer_after(stage) for stage in range(6)] == [0, 1, 1, 2, 2, 3]


def test_the_own_token_is_read_back_exactly_at_every_token():
    built = builder(PER_TOKEN)
    x1, x2, x3 = built.own_token()
    assert (x1.low, x1.high, x1.stage) == (-2.0, 1.0, 0)
    output = linear([(1.0, x1), (-2.0, x2), (0.5, x3)], offset=0.25)
    x = grid(-2.0, 1.0, 61, 5, 3)
    y = run(model(built, [output], site="token"), x).numpy()
    expected = x[..., 0].numpy() - 2 * x[..., 1].numpy() + 0.5 * x[..., 2].numpy() + 0.25
    assert np.abs(y - expected).max() <= 1e-14
    assert output.low <= expected.min() and expected.max() <= output.high
