"""Model files: one ``.safetensors`` file per compiled model (docs/design.md, "The compiled model").

The tensors are stored under their TransformerLens-style names, the config (the model's card,
:mod:`~infoflow_dsl.transformer.card`, as JSON) in the header metadata under ``"infoflow"``, next
to ``"format": "infoflow/1"``. A token model (language v3) is the same file: its config also holds
``"input": "tokens"``, the ``"vocabulary"`` and ``"token_output"``
(:mod:`~infoflow_dsl.transformer.config`), its ``embed.W_E`` is the [V, D] table. The card is
checked field by field when a file is read: a missing, unknown or ill-typed field, or a format
this version does not read, is a ModelFileError naming the field.

Sparse layout (the default; ``dense=True`` / ``infoflowc compile --dense`` writes every tensor
dense): a tensor ``NAME`` with under 10% nonzero entries (and at least SPARSE_MIN_SIZE entries) is
stored as three tensors instead, ``NAME.values`` (its nonzero entries, the model's dtype),
``NAME.indices`` (their row-major positions in the flattened tensor, strictly increasing, I32, or
I64 for tensors of 2^31 entries or more) and ``NAME.shape`` (I64, the dense shape), so that files
follow the nonzero count. Rebuilding ``dense = zeros(prod(shape)); dense[indices] = values;
dense.reshape(shape)`` gives the dense tensor exactly (README, "Model files"). Reading never runs code (no
pickle, no ``torch.load``) and checks everything before a model is built: every fault in a file
raises :class:`ModelFileError` with a one-line message naming the file and the fault. Writing is
atomic (a temporary file in the same folder, then ``os.replace``) and deterministic (the same
model gives the same bytes, in any process).
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import safetensors
import safetensors.torch
import torch

from ..errors import ModelFileError
from ..files import write_bytes_atomically
from .card import CARD_FORMAT, ModelCard
from .model import CompiledTransformer
from .sparse import SPARSE_DENSITY, holds_sparse, sparse_nonzero

FORMAT = CARD_FORMAT
CONFIG_KEY = "infoflow"
_DTYPES = {"F32": torch.float32, "F64": torch.float64}
SPARSE_MIN_SIZE = 64  # smaller tensors stay dense (the three tensors would cost more than they save)
SPARSE_PARTS = {".values": None, ".indices": ("I32", "I64"), ".shape": ("I64",)}  # suffix -> index dtypes
_MAX_HEADER = 100_000_000  # the safetensors limit on the header's size
_SNIFFED = 4096  # bytes read past the header length to tell a text file from a broken model


# ---------------------------------------------------------------------------- writing


def model_to_bytes(model: CompiledTransformer, dense: bool = False) -> bytes:
    """The file contents for ``model``: deterministic for a given model; tensors under 10% dense in
    the sparse layout unless ``dense``."""
    if not isinstance(model, CompiledTransformer):
        raise TypeError(f"expected a CompiledTransformer, got {type(model).__name__}")
    tensors = {name: _on_cpu(t, dense) for name, t in model.state_dict().items()}
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) != 1 or not dtypes <= set(_DTYPES.values()):
        found = sorted(map(str, dtypes))
        raise ValueError(f"a model file holds float32 or float64 tensors of one dtype, this model has {found}")
    try:
        config_json = json.dumps(model.card.to_json(), sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise ValueError(f"the model's config is not JSON-serialisable: {e}") from e
    if not dense:
        tensors = sparse_layout(tensors)
    data = safetensors.torch.save(tensors, metadata={"format": FORMAT, CONFIG_KEY: config_json})
    return _canonical_header(data)


def _on_cpu(tensor: torch.Tensor, dense: bool) -> torch.Tensor:
    """A state-dict tensor ready to write: on the CPU, contiguous; a weight the model holds sparse
    stays a coalesced COO tensor (turned dense only for the dense layout, which needs it)."""
    tensor = tensor.detach().to("cpu")
    if tensor.is_sparse:
        return tensor.to_dense() if dense else tensor.coalesce()
    return tensor.contiguous()


def sparse_layout(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` with each one under SPARSE_DENSITY nonzero replaced by NAME.values, NAME.indices
    and NAME.shape (see the module docstring); the others as they are, in the same order. A sparse
    COO tensor (a weight the model holds sparse) gives the same three tensors as its dense
    matrix would, without ever being made dense."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        size = tensor.numel()
        if tensor.is_sparse:
            indices, values = _flat_nonzero(tensor)
        else:
            flat = tensor.reshape(-1)  # a view: no copy
            if size < SPARSE_MIN_SIZE or int(torch.count_nonzero(flat)) >= SPARSE_DENSITY * size:
                out[name] = tensor
                continue
            indices = torch.nonzero(flat).reshape(-1)  # (nnz,) increasing
            values = flat[indices]
        out[f"{name}.values"] = values
        out[f"{name}.indices"] = indices.to(torch.int32 if size < 2**31 else torch.int64)
        out[f"{name}.shape"] = torch.tensor(tensor.shape, dtype=torch.int64)
    return out


def _flat_nonzero(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(row-major flat indices, increasing; values) of a sparse COO tensor's nonzero entries."""
    coo = sparse_nonzero(tensor)  # coalesced: entries in row-major order
    strides = torch.tensor(torch.empty(coo.shape, device="meta").stride(), dtype=torch.int64)  # (ndim,)
    return (coo.indices() * strides[:, None]).sum(dim=0), coo.values()


