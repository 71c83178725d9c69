"""Where comparisons live (infoflow_dsl/verify/sites.py): every listed value, read from a
TransformerLens cache, against the reference evaluator, on both routes (efficient and gather);
activation patching against numpy."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from functools import lru_cache

import numpy as np
import pytest
import torch
from cli_runner import run_cli
from compiled import CANONICAL_EFFICIENT, EXTRA_COMPILED, PER_TOKEN_COMPILED, model, program
from handmade_models import random_model
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.errors import StoredProgramError
from infoflow_dsl.language.typed import Box
from infoflow_dsl.oracle.evaluate import retrieval_margin
from infoflow_dsl.pipeline.reading import program_of, relower
from infoflow_dsl.verify.sites import ffn_reference, node_reference, tree_reference

SAMPLES = 1000
TABLE = [  # 12 programs of the test table, and per-token ones with every kind of node
    *EXTRA_COMPILED[:12], "tok_global_max", "tok_centered", "tok_nearest_earlier", "tok_global_top2",
    "tok_argmax_prefix", "tok_prefix_mean_times_own"]
assert set(TABLE) <= set(EXTRA_COMPILED + PER_TOKEN_COMPILED)


def _check_sites(compiled: ifl.CompiledTransformer, target: ifl.Program, seed: int, samples: int = SAMPLES) -> int:
    """Every record's value within its bound at every token where its sub-expression is
    defined (a reduction over an empty range, e.g. max_<t : s < t> at s = T, is not), on
    ``samples`` random inputs (those under the margin excluded: per input, or for a per-token
    target per input and token). A gather-route model's nodes are those of its gathered tree
    (slots and presences), evaluated by the reference. Returns the records checked."""
    x = ifl.sample_inputs(target, samples, seed=seed)
    kept = torch.ones(samples, dtype=torch.bool)
    if target.margin is not None:
        kept = retrieval_margin(target, x) >= target.margin
    assert int(kept.sum()) >= kept.numel() // 2
    gathered = compiled.config.get("route") == "gather"
    reference = tree_reference(relower(compiled).tree, x) if gathered else node_reference(target, x)
    sites = ifl.circuit(compiled)
    hooks = {s.hook for s in sites} | {s.argument.hook for s in sites if s.argument is not None}
    with torch.no_grad():
        _, cache = ifl.hooked(compiled).run_with_cache(x.to(compiled.dtype), names_filter=lambda name: name in hooks)
    for site in sites:
        if site.kind == "comparison":
            node, _, component = site.name.partition("[")
            want = reference[node]
            if component:
                want = want[..., int(component[:-1]) - 1]
        else:
            want = ffn_reference(site, cache)
        got = site.read(cache)
        if site.site == "token" and want.dim() == 1:  # a node without context, computed at every token
            want = want[:, None].expand_as(got)
        assert got.shape == want.shape
        covered = kept if site.site == "token" or kept.dim() == 1 else kept.all(-1)  # (B, T) per token, or (B,)
        defined = torch.isfinite(want) & covered.reshape(*covered.shape, *[1] * (want.dim() - covered.dim()))
        error = (got - want)[defined].abs().max()
        assert error <= site.bound, f"{site.name} ({site.computes}): {float(error):.3g} > bound {site.bound:.3g}"
    return len(sites)


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_example_values_in_the_cache_match_the_reference(name):
    compiled = ifl.load(EXAMPLES_DIR / f"{name}.safetensors")
    count = _check_sites(compiled, program_of(compiled), seed=11)
    nodes = sum(len(layer["heads"]) for layer in compiled.config["layers"]
                if any(h["kind"] != "position" for h in layer["heads"]))
    assert count >= nodes  # at least one record per comparison head


@pytest.mark.parametrize("name", TABLE)
def test_table_program_values_in_the_cache_match_the_reference(name):
    _check_sites(model(name, 1e-3, "float32"), program(name), seed=12)


@pytest.mark.parametrize("name", ["min_pairwise", "nearest_neighbour", "norms_away_from_zero", "tok_own_square"])
def test_deep_models_values_in_the_cache_match_the_reference(name):
    """--ffn deep: every tent level (function "tent") and every node within its bound."""
    compiled = model(name, 1e-3, "float64", ffn="deep")
    assert any(b["computes"].startswith("tent^") for layer in compiled.config["layers"] for b in layer["mlp"])
    _check_sites(compiled, program(name), seed=13)


def test_min_pairwise_records():
    sites = {s.name: s for s in ifl.circuit(ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors"))}
    c1, c2 = sites["c1"], sites["c2"]
    assert (c1.computes, c1.site, c1.hook, c1.head) == (
        "min_<t2> <x(t1), x(t2)>", "token", "blocks.0.hook_resid_post", ("blocks.0.attn", 0))
    assert (c2.computes, c2.site, c2.hook, c2.head) == ("min_<t1> c1(t1)", "readout", "blocks.1.hook_resid_mid",
                                                         ("blocks.1.attn", 0))
    labels = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors").config["residual_labels"]
    assert [labels[i] for i in c2.index] == ["c2:mean[1]"]
    assert {labels[i] for i in c1.index} == {f"L1:f{k}" for k in (2, 3, 5, 6, 8, 9, 11, 12)}
    ffn = sites["L1:f3"]
    assert (ffn.kind, ffn.function, ffn.computes) == ("ffn", "square", "(+1·x[1] -1·c1:mean[1])^2")
    assert [labels[i] for i in ffn.argument.index] == ["x[1]", "c1:mean[1]"]
    assert sorted(sites) == sorted(["c1", "c2", *(f"L1:f{k}" for k in (2, 3, 5, 6, 8, 9, 11, 12))])
    assert ifl.circuit(ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors"))[0].to_json()["head"] == {
        "hook_z": "blocks.0.attn.hook_z", "index": 0}


def test_node_reference_root_is_the_target():
    """The last node's exact value is the target itself (min_pairwise, kth_largest: the output is c_last)."""
    for name in ("min_pairwise", "kth_largest"):
        target = program(name)
        x = ifl.sample_inputs(target, 64, seed=3)
        values = node_reference(target, x)
        assert torch.equal(values[list(values)[-1]], ifl.evaluate(target, x))


