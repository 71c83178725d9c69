"""The feature dictionary (``ifl.features``) against the weights and against the plain model:
projecting the superposed model's residual on the dictionary gives back the plain circuit's
intermediate values at every hook where a feature is alive."""

from __future__ import annotations

import itertools
import json
from functools import lru_cache
from pathlib import Path

import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition.dictionary import features, read_value
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

TOKENS = ", ".join(f'"{chr(97 + i)}"' for i in range(8))
REVERSE = f"input x : token {{{TOKENS}}}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n"
HIST = f"input x : token {{{TOKENS}}}\nlength T = 4\ntarget(t) = sum_<s> [x(s) == x(t)]\n"


@lru_cache(maxsize=4)
def _models(source: str, residual: int) -> tuple[CompiledTransformer, CompiledTransformer]:
    program = ifl.parse_program(source, "p.iflow")
    plain = ifl.compile(program, samples=0, dtype="float64")
    return plain, ifl.compile(program, samples=0, dtype="float64", residual=residual)


def _streams(model: CompiledTransformer, x: torch.Tensor) -> dict[str, torch.Tensor]:
    seen: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        model.run(x, lambda name, t: seen.setdefault(name, t))
    return seen


def _inputs(tokens: int = 8) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(tokens), repeat=4)), dtype=torch.int64)


def _recovered(source: str, residual: int, tokens: int = 8) -> tuple[int, int]:
    """(features × hooks checked, categorical reads by threshold among them); asserts each."""
    plain, superposed = _models(source, residual)
    x = _inputs(tokens)
    truth, held = _streams(plain, x), _streams(superposed, x)
    index = {label: i for i, label in enumerate(plain.config["residual_labels"])}
    checked = thresholds = 0
    per_token = plain.config.get("output") == "token"
    record = superposed.config["superposition"]
    lifted = {source for _, source, _, raised in record.get("queries", []) if raised}
    for feature in features(superposed):
        for hook, entry in feature["hooks"].items():
            # a spanned column's identity holds at the token rows (a per-token model never reads its readout row),
            # and so do a packed number's values there (a per-token head's output at the readout row is no value
            # of the program, its query there may be 0, and the tables are built on the program's values)
            # a moved query's host whose readout row was raised (compiler/superposition/queries.py) holds no program
            # value there
            tokens = entry["read"] == "combination" or ("pack" in feature and per_token) or feature["name"] in lifted
            rows = slice(None, -1) if tokens else slice(None)
            # a coordinate holding a sum of numbers only the unembedding reads: that sum of the plain values
            want = sum(weight * truth[hook][:, rows, index[name]]
                       for name, weight in feature.get("sum", [[feature["name"], 1.0]]))
            got = read_value(entry, held[hook][:, rows], feature.get("margin"))
            if entry["read"] == "threshold":
                thresholds += 1
                assert torch.equal(got, want.round()), (feature["name"], hook)
                assert float((want - want.round()).abs().max()) < 1e-6
            else:
                assert float((got - want).abs().max()) < 1e-9, (feature["name"], hook)
            checked += 1
    return checked, thresholds


def test_the_residual_projected_on_the_dictionary_gives_the_plain_circuits_values() -> None:
    plain, _ = _models(REVERSE, 17)
    checked, thresholds = _recovered(REVERSE, 17)
    assert thresholds > 0 and checked > len(plain.config["residual_labels"])


def test_packed_numbers_are_read_back_from_their_shared_direction() -> None:
    """Tracr's count_a at T = 5 with its mean, 1/count and the token indicator packed in one
    direction (compile --residual 2): where they share it they are read by ``table`` (decoded
    from v by the grid), where one is alone by its coordinate over its scale, and every value is
    the plain circuit's on every input up to length 4."""
    source = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = sum_<s> [x(s) == "a"]\n'
    _, packed = _models(source, 2)
    assert "packed" in packed.config["superposition"]
    found = features(packed)
    reads = {entry["read"] for f in found if "pack" in f for entry in f["hooks"].values()}
    assert reads == {"exact", "table"}
    assert _recovered(source, 2, tokens=3)[0] > len(found)


