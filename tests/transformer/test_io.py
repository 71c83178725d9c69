"""Model files (infoflow_dsl/io.py): round trips, determinism, atomic writes and every malformed file."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import safetensors
import safetensors.torch
import torch
from handmade_models import random_model, random_token_model, token_model

import infoflow_dsl as ifl
from infoflow_dsl.errors import ModelFileError
from infoflow_dsl.transformer import io as mio
from infoflow_dsl.transformer.card import Trained
from infoflow_dsl.transformer.io import load, model_from_bytes, model_to_bytes, save
from infoflow_dsl.transformer.model import CompiledTransformer

REPO = Path(__file__).resolve().parents[2]


def inputs(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, length, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def header(data: bytes) -> dict:
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n])


def with_header(data: bytes, new_header: dict) -> bytes:
    """``data`` with its header replaced (the data section kept)."""
    (n,) = struct.unpack("<Q", data[:8])
    text = json.dumps(new_header).encode()
    return struct.pack("<Q", len(text)) + text + data[8 + n :]


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("output_shape", [[], [3]])
def test_round_trip_is_bitwise(tmp_path: Path, dtype: torch.dtype, output_shape: list[int]) -> None:
    model = random_model(seed=11, dtype=dtype, output_shape=output_shape)
    path = tmp_path / "m.safetensors"
    save(model, path)
    loaded = load(path)
    assert isinstance(loaded, type(model))
    assert loaded.dtype == dtype
    assert loaded.config == model.config
    assert list(loaded.state_dict()) == list(model.state_dict())
    for name, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t), name
    for length in (1, 4, model.T):
        x = inputs(5, length)
        assert torch.equal(loaded(x), model(x))
    assert loaded.parameter_count() == model.parameter_count()
    assert model_from_bytes(path.read_bytes()).config == model.config


def test_file_layout(tmp_path: Path) -> None:
    model = random_model(seed=12, dtype=torch.float32)
    path = tmp_path / "m.safetensors"
    save(model, str(path))
    with safetensors.safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
        assert set(f.keys()) == set(model.state_dict())
        assert f.get_tensor("blocks.0.attn.W_Q").dtype == torch.float32
    assert metadata["format"] == "infoflow/1"
    assert metadata["infoflow"] == json.dumps(model.config, sort_keys=True, separators=(",", ":"))
    assert list(header(path.read_bytes())["__metadata__"]) == ["format", "infoflow"]
    assert not path.read_bytes().startswith(b"\x80")  # not a pickle
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_saving_twice_gives_identical_bytes(tmp_path: Path) -> None:
    model = random_model(seed=13)
    save(model, tmp_path / "a.safetensors")
    save(model, tmp_path / "b.safetensors")
    save(load(tmp_path / "a.safetensors"), tmp_path / "c.safetensors")
    a = (tmp_path / "a.safetensors").read_bytes()
    assert a == (tmp_path / "b.safetensors").read_bytes() == (tmp_path / "c.safetensors").read_bytes()
    assert a == model_to_bytes(model)


def test_fresh_process_gives_bitwise_identical_outputs_and_bytes(tmp_path: Path) -> None:
    """Load in a new interpreter (another hash seed, nothing cached): same outputs bit for bit, and
    saving the loaded model there gives the same bytes."""
    model = random_model(seed=14, output_shape=[2])
    path = tmp_path / "m.safetensors"
    save(model, path)
    x = inputs(6, 5, seed=3)
    safetensors.torch.save_file({"x": x}, str(tmp_path / "x.safetensors"))
    script = textwrap.dedent("""
        import sys, torch, safetensors.torch
        torch.set_num_threads(1)
        from infoflow_dsl.transformer.io import load, save
        folder = sys.argv[1]
        model = load(folder + "/m.safetensors")
        x = safetensors.torch.load_file(folder + "/x.safetensors")["x"]
        safetensors.torch.save_file({"y": model(x)}, folder + "/y.safetensors")
        save(model, folder + "/again.safetensors")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, env=env, cwd=tmp_path, timeout=120)
    y = safetensors.torch.load_file(str(tmp_path / "y.safetensors"))["y"]
    want = model(x)
    assert y.dtype == want.dtype and y.shape == want.shape
    assert y.numpy().tobytes() == want.numpy().tobytes()
    assert (tmp_path / "again.safetensors").read_bytes() == path.read_bytes()