# ---------------------------------------------------------------------------- the gather route

#: (program, T, inputs checked): --allow-inefficient models (triangle_center's 34 layers of width
#: 1,148 at T = 4 are slow to cache: fewer inputs).
GATHERED = [("third_largest", 4, SAMPLES), ("triangle_center", 4, 200)]


@lru_cache(maxsize=2)
def gathered_model(name: str, length: int) -> ifl.CompiledTransformer:
    return ifl.compile(program(name, length), eps=1e-2, dtype="float64", samples=0, allow_inefficient=True)


@pytest.mark.parametrize(("name", "length", "samples"), GATHERED)
def test_gather_route_models_map_every_node_and_ffn_function_and_each_holds_its_value(name, length, samples, tmp_path):
    """``infoflowc circuit`` on a --allow-inefficient model: a record for every comparison head
    (one per component) and every FFN block the config lists, each within its bound."""
    compiled = gathered_model(name, length)
    assert compiled.config["route"] == "gather"
    path = tmp_path / f"{name}.safetensors"
    ifl.save(compiled, path)
    code, out, err = run_cli(["circuit", str(path), "--json"])
    assert (code, err) == (0, "")
    records = json.loads(out)["sites"]
    layers = compiled.config["layers"]
    nodes = {h["name"] for layer in layers for h in layer["heads"] if h["kind"] not in ("position", "presence")}
    blocks = [b["name"] for layer in [{"mlp": compiled.config.get("embedding_mlp", [])}, *layers]
              for b in layer["mlp"]]
    assert {r["name"].partition("[")[0] for r in records if r["kind"] == "comparison"} == nodes
    assert sorted(r["name"] for r in records if r["kind"] == "ffn") == sorted(blocks)
    assert _check_sites(compiled, program(name, length), seed=14, samples=samples) == len(records)


def test_a_model_without_a_program_has_no_map():
    with pytest.raises(StoredProgramError, match="holds no program source"):
        ifl.circuit(random_model())


# ---------------------------------------------------------------------------- activation patching