def test_a_packed_number_holding_a_sum_is_read_back_as_that_sum() -> None:
    """x(t)·max at D = 1: the product is folded onto the max, which packs with x. The max's
    record says its coordinate holds max + product/3 (``sum``); read by ``table`` where x shares
    the direction (the product not yet written: the sum is the max) and by its scale after, it is
    the plain circuit's sum at every hook of every input up to length 4."""
    source = "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = max_<s> x(s) * x(t)\n"
    _, model = _models(source, 1)
    found = {f["name"]: f for f in features(model)}
    held = found["h1:retrieval[1]"]
    assert held["pack"] and [name for name, _ in held["sum"]] == ["h1:retrieval[1]", "product1"]
    assert {e["read"] for e in held["hooks"].values()} == {"exact", "table"}
    assert _recovered(source, 1, tokens=3)[0] >= 3


def test_a_token_indicator_hosting_a_readout_number_is_read_back_as_their_sum() -> None:
    """x(argmax_<s> rank(x(s))) at D = 4: each fetched indicator is written onto one of the
    token's own indicators (0 at the readout row); the host's record holds their sum, and reading
    it gives the plain circuit's sum at every hook, at every row, of every input up to length 4."""
    source = ('input x : token {"a", "b", "c"}\nlength T = 4\ntable rank = {"a": 1, "b": 3, "c": 2}\n'
              "target x(argmax_<s> rank(x(s)))\n")
    _, model = _models(source, 4)
    found = {f["name"]: f for f in features(model)}
    assert [found[f"x={t}"]["sum"][0][0] for t in "abc"] == ["x=a", "x=b", "x=c"]
    assert all(found[f"x={t}"]["sum"][1][0].startswith("h") for t in "abc")
    assert _recovered(source, 4, tokens=3)[0] >= 3


def test_a_decoded_answers_host_is_read_back_as_the_indicators_sum() -> None:
    """A permutation of four tokens at D = 1 (compiler/superposition/readout.py): the host's
    coordinate holds Σ n(v)·[x = v], the plain circuit's indicators weighted by their answers'
    index, at every hook and row of every input up to length 4."""
    source = ('input x : token {"a", "b", "c", "d"}\nlength T = 4\n'
              'table nx = {"a": "b", "b": "c", "c": "d", "d": "a"}\ntarget(t) = nx(x(t))\n')
    _, model = _models(source, 1)
    held = [f for f in features(model) if "sum" in f]
    assert len(held) == 1 and sorted(name for name, _ in held[0]["sum"]) == ["x=a", "x=b", "x=c", "x=d"]
    assert _recovered(source, 1, tokens=4)[0] >= 3


def test_a_spanned_column_is_read_back_as_the_combination_of_its_terms() -> None:
    """sort_unique over five tokens: its token thresholds [x(t) < v] are folded onto the token's
    indicators (compiler/superposition/spans.py); the dictionary lists each as the combination
    of its terms, and Σ a_i·value_i read off the superposed stream is the plain circuit's value
    at every token row of every hook where it is alive."""
    source = ("input x : token {1, 2, 3, 4, 5}\nlength T = 6\n"
              "target(t) = x(argmin_<s> |(sum_<r> [x(r) < x(s)]) - (t - 1)|)\n")
    _, model = _models(source, 100)
    found = {f["name"]: f for f in features(model)}
    assert found["tok:[x(t) < 3]"]["combination"] == [["x=1", 1.0], ["x=2", 1.0]]
    assert {e["read"] for e in found["tok:[x(t) < 3]"]["hooks"].values()} == {"combination"}
    assert _recovered(source, 100, tokens=5)[0] > len(found)


def test_a_spanned_columns_terms_packed_in_one_direction_are_read_through_their_tables() -> None:
    """Tracr's sort over three tokens at D = 16 (F = 19): the positional step folded onto the
    others and ``one`` = Σ x = v, a token indicator among its terms packed with a mean (read by
    ``table``); every combination is still the plain circuit's value at every token row."""
    source = ("input x : token {1, 2, 3}\nlength T = 5\n"
              "let rank(s) = sum_<r> [x(r) < x(s) or (x(r) == x(s) and r < s)]\n"
              "target(t) = x(argmin_<s> |rank(s) - (t - 1)|)\n")
    _, model = _models(source, 16)
    record = model.config["superposition"]
    assert model.d_model <= 16 < record["features_alive"] and "packed" in record and record["spanned"]
    found = features(model)
    packed = {f["name"] for f in found if "pack" in f}
    assert any(name in packed for f in found for name, _ in f.get("combination", []))
    assert _recovered(source, 16, tokens=3)[0] > len(found)


