"""compile --residual: superposed token models, exact where the margin holds, wrong one unit past it.

The models are small token programs with more categorical features than dimensions at one depth
(reverse over 8 tokens: 16 one-hot features alive at layer 2); every claim is checked against
the float64 reference evaluator on every input up to length 4."""

from __future__ import annotations

import itertools
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.circuits.disguise import disguise
from infoflow_dsl.compiler.superposition import smallest_storage, superpose
from infoflow_dsl.compiler.superposition.categorical import usage
from infoflow_dsl.compiler.superposition.layout import holds, layout
from infoflow_dsl.errors import CompileError
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

EXAMPLES = Path(__file__).resolve().parents[3] / "compiled_examples"

TOKENS = ", ".join(f'"{chr(97 + i)}"' for i in range(8))
REVERSE = f"input x : token {{{TOKENS}}}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n"
#: hist's share, hist / len: its gates read the token's indicators in an FFN (clean-ups); hist itself, a count
#: decoded by steps on its mean (compiler/tokens/widths.py), leaves no categorical feature worth storing
HIST = f"input x : token {{{TOKENS}}}\nlength T = 4\ntarget(t) = mean_<s> [x(s) == x(t)]\n"


def _program(source: str, name: str) -> Any:
    return ifl.parse_program(source, name)


@lru_cache(maxsize=4)
def _plain(source: str) -> tuple[dict[str, torch.Tensor], dict]:
    model = ifl.compile(_program(source, "p.iflow"), samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}
    return tensors, model.card


@lru_cache(maxsize=4)
def _smallest(source: str) -> int:
    tensors, config = _plain(source)
    with pytest.raises(CompileError) as refused:
        superpose(tensors, config, 1)
    return int(str(refused.value).split(" is ")[-1].split(" ")[0])


def _wrong(model: CompiledTransformer, source: str, tokens: int = 8, random: int = 0) -> list[list[int]]:
    """Every input up to length 4 (and ``random`` seeded ones at the program's T) where the
    model's answer differs from the reference's."""
    program = _program(source, "p.iflow")
    found = []
    batches = [torch.tensor(list(itertools.product(range(tokens), repeat=n)), dtype=torch.int64) for n in range(1, 5)]
    if random:
        batches.append(ifl.sample_inputs(program, random, seed=7))
    for x in batches:
        truth = ifl.evaluate(program, x)
        with torch.no_grad():
            y = model(x)
        got = y.argmax(-1) if model.token_output else y
        bad = (got.double() - truth).abs() > (0.5 if model.token_output else 1e-3)
        found += [x[i].tolist() for i in torch.nonzero(bad.reshape(len(x), -1).any(-1)).flatten().tolist()]
    return found


def _compressed(source: str) -> int:
    """The dimensions ``disguise --compress`` reaches on the plain model (tight lifetimes)."""
    tensors, config = _plain(source)
    plain = CompiledTransformer(config, tensors, dtype=torch.float64)
    return disguise(plain, compress=True).d_model