def _canonical_header(data: bytes) -> bytes:
    """Rewrite the header with the metadata first and its keys sorted. safetensors emits the
    metadata in hash-map order, which differs between processes; the tensors' entries (already in
    a fixed order) and the data section are kept as they are (offsets are relative to the data)."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    metadata = header.pop("__metadata__")
    header = {"__metadata__": dict(sorted(metadata.items())), **header}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # safetensors pads the header to a multiple of 8 with spaces
    return struct.pack("<Q", len(text)) + text + data[8 + n :]


def save(model: CompiledTransformer, path: str | os.PathLike[str], dense: bool = False) -> None:
    """Write ``model`` to ``path`` (a ``.safetensors`` file) atomically: the file is either the
    complete new model or left as it was. Sparse layout for very sparse tensors unless ``dense``."""
    write_bytes_atomically(path, model_to_bytes(model, dense))


# ---------------------------------------------------------------------------- reading


def load(path: str | os.PathLike[str], device: torch.device | str | None = None) -> CompiledTransformer:
    """Rebuild a model from its file alone. Raises :class:`ModelFileError` for every fault.

    Only a regular file is read (a FIFO would block, /dev/zero never ends), and its 8-byte
    header length is checked against the file's size before anything else is read: a 6 GB file
    of zeros is refused after 8 bytes, not after reading 6 GB.

    Args:
        path: the ``.safetensors`` file.
        device: where to put the weights (default cpu).

    Returns:
        The :class:`CompiledTransformer` the file holds.

    Raises:
        ModelFileError: every fault of the file (not a model, truncated, inconsistent, too large).
    """
    try:
        data = _read_model_file(Path(path))
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except _Fault as e:
        raise ModelFileError(f"{path}: {e}") from None
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read the file ({e.strerror or e})") from None
    return model_from_bytes(data, device=device, name=str(path))


def _read_model_file(path: Path) -> bytes:
    """The bytes of a model file, read only once its header length fits its size (_Fault)."""
    with open(path, "rb", buffering=0) if path.is_file() else _not_regular(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        head = stream.read(8)
        if len(head) == 8:
            (n,) = struct.unpack("<Q", head)
            if n > min(_MAX_HEADER, size - 8):
                start = head + stream.read(_SNIFFED)
                raise _Fault(_TEXT_FILE if _is_text(start) else
                             f"truncated or not a safetensors file (a header of {n:,} bytes in a file of {size:,})")
        return head + stream.read()


_TEXT_FILE = ("a text file, not a safetensors file (a .iflow program? compile it first with infoflowc compile, and "
              "give the .safetensors it writes)")


def _is_text(start: bytes) -> bool:
    """Whether a file beginning with ``start`` reads as text (UTF-8 without NUL in its first
    _SNIFFED bytes; a character cut at the end of those is still text): a program, most likely."""
    head = start[:_SNIFFED]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        return b"\0" not in head and error.start >= len(head) - 3
    return b"\0" not in head


def _not_regular(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(path)
    raise _Fault("not a regular file (a folder, device, FIFO or socket); a model is a .safetensors file")


def model_from_bytes(data: bytes, device: torch.device | str | None = None,
                     name: str = "<bytes>") -> CompiledTransformer:
    """Rebuild a model from a file's contents; ``name`` is the file named in error messages."""
    try:
        card, tensors, dtype = _read_model(bytes(data))
        return CompiledTransformer(card, tensors, device=device, dtype=dtype)
    except _Fault as e:
        raise ModelFileError(f"{name}: {e}") from None
    except RecursionError:  # JSON nested hundreds deep in the config
        raise ModelFileError(f"{name}: the config nests too deeply") from None
    except ValueError as e:  # the model's own checks of config and shapes
        raise ModelFileError(f"{name}: {_one_line(str(e))}") from None