def test_a_plain_models_dictionary_is_its_coordinates() -> None:
    plain, _ = _models(HIST, 1000)
    found = features(plain)
    assert {f["name"] for f in found if f["kind"] == "categorical"} == {f"x={chr(97 + i)}" for i in range(8)} | {
        "pos:first"}  # the token's indicators are its one-hot columns x=v
    for feature in found:
        assert feature["hooks"]
        for entry in feature["hooks"].values():
            assert entry["read"] == "exact" and sum(abs(w) for w in entry["direction"]) == 1.0


def test_the_embeddings_rows_are_the_dictionarys_directions() -> None:
    """W_E[v] + W_pos[p] of the superposed model = Σ_f value_f(v, p) · direction_f at
    blocks.0.hook_resid_pre, the values read off the plain model's table (a spanned column, a
    combination of the others' directions, is not written: it is not in the sum)."""
    plain, superposed = _models(REVERSE, 17)
    index = {label: i for i, label in enumerate(plain.config["residual_labels"])}
    w_e, w_pos = plain.embed.W_E.double(), plain.pos_embed.W_pos.double()
    built = torch.zeros_like(superposed.embed.W_E[:, None].double() + superposed.pos_embed.W_pos[None].double())
    for feature in features(superposed):
        entry = feature["hooks"].get("blocks.0.hook_resid_pre")
        if entry is not None and entry["read"] != "combination":
            values = sum(weight * (w_e[:, index[name]][:, None] + w_pos[:, index[name]][None])  # (V, T+1)
                         for name, weight in feature.get("sum", [[feature["name"], 1.0]]))
            built += values[..., None] * torch.tensor(entry["direction"], dtype=torch.float64)
    held = superposed.embed.W_E.double()[:, None] + superposed.pos_embed.W_pos.double()[None]
    live = torch.tensor([any(feature["hooks"].get("blocks.0.hook_resid_pre", {}).get("direction", [0.0] * 99)[d]
                             for feature in features(superposed)) for d in range(superposed.d_model)])
    assert torch.allclose(built[..., live], held[..., live], atol=1e-12)


def test_the_dictionary_travels_with_the_file(tmp_path: Path) -> None:
    _, superposed = _models(REVERSE, 17)
    ifl.save(superposed, tmp_path / "m.safetensors")
    assert features(tmp_path / "m.safetensors") == features(superposed)


def test_circuit_features_prints_the_dictionary_and_export_carries_it(tmp_path: Path) -> None:
    _, superposed = _models(REVERSE, 17)
    path = tmp_path / "m.safetensors"
    ifl.save(superposed, path)
    code, out, err = run_cli(["circuit", str(path), "--features", "--json"])
    assert code == 0, err
    assert json.loads(out)["features"] == json.loads(json.dumps(features(superposed)))
    code, out, _ = run_cli(["circuit", str(path), "--features"])
    assert code == 0 and "F/D = " in out and "h2:position[1]" in out and "threshold" in out
    code, _, err = run_cli(["export", str(path), "--to", "hf-gpt2", "-o", str(tmp_path / "hf")])
    assert code == 0, err
    info = json.loads((tmp_path / "hf" / "infoflow.json").read_text())
    assert info["features"] == json.loads(json.dumps(features(superposed)))
    assert run_cli(["check", str(tmp_path / "hf")])[0] == 0


def test_a_superposed_models_edge_graph_and_truth_are_read_off_its_weights() -> None:
    """circuit_graph reads the plain circuit's nodes again off the superposed weights (checked
    against them); the edge a stored group's interference opens (the token read as the output's
    scores' storage) is in the graph, and the truth finds no ablation needs it."""
    _, superposed = _models(REVERSE, 14)
    graph, truths = ifl.edge_truth(superposed, ("zero",))
    names = {e.name for e in graph.edges}
    assert "input->output<out>" in names and "a1.h0->output<out>" in names
    needed = set(truths["zero"].necessary)
    assert "a1.h0->output<out>" in needed and "input->output<out>" not in needed
