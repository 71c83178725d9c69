"""``ifl.export`` to a Hugging Face GPT-2 directory, read back with ``AutoModelForCausalLM``.

Every shipped example and table programs of every route: in float64 the export computes
``model(x)`` within 1e-12 and is within ε of the reference on 500 random inputs and 256
corners (``bench/bench_export.py`` runs 2,000); the same after a ``save_pretrained`` round
trip; in float32 within the model's own rounding (its distance from the float64 model, times a
small slack).
"""

from __future__ import annotations

import json

import pytest
import torch
from exported import SHIPPED, export_and_load, export_check_inputs, largest_error, largest_gap, shipped, table_model
from transformers import AutoModelForCausalLM

import infoflow_dsl as ifl
from infoflow_dsl.exporters.directory import ExportError
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.transformer import sparse
from infoflow_dsl.transformer.model import CompiledTransformer

EXACT = 1e-12
#: float32: |export − model64| at most this many times |model32 − model64| (bench_export: 0.9 to 7.6)
FLOAT32_SLACK = 8.0

#: (program, route): ten table programs beyond the shipped ones, a deep-route and a gather-route model among them
TABLE = [("max_norm", "wide"), ("mean_token", "wide"), ("pairwise_distinct", "wide"), ("ordered_pairs", "wide"),
         ("causal_sum", "wide"), ("window", "wide"), ("second_largest", "wide"), ("argmax_token", "wide"),
         ("tok_next_token", "wide"), ("tok_prefix_min", "wide"), ("tok_window_max", "wide"),
         ("min_pairwise", "deep"), ("third_largest", "gather")]


def assert_exact_and_within_eps(model: CompiledTransformer, tmp_path, name: str | None = None) -> None:
    exported = export_and_load(model, tmp_path / "out")
    x = export_check_inputs(model, name)  # the random inputs, then corners
    with torch.no_grad():
        y, expected = exported(x), model(x)
    assert y.dtype == torch.float64
    assert largest_gap(y, expected) <= EXACT
    assert largest_error(exported, model, x) <= model.config["eps"]
    # save_pretrained round trip: the same tensors, the same outputs
    exported.hf.save_pretrained(tmp_path / "again")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "again", attn_implementation="eager")
    assert again.state_dict().keys() == exported.hf.state_dict().keys()
    assert all(torch.equal(again.state_dict()[k], t) for k, t in exported.hf.state_dict().items())
    arguments = ifl.export_inputs(tmp_path / "out", x[:32])  # random inputs (the corners come last)
    with torch.no_grad():
        assert torch.equal(ifl.export_outputs(tmp_path / "out", again(**arguments)), y[:32])


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_example_exports_exactly_and_within_eps(name, tmp_path) -> None:
    assert_exact_and_within_eps(shipped(name), tmp_path, name)


@pytest.mark.parametrize(("name", "route"), TABLE)
def test_table_programs_of_every_route_export_exactly_and_within_eps(name, route, tmp_path) -> None:
    model = table_model(name, route)
    assert model.config.get("ffn", "wide") == ("deep" if route == "deep" else model.config.get("ffn", "wide"))
    assert (model.config.get("route") == "gather") == (route == "gather")
    assert_exact_and_within_eps(model, tmp_path)


@pytest.mark.parametrize("name", ["min_pairwise", "induction", "nearest_neighbour", "intrinsic_3"])
def test_a_float32_export_is_within_the_models_own_rounding(name, tmp_path) -> None:
    model32, model64 = shipped(name, torch.float32), shipped(name)
    exported = export_and_load(model32, tmp_path / "out")
    x = model_inputs(program_of(model64), 300, seed=7)
    with torch.no_grad():
        y, y32, y64 = (exported(x).double(), model32(x.float()).double(), model64(x))
    assert exported.dtype == torch.float32
    assert largest_gap(y, y64) <= FLOAT32_SLACK * largest_gap(y32, y64)
    assert largest_error(exported, model32, x) <= model32.config["eps"]