class _Fault(Exception):
    """A fault found while reading; becomes a ModelFileError with the file's name."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _read_model(data: bytes) -> tuple[ModelCard, dict[str, torch.Tensor], torch.dtype]:
    """Parse and check a file's contents: (its card, tensors, dtype). Raises _Fault or ValueError."""
    if len(data) < 8:
        raise _Fault(f"not a safetensors file (only {len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data) and _is_text(data):
        raise _Fault(_TEXT_FILE)
    if n > _MAX_HEADER:
        raise _Fault("not a safetensors file (implausible header length)")
    if 8 + n > len(data):
        raise _Fault(f"truncated or not a safetensors file (header of {n} bytes, file of {len(data)} bytes)")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _Fault("not a safetensors file (the header is not JSON)") from None
    if not isinstance(header, dict):
        raise _Fault("not a safetensors file (the header is not a JSON object)")

    metadata = header.pop("__metadata__", None)
    if not isinstance(metadata, dict) or CONFIG_KEY not in metadata or "format" not in metadata:
        raise _Fault(f"a safetensors file without infoflow metadata (no '{CONFIG_KEY}' and 'format' keys)")
    if metadata["format"] != FORMAT:
        raise _Fault(f"unsupported format {metadata['format']!r} (this version reads {FORMAT!r})")
    try:
        config = json.loads(metadata[CONFIG_KEY])
    except (TypeError, json.JSONDecodeError) as e:
        raise _Fault(f"the config in the metadata is not valid JSON ({_one_line(str(e))})") from None
    try:
        card = ModelCard.from_json(config)
    except ValueError as e:
        raise _Fault(f"bad config: {_one_line(str(e))}") from None

    dtypes = set()
    for tname, info in header.items():
        dtype = info.get("dtype") if isinstance(info, dict) else None
        suffix = next((part for part in SPARSE_PARTS if tname.endswith(part)), None)
        allowed = SPARSE_PARTS[suffix] if suffix is not None else None
        if suffix is not None and allowed is not None:
            if dtype not in allowed:
                raise _Fault(f"tensor {tname} has dtype {dtype!r}; sparse {suffix[1:]} are {' or '.join(allowed)}")
            continue
        if dtype not in _DTYPES:
            raise _Fault(f"tensor {tname} has dtype {dtype!r}; a model file holds F32 or F64 tensors")
        dtypes.add(dtype)
    if len(dtypes) > 1:
        raise _Fault(f"the tensors mix dtypes {sorted(dtypes)}; a model file holds one dtype")
    try:
        tensors = safetensors.torch.load(data)
    except (safetensors.SafetensorError, ValueError, RuntimeError) as e:
        raise _Fault(f"corrupt or truncated tensor data ({_one_line(str(e))})") from None
    shapes = stored_shapes(tensors)  # before any tensor is made dense: a claimed shape is checked first
    try:
        card.spec.check_tensor_shapes(shapes)
    except ValueError as e:
        raise _Fault(_one_line(str(e))) from None
    _check_memory(tensors, shapes, len(data))
    tensors = dense_layout(tensors, shapes)
    for tname, t in tensors.items():
        if not bool(torch.isfinite(t.coalesce().values() if t.is_sparse else t).all()):
            raise _Fault(f"tensor {tname} holds non-finite values (NaN or infinity)")
    dtype = _DTYPES[dtypes.pop()] if dtypes else torch.float32
    return card, tensors, dtype


#: what loading may hold in memory for a file of n bytes: max(LOAD_MEMORY_FLOOR, LOAD_AMPLIFICATION·n).
#: A compiled model stays far below it (a matrix of a million entries or more under 10% nonzero
#: is held sparse; a smaller one costs at most 8 MB dense); a small file claiming a huge dense
#: tensor through the sparse layout is refused before anything is allocated.
LOAD_MEMORY_FLOOR = 256 * 2**20
LOAD_AMPLIFICATION = 64


def stored_shapes(tensors: dict[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    """Every model tensor's shape as the file states it: a dense tensor's own, a sparse triple's
    ``NAME.shape`` (checked: a vector of sizes ≥ 0, complete, not also stored dense). Nothing is
    allocated."""
    shapes = {name: tuple(t.shape) for name, t in tensors.items() if not any(name.endswith(p) for p in SPARSE_PARTS)}
    for name in sorted({name.rsplit(".", 1)[0] for name in tensors if name not in shapes}):
        missing = [name + suffix for suffix in SPARSE_PARTS if name + suffix not in tensors]
        if missing:
            raise _Fault(f"sparse tensor {name} lacks {', '.join(missing)}")
        if name in shapes:
            raise _Fault(f"tensor {name} is stored both dense and sparse")
        shape = tensors[name + ".shape"]
        if shape.dim() != 1 or bool((shape < 0).any()):
            raise _Fault(f"sparse tensor {name}: its shape must be a vector of sizes ≥ 0")
        shapes[name] = tuple(int(n) for n in shape)
    return shapes


def _check_memory(tensors: dict[str, torch.Tensor], shapes: dict[str, tuple[int, ...]], file_size: int) -> None:
    """Refuse (_Fault) a file whose tensors, as the model holds them, would take more than
    max(LOAD_MEMORY_FLOOR, LOAD_AMPLIFICATION × the file's size): products in Python integers
    (no overflow), sparse-held matrices counted by their stored entries."""
    need = 0
    for name, shape in shapes.items():
        itemsize = 8
        if name in tensors:
            need += math.prod(shape) * tensors[name].element_size()
            continue
        stored = int(tensors[name + ".values"].numel())
        if holds_sparse(name, shape, stored):
            need += stored * (itemsize + 2 * 8)
        else:
            need += math.prod(shape) * itemsize
    allowed = max(LOAD_MEMORY_FLOOR, LOAD_AMPLIFICATION * file_size)
    if need > allowed:
        raise _Fault(f"its tensors would take {need / 2**20:,.0f} MB in memory from a file of {file_size:,} bytes "
                      f"(at most {allowed / 2**20:,.0f} MB are read from a file this size)")


def dense_layout(tensors: dict[str, torch.Tensor], shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """The model's tensors from a file's tensors: each NAME.values, NAME.indices, NAME.shape triple
    (complete, its shape ``shapes[NAME]``: checked by :func:`stored_shapes`) rebuilt as NAME
    (checked here: values and indices one-dimensional, indices strictly increasing and in range):
    dense, or, for a tensor the model holds sparse (``sparse.holds_sparse``), a sparse COO tensor
    built from the triple directly, never dense."""
    out = {name: t for name, t in tensors.items() if not any(name.endswith(part) for part in SPARSE_PARTS)}
    for name in sorted(set(shapes) - set(out)):
        values, indices, dims = tensors[name + ".values"], tensors[name + ".indices"], shapes[name]
        if values.dim() != 1 or indices.shape != values.shape:
            raise _Fault(f"sparse tensor {name}: values and indices must be two vectors of one length")
        size = math.prod(dims)  # a Python integer: no overflow
        indices = indices.to(torch.int64)
        if indices.numel() and size == 0:
            raise _Fault(f"sparse tensor {name}: its shape {list(dims)} has no entries, yet {indices.numel()} "
                         f"values are stored")
        if indices.numel() and (int(indices[0]) < 0 or int(indices[-1]) >= size or
                                bool((indices[1:] <= indices[:-1]).any())):
            raise _Fault(f"sparse tensor {name}: indices must increase strictly within 0..{size - 1}")
        if holds_sparse(name, dims, int(torch.count_nonzero(values))):
            out[name] = _coo_from_flat(indices, values, dims)
            continue
        dense = values.new_zeros(size)
        dense[indices] = values
        out[name] = dense.reshape(dims)
    return out


def _coo_from_flat(indices: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The sparse COO tensor of ``shape`` with ``values`` at the increasing row-major flat
    ``indices`` (already checked), coalesced as it comes (no sort needed), zeros dropped."""
    coordinates = []
    for size in reversed(shape):  # unravel: the last axis varies fastest
        coordinates.append(indices % size)
        indices = indices // size
    coo = torch.sparse_coo_tensor(torch.stack(coordinates[::-1]), values, shape, is_coalesced=True,
                                  check_invariants=False)
    return sparse_nonzero(coo)
