"""Weights held sparse, and the ReLU blocks' products over their nonzero entries.

Compiled ReLU blocks (the embedding's and every layer's FFN) are wide (thousands to millions of
units) and very sparse: a unit reads two or three directions and writes one. A very large, very
sparse ReLU matrix is held as a sparse COO tensor (:func:`holds_sparse`), stored sparse in a file
(``io``), and the products of a frozen, sparse enough block multiply by CSR copies of its
matrices (:func:`relu_block`): the same sums over the nonzero terms only.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

Tensor = torch.Tensor
#: ``tap(name, tensor)``: what the forward continues with in place of ``tensor`` (the model's
#: hooks; :func:`relu_block` taps a block's hidden activations through one).
Tap = Callable[[str, Tensor], Tensor]

HIDDEN_CHUNK = 1 << 18  # hidden activations per FFN chunk on a CPU (2 MiB in float64: one core's L2)
#: hidden activations per FFN chunk on an accelerator (512 MiB in float64): a GPU has no
#: per-core cache to stay in, and every chunk costs kernel launches (min_pairwise at T = 4096,
#: batch 8, in 2^18-sized chunks: 66 chunks, 997 kernels a forward against a plain transformer's 199)
DEVICE_HIDDEN_CHUNK = 1 << 26


def hidden_chunk(device: torch.device) -> int:
    """Hidden activations per chunk of a ReLU block's rows on ``device``."""
    return HIDDEN_CHUNK if device.type == "cpu" else DEVICE_HIDDEN_CHUNK

#: The ReLU blocks' matrices (the embedding's and every layer's FFN): the only weights whose size
#: grows with the FFN width, thousands to millions of units each reading two or three directions.
RELU_MATRICES = re.compile(r"^(embed\.W_E[12]|blocks\.[0-9]+\.mlp\.W_(in|out))$")
#: "Very sparse": under this fraction of entries nonzero. Such a tensor is stored sparse in a file
#: (io), an FFN of such matrices multiplies by CSR copies, and a large one is held sparse.
SPARSE_DENSITY = 0.1
SPARSE_HOLD_SIZE = 1 << 20  # entries from which a very sparse ReLU matrix is held sparse in memory


def holds_sparse(name: str, shape: tuple[int, ...] | torch.Size, nonzero: int) -> bool:
    """Whether a model holds tensor ``name`` (of ``shape``, with ``nonzero`` nonzero entries) as
    a sparse COO tensor rather than dense: a ReLU-block matrix of at least SPARSE_HOLD_SIZE
    entries, under SPARSE_DENSITY nonzero. A function of the values alone, so a model
    loaded from a dense file holds exactly what the same model loaded from a sparse one holds.

    min_pairwise at d = 256, T = 128, ε = 1e-2 has 187 M stored weights and 364,807 nonzero
    ones: held dense, its compile peaked at 2.5 GB; held sparse, memory follows the nonzero
    count (BENCHMARKS.md, "Peak memory"). Smaller matrices stay dense (every shipped example):
    TransformerLens users and the trainer index them as usual."""
    return bool(RELU_MATRICES.match(name)) and large_and_sparse(shape, nonzero)


def large_and_sparse(shape: tuple[int, ...] | torch.Size, nonzero: int) -> bool:
    """At least SPARSE_HOLD_SIZE entries, under SPARSE_DENSITY of them nonzero: a ReLU matrix
    that :func:`holds_sparse` holds sparse."""
    size = math.prod(shape)
    return size >= SPARSE_HOLD_SIZE and nonzero < SPARSE_DENSITY * size


def nonzero_entries(tensor: Tensor) -> int:
    """Nonzero entries of a dense or a sparse COO tensor."""
    if tensor.is_sparse:
        return int(torch.count_nonzero(tensor.coalesce().values()))
    return int(torch.count_nonzero(tensor))


def sparse_nonzero(tensor: Tensor) -> Tensor:
    """``tensor`` as a coalesced sparse COO tensor holding its nonzero entries only (row-major
    order; an explicit zero, or a value that rounded to 0 in a cast, is dropped, as the dense
    tensor's CSR copy would drop it)."""
    coo = (tensor if tensor.is_sparse else tensor.to_sparse()).coalesce()
    keep = coo.values() != 0
    if bool(keep.all()):
        return coo
    return torch.sparse_coo_tensor(coo.indices()[:, keep], coo.values()[keep], coo.shape,
                                   is_coalesced=True, check_invariants=False)


