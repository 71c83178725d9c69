"""The exact rewrites before circuit-keeping training (``training/rebalance.py``): each pass and all
of them together keep the function (against the float64 reference evaluator, and against the
padded model's own outputs), and each moves the statistic it is there for.

The model: Tracr's reverse (two layers; its first FFN's units fire on few tokens, its head's β is
47 and its ReLU slopes 180), padded to heads 2, d_model 32, d_mlp 32 as the trained tier pads it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cli_runner import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl.circuits.certify import certify
from infoflow_dsl.circuits.graph import circuit_graph
from infoflow_dsl.circuits.statistics import weight_statistics
from infoflow_dsl.errors import TrainError
from infoflow_dsl.oracle.evaluate import evaluate
from infoflow_dsl.oracle.tokens import random_ids
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.training.circuit_keeping import KeepSettings, covering_settings, kept_graph, train_keeping_circuit
from infoflow_dsl.training.rebalance import (
    LAYER_ACTIVITY,
    PASSES,
    Rebalancing,
    UnitRanges,
    balance,
    fill_dead_directions,
    flip_units,
    model_tensors,
    rebalance,
    unit_ranges,
    write_back,
)
from infoflow_dsl.training.settings import TrainSettings
from infoflow_dsl.training.train import build_model

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
TRACR = ROOT / "compiled_examples" / "tracr"
BASE = TrainSettings(heads=(2,), d_model=32, d_head=8, d_mlp=32, steps=0, batch=64)


def _padded(init: ifl.CompiledTransformer, passes: tuple[str, ...]) -> tuple[ifl.CompiledTransformer, dict]:
    """The padded model of ``init`` (as training builds it), rewritten by ``passes``."""
    program = program_of(init)
    model, _ = build_model(program, covering_settings(init, BASE), init)
    record = rebalance(model, init, kept_graph(circuit_graph(init), model), program, Rebalancing(passes)) \
        if passes else {}
    return model, record


@pytest.fixture(scope="module")
def reverse() -> ifl.CompiledTransformer:
    return ifl.load(TRACR / "reverse.safetensors", device="cpu")


@pytest.fixture(scope="module")
def models(reverse) -> dict[tuple[str, ...], ifl.CompiledTransformer]:
    """The padded model and its rewrites: each pass alone, and all of them."""
    return {passes: _padded(reverse, passes)[0] for passes in [(), *((p,) for p in PASSES), PASSES]}


def _answers_match(model: ifl.CompiledTransformer, program, ids: torch.Tensor) -> None:
    truth = evaluate(program, ids)  # (B, T') token ids, −1 where undefined
    answer = model(ids).argmax(dim=-1)
    defined = truth >= 0
    assert torch.equal(answer[defined], truth[defined])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_rewrite_keeps_the_function_on_random_sequences(models, reverse, data) -> None:
    program = program_of(reverse)
    length = data.draw(st.integers(1, program.length))
    ids = torch.tensor([data.draw(st.lists(st.integers(0, program.token_vocabulary.size - 1), min_size=length,
                                           max_size=length)) for _ in range(4)])
    padded = models[()](ids).detach().double()
    for passes, model in models.items():
        _answers_match(model, program, ids)
        scores = model(ids).detach().double()
        assert (scores - padded).abs().max() <= 1e-4 * max(1.0, float(padded.abs().max())), passes


def test_the_rewritten_model_answers_every_short_sequence_right(models, reverse) -> None:
    program = program_of(reverse)
    size = program.token_vocabulary.size
    for length in range(1, 5):
        ids = torch.cartesian_prod(*[torch.arange(size)] * length).reshape(-1, length)
        _answers_match(models[PASSES], program, ids)


def _unit_activity(model: ifl.CompiledTransformer, x: torch.Tensor, layer: int) -> torch.Tensor:
    """Each unit of ``layer``'s FFN: the fraction of input-token rows where it is active."""
    found: list[torch.Tensor] = []

    def tap(name: str, value: torch.Tensor) -> torch.Tensor:
        if name == f"blocks.{layer}.mlp.hook_post":
            found.append((value[:, :-1] > 0).double().mean(dim=(0, 1)))
        return value

    with torch.no_grad():
        model.run(x, tap)
    return found[0]


def test_a_flipped_unit_is_always_active_and_its_slot_active_where_it_was_not(reverse, models) -> None:
    program = program_of(reverse)
    model, _ = _padded(reverse, ())
    graph = kept_graph(circuit_graph(reverse), model)
    ranges = unit_ranges(model, graph, program)[0]
    tensors = model_tensors(model)
    sparse = UnitRanges(ranges.bound, torch.zeros_like(ranges.activity), ranges.z)  # flip every unit it can
    flipped = flip_units(tensors, 0, reverse.d_mlp[0], sparse, margin=1.5)
    write_back(model, tensors)
    free = list(range(reverse.d_mlp[0], reverse.d_mlp[0] + len(flipped)))
    x = random_ids(program, 128, seed=5)
    before, after = _unit_activity(models[()], x, 0), _unit_activity(model, x, 0)
    assert len(flipped) == len(free) > 0
    assert torch.equal(after[flipped], torch.ones(len(flipped), dtype=torch.float64))
    assert torch.allclose(after[free], 1.0 - before[flipped])
    _answers_match(model, program, x)
    assert (model(x) - models[()](x)).abs().max() <= 1e-4