def test_the_default_loader_needs_no_remote_code_and_its_attention_gives_the_same(tmp_path) -> None:
    """``AutoModelForCausalLM.from_pretrained(DIR)`` as is (sdpa attention) against eager."""
    model = shipped("induction")
    ifl.export(model, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model_type"] == "gpt2" and "auto_map" not in config
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert type(plain).__name__ == "GPT2LMHeadModel" and plain.dtype == torch.float64
    x = model_inputs(program_of(model), 100, seed=2)
    with torch.no_grad():
        y = ifl.export_outputs(tmp_path / "out", plain(**ifl.export_inputs(tmp_path / "out", x)))
        assert largest_gap(y, model(x)) <= EXACT
        # the inputs from the compiled model itself are the directory's
        from_model = ifl.export_inputs(model, x)
        assert torch.equal(from_model["inputs_embeds"], ifl.export_inputs(tmp_path / "out", x)["inputs_embeds"])


def test_the_layernorms_are_exact_and_every_residual_vector_sums_to_zero(tmp_path) -> None:
    model = shipped("nearest_neighbour")  # an embedding ReLU block, masks, a readout of K = 4
    exported = export_and_load(model, tmp_path / "out")
    info = json.loads((tmp_path / "out" / "infoflow.json").read_text())
    assert info["layernorm"] == {"mode": "exact", "eps": 2.0**80, "gain": 2.0**40, "constant": 1.0}
    assert info["layout"]["embedding_layer"] == 0 and exported.hf.config.n_layer == len(model.blocks) + 1
    x = model_inputs(program_of(model), 50, seed=1)
    with torch.no_grad():
        hidden = exported.hf(**ifl.export_inputs(tmp_path / "out", x), output_hidden_states=True).hidden_states
    for h in hidden[:-1]:
        assert float(h.sum(-1).abs().max()) <= 1e-12 * float(h.abs().max())
        assert float(torch.nn.functional.layer_norm(h, h.shape[-1:], eps=2.0**80).mul(2.0**40).sub(h).abs().max()) \
            <= 1e-12 * float(h.abs().max())
    assert float(hidden[0][:, 0].abs().max()) == 0.0 and float(hidden[-2][:, 0].abs().max()) == 0.0  # the sink


def test_a_query_with_no_allowed_key_reads_the_sink_and_gets_exactly_nothing(tmp_path) -> None:
    """induction's previous-token head: token 1 has no key t − 1, so it attends the sink alone."""
    model = shipped("induction")
    exported = export_and_load(model, tmp_path / "out")
    slot = next(h for h in json.loads((tmp_path / "out" / "infoflow.json").read_text())["heads"] if h["name"] == "p1")
    x = model_inputs(program_of(model), 20, seed=4, corners=0)
    with torch.no_grad():
        out = exported.hf(**ifl.export_inputs(tmp_path / "out", x), output_attentions=True)
    pattern = out.attentions[slot["layer"]][:, slot["slot"]]  # (B, N, N)
    assert torch.equal(pattern[:, 1, 0], torch.ones(20, dtype=torch.float64))  # token 1: all on the sink
    assert float(pattern[:, 2:, 0].abs().max()) == 0.0 and float(pattern[:, :, -1].abs().max()) == 0.0


def test_a_sparse_held_model_exports_by_its_nonzero_entries_alone(tmp_path, monkeypatch) -> None:
    dense = shipped("intrinsic_3")
    monkeypatch.setattr(sparse, "SPARSE_HOLD_SIZE", 1 << 10)
    monkeypatch.setattr(sparse, "SPARSE_DENSITY", 0.2)  # W_in is 11% dense, W_out 2%
    held = CompiledTransformer(dense.config, dense.state_dict(), dtype=torch.float64)
    assert held.blocks[0].mlp.W_in.is_sparse and held.blocks[0].mlp.W_out.is_sparse
    to_dense = torch.Tensor.to_dense

    def refuse(tensor: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        assert not (tensor.is_sparse and tensor.numel() >= 1 << 10), "a held-sparse matrix was densified"
        return to_dense(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to_dense", refuse)
    ifl.export(held, tmp_path / "held")
    monkeypatch.undo()
    ifl.export(dense, tmp_path / "dense")
    from safetensors.torch import load_file

    a, b = load_file(tmp_path / "held" / "model.safetensors"), load_file(tmp_path / "dense" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_an_existing_non_empty_directory_is_kept_unless_forced(tmp_path) -> None:
    model = shipped("running_max")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    with pytest.raises(ExportError, match="not empty"):
        ifl.export(model, tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["mine.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left behind
    ifl.export(model, tmp_path / "out", force=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["config.json", "infoflow.json",
                                                                     "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(ExportError, match="unknown export target"):
        ifl.export(model, tmp_path / "other", to="hf-bert")
    assert not (tmp_path / "other").exists()


def test_an_export_is_read_from_its_safetensors_alone_never_a_pickle_or_a_shard_index(tmp_path) -> None:
    """``from_pretrained`` would take a ``pytorch_model.bin`` (a pickle) in place of a missing
    ``model.safetensors``, and a ``model.safetensors.index.json`` may name shards outside the folder."""
    from cli_runner import run_cli

    model = shipped("min_pairwise")
    ifl.export(model, tmp_path / "out")
    weights = tmp_path / "out" / "model.safetensors"
    state = dict(ifl.load_exported(tmp_path / "out").hf.state_dict())
    torch.save(state, tmp_path / "out" / "pytorch_model.bin")
    with pytest.raises(ExportError, match=r"holds pytorch_model\.bin beside model\.safetensors"):
        ifl.load_exported(tmp_path / "out")
    saved = weights.read_bytes()
    weights.unlink()
    with pytest.raises(ExportError, match=r"no model\.safetensors"):
        ifl.load_exported(tmp_path / "out")
    code, _, err = run_cli(["check", str(tmp_path / "out")])
    assert code == 2 and "no model.safetensors" in err
    (tmp_path / "out" / "pytorch_model.bin").unlink()
    weights.write_bytes(saved)
    (tmp_path / "out" / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"transformer.wte.weight": "../elsewhere.safetensors"}}))
    with pytest.raises(ExportError, match=r"model\.safetensors\.index\.json"):
        ifl.load_exported(tmp_path / "out")


@pytest.mark.parametrize(("change", "fault"), [
    (lambda info: info["embedding"].update(W_x=[row[:5] for row in info["embedding"]["W_x"]]),
     r"embedding W_x has shape \[5, 5\], expected \[5, 64\]"),
    (lambda info: info["embedding"].update(cls=info["embedding"]["cls"][:3]), r"embedding cls has shape \[3\]"),
    (lambda info: info.update(trained=[1, 2]), r"trained.*an object"),
    (lambda info: info["layout"].update(width=32), r"embedding W_x has shape \[5, 64\], expected \[5, 32\]"),
    (lambda info: info["input"].update(min_length="one"), r"its files do not make one model \(TypeError"),
])
def test_export_files_that_do_not_fit_together_are_refused_when_read(tmp_path, change, fault) -> None:
    """Found by the fuzz below: an embedding whose shape is not the model's (the forward's
    RuntimeError), a ``trained`` that is not an object (check's AttributeError), ... each an
    ExportError when the folder is read, naming the fault."""
    ifl.export(shipped("min_pairwise", torch.float32), tmp_path / "out")
    path = tmp_path / "out" / "infoflow.json"
    info = json.loads(path.read_text())
    change(info)
    path.write_text(json.dumps(info))
    with pytest.raises(ExportError, match=fault):
        ifl.load_exported(tmp_path / "out")


def test_an_export_whose_weights_give_nan_is_checked_above_eps(tmp_path) -> None:
    from cli_runner import run_cli
    from safetensors.torch import load_file, save_file

    ifl.export(shipped("min_pairwise"), tmp_path / "out")
    weights = tmp_path / "out" / "model.safetensors"
    tensors = load_file(weights)
    name = next(n for n in tensors if n.endswith("mlp.c_proj.weight"))
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, weights, metadata={"format": "pt"})
    code, out, _ = run_cli(["check", str(tmp_path / "out"), "--samples", "50"])
    assert code == 3 and "ABOVE ε" in out


#: mutated export folders in CI (each loaded through transformers: about 0.5 s a load);
#: bench/bench_hostile_files.py runs hundreds
EXPORT_FUZZ_EXAMPLES = 40


def test_fuzz_a_mutated_export_folder_loads_and_runs_or_is_an_export_error(tmp_path) -> None:
    """Issue 34's fuzz, on export folders: hypothesis mutates infoflow.json and config.json (any
    value at any depth replaced, removed or nested deeply), the weights file (as a model file),
    removes a file or adds a pickle; ``load_exported`` gives a model that runs on an input of its
    length, or ExportError, never another exception, and every fifth goes through ``check``
    (exit 0, 2 or 3)."""
    from cli_runner import run_cli
    from hostile_files import export_mutants
    from hypothesis import HealthCheck, given, settings

    valid = tmp_path / "valid"
    ifl.export(shipped("min_pairwise", torch.float32), valid)
    files = {path.name: path.read_bytes() for path in valid.iterdir()}
    seen = [0]

    @settings(max_examples=EXPORT_FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutant=export_mutants(files))
    def outcome(mutant: dict[str, bytes]) -> None:
        seen[0] += 1
        folder = tmp_path / f"mutant{seen[0]}"
        folder.mkdir()
        for name, data in mutant.items():
            (folder / name).write_bytes(data)
        try:
            model = ifl.load_exported(folder)
        except ExportError:
            return
        model(torch.zeros(1, model.T, model.d))
        if seen[0] % 5 == 0:
            assert run_cli(["check", str(folder), "--samples", "10"])[0] in (0, 2, 3)

    outcome()
