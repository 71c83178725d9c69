"""The edge-level forward (infoflow_dsl/circuits/patching.py): the model's own output with
nothing ablated, a node's output removed through the model's own hooks when every edge out of it
is zero-ablated, and a resample from the input itself changes nothing."""

from __future__ import annotations

import pytest
import torch
from exported import shipped as shipped_in
from shipped_models import MEASURED, graph, model_inputs_of, shipped

from infoflow_dsl.circuits.patching import EdgeForward, edge_key, stand_ins


def _inputs(name: str, count: int = 48) -> torch.Tensor:
    return model_inputs_of(name, count, 11, 6)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to the float32 rounding of the shipped models (the forward sums heads apart)."""
    return bool(((a - b).abs() <= 1e-5 * (1 + b.abs())).all())


@pytest.mark.parametrize("name", MEASURED)
def test_nothing_ablated_is_the_models_forward(name: str) -> None:
    model, x = shipped(name), _inputs(name)
    with torch.no_grad():
        expected = model(x).to(torch.float64)
    assert _close(EdgeForward(model, graph(name)).run(x).y, expected)


def _hook_values(model: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every hook's value in the model's own clean run."""
    seen: dict[str, torch.Tensor] = {}

    def record(name: str, value: torch.Tensor) -> torch.Tensor:
        seen[name] = value.clone()
        return value

    with torch.no_grad():
        model.run(x, record)
    return seen


@pytest.mark.parametrize("ablation", ["zero", "mean"])
@pytest.mark.parametrize("name", MEASURED)
def test_ablating_every_edge_out_of_a_node_replaces_it_as_the_models_hooks_do(name: str, ablation: str) -> None:
    """Independently of the edge forward: the model's own run with the node's output replaced at
    its TransformerLens hook (a head's z at its index, an MLP's hook_mlp_out) by 0 or by its mean
    over the batch (the head's output z W_O is linear in z). Every receiver of the node reads the
    same ablated sender, the case the forward shares one sum for. In float64: a stand-in can put
    a large-β head's scores near a tie, where float32's rounding is amplified."""
    model, edges, x = shipped_in(name, torch.float64), graph(name), _inputs(name)
    forward = EdgeForward(model, edges)
    stands, clean = stand_ins(forward, x, ablation), _hook_values(model, x)
    for node in edges.senders():
        if node.kind == "input":
            continue
        out_of = [edge_key(e) for e in edges.edges if e.sender == node.name]
        hook = f"blocks.{node.layer}.attn.hook_z" if node.kind == "head" else f"blocks.{node.layer}.hook_mlp_out"
        mean = clean[hook].mean(dim=0, keepdim=True)

        def tap(name: str, value: torch.Tensor, hook: str = hook, index: int | None = node.index,
                mean: torch.Tensor = mean) -> torch.Tensor:
            if name != hook:
                return value
            value = value.clone()
            stand_in = mean if ablation == "mean" else torch.zeros_like(mean)
            if index is None:
                value[:] = stand_in
            else:
                value[:, :, index] = stand_in[:, :, index]
            return value

        with torch.no_grad():
            expected = model.run(x, tap)
        assert torch.allclose(forward.run(x, out_of, stands).y, expected, rtol=1e-9, atol=1e-9), node.name


@pytest.mark.parametrize("name", MEASURED)
def test_resampling_from_the_input_itself_changes_no_bit(name: str) -> None:
    model, edges, x = shipped(name), graph(name), _inputs(name)
    forward = EdgeForward(model, edges)
    every = [edge_key(e) for e in edges.edges]
    assert torch.equal(forward.run(x, every, stand_ins(forward, x, "resample", x)).y, forward.run(x).y)


def test_an_unknown_ablation_or_a_resample_without_inputs_is_refused() -> None:
    forward, x = EdgeForward(shipped("tracr/reverse"), graph("tracr/reverse")), _inputs("tracr/reverse")
    with pytest.raises(ValueError, match="unknown ablation 'noise'"):
        stand_ins(forward, x, "noise")
    with pytest.raises(ValueError, match="needs the corrupted inputs"):
        stand_ins(forward, x, "resample")


@pytest.mark.parametrize("name", ["tracr/sort", "tracr/shuffle_dyck3", "min_pairwise"])
def test_starting_from_the_clean_run_gives_the_same_bits_for_every_candidate_pair(name: str) -> None:
    """The layers before an ablated edge's receiver are taken from the clean run: for every pair the
    model could carry, alone and with every later pair too, the output is bit for bit the full run's."""
    model, edges, x = shipped(name), graph(name), _inputs(name, 32)
    forward = EdgeForward(model, edges)
    clean = forward.run(x)
    for ablation in ("zero", "mean"):
        stands = stand_ins(forward, x, ablation)
        pairs = edges.pairs()
        for i, pair in enumerate(pairs):
            for ablated in ([pair], pairs[i:]):
                assert torch.equal(forward.run(x, ablated, stands).y, forward.run(x, ablated, stands, clean=clean).y)
