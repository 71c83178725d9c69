"""compile --residual with packed numbers: a peak of numbers (a count's mean and 1/count, the token
indicator its gate reads) in one direction read by step tables, below what ``disguise --compress``
reaches; exact against the float64 reference, ``check`` passing, deterministic; the tables' margin
(a quarter of v's gap) one notch too small is wrong on a named input; D too small is refused."""

from __future__ import annotations

import dataclasses
import itertools
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import run_cli
from compiled import smallest_residual

import infoflow_dsl as ifl
from infoflow_dsl.circuits.disguise import disguise
from infoflow_dsl.errors import CompileError
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

#: Tracr's count_a at T = 5: its peak (the token indicators, the head's mean and 1/count) is numbers
COUNT = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = sum_<s> [x(s) == "a"]\n'
#: two counts' difference at T = 5: packed in two merges, each lowering the peak by one
TWO_COUNTS = ('input x : token {"a", "b", "c"}\nlength T = 5\n'
              'target(t) = sum_<s> [x(s) == "a"] - sum_<s> [x(s) == "b"]\n')
#: Tracr's frac_prevs at T = 5: the indicator the head reads and its mean, packed in float32 too
FRAC = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = mean_<s : s <= t> [x(s) == "a"]\n'

#: Tracr's detect_pattern_abc: two fetched tokens (masked heads) and the own token, read by one `and`
PATTERN = ('input x : token {"a", "b", "c"}\nlength T = 6\n'
           'target(t : t >= 3) = [x(t - 2) == "a" and x(t - 1) == "b" and x(t) == "c"]\n')

#: the own token compared with two fetched ones: each [x(t) = v] is read by two units, one per fetch
REPEAT = ('input x : token {"a", "b", "c"}\nlength T = 6\n'
          'target(t : t >= 3) = [x(t - 2) == x(t) and x(t - 1) != x(t)]\n')


def _program(source: str) -> Any:
    return ifl.parse_program(source, "p.iflow")


@lru_cache(maxsize=4)
def _smallest(source: str, dtype: str) -> int:
    """The smallest D compile --residual certifies (cached per source)."""
    return smallest_residual(_program(source), dtype)


@lru_cache(maxsize=4)
def _compiled(source: str, dtype: str) -> CompiledTransformer:
    return ifl.compile(_program(source), samples=0, dtype=dtype, residual=_smallest(source, dtype))


def _compressed(source: str) -> int:
    """What ``disguise --compress`` reaches on the plain model."""
    return disguise(ifl.compile(_program(source), samples=0, dtype="float64"), compress=True).d_model


def _wrong(model: CompiledTransformer, source: str, longest: int = 4) -> list[str]:
    """Every input up to length ``longest`` (as letters) where the model is off the reference by more than ε."""
    program = _program(source)
    found = []
    size = program.vocabulary.size
    for n in range(1, longest + 1):
        x = torch.tensor(list(itertools.product(range(size), repeat=n)), dtype=torch.int64)
        with torch.no_grad():
            bad = ((model(x).double() - ifl.evaluate(program, x)).abs() > 1e-3).reshape(len(x), -1).any(-1)
        found += ["".join("abcdefgh"[i] for i in x[k].tolist()) for k in torch.nonzero(bad).flatten().tolist()]
    return found