def relu_block(owner: nn.Module, h: Tensor, w_in: Tensor, b_in: Tensor, w_out: Tensor,
               tap: Tap | None = None, prefix: str = "") -> Tensor:
    """relu(h w_in + b_in) w_out for h (B, N, D_in) -> (B, N, D_out).

    Compiled ReLU blocks are wide (thousands of units) and sparse (a unit reads two or three
    directions and writes one). When the weights are frozen and under 10% dense the products
    use CSR copies: [w_in; b_in]ᵀ (the bias as one more input column, read against a constant
    1) and w_outᵀ, the same sums over the nonzero terms only, each cut to the directions some
    unit reads or writes (:class:`SparseProducts`: the deep route's forward 2.7× faster, the
    same bits; the other columns of the output are 0). Rows go in chunks that keep the
    hidden activations under 2^18 numbers, so that they stay in a core's L2 cache between the
    two products (BENCHMARKS.md: up to 2× faster than chunks of 2^22); on an accelerator the chunks
    hold 2^26 (:func:`hidden_chunk`), since there each chunk costs kernel launches, not cache.

    Each chunk writes into one preallocated output rather than a list joined at the end: small
    live results interleaved with large hidden buffers fragmented glibc's heap until a
    10,256-input check of a 47,084-unit model held 24 GB; written in place it stays under 1 GB.

    With a ``tap`` the first product of every chunk is gathered into (B, N, M), tapped as
    ``{prefix}hook_pre``, its relu tapped as ``{prefix}hook_post``, and the second product of
    each chunk reads the tapped rows: the same products, chunk by chunk, as without a tap.
    """
    batch, rows, size = h.shape
    flat = h.reshape(batch * rows, size)  # (N, D_in)
    width = w_in.shape[1]
    chunk = max(1, hidden_chunk(h.device) // max(width, 1))
    sparse = sparse_weights(owner, w_in, b_in, w_out)
    if sparse is None:
        def hidden(start: int) -> Tensor:  # pre-activations of one chunk, (n, M)
            return flat[start:start + chunk] @ w_in + b_in

        def output(start: int, active: Tensor) -> None:  # (n, M) -> out's rows (n, D_out)
            out[start:start + chunk] = active @ w_out

        def as_rows(native: Tensor) -> Tensor:  # (n, M) <-> (n, M)
            return native
    else:
        read = flat.index_select(1, sparse.reads)  # (N, k)  the directions the block reads
        columns = torch.cat([read, flat.new_ones(flat.shape[0], 1)], dim=1).T.contiguous()  # (k + 1, N)

        def hidden(start: int) -> Tensor:  # (M, n)
            return torch.sparse.mm(sparse.w_in_t, columns[:, start:start + chunk])

        def output(start: int, active: Tensor) -> None:  # (M, n) -> out's rows (n, j) of the written columns
            out[start:start + chunk, sparse.writes] = torch.sparse.mm(sparse.w_out_t, active).T

        def as_rows(native: Tensor) -> Tensor:  # (M, n) <-> (n, M)
            return native.T

    starts = range(0, flat.shape[0], chunk)
    every_column = sparse is None or sparse.writes.numel() == w_out.shape[1]
    out = (flat.new_empty if every_column else flat.new_zeros)(flat.shape[0], w_out.shape[1])  # (N, D_out)
    if tap is None:
        for start in starts:
            output(start, hidden(start).relu_())
    else:
        pre = torch.cat([as_rows(hidden(start)) for start in starts]) if starts else flat.new_zeros(0, width)
        pre = tap(prefix + "hook_pre", pre.reshape(batch, rows, width))  # (B, N, M)
        post = tap(prefix + "hook_post", torch.relu(pre)).reshape(batch * rows, width)  # (N, M)
        for start in starts:
            output(start, as_rows(post[start:start + chunk]))
    return out.reshape(batch, rows, w_out.shape[1])


@dataclass(frozen=True)
class SparseProducts:
    """A sparse ReLU block relu(h w_in + b_in) w_out as the products :func:`relu_block` takes:
    the k input directions some unit reads (``reads``, ascending), [w_in[reads]; b_in]ᵀ as CSR
    (M, k + 1), the j output directions some unit writes (``writes``, ascending) and
    w_out[:, writes]ᵀ as CSR (j, M). Dropping the directions no unit touches leaves every
    nonzero term, in the same order (the column indices keep their order, the bias stays last):
    the same sums, while the products' operands shrink from the stream's width to the block's
    (a deep route's 16-unit blocks read a handful of a hundred directions)."""

    reads: Tensor
    w_in_t: Tensor
    writes: Tensor
    w_out_t: Tensor


def sparse_products(w_in: Tensor, b_in: Tensor, w_out: Tensor) -> SparseProducts:
    """The :class:`SparseProducts` of a block whose w_in (D_in, M) and w_out (M, D_out) are dense
    or sparse COO."""
    reads, writes = _nonzero_lines(w_in, 0), _nonzero_lines(w_out, 1)
    return SparseProducts(reads=reads, w_in_t=_transposed_csr(w_in.detach().index_select(0, reads), b_in.detach()),
                          writes=writes, w_out_t=_transposed_csr(w_out.detach().index_select(1, writes)))


def _nonzero_lines(w: Tensor, dim: int) -> Tensor:
    """The indices along ``dim`` (0: rows, 1: columns) of the lines of ``w`` holding a nonzero
    entry, ascending (int64)."""
    if w.is_sparse:
        return sparse_nonzero(w).indices()[dim].unique()
    return (w.detach() != 0).any(dim=1 - dim).nonzero().flatten()


def sparse_weights(owner: nn.Module, w_in: Tensor, b_in: Tensor, w_out: Tensor) -> SparseProducts | None:
    """The :class:`SparseProducts` of a block when frozen and sparse enough (cached on ``owner``
    per version): always when either matrix is, or would be, held sparse (:func:`holds_sparse`),
    else when under SPARSE_DENSITY nonzero together. Both give the same canonical CSR (rows in order, columns
    sorted, zeros dropped) for the same values, so a held-sparse model computes the same bits as
    the dense-held one."""
    held = w_in.is_sparse or w_out.is_sparse
    if w_in.requires_grad or b_in.requires_grad or w_out.requires_grad:
        if held:
            raise ValueError("weights held sparse are frozen: to train them, build the model with sparse=False")
        return None
    if w_in.numel() == 0:
        return None
    key = (w_in._version, b_in._version, w_out._version, w_in.device, w_in.dtype)
    cached = getattr(owner, "_csr_cache", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    sparse = None
    nonzero = [nonzero_entries(w) for w in (w_in, w_out)]
    # a dense-held model takes CSR products wherever the sparse-held one must (either matrix
    # qualifies on its own), so the two compute the same bits
    qualifies = any(large_and_sparse(w.shape, count) for w, count in zip((w_in, w_out), nonzero, strict=True))
    if held or qualifies or sum(nonzero) / (w_in.numel() + w_out.numel()) < SPARSE_DENSITY:
        with warnings.catch_warnings():  # "sparse CSR support is in beta": the products used here are stable
            warnings.simplefilter("ignore", UserWarning)
            sparse = sparse_products(w_in, b_in, w_out)
    object.__setattr__(owner, "_csr_cache", (key, sparse))
    return sparse


def _transposed_csr(w: Tensor, bias: Tensor | None = None) -> Tensor:
    """[w; bias]ᵀ (bias as one more row of w, if given) as a CSR tensor: w (D, M) dense or
    sparse COO -> (M, D + 1) or (M, D), its nonzero entries only."""
    w = w.detach()
    if not w.is_sparse:
        stacked = w if bias is None else torch.cat([w, bias[None]], dim=0)  # (D + 1, M)
        return stacked.T.contiguous().to_sparse_csr()
    if bias is not None:
        w = torch.cat([w, sparse_nonzero(bias[None])], dim=0)  # (D + 1, M) COO
    return w.t().coalesce().to_sparse_csr()