def test_load_onto_a_device(tmp_path: Path, device: str) -> None:
    model = random_model(seed=15)
    save(model, tmp_path / "m.safetensors")
    loaded = load(tmp_path / "m.safetensors", device=device)
    assert all(t.device.type == device for t in loaded.state_dict().values())
    torch.testing.assert_close(loaded(inputs(2, 3)).cpu(), model(inputs(2, 3)), rtol=0, atol=1e-12)
    save(loaded, tmp_path / "back.safetensors")  # saved from the device: the same bytes
    assert (tmp_path / "back.safetensors").read_bytes() == (tmp_path / "m.safetensors").read_bytes()


# ---------------------------------------------------------------------------- atomic writes


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.safetensors"
    old = random_model(seed=16)
    save(old, path)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(mio.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save(random_model(seed=17), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]


def test_unserialisable_model_writes_nothing(tmp_path: Path) -> None:
    model = random_model(seed=18)
    model.card = dataclasses.replace(model.card, trained=Trained(extra={"bad": object()}))  # an opaque record
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        save(model, tmp_path / "m.safetensors")
    half = random_model(seed=18).to(torch.float16)
    with pytest.raises(ValueError, match="float32 or float64"):
        save(half, tmp_path / "m.safetensors")
    with pytest.raises(TypeError, match="CompiledTransformer"):
        save(torch.nn.Linear(2, 2), tmp_path / "m.safetensors")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- malformed files


def _good() -> bytes:
    return model_to_bytes(random_model(seed=19, dtype=torch.float32))


def _retensor(update: dict[str, torch.Tensor | None], config_update: dict | None = None) -> bytes:
    """A well-formed safetensors file holding the good model's tensors with ``update`` applied."""
    data = _good()
    meta = header(data)["__metadata__"]
    tensors = safetensors.torch.load(data)
    for name, t in update.items():
        if t is None:
            tensors.pop(name)
        else:
            tensors[name] = t
    if config_update is not None:
        config = json.loads(meta["infoflow"])
        config.update(config_update)
        meta = {**meta, "infoflow": json.dumps(config)}
    return safetensors.torch.save(tensors, metadata=meta)


def _remeta(metadata: dict | None) -> bytes:
    data = _good()
    h = header(data)
    if metadata is None:
        h.pop("__metadata__")
    else:
        h["__metadata__"] = metadata
    return with_header(data, h)


def _config(**changes) -> dict:
    config = json.loads(header(_good())["__metadata__"]["infoflow"])
    config.update(changes)
    return {k: v for k, v in config.items() if v is not None}


MALFORMED = {
    "empty": (lambda: b"", "not a safetensors file"),
    "tiny": (lambda: b"abc", "not a safetensors file"),
    "text": (lambda: b"this is a plain text file, not a model at all\n", "not a safetensors file"),
    "json": (lambda: b'{"T": 6, "d": 2}' + b" " * 100, "not a safetensors file"),
    "huge header length": (lambda: struct.pack("<Q", 2**40) + b"{}", "not a safetensors file"),
    "truncated in the header": (lambda: _good()[:50], "truncated"),
    "truncated in the data": (lambda: _good()[:-100], "corrupt or truncated"),
    "trailing bytes": (lambda: _good() + b"\x00" * 8, "corrupt or truncated"),
    "header not json": (lambda: struct.pack("<Q", 8) + b"{{{{{{{{" + b"\x00" * 64, "header is not JSON"),
    "header a list": (lambda: struct.pack("<Q", 8) + b"[1,2,3] ", "not a JSON object"),
    "no metadata": (lambda: _remeta(None), "without infoflow metadata"),
    "foreign metadata": (lambda: _remeta({"format": "pt"}), "without infoflow metadata"),
    "other format": (lambda: _remeta({"format": "infoflow/9", "infoflow": "{}"}), "unsupported format 'infoflow/9'"),
    "config not json": (lambda: _remeta({"format": "infoflow/1", "infoflow": "{T: 6"}), "not valid JSON"),
    "config a list": (lambda: _remeta({"format": "infoflow/1", "infoflow": "[1]"}), "bad config.*JSON object"),
    "config without T": (lambda: _remeta({"format": "infoflow/1", "infoflow": json.dumps(_config(T=None))}),
                         r"bad config: config\['T'\]"),
    "config without layers": (lambda: _remeta({"format": "infoflow/1", "infoflow": json.dumps(_config(layers=None))}),
                              r"bad config: config\['layers'\]"),
    "config bad mask": (lambda: _remeta({"format": "infoflow/1", "infoflow": json.dumps(
        _config(layers=[{"heads": [{"name": "a", "mask": [["key", "~", 1]]}]}]))}), "unknown mask operator"),
    "config with fewer layers": (lambda: _retensor({}, {"layers": [{"heads": []}]}), "unexpected tensor"),
    "config with larger T": (lambda: _retensor({}, {"T": 9}),
                             r"pos_embed.W_pos has shape \[7, 8\], expected \[10, 8\]"),
    "config with other d": (lambda: _retensor({}, {"d": 3}), r"embed.W_E has shape \[3, 8\], expected \[4, 8\]"),
    "config with other D": (lambda: _retensor({}, {"d_model": 9}), r"embed.W_E has shape \[3, 8\], expected \[3, 9\]"),
    "config with vector output": (lambda: _retensor({}, {"output_shape": [2]}), r"unembed.W_U has shape \[8, 1\]"),
    "missing tensor": (lambda: _retensor({"blocks.1.mlp.b_out": None}), "missing tensor.*blocks.1.mlp.b_out"),
    "extra tensor": (lambda: _retensor({"blocks.0.attn.extra": torch.zeros(2)}), "unexpected tensor.*attn.extra"),
    "wrong head count": (lambda: _retensor({"blocks.0.attn.beta": torch.ones(6)}), r"attn.beta has shape \[6\]"),
    "inconsistent width": (lambda: _retensor({"blocks.0.attn.W_K": torch.zeros(7, 8, 4)}), "width E_0 is 3"),
    "wrong rank": (lambda: _retensor({"unembed.b_U": torch.zeros(1, 1)}), "expected rank 1"),
    "int32 tensor": (lambda: _retensor({"embed.cls": torch.zeros(8, dtype=torch.int32)}), "dtype 'I32'"),
    "float16 tensor": (lambda: _retensor({"embed.cls": torch.zeros(8, dtype=torch.float16)}), "dtype 'F16'"),
    "mixed dtypes": (lambda: _retensor({"embed.cls": torch.zeros(8, dtype=torch.float64)}), "mix dtypes"),
    "nan weight": (lambda: _retensor({"embed.cls": torch.full((8,), float("nan"))}), "non-finite"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_files_raise_model_file_error(tmp_path: Path, case: str) -> None:
    make, message = MALFORMED[case]
    path = tmp_path / "bad.safetensors"
    path.write_bytes(make())
    with pytest.raises(ModelFileError, match=message) as info:
        load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    with pytest.raises(ModelFileError, match=message):
        model_from_bytes(path.read_bytes(), name="x")


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="no such file") as info:
        load(tmp_path / "nowhere.safetensors")
    assert str(info.value).startswith(str(tmp_path / "nowhere.safetensors"))
    with pytest.raises(ModelFileError, match="not a regular file"):
        load(tmp_path)  # a folder


def test_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A FIFO blocked the loader forever, /dev/zero ran it out of memory (issue 34, 3 and 11)."""
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(ModelFileError, match="not a regular file"):
            load(path)


def test_a_large_file_of_zeros_is_refused_after_its_header_length(tmp_path: Path) -> None:
    """A header length of 0 in a 64 MB sparse file: refused from its first 8 bytes (the file is
    never read whole; it used to be, 6.5 GB and 28 s for a 6 GB file)."""
    path = tmp_path / "zeros.safetensors"
    with open(path, "wb") as stream:
        stream.truncate(64 * 2**20)  # a hole: no disk, no reading cost but what the loader reads
    with pytest.raises(ModelFileError, match="not a safetensors file"):
        load(path)


def test_a_small_file_claiming_a_huge_tensor_is_refused_before_allocating() -> None:
    """A sparse NAME.shape claiming 1.5e9 entries in a small file allocated 6.1 GB before the
    shape check refused it; a shape whose product overflows int64 ended in exit 1. Now the
    stated shapes are checked first, then the memory they imply (issue 34, point 3)."""
    def claim(width: int, everywhere: bool) -> Callable[[dict[str, torch.Tensor]], None]:
        def change(tensors: dict[str, torch.Tensor]) -> None:
            d_model = int(tensors["blocks.0.attn.W_O.shape"][-1]) if "blocks.0.attn.W_O.shape" in tensors else \
                int(tensors["blocks.0.attn.W_O"].shape[-1])
            shapes = {"blocks.0.mlp.b_in": [width]}
            if everywhere:
                shapes |= {"blocks.0.mlp.W_in": [d_model, width], "blocks.0.mlp.W_out": [width, d_model]}
            dtype = tensors["embed.W_E"].dtype if "embed.W_E" in tensors else tensors["embed.W_E.values"].dtype
            for name, shape in shapes.items():
                tensors.pop(name, None)
                tensors |= {f"{name}.values": torch.zeros(0, dtype=dtype),
                            f"{name}.indices": torch.zeros(0, dtype=torch.int64),
                            f"{name}.shape": torch.tensor(shape, dtype=torch.int64)}
        return change

    for width, everywhere, message in ((1_500_000_000, False, "has shape"), (1_500_000_000, True, "would take"),
                                       (2**62, True, "would take")):
        with pytest.raises(ModelFileError, match=message):
            model_from_bytes(_sparse_file(claim(width, everywhere)))


def test_every_truncation_is_caught(tmp_path: Path) -> None:
    data = _good()
    for cut in sorted({0, 1, 7, 8, 9, 100, len(data) // 2, len(data) - 8, len(data) - 1}):
        with pytest.raises(ModelFileError):
            model_from_bytes(data[:cut])


def test_the_good_file_loads() -> None:
    """The malformed cases are built from this file: it loads."""
    assert model_from_bytes(_good()).dtype == torch.float32
    assert model_from_bytes(_retensor({}, {})).config == json.loads(header(_good())["__metadata__"]["infoflow"])


# ---------------------------------------------------------------------------- the sparse layout


def _compiled(name: str = "min_pairwise") -> CompiledTransformer:
    return ifl.compile(ifl.load_program(REPO / "compiled_examples" / f"{name}.iflow"), eps=1e-2, samples=0)


def test_sparse_layout_is_the_default_and_loads_bitwise_equal_to_the_dense_layout(tmp_path: Path) -> None:
    model = _compiled()
    save(model, tmp_path / "sparse.safetensors")
    save(model, tmp_path / "dense.safetensors", dense=True)
    sparse, dense = load(tmp_path / "sparse.safetensors"), load(tmp_path / "dense.safetensors")
    with safetensors.safe_open(str(tmp_path / "dense.safetensors"), framework="pt") as f:
        assert set(f.keys()) == set(model.state_dict())
    with safetensors.safe_open(str(tmp_path / "sparse.safetensors"), framework="pt") as f:
        stored = set(f.keys())
    assert "blocks.0.mlp.W_out.values" in stored and "blocks.0.mlp.W_out" not in stored
    for name, tensor in model.state_dict().items():
        assert torch.equal(sparse.state_dict()[name], tensor) and torch.equal(dense.state_dict()[name], tensor), name
    x = inputs(9, model.T, seed=4)[..., :1].expand(-1, -1, model.d).contiguous()
    assert sparse(x).numpy().tobytes() == dense(x).numpy().tobytes()
    assert (tmp_path / "sparse.safetensors").stat().st_size < (tmp_path / "dense.safetensors").stat().st_size
    assert model_to_bytes(sparse) == (tmp_path / "sparse.safetensors").read_bytes()  # deterministic


def test_sparse_files_follow_the_nonzero_count() -> None:
    """The data section within 4× of the nonzero weights' values and int32 indices."""
    model = _compiled("intrinsic_3")
    data = model_to_bytes(model)
    (n,) = struct.unpack("<Q", data[:8])
    nonzero = sum(int(torch.count_nonzero(t)) for t in model.state_dict().values())
    assert len(data) - 8 - n <= 4 * nonzero * (model.dtype.itemsize + 4)


def test_the_readme_recipe_rebuilds_every_dense_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    marker = "<!-- recipe: tests/transformer/test_io.py runs this block -->"
    recipe = re.search(re.escape(marker) + r"\n```python\n(.*?)```", readme, re.DOTALL)
    assert recipe is not None
    model = _compiled()
    save(model, tmp_path / "min_pairwise.safetensors")
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(recipe.group(1), scope)
    weights = scope["weights"]
    assert set(weights) == set(model.state_dict())
    for name, tensor in model.state_dict().items():
        assert torch.equal(torch.from_numpy(weights[name]), tensor), name


def _sparse_file(change: Callable[[dict[str, torch.Tensor]], None]) -> bytes:
    data = model_to_bytes(_compiled())
    tensors = safetensors.torch.load(data)
    change(tensors)
    return safetensors.torch.save(tensors, metadata=header(data)["__metadata__"])


SPARSE_FAULTS = {
    "missing indices": (lambda t: t.pop("blocks.0.mlp.W_out.indices"), "lacks blocks.0.mlp.W_out.indices"),
    "both layouts": (lambda t: t.update({"blocks.0.mlp.W_out": torch.zeros(2)}), "both dense and sparse"),
    "index out of range": (lambda t: t["blocks.0.mlp.W_out.indices"].__setitem__(-1, 2**30), "increase strictly"),
    "indices not increasing": (lambda t: t["blocks.0.mlp.W_out.indices"].__setitem__(0, 10**6), "increase strictly"),
    "float indices": (lambda t: t.update({"blocks.0.mlp.W_out.indices": t["blocks.0.mlp.W_out.indices"].float()}),
                      "sparse indices are I32 or I64"),
    "short values": (lambda t: t.update({"blocks.0.mlp.W_out.values": t["blocks.0.mlp.W_out.values"][1:]}),
                     "values and indices must be two vectors of one length"),
    "wrong shape": (lambda t: t["blocks.0.mlp.W_out.shape"].__setitem__(0, 1), "increase strictly|has shape"),
}


@pytest.mark.parametrize("case", list(SPARSE_FAULTS))
def test_malformed_sparse_tensors_raise_model_file_error(case: str) -> None:
    change, message = SPARSE_FAULTS[case]
    with pytest.raises(ModelFileError, match=message):
        model_from_bytes(_sparse_file(change), name="bad.safetensors")


# ---------------------------------------------------------------------------- token models (language v3)


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("token_output", [True, False])
def test_token_model_round_trip_is_bitwise(tmp_path: Path, dense: bool, token_output: bool) -> None:
    model = random_token_model(seed=7, token_output=token_output, values=None if token_output else (1, 2, 3.5, 4),
                               names=("a", "b", "c", "d") if token_output else ("1", "2", "3.5", "4"))
    path = tmp_path / "tokens.safetensors"
    save(model, path, dense=dense)
    loaded = load(path)
    assert loaded.config == model.config and loaded.vocabulary == model.vocabulary
    assert (loaded.token_input, loaded.token_output) == (True, token_output)
    for name, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t), name
    ids = torch.randint(0, 4, (5, 3), generator=torch.Generator().manual_seed(2))
    assert torch.equal(loaded(ids), model(ids))
    assert model_to_bytes(loaded, dense=dense) == path.read_bytes()  # the same bytes again
    assert json.loads(header(path.read_bytes())["__metadata__"]["infoflow"])["vocabulary"] == model.config["vocabulary"]


def test_a_sparse_one_hot_table_round_trips(tmp_path: Path) -> None:
    """The hand-built identity model's W_E is one-hot (over 10% nonzero at V = 3); a wide table of
    one-hot rows is stored sparse and loads back dense and equal."""
    model = token_model("identity")
    config, tensors = dict(model.config), {name: t.clone() for name, t in model.state_dict().items()}
    wide = 40  # d_model 40: the table's 3 × 40 entries hold 3 + 3 nonzero (one-hot, constant)
    config |= {"d_model": wide, "residual_labels": [f"r{i}" for i in range(wide)]}
    for name, tensor in tensors.items():
        padded = torch.zeros(*[wide if n == model.d_model else n for n in tensor.shape], dtype=tensor.dtype)
        padded[tuple(slice(0, n) for n in tensor.shape)] = tensor
        tensors[name] = padded
    tensors["pos_embed.W_pos"][:, wide - 2:] = tensors["pos_embed.W_pos"][:, model.d_model - 2:model.d_model]
    tensors["pos_embed.W_pos"][:, model.d_model - 2:model.d_model] = 0.0
    wide_model = CompiledTransformer(config, tensors, dtype=torch.float64)
    path = tmp_path / "wide.safetensors"
    save(wide_model, path)
    stored = safetensors.torch.load(path.read_bytes())
    assert "embed.W_E.values" in stored and "embed.W_E" not in stored
    loaded = load(path)
    assert torch.equal(loaded.embed.W_E, wide_model.embed.W_E) and not loaded.embed.W_E.is_sparse
    ids = torch.tensor([[0, 1, 2, 2, 1]])
    assert torch.equal(loaded(ids), model(ids))


def test_a_file_with_a_bad_token_config_raises_model_file_error(tmp_path: Path) -> None:
    model = random_token_model(seed=3)
    data = model_to_bytes(model)
    bad = header(data)
    config = json.loads(bad["__metadata__"]["infoflow"])
    config["vocabulary"]["names"] = ["a", "b", "c"]
    bad["__metadata__"]["infoflow"] = json.dumps(config)
    with pytest.raises(ModelFileError, match=r"bad config: a token model's d is its vocabulary's size 3, got d = 4"):
        model_from_bytes(with_header(data, bad), name="bad.safetensors")


def _modes_of_every_output(folder: Path) -> dict[str, int]:
    """Run every command that writes a file (compile, report, analyze --plot/--html, export, train,
    sweep, disguise) into ``folder``; the permission bits of each file and folder written, by path."""
    from cli_runner import run_cli

    source = REPO / "compiled_examples" / "min_pairwise.iflow"
    model_file = REPO / "compiled_examples" / "d_retrieval.safetensors"
    toy = ["--T", "4", "--d-model", "8", "--d-head", "4", "--d-mlp", "8", "--batch", "16", "--validation", "16",
           "--steps", "1"]
    commands = [
        ["compile", str(source), "--eps", "1e-2", "--samples", "0", "-o", str(folder / "m.safetensors")],
        ["report", str(model_file), "-o", str(folder / "page.html")],
        ["analyze", str(source), "--plot", str(folder / "plot.png"), "--html", str(folder / "analysis.html")],
        ["export", str(model_file), "--to", "tl-native", "-o", str(folder / "exported")],
        ["train", str(REPO / "compiled_examples" / "d_retrieval.iflow"), "--heads", "1", *toy,
         "-o", str(folder / "trained.safetensors")],
        ["sweep", str(REPO / "compiled_examples" / "d_retrieval.iflow"), "--heads", "1", *toy, "--workers", "1",
         "-o", str(folder / "sweep")],
        ["disguise", str(model_file), "--rotate", "-o", str(folder / "disguised.safetensors")],
        ["discover", str(model_file), "--method", "eap", "--samples", "8", "--html", str(folder / "found.html")],
        ["circuit", str(model_file), "--edges", "--truth", "--samples", "8", "-o", str(folder / "truth.safetensors")],
    ]
    for argv in commands:
        code, _, err = run_cli(argv)
        assert code == 0, (argv, err)
    return {str(path.relative_to(folder)): path.stat().st_mode & 0o777 for path in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_every_output_file_gets_the_mode_the_umask_gives(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        modes = _modes_of_every_output(tmp_path)
    finally:
        os.umask(previous)
    for expected in ("m.safetensors", "page.html", "plot.png", "analysis.html", "exported",
                     "exported/model.safetensors", "trained.safetensors", "sweep/results.csv", "sweep/summary.md",
                     "disguised.safetensors", "found.html", "truth.safetensors"):
        assert expected in modes, sorted(modes)
    wrong = {path: oct(mode) for path, mode in modes.items()
             if mode != (0o777 if (tmp_path / path).is_dir() else 0o666) & ~umask}
    assert not wrong, f"under umask {oct(umask)}: {wrong}"


@pytest.mark.parametrize(("field", "value"), [
    ("eps", "0.01"), ("eps", -1), ("eps", [1e-3]), ("a_priori_bound", "small"), ("measured_error", [1]),
    ("dtype", "float16"),
    ("ffn", "wider"), ("route", 3), ("trained", "yes"), ("residual_labels", [1, 2]), ("program", {"name": 3}),
    ("disguised", "yes"), ("disguised", {"rotate": True}), ("disguised", {"rotate": 1, "graph": {}}),
    ("circuit_truth", []), ("circuit_truth", {"graph": {}, "ablations": {}}),
    ("program", {"name": "p.iflow", "source": "x", "margin": "0.1"}),
    # found by the hostile bench (report, check: KeyError / TypeError): a measurement without its counts
    ("measured_error", {"max_error": 0.1}), ("measured_error", {"max_error": 0.1, "samples": 10, "corners": 256,
                                                                "seed": -1, "excluded_by_margin": 0}),
    ("measured_error", {"max_error": 0.1, "samples": 10, "corners": 0, "seed": 0, "excluded_by_margin": 0,
                        "exhaustive": 3}),
])
def test_a_config_field_of_the_wrong_kind_is_a_model_file_error_naming_it(field: str, value: object) -> None:
    """These fields went unchecked until a tool read them: exit 1 (issue 34, points 7 and 9). The
    message names the field, down to the entry at fault (``config['program']['name']``)."""
    with pytest.raises(ModelFileError, match=rf"config\['{field}'\](\[[^]]*\])* (must be|lacks)"):
        model_from_bytes(_retensor({}, {field: value}))


@pytest.mark.parametrize("field", ["eps", "a_priori_bound"])
def test_a_null_eps_or_bound_belongs_to_a_trained_model_only(field: str) -> None:
    """Found by the hostile bench: ``"eps": null`` in a compiled model's config crashed check and
    report (float(None)); null marks a trained model, which says so."""
    with pytest.raises(ModelFileError, match=rf"config\['{field}'\] is null, which only a trained model's may be"):
        model_from_bytes(_retensor({}, {field: None}))
    assert model_from_bytes(_retensor({}, {field: None, "trained": {"steps": 1}})).config[field] is None


def test_a_config_nested_deeply_or_with_t_above_the_limit_is_a_model_file_error() -> None:
    with pytest.raises(ModelFileError, match="T up to 1,000,000"):
        model_from_bytes(_retensor({}, {"T": 1_000_001}))
    nested = json.loads("[" * 600 + "]" * 600)  # a config field nested 600 deep (RecursionError, exit 1, before)
    with pytest.raises(ModelFileError, match="nests too deeply"):
        model_from_bytes(_retensor({}, {"trained": {"extra": nested}}))  # an open record keeps any JSON
    with pytest.raises(ModelFileError):  # the config's JSON text itself nested 100,000 deep
        model_from_bytes(_deep_header(100_000))


def _deep_header(depth: int) -> bytes:
    """The good file with a metadata config of ``depth`` nested lists (JSON text, never parsed here)."""
    data = _good()
    meta = header(data)["__metadata__"]
    return with_header(data, {**header(data), "__metadata__": {**meta, "infoflow": "[" * depth + "]" * depth}})


#: mutants per valid file in CI (bench/bench_hostile_files.py runs thousands, with memory and time)
FUZZ_EXAMPLES = 150


@pytest.mark.parametrize("valid", ["random", "compiled", "token"])
def test_fuzz_a_mutated_model_file_loads_and_runs_or_is_a_model_file_error(valid: str) -> None:
    """Issue 34's fuzz: hypothesis mutates valid files (a config value, a tensor's shape, dtype
    or offsets, a byte, a cut, deep nesting); every outcome is a model that runs on an input of
    its length, or ModelFileError, never another exception."""
    from hostile_files import mutants
    from hypothesis import HealthCheck, given, settings

    data = {"random": _good, "compiled": lambda: model_to_bytes(_compiled()),
            "token": lambda: model_to_bytes(token_model("identity"))}[valid]()

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutant=mutants(data))
    def outcome(mutant: bytes) -> None:
        try:
            model = model_from_bytes(mutant)
        except ModelFileError:
            return
        ids = torch.zeros(1, model.T, dtype=torch.long)
        model(ids if model.token_input else ids.to(model.dtype)[..., None].expand(1, model.T, model.d))

    outcome()