# (program, the first node's query-key function f(x_query, x_key) in numpy, which keys a query t
# may see, how the output combines c1, |φ|₁ and the key features' range over the domain of radius r).
PATCHING = {
    "min_pairwise": (lambda a, b: (a * b).sum(-1), lambda t, s: True, np.min, lambda d, r: (d * r, 2 * r)),
    "pairwise_distinct": (lambda a, b: (a * b).sum(-1), lambda t, s: t != s, np.min, lambda d, r: (d * r, 2 * r)),
    "ordered_pairs": (lambda a, b: (a[..., 0] - b[..., 0]) ** 2, lambda t, s: s > t, np.max,
                      lambda d, r: (2 * r + 1, max(2 * r, r * r))),
}
MARGIN = 1e-3  # inputs whose c1 retrieval (on the second input) has its best key ahead by this much


def _radius(target: ifl.Program) -> float:
    domain = target.domain
    return max(abs(domain.low), abs(domain.high)) if isinstance(domain, Box) else domain.radius


@pytest.mark.parametrize("name", list(PATCHING))
def test_patching_c1_hook_z_from_a_second_input_moves_the_output_as_predicted(name):
    """Replace head c1's hook_z by its value on x2: every token t then holds the key features
    of x2(s*), s* the best key for t in x2, so c1 reads f(x1(t), x2(s*)) and the output is the
    program's combination of those. Bound: the a-priori bound (the products, the readout head
    and rounding are the same computations on the same ranges; c1's own Gibbs term only
    shrinks) plus |φ|₁ · (N − 1) e^(−β δ) · range(ψ), the retrieval error under a margin δ."""
    f, allowed, combine, sizes = PATCHING[name]
    compiled = model(name, 1e-3, "float32") if name != "min_pairwise" else ifl.load(
        EXAMPLES_DIR / "min_pairwise.safetensors")
    target = program_of(compiled)
    c1 = next(s for s in ifl.circuit(compiled) if s.name == "c1")
    layer_prefix, head = c1.head
    x1 = ifl.sample_inputs(target, 400, seed=21).numpy()
    x2 = ifl.sample_inputs(target, 400, seed=22).numpy()
    length = target.length
    keys = np.array([[allowed(t, s) for s in range(length)] for t in range(length)])  # (T, T)
    scores = np.where(keys, f(x2[:, :, None], x2[:, None, :]), np.nan)  # (B, t, s) on x2
    best = combine is np.max
    has_keys, several = keys.any(-1), keys.sum(-1) > 1  # (T,)
    signed = np.where(keys, scores if best else -scores, -np.inf)  # (B, t, s): the best key is the largest
    top = -np.sort(-signed, axis=-1)[..., :2]  # (B, t, 2)
    gap = np.where(several, top[..., 0] - np.where(several, top[..., 1], 0.0), np.inf)  # (B, t)
    margin_ok = np.all(gap >= MARGIN, axis=-1)
    star = (np.nanargmax if best else np.nanargmin)(np.where(has_keys[None, :, None], scores, 0.0), axis=-1)
    retrieved = np.take_along_axis(x2, star[..., None], axis=1)  # (B, T, d): x2(s*(t))
    c1_patched = f(x1, retrieved)  # (B, T)
    predicted = combine(c1_patched[:, has_keys], axis=-1)  # the output combines c1 over the tokens with keys

    wrapped = ifl.hooked(compiled)
    name_z = f"{layer_prefix}.hook_z"
    t1, t2 = (torch.from_numpy(x).to(compiled.dtype) for x in (x1, x2))
    with torch.no_grad():
        _, cache2 = wrapped.run_with_cache(t2, names_filter=name_z)

        def patch(z: torch.Tensor, hook: object) -> torch.Tensor:
            z = z.clone()
            z[:, :, head] = cache2[name_z][:, :, head]  # (B, T'+1, H, V)
            return z

        patched = wrapped.run_with_hooks(t1, fwd_hooks=[(name_z, patch)]).double().numpy()
        original = compiled(t1).double().numpy()
    beta = compiled.config["layers"][int(layer_prefix.split(".")[1])]["heads"][head]["beta"]
    sensitivity, spread = sizes(target.dimension, _radius(target))
    bound = compiled.config["a_priori_bound"] + sensitivity * (length - 1) * math.exp(-beta * MARGIN) * spread
    assert margin_ok.sum() >= 200
    error = np.abs(patched - predicted)[margin_ok]
    moved = np.abs(original - predicted)[margin_ok]
    print(f"{name}: {int(margin_ok.sum())} inputs, patched vs predicted {error.max():.3g} <= bound {bound:.3g}; "
          f"moved > 4·bound on {np.mean(moved > 4 * bound):.0%}")
    assert error.max() <= bound, f"{error.max():.3g} > {bound:.3g}"
    assert np.mean(moved > 4 * bound) > 0.5  # the patch moves the output well beyond the bound


