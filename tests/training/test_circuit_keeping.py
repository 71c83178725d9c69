"""train --keep-circuit: the task, interchange and strict losses on a model whose answer is known.

The model: Tracr's shift_by_2 (one head, a0.h0, reading the token two positions back) padded with
a second head a0.h1 outside the circuit. With a0.h1 writing nothing, every loss is 0 (the model is
its own init). With a0.h1 writing δ into what the readout reads, the losses are computed here from
plain forwards, independently of the edge-level forward the training runs: the task and the
interchange losses see δ(x), zero ablation of the pairs outside the graph removes it, and resample
ablation replaces it by δ(x')."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import infoflow_dsl as ifl
from infoflow_dsl.circuits.graph import circuit_graph
from infoflow_dsl.errors import TrainError
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.training.circuit_keeping import (
    ADDED,
    CircuitLosses,
    KeepSettings,
    add_noise,
    fill_zeros,
    kept_graph,
    step_batch,
    train_keeping_circuit,
)
from infoflow_dsl.training.settings import TrainSettings
from infoflow_dsl.training.train import build_model, estimate_standardisation, squared_error

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
SHIFT = ROOT / "compiled_examples" / "tracr" / "shift_by_2.safetensors"
SETTINGS = TrainSettings(heads=(2,), d_model=12, d_head=4, d_mlp=0, steps=0, batch=64)


@pytest.fixture(scope="module")
def init() -> ifl.CompiledTransformer:
    return ifl.load(SHIFT, device="cpu")


def _losses(init: ifl.CompiledTransformer, write: torch.Tensor | None = None):
    """The padded model (a0.h1's W_O set to ``write``), its losses and one batch."""
    program = program_of(init)
    model, _ = build_model(program, SETTINGS, init)
    if write is not None:
        with torch.no_grad():
            model.blocks[0].attn.W_O[1] = write
    standard = estimate_standardisation(program, SETTINGS.dist, "cpu")
    standard.unfold_from(model)
    init_graph = circuit_graph(init)
    graph = kept_graph(init_graph, model)
    losses = CircuitLosses(model, graph, init, init_graph, program, standard)
    batches = (step_batch(program, SETTINGS, step, standard) for step in range(100))
    return model, losses, next(b for b in batches if b.x.shape[1] >= 6), standard  # most sites defined


def test_the_kept_graph_has_every_node_and_the_init_edges(init) -> None:
    _, losses, _, _ = _losses(init)
    graph = losses.forward.graph
    assert [n.name for n in graph.nodes] == ["input", "a0.h0", "a0.h1", "output"]
    assert graph.edges == circuit_graph(init).edges
    assert graph.by_name["a0.h1"].computes == ADDED
    assert losses.nodes == ["a0.h0"]
    assert len(losses.outside) == len(graph.pairs()) - len(graph.edges)


def test_every_loss_vanishes_on_the_init_model_itself(init) -> None:
    _, losses, batch, _ = _losses(init)
    assert _value(losses.task(batch)) < 1e-12
    assert _value(losses.interchange(batch, ["a0.h0"])) < 1e-12
    for ablation in ("zero", "mean", "resample"):
        assert _value(losses.strict(batch, (ablation,))) < 1e-12


def _value(loss: torch.Tensor) -> float:
    return float(loss.detach())


def _without(model: ifl.CompiledTransformer, heads: list[int]) -> ifl.CompiledTransformer:
    """A copy of ``model`` with the W_O of ``heads`` zeroed."""
    tensors = {n: t.detach().clone() for n, t in model.state_dict().items()}
    for head in heads:
        tensors["blocks.0.attn.W_O"][head] = 0.0
    return ifl.CompiledTransformer(model.config, tensors, device="cpu", dtype=torch.float32)


def _plain(model: ifl.CompiledTransformer, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x).to(torch.float64)


def test_the_losses_follow_the_written_delta_computed_from_plain_forwards(init) -> None:
    write = 0.4 * torch.randn(4, 12, generator=torch.Generator().manual_seed(5))
    model, losses, batch, standard = _losses(init, write)
    x, x_prime, z = batch.x, batch.partner, batch.z
    none, only_h0 = _without(model, [0, 1]), _without(model, [1])
    delta = lambda inputs: _plain(model, inputs) - _plain(only_h0, inputs)  # noqa: E731  a0.h1's part of the output
    h0 = lambda inputs: _plain(only_h0, inputs) - _plain(none, inputs)  # noqa: E731
    assert float(delta(x).abs().max()) > 0.1  # a0.h1 moves the output
    task = squared_error(_plain(model, x), z)[0]
    assert _value(losses.task(batch)) == pytest.approx(float(task), rel=1e-4, abs=1e-9)
    assert float(task) > 1e-3
    # the swap: a0.h0's part from x', a0.h1's (reading the embedding only) from x; the target is the
    # init model under the same swap, its answer one-hot
    init_none = _without(init, [0])
    init_swapped = _plain(init, x) - (_plain(init, x) - _plain(init_none, x)) + (
        _plain(init, x_prime) - _plain(init_none, x_prime))
    onehot = torch.nn.functional.one_hot(init_swapped.argmax(dim=-1), 4).to(torch.float64)
    target = torch.where(z.isnan(), torch.nan, standard.forward(onehot, True))
    swapped = _plain(model, x) - h0(x) + h0(x_prime)
    expected = squared_error(swapped, target)[0]
    assert _value(losses.interchange(batch, ["a0.h0"])) == pytest.approx(float(expected), rel=1e-4, abs=1e-9)
    # zero ablation of the outside pairs removes a0.h1's write; resample ablation reads it on x'
    assert _value(losses.strict(batch, ("zero",))) == pytest.approx(
        float(squared_error(_plain(only_h0, x), z)[0]), rel=1e-4, abs=1e-9)
    resampled = squared_error(_plain(only_h0, x) + delta(x_prime), z)[0]
    assert _value(losses.strict(batch, ("resample",))) == pytest.approx(float(resampled), rel=1e-4, abs=1e-9)
    assert float(resampled) > 1e-3


def test_noise_is_relative_and_no_zero_is_kept() -> None:
    generator = torch.Generator().manual_seed(0)
    big, empty = torch.zeros(6, 5), torch.zeros(6, 5)
    big[0, 0] = 100.0
    rms = float(big.square().mean().sqrt())
    add_noise([big, empty], 0.01, generator)
    assert float(big[1:].std()) == pytest.approx(0.01 * rms, rel=0.5)
    assert float(empty.std()) == pytest.approx(0.01 / 6**0.5, rel=0.5)
    sparse = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    assert fill_zeros([sparse], 0.01, generator) == 3
    assert bool((sparse != 0).all()) and float(sparse[0, 1]) == 1.0


def test_keep_settings_and_the_init_are_checked(init) -> None:
    with pytest.raises(TrainError, match="--init"):
        train_keeping_circuit(program_of(init), SETTINGS, None)
    with pytest.raises(TrainError):
        KeepSettings(noise=-1.0)
    with pytest.raises(TrainError):
        KeepSettings(ablations=("sideways",))


def test_covering_settings_hold_the_init_and_the_padded_model_has_exactly_their_shape() -> None:
    from infoflow_dsl.training.circuit_keeping import covering_settings

    reverse = ifl.load(ROOT / "compiled_examples" / "tracr" / "reverse.safetensors", device="cpu")
    settings = covering_settings(reverse, TrainSettings(heads=(2,), d_model=8, d_head=1, d_mlp=4))
    assert (settings.heads, settings.d_model, settings.d_head, settings.d_mlp) == ((2, 2), 14, 4, 18)
    model, _ = build_model(program_of(reverse), settings, reverse)
    scratch, _ = build_model(program_of(reverse), settings)
    assert {n: t.shape for n, t in model.state_dict().items()} == {n: t.shape for n, t in scratch.state_dict().items()}