def test_a_categorical_peak_compiles_below_what_compress_reaches_exact_checked_and_scored(tmp_path: Path) -> None:
    """Reverse over 8 tokens: at its peak the fetched tokens and the token indicators, categorical
    and carried past their reads. On the route without packs, compile --residual goes below what ``disguise --compress``
    reaches on the plain model (sharing over the depth, tight lifetimes), so the sharing is at
    one depth; the model is exact on every input up to length 4 and 300 random ones at T,
    ``check`` passes, and ``sae`` prints its scores as JSON."""
    compressed = _compressed(REVERSE)
    model = _compiled(_categorical(REVERSE))
    record = model.config["superposition"]
    assert model.d_model < compressed == record["features_alive"] and record["superposed"] > record["storage"]
    assert _wrong(model.double(), REVERSE, random=300) == []
    path = tmp_path / "reverse8.safetensors"
    ifl.save(model, path)
    assert run_cli(["check", str(path), "--samples", "500"])[0] == 0
    code, out, err = run_cli(["sae", str(path), "--hook", f"blocks.{model.n_layers - 1}.hook_resid_mid",
                              "--steps", "5", "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["d_model"] == model.d_model and result["sae"]["recovered"] >= 0.0 and result["baselines"]


def test_a_numeric_peak_goes_below_what_compress_reaches_by_exact_folds_and_refuses_below_naming_it(
        tmp_path: Path) -> None:
    """hist's share over 8 tokens: at its peak the plain model holds numbers (the counts' means,
    1/len, the gates), which the margin cannot protect (docs/superposition.md: the Gram-matrix
    argument). What takes it below F is exact: the eight gates only the output reads, whose sum
    it is, fold into one coordinate (compiler/superposition/sums.py), and numbers of known
    values pack; one below the smallest D is refused (exit 2, no traceback) naming it."""
    compressed = _compressed(HIST)
    source = tmp_path / "hist8.iflow"
    source.write_text(HIST)
    code, _, err = run_cli(["compile", str(source), "--residual", "1", "--samples", "0",
                            "-o", str(tmp_path / "x.safetensors")])
    assert code == 2 and "Traceback" not in err
    smallest = int(err.split("margin 0.45 is ")[1].split(" ")[0])
    assert smallest < compressed and f"the plain model has {compressed} features alive" in err
    code, _, err = run_cli(["compile", str(source), "--residual", str(smallest - 1), "--samples", "0",
                            "-o", str(tmp_path / "x.safetensors")])
    assert code == 2 and f"margin 0.45 is {smallest} (" in err and not (tmp_path / "x.safetensors").exists()
    model = ifl.compile(_program(HIST, "hist8.iflow"), samples=0, residual=smallest)
    summed = model.config["superposition"]["summed"]
    assert model.d_model <= smallest and [len(terms) for _, terms in summed] == [8]
    assert _wrong(model.double(), HIST, random=200) == []


@lru_cache(maxsize=1)
def _compiled(smallest: int) -> CompiledTransformer:
    return ifl.compile(_program(REVERSE, "reverse8.iflow"), samples=64, residual=smallest)


def _categorical(source: str) -> int:
    """The smallest D the route without packed numbers reaches: from the smallest D up, the first
    whose model has no packs (the fetched tokens' known values pack with the token's
    indicators below it; compile takes packs only where the categorical route cannot reach D)."""
    program = _program(source, "p.iflow")
    return next(d for d in itertools.count(_smallest(source))
                if "packed" not in ifl.compile(program, samples=0, residual=d).config["superposition"])


def test_compile_residual_is_exact_below_the_features_alive_and_reports_its_certificate() -> None:
    smallest = _smallest(REVERSE)
    model = _compiled(smallest)
    record = model.config["superposition"]
    assert model.config["d_model"] == record["d_model"] <= smallest
    assert record["features_alive"] > record["d_model"]  # superposition at one depth: F/D > 1
    assert record["ratio"] == record["features_alive"] / record["d_model"]
    assert record["holds"] and record["max_bound"] < record["margin"]
    assert model.config["measured_error"]["wrong"] == 0
    assert _wrong(model.double(), REVERSE) == []


def test_too_small_a_residual_is_refused_naming_the_smallest_that_works() -> None:
    smallest = _smallest(REVERSE)
    with pytest.raises(CompileError, match=f"the smallest residual .* is {smallest} "):
        ifl.compile(_program(REVERSE, "reverse8.iflow"), samples=0, residual=smallest - 1)


def test_a_vector_program_gets_what_compress_reaches_within_eps_and_checked(tmp_path: Path) -> None:
    """Over vectors the embedding is linear (its 0/1 columns copy coordinates of x): nothing is
    categorical, nothing superposed; --residual gives the model tight lifetimes and the exact
    folds alone (duplicates; numbers every later reader reads in one form, held as that sum:
    the first layer's comparisons, which the next FFN reads only as their signed sum): F, what
    ``disguise --compress`` reaches, or below it by what they fold; within ε of the reference on
    random inputs; check passes."""
    program = ifl.load_program(EXAMPLES / "min_pairwise.iflow")
    plain = ifl.compile(program, samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in plain.state_dict().items()}
    assert usage(tensors, plain.card).groups == ()
    with pytest.raises(CompileError) as refused:
        ifl.compile(program, samples=0, residual=1)
    smallest = int(str(refused.value).split(" is ")[-1].split(" ")[0])
    model = ifl.compile(program, samples=0, residual=smallest)
    record = model.config["superposition"]
    assert record["features_alive"] == disguise(plain, compress=True).d_model < plain.d_model
    assert record["superposed"] == 0 and model.d_model == record["features_alive_folded"] <= record["features_alive"]
    folds = len(record["duplicates"]) + sum(len(terms) - 1 for _, terms in record["summed"])
    assert record["features_alive"] - record["features_alive_folded"] <= folds
    x = ifl.sample_inputs(program, 500, seed=5)
    with torch.no_grad():
        error = float((model(x.to(model.dtype)).double() - ifl.evaluate(program, x)).abs().max())
    assert error <= model.config["eps"]
    ifl.save(model, tmp_path / "m.safetensors")
    assert run_cli(["check", str(tmp_path / "m.safetensors"), "--samples", "500"])[0] == 0


@pytest.mark.parametrize(("source", "kind"), [(REVERSE, "score"), (HIST, "clean-up")])
def test_one_storage_dimension_short_of_the_certified_breaks_the_bound_of_a_reader(source: str, kind: str) -> None:
    """Per reader kind (direct score reads; clean-ups before FFN and query/key reads): the
    smallest certified storage holds and is exact on every input up to length 4; one dimension
    fewer breaks the bound of a read of that kind (so compile refuses it)."""
    tensors, config = _plain(source)
    plan = layout(tensors, config, usage(tensors, config))
    least = smallest_storage(plan)
    certified = superpose(tensors, config, 10**6, storage=least)
    assert holds(list(certified.reads))
    assert _wrong(CompiledTransformer(certified.card, certified.tensors, dtype=torch.float64), source) == []
    short = superpose(tensors, config, 10**6, storage=least - 1)
    margin = certified.card.superposition.margin
    assert any(r.kind == kind and r.total >= margin - 1e-4 for r in short.reads)


def test_the_cli_prints_the_certificate_or_refuses_with_exit_2(tmp_path: Path) -> None:
    source = tmp_path / "reverse8.iflow"
    source.write_text(REVERSE)
    smallest = _smallest(REVERSE)
    code, out, err = run_cli(["compile", str(source), "--residual", str(smallest - 1), "--samples", "0"])
    assert code == 2 and f"is {smallest} " in err and "Traceback" not in err
    code, out, err = run_cli(["compile", str(source), "--residual", str(smallest), "--samples", "32"])
    assert code == 0, err
    assert f"in D = {smallest} dimensions: F/D = " in out and "against the margin 0.45" in out
    written, compiled = ifl.load(source.with_suffix(".safetensors")).state_dict(), _compiled(smallest).state_dict()
    assert all(torch.equal(written[name], compiled[name]) for name in compiled)  # deterministic: the same weights
    assert run_cli(["check", str(source.with_suffix(".safetensors"))])[0] == 0
    code, _, err = run_cli(["circuit", str(source.with_suffix(".safetensors"))])
    assert code == 2 and "circuit MODEL --features" in err  # the site map is the plain circuit's: refused


def _clean_ups(model: CompiledTransformer, x: torch.Tensor, margin: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, out) of every clean-up of ``model`` on ``x``, each (B, N, clean-ups): the read
    r = <u_f, h> (from the first unit's pre-activation (r − m)/(1 − 2m)) and the value written,
    relu(first) − relu(second)."""
    seen: dict[str, torch.Tensor] = {}
    model.run(x, lambda name, t: seen.setdefault(name, t))
    reads, outs = [], []
    for layer, described in enumerate(model.config["layers"]):
        offset = 0
        for block in described["mlp"]:
            if block["name"].startswith("clean:"):
                units = slice(offset, offset + block["units"])
                pre = seen[f"blocks.{layer}.mlp.hook_pre"][..., units]
                post = seen[f"blocks.{layer}.mlp.hook_post"][..., units]
                reads.append(pre[..., 0::2] * (1 - 2 * margin) + margin)
                outs.append(post[..., 0::2] - post[..., 1::2])
            offset += block["units"]
    return torch.cat(reads, dim=-1), torch.cat(outs, dim=-1)


def test_a_clean_up_whose_margin_is_just_below_the_interference_it_meets_fails_on_that_input() -> None:
    """The margin argument of a clean-up, made tight: on every input up to length 4 the reads
    r = <u_f, h> lie within I* of 0 or 1 (I* the largest interference met, at most the bound);
    with the thresholds at I* + 0.01 every clean-up writes exactly 0 or 1 and the model is
    exact, at I* − 0.01 the clean-up on the input where I* is met writes neither."""
    tensors, config = _plain(HIST)
    least = smallest_storage(layout(tensors, config, usage(tensors, config)))
    certified = superpose(tensors, config, 10**6, storage=least)
    margin = certified.card.superposition.margin
    model = CompiledTransformer(certified.card, certified.tensors, dtype=torch.float64)
    x = torch.tensor(list(itertools.product(range(8), repeat=4)), dtype=torch.int64)
    with torch.no_grad():
        r, _ = _clean_ups(model, x, margin)
    deviation = (r - r.round()).abs().amax(dim=(1, 2))  # (B,): the interference each input meets
    met = float(deviation.max())
    assert 0.05 < met <= certified.card.superposition.max_bound + 1e-9  # the bound holds (here: tight)
    witness = x[int(deviation.argmax())][None]
    for shifted, exact in ((met + 0.01, True), (met - 0.01, False)):
        built = superpose(tensors, config, 10**6, storage=least, margin=shifted)
        tight = CompiledTransformer(built.card, built.tensors, dtype=torch.float64)
        with torch.no_grad():
            _, out = _clean_ups(tight, witness, shifted)
        off = float((out - out.round()).abs().max())
        assert (off < 1e-9) == exact, f"input {witness.tolist()}: a clean-up {off:.3g} off 0/1 at margin {shifted:.3f}"
        if exact:
            assert _wrong(tight, HIST) == []


def test_one_storage_dimension_short_of_the_smallest_certified_reverse_answers_wrong_on_a_named_input() -> None:
    """The score reads' margin: reverse over 8 tokens with every group superposed is certified
    and exact at its smallest storage; one dimension fewer breaks the bound, and the model
    answers wrong (here on the one-token input "f")."""
    tensors, config = _plain(REVERSE)
    least = smallest_storage(layout(tensors, config, usage(tensors, config)))
    exact = superpose(tensors, config, 10**6, storage=least)
    assert holds(list(exact.reads))
    assert _wrong(CompiledTransformer(exact.card, exact.tensors, dtype=torch.float64), REVERSE) == []
    short = superpose(tensors, config, 10**6, storage=least - 1)
    assert not holds(list(short.reads))
    wrong = _wrong(CompiledTransformer(short.card, short.tensors, dtype=torch.float64), REVERSE)
    assert wrong and wrong[0] == [5], wrong[:3]