def test_pairs_give_the_free_units_cancelling_outputs_and_a_trained_layer_activity(reverse, models) -> None:
    w_out = model_tensors(models[("pairs",)])["blocks.1.mlp.W_out"]  # layer 1: every unit free (reverse has none)
    assert bool((w_out.abs().sum(dim=1) > 0).all()) and torch.allclose(w_out[0::2], -w_out[1::2])
    x = random_ids(program_of(reverse), 256, seed=11)
    assert abs(float(_unit_activity(models[("pairs",)], x, 1).mean()) - LAYER_ACTIVITY) < 0.1
    assert abs(float(_unit_activity(models[()], x, 1).mean()) - LAYER_ACTIVITY) > 0.1  # before: random units


def test_balance_evens_the_scales_and_rotate_leaves_no_zero_block(models) -> None:
    plain, balanced = model_tensors(models[()]), model_tensors(models[("balance",)])
    largest = {name: float(t.abs().max()) for name, t in plain.items() if t.numel()}
    assert largest["blocks.0.mlp.W_in"] > 100 and largest["blocks.1.attn.beta"] > 40  # compiled: sharp
    balanced_largest = max(float(t.abs().max()) for name, t in balanced.items() if t.numel() and "b_" not in name)
    assert balanced_largest < max(largest.values()) / 4
    assert float(balanced["blocks.1.attn.beta"][0]) == pytest.approx(1 / 8**0.5)
    x = random_ids(program_of(models[()]), 64, seed=3)
    before, after = weight_statistics(models[()], x), weight_statistics(models[PASSES], x)
    assert before["zeros"] > 0.4 and after["zeros"] < 0.2  # what stays 0: the added heads' W_O (fill_zeros fills it)
    assert after["kurtosis"] < before["kurtosis"]


def test_the_padding_directions_half_read_half_written_keep_the_function_and_raise_the_stable_rank(
        reverse, models) -> None:
    model, _ = _padded(reverse, ())
    tensors = model_tensors(model)
    balance(tensors, len(model.blocks), rounds=4)
    write_back(model, tensors)
    x = random_ids(program_of(reverse), 64, seed=4)
    before, rank = model(x).detach(), weight_statistics(model, x)["stable_rank"]
    fill_dead_directions(tensors, len(model.blocks), reverse.d_model, torch.Generator().manual_seed(0))
    write_back(model, tensors)
    assert (model(x).detach() - before).abs().max() <= 1e-5 * max(1.0, float(before.abs().max()))
    assert weight_statistics(model, x)["stable_rank"] > rank + 0.01
    read = tensors["blocks.0.mlp.W_in"][reverse.d_model::2]  # the even padding directions: read, not written
    assert bool((read != 0).all()) and not tensors["blocks.0.mlp.W_out"][:, reverse.d_model::2].any()


def test_rebalanced_training_at_ten_times_the_noise_is_certified() -> None:
    init = ifl.load(TRACR / "shift_by_2.safetensors", device="cpu")
    settings_ = covering_settings(init, TrainSettings(heads=(2,), d_model=32, d_head=8, d_mlp=32, steps=20,
                                                      batch=32, lr=1e-5))
    kept = train_keeping_circuit(program_of(init), settings_, init, KeepSettings(noise=1e-3, rebalance=PASSES))
    assert kept.model.config["trained"]["rebalanced"]["pairs"] > 0
    assert certify(kept.model, samples=200).holds


def test_unknown_passes_and_margins_below_one_are_refused() -> None:
    with pytest.raises(TrainError, match="passes"):
        Rebalancing(("flip", "shear"))
    with pytest.raises(TrainError, match="margin"):
        Rebalancing(margin=0.5)
    with pytest.raises(TrainError, match="passes"):
        KeepSettings(rebalance=("twist",))


def test_train_rebalance_writes_a_certified_model_and_still_refuses_a_broken_one(tmp_path) -> None:
    shift = TRACR / "shift_by_2"
    common = [str(shift.with_suffix(".iflow")), "--heads", "2", "--d-model", "16", "--d-head", "4", "--d-mlp", "8",
              "--batch", "32", "--samples", "200", "--init", str(shift.with_suffix(".safetensors")),
              "--keep-circuit", "--rebalance"]
    out = tmp_path / "kept.safetensors"
    code, stdout, err = run_cli(["train", *common, "--steps", "8", "--noise", "1e-2", "-o", str(out)])
    assert code == 0 and "certified; wrote" in stdout, err
    trained = ifl.load(out, device="cpu").config["trained"]
    assert trained["keep_circuit"]["rebalance"] == list(PASSES) and trained["rebalanced"]["pairs"] > 0
    broken = tmp_path / "broken.safetensors"
    code, _, err = run_cli(["train", *common, "--steps", "1", "--noise", "3", "-o", str(broken)])
    assert code == 3 and "refused" in err and not broken.exists()