def test_a_numeric_peak_packs_below_what_compress_reaches_exact_checked_and_deterministic(tmp_path: Path) -> None:
    model = _compiled(COUNT, "float64")
    record = model.config["superposition"]
    assert model.d_model < _compressed(COUNT) == record["features_alive"]
    packed = record["packed"]
    assert packed["read"] == "table" and packed["features_alive_packed"] < record["features_alive"]
    members = {m for p in packed["packs"] for m in p["members"]}
    assert {"h1:uniform[1]", "h1:uniform[2]"} <= members  # the mean and 1/count share one direction
    assert all(r["error"] < 0.25 for p in packed["packs"] for r in p["reads"])
    assert packed["units_added"] == sum(p["units"] for p in packed["packs"]) > 0
    assert _wrong(model, COUNT, longest=5) == []
    ifl.save(model, tmp_path / "a.safetensors")
    (tmp_path / "count.iflow").write_text(COUNT)
    code, out, err = run_cli(["compile", str(tmp_path / "count.iflow"), "--residual", str(model.d_model), "--dtype",
                              "float64", "--samples", "0", "-o", str(tmp_path / "b.safetensors")])
    assert code == 0, err
    assert "packed numbers   3 numbers in 1 directions read by step tables" in out
    b = ifl.load(tmp_path / "b.safetensors")
    b.card = dataclasses.replace(b.card, program=dataclasses.replace(
        b.card.program, name=model.card.program.name))  # the file's name, the one difference
    ifl.save(b, tmp_path / "b.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    assert run_cli(["check", str(tmp_path / "a.safetensors"), "--samples", "200"])[0] == 0


def test_packing_holds_in_float32_where_the_tables_rounding_fits() -> None:
    model = _compiled(FRAC, "float32")
    assert model.d_model < _compressed(FRAC) and "packed" in model.config["superposition"]
    assert _wrong(model.double(), FRAC, longest=5) == []


def test_too_small_a_residual_is_refused_naming_the_smallest_packed_one() -> None:
    smallest = _smallest(COUNT, "float64")
    assert smallest < _compressed(COUNT)
    with pytest.raises(CompileError, match=f"the smallest residual .* is {smallest} "):
        ifl.compile(_program(COUNT), samples=0, dtype="float64", residual=smallest - 1)


def _tables(model: CompiledTransformer) -> list[tuple[int, slice]]:
    """(layer, the units) of every step table."""
    found = []
    for layer, described in enumerate(model.config["layers"]):
        start = 0
        for block in described["mlp"]:
            if block["name"].startswith("table:"):
                found.append((layer, slice(start, start + block["units"])))
            start += block["units"]
    return found


def _drifted(model: CompiledTransformer, notch: float) -> CompiledTransformer:
    """The model with every table reading v + notch·g (g: the least gap of a table's steps,
    2 / its largest slope): each ramp shifted as v's error would shift it."""
    tensors = {n: (t.to_dense() if t.is_sparse else t).double().clone() for n, t in model.state_dict().items()}
    tables = _tables(model)
    slope = max(float(tensors[f"blocks.{layer}.mlp.W_in"][:, units].abs().sum(0).max()) for layer, units in tables)
    for layer, units in tables:
        w_in = tensors[f"blocks.{layer}.mlp.W_in"][:, units]
        tensors[f"blocks.{layer}.mlp.b_in"][units] += w_in.sum(0) * notch * 2 / slope
    return CompiledTransformer(model.card, tensors, dtype=torch.float64)


def test_a_tables_reading_one_notch_past_a_quarter_of_its_gap_is_wrong_on_a_named_input() -> None:
    """A step table is exact while v is within a quarter of its gap (the certificate: err_v <
    1/4): v moved by 0.24 of the least gap either way leaves the model exact on every input up to
    length T = 5; read 0.26 too high, the step just above a value is 0.02 into its ramp there,
    and the count is wrong on the input "aaaaa" (S = 5 of c = 5) and nowhere else."""
    model = _compiled(COUNT, "float64")
    assert _wrong(_drifted(model, 0.24), COUNT, longest=5) == []
    assert _wrong(_drifted(model, -0.24), COUNT, longest=5) == []
    assert _wrong(_drifted(model, 0.26), COUNT, longest=5) == ["aaaaa"]


def test_the_default_dtype_is_float64_where_only_its_rounding_certifies_the_tables() -> None:
    """count_a's tables pass float64's rounding rule, not float32's: with no dtype given, compile
    --residual at float64's smallest D builds in float64 and says why (the config's dtype_rule),
    as a default compile does where float32 does not certify ε."""
    smallest = _smallest(COUNT, "float64")
    assert smallest < _smallest(COUNT, "float32")
    model = ifl.compile(_program(COUNT), samples=0, residual=smallest)
    assert model.dtype == torch.float64 and model.d_model == smallest
    assert model.config["dtype_rule"].startswith(f"float64: float32 does not certify --residual {smallest}")
    assert not _wrong(model, COUNT)


def test_members_present_together_at_an_attention_stage_unread_there_pack() -> None:
    """A count of smaller tokens: its key columns and the head's outputs share a pack whose members
    are present together where a head reads one of the others (an attention stage); only FFN
    stages get tables (this crashed the rewrite), and the packed model is exact."""
    source = "input x : token {1, 2, 3, 4}\nlength T = 4\ntarget(t) = sum_<s> [x(s) < x(t)]\n"
    smallest = _smallest(source, "float64")
    model = ifl.compile(_program(source), samples=0, dtype="float64", residual=smallest)
    assert model.config["superposition"].get("packed") and smallest < _compressed(source)
    assert not _wrong(model, source)


@pytest.mark.parametrize(("source", "read_together"), [(PATTERN, 3)])
def test_the_inputs_of_one_and_pack_whole_below_what_compress_reaches(source: str, read_together: int) -> None:
    """One unit reads all of them, so no two of them pack alone (the unit would read the others
    beside the table): they pack whole, one step table of v replaces the `and`. The fetched
    tokens pack by the masked heads' own values. (Tracr's shuffle_dyck2, whose `and` reads six
    steps, packed them whole until the steps, read only as their sum, were folded into one
    coordinate: test_sums.py.)"""
    model = _compiled(source, "float64")
    record = model.config["superposition"]
    assert model.d_model < _compressed(source) == record["features_alive"]
    packs = record["packed"]["packs"]
    assert max(len(p["members"]) for p in packs) == read_together
    assert all(r["error"] < 0.25 for p in packs for r in p["reads"])
    assert _wrong(model, source) == []


def test_a_residual_between_the_packed_d_and_f_packs_only_what_it_needs() -> None:
    """The packs come in the order the choice merged them, the peak falling at each: --residual R
    takes the fewest that bring the plain lifetimes within R, so the model has R dimensions (not
    the fewest packing reaches) and fewer table units, and is exact."""
    least = _compiled(TWO_COUNTS, "float64")
    alive = least.config["superposition"]["features_alive"]
    assert least.d_model + 1 < alive
    between = ifl.compile(_program(TWO_COUNTS), samples=0, dtype="float64", residual=least.d_model + 1)
    assert between.d_model == least.d_model + 1
    fewer, most = (m.config["superposition"]["packed"] for m in (between, least))
    assert len(fewer["packs"]) < len(most["packs"]) and 0 < fewer["units_added"] < most["units_added"]
    assert _wrong(between, TWO_COUNTS, longest=5) == []


def test_numbers_two_units_read_together_pack_as_one_group() -> None:
    """[x(t) = v] is read by the unit comparing it with x(t − 2) and by the one comparing it with
    x(t − 1): no pack of one unit's two inputs is admitted (the other unit reads its member beside
    the table), so the inputs of units that share a number are tried as one group, three members
    per token value, and the model is exact below what compress reaches."""
    model = _compiled(REPEAT, "float64")
    record = model.config["superposition"]
    assert model.d_model < _compressed(REPEAT) == record["features_alive"]
    packs = record["packed"]["packs"]
    assert any(len(p["members"]) == 3 and sum(m.startswith("x=") for m in p["members"]) == 1 for p in packs)
    assert _wrong(model, REPEAT) == []


@pytest.mark.parametrize("source", [
    "input x : token {1, 2, 3, 4}\nlength T = 5\ntarget(t) = max_<s : s <= t> x(s)\n",
    "input x : token {1, 2, 3}\nlength T = 5\ntarget(t) = sum_<s> [x(s) == max_<r> x(r)]\n",
])
def test_a_sharp_heads_output_and_a_mean_of_ffn_steps_pack(source: str) -> None:
    """A running max's output (a sharp head whose key and value read x: x's values) packs with
    x, D = 1 where compress reaches 3; the mean a uniform head takes of FFN steps (their recorded
    values at any key) packs with 1/count. Both exact on every input up to length 4."""
    model = _compiled(source, "float64")
    record = model.config["superposition"]
    assert record.get("packed") and model.d_model < record["features_alive_folded"] <= _compressed(source)
    assert _wrong(model, source) == []
