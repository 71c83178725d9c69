"""assemble (infoflow_dsl/assemble.py): ReLU-block matrices built entry by entry give the bits a
dense += would, and a compile whose ReLU matrices the model holds sparse never builds one dense."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl.compiler.assemble import MatrixEntries
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.transformer import sparse as sparse_module
from infoflow_dsl.transformer.io import model_from_bytes, model_to_bytes

ENTRY = st.tuples(st.integers(0, 5), st.integers(0, 6), st.sampled_from([1.0, -1.0, 0.5, 1e-17, -0.0, 3.25, 1 / 3]))


@settings(max_examples=200, deadline=None)
@given(st.lists(ENTRY, max_size=40), st.booleans())
def test_matrix_entries_sum_in_the_order_written_as_a_dense_matrix_would(writes, held) -> None:
    name = "blocks.0.mlp.W_in" if held else "blocks.0.attn.W_Q"  # held sparse under the lowered size, or not
    entries, dense = MatrixEntries(name, 6, 7), torch.zeros(6, 7, dtype=torch.float64)
    for row, column, value in writes:
        entries.add((row, column), value)
        dense[row, column] += value
    original = sparse_module.SPARSE_HOLD_SIZE
    sparse_module.SPARSE_HOLD_SIZE = 1  # hypothesis runs the body many times: no fixture
    try:
        built = entries.tensor()
    finally:
        sparse_module.SPARSE_HOLD_SIZE = original
    sparse = held and int(torch.count_nonzero(dense)) < 0.1 * dense.numel()
    assert built.is_sparse == sparse
    if sparse:
        assert bool((built.coalesce().values() != 0).all())  # nonzero entries only
    assert (built.to_dense() if built.is_sparse else built).numpy().tobytes() == dense.numpy().tobytes()


def test_a_compile_that_holds_its_relu_matrices_sparse_never_builds_them_dense(monkeypatch) -> None:
    """min_pairwise at d = 64 (W_in 1.4 M entries, 0.4% nonzero): with the real threshold, no tensor of
    the threshold's size is made dense by the compile, its measurement or the sparse file; the
    file loads held sparse and computes the same outputs."""
    program = ifl.parse_program("input x : R^64 in [-1, 1]\nlength T = 8\ntarget min_<t1, t2> <x(t1), x(t2)>\n",
                                "wide.iflow")
    big: list[tuple[str, tuple[int, ...]]] = []
    real_zeros, real_to_dense = torch.zeros, torch.Tensor.to_dense

    def note(how: str, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.numel() >= sparse_module.SPARSE_HOLD_SIZE:
            big.append((how, tuple(tensor.shape)))
        return tensor

    monkeypatch.setattr(torch, "zeros", lambda *a, **k: note("zeros", real_zeros(*a, **k)))
    monkeypatch.setattr(torch.Tensor, "to_dense", lambda self, *a, **k: note("to_dense", real_to_dense(self, *a, **k)))
    model = ifl.compile(program, eps=1e-2, samples=16)
    data = model_to_bytes(model)
    monkeypatch.undo()
    assert not big, big
    held = sorted(n for n, t in model.state_dict().items() if t.is_sparse)
    assert held == ["blocks.0.mlp.W_in", "blocks.0.mlp.W_out"]
    assert model.blocks[0].mlp.W_in.numel() >= sparse_module.SPARSE_HOLD_SIZE
    assert len(data) <= 4 * model.nonzero_parameter_count() * (model.dtype.itemsize + 4)
    loaded = model_from_bytes(data)
    x = model_inputs(program, 8, seed=1)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
