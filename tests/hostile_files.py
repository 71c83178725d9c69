"""Mutations of valid model files and export folders, for the loaders' fuzz tests
(tests/transformer/test_io.py, tests/exporters/test_directory.py) and their benchmark
(bench/bench_hostile_files.py).

A model file: a config value replaced by any JSON, a tensor's header entry (shape, dtype,
offsets) changed, a byte changed, the file cut short, or the config nested deeply; each mutant
must load as a model that runs, or be refused with ModelFileError. An export folder: any value
of ``infoflow.json`` or ``config.json`` (at any depth) replaced, removed or nested deeply, the
weights file mutated as above, a file removed, or a pickle or shard index added; each must load
as a model that runs, or be refused with ExportError."""

from __future__ import annotations

import json
import struct
from typing import Any

from hypothesis import strategies as st

#: any JSON value, small: what a hostile config field may hold
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
#: config keys worth changing beyond the file's own
EXTRA_KEYS = ["input", "vocabulary", "token_output", "output", "program"]
DTYPES = ["F16", "BF16", "I8", "U8", "I32", "I64", "F64", "F32", "BOOL", "X", 3]


def header_of(data: bytes) -> dict[str, Any]:
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])


def with_header(data: bytes, header: dict[str, Any]) -> bytes:
    """``data`` with its header replaced (the tensor bytes kept)."""
    (n,) = struct.unpack("<Q", data[:8])
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data[8 + n:]


@st.composite
def mutants(draw: Any, valid: bytes) -> bytes:
    """One mutation of the valid file ``valid``."""
    header = header_of(valid)
    configured = "infoflow" in header.get("__metadata__", {})  # an export's weights file holds no config
    kind = draw(st.sampled_from(["config", "nesting"] * configured + ["shape", "dtype", "offsets", "byte", "cut"]))
    if kind in ("byte", "cut"):
        at = draw(st.integers(0, len(valid) - 1))
        return valid[:at] if kind == "cut" else valid[:at] + bytes([draw(st.integers(0, 255))]) + valid[at + 1:]
    metadata = header["__metadata__"]
    if kind in ("config", "nesting"):
        config = json.loads(metadata["infoflow"])
        key = draw(st.sampled_from(sorted(config) + EXTRA_KEYS))
        depth = draw(st.integers(100, 5_000))
        config[key] = "@nested@" if kind == "nesting" else draw(JSON_VALUES)
        text = json.dumps(config).replace('"@nested@"', "[" * depth + "]" * depth)  # never parsed here
        return with_header(valid, {**header, "__metadata__": {**metadata, "infoflow": text}})
    name = draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))
    entry = dict(header[name])
    if kind == "shape":
        entry["shape"] = draw(st.lists(st.integers(0, 2**62), max_size=3))
    elif kind == "dtype":
        entry["dtype"] = draw(st.sampled_from(DTYPES))
    else:
        entry["data_offsets"] = draw(st.lists(st.integers(0, 2**40), min_size=2, max_size=2))
    return with_header(valid, {**header, name: entry})


#: what an export folder must never be read from (a pickle, a shard index that can point anywhere)
FOREIGN_FILES = ["pytorch_model.bin", "model.safetensors.index.json"]


@st.composite
def json_mutants(draw: Any, value: Any) -> Any:
    """``value`` (parsed JSON) with one entry, at a depth drawn down its containers, replaced by
    any JSON value, nested 100..5,000 lists deep (as a marker replaced in the text: see
    :func:`json_text`), or removed."""
    if not isinstance(value, dict | list) or not value or draw(st.integers(0, 3)) == 0:
        return draw(JSON_VALUES | st.just("@nested@"))
    key = draw(st.sampled_from(sorted(value) if isinstance(value, dict) else range(len(value))))
    copy = dict(value) if isinstance(value, dict) else list(value)
    if draw(st.integers(0, 5)) == 0:
        del copy[key]
    else:
        copy[key] = draw(json_mutants(value[key]))
    return copy


def json_text(value: Any, depth: int) -> bytes:
    return json.dumps(value).replace('"@nested@"', "[" * depth + "]" * depth).encode()


@st.composite
def export_mutants(draw: Any, files: dict[str, bytes]) -> dict[str, bytes]:
    """One mutation of an export folder, given as its files (name → bytes)."""
    kind = draw(st.sampled_from(["infoflow.json", "config.json", "model.safetensors", "removed", "foreign"]))
    out = dict(files)
    if kind == "removed":
        del out[draw(st.sampled_from(sorted(files)))]
    elif kind == "foreign":
        out[draw(st.sampled_from(FOREIGN_FILES))] = draw(st.binary(max_size=64))
    elif kind == "model.safetensors":
        out[kind] = draw(mutants(files[kind]))
    else:
        out[kind] = json_text(draw(json_mutants(json.loads(files[kind]))), draw(st.integers(100, 5_000)))
    return out