# ---------------------------------------------------------------------------- infoflowc circuit


def test_cli_circuit_json_is_the_records_and_text_names_them():
    path = EXAMPLES_DIR / "min_pairwise.safetensors"
    code, out, err = run_cli(["circuit", str(path), "--json"])
    assert (code, err) == (0, "")
    assert json.loads(out) == {"model": str(path), "sites": [s.to_json() for s in ifl.circuit(ifl.load(path))]}
    code, out, err = run_cli(["circuit", str(path)])
    assert (code, err) == (0, "")
    assert "c1         token   blocks.0.hook_resid_post" in out and "head blocks.0.attn.hook_z[:, :, 0]" in out


def test_cli_circuit_refuses_a_bad_file_and_a_model_without_program(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a model")
    code, out, err = run_cli(["circuit", str(bad)])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    handmade = tmp_path / "handmade.safetensors"
    ifl.save(random_model(), handmade)
    code, out, err = run_cli(["circuit", str(handmade)])
    assert (code, out) == (2, "") and err.strip() == f"{handmade}: the file holds no program source"


def test_a_stored_program_that_is_not_the_weights_program_is_refused(tmp_path) -> None:
    """The program text changed from min to max after compiling: circuit used to print a max node,
    exit 0, though the weights compute min (issue 34, point 6)."""
    from cli_runner import run_cli
    from programs import EXAMPLES_DIR

    from infoflow_dsl.errors import StoredProgramError

    model = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors")
    assert ifl.circuit(model)  # the file as compiled: its circuit
    model.card = dataclasses.replace(model.card, program=dataclasses.replace(
        model.card.program, source=model.card.program.source.replace("min_<", "max_<")))
    with pytest.raises(StoredProgramError, match="the weights do not compute the program stored in the file"):
        ifl.circuit(model)
    path = tmp_path / "swapped.safetensors"
    ifl.save(model, path)
    code, out, err = run_cli(["circuit", str(path)])
    assert (code, out) == (2, "") and "do not compute the program" in err


DESCRIBED = "the config's 'layers' does not describe the program's circuit"


@pytest.mark.parametrize(("change", "fault"), [
    (lambda config: config["layers"][0].update(mlp=[["not", "a", "block"]]),
     "config['layers'][0]['mlp'][0] must be an object"),
    (lambda config: config["layers"][1]["heads"][0].update(computes="max_<t1> c1(t1)"), DESCRIBED),
    (lambda config: config.update(embedding_mlp=[{"name": 3}]), "config['embedding_mlp'][0]['name'] must be a string"),
    (lambda config: config.update(a_priori_bouSd=config.pop("a_priori_bound")), "unknown field 'a_priori_bouSd'"),
])
def test_a_config_whose_circuit_description_was_changed_is_refused(tmp_path, change, fault) -> None:
    """Found by the hostile-file bench: a config whose layer descriptions were changed (weights
    untouched) crashed ``report`` (exit 1) reading them. A description of the wrong kind is
    refused when the file is read (its card: a ModelFileError naming the field); one of the
    right kind is checked against the relowered circuit with the weights."""
    from cli_runner import run_cli
    from hostile_files import header_of, with_header
    from programs import EXAMPLES_DIR

    from infoflow_dsl.errors import ModelFileError, StoredProgramError
    from infoflow_dsl.transformer.io import model_to_bytes

    data = model_to_bytes(ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors"))
    header = header_of(data)
    config = json.loads(header["__metadata__"]["infoflow"])
    change(config)
    header["__metadata__"]["infoflow"] = json.dumps(config)
    path, page = tmp_path / "changed.safetensors", tmp_path / "changed.html"
    path.write_bytes(with_header(data, header))
    if fault == DESCRIBED:
        with pytest.raises(StoredProgramError, match=re.escape(fault)):
            ifl.circuit(ifl.load(path))
    else:
        with pytest.raises(ModelFileError, match=re.escape(fault)):
            ifl.load(path)
    code, out, err = run_cli(["report", str(path), "-o", str(page)])
    assert (code, out) == (2, "") and fault in err and not page.exists()
