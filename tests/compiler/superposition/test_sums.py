"""Numbers every later reader reads in one form share a coordinate holding it
(compiler/superposition/sums.py). The narrow fold (the unembedding alone): Tracr's nary_add
compiles below what ``disguise --compress`` reaches, exact against the reference, its dictionary
holding the sum; a number another reader needs, or a categorical output, is never folded. The
wide fold (any later reader): a product beside its factor (x·max, then packed through the
factor's values up to the fold), a head's two value reads, the steps one `and` sums; a fetched
number's one-hot that the output reads in one form dissolves onto one coordinate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from cli_runner import run_cli
from compiled import dense_float64, every_input, plain_float64, smallest_residual

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition import features_alive
from infoflow_dsl.compiler.superposition.dictionary import features, read_value
from infoflow_dsl.compiler.superposition.sums import read_by_unembedding_alone, summed
from infoflow_dsl.compiler.superposition.values import sources
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

#: Tracr's nary_add: x + y − z over tokens, tokens, indices (from 0)
NARY_ADD = "input x : token {1, 2, 3}\nlength T = 10\ntarget(t) = 2 * x(t) - (t - 1)\n"
#: a count beside the token: the token's number is read by the output and by nothing else; the
#: count's share [x(s) == 1] by a head
COUNT_PLUS = "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = x(t) + sum_<s> [x(s) == 1]\n"


def test_nary_adds_two_numbers_become_one_coordinate_holding_the_outputs_form(tmp_path: Path) -> None:
    """F = 2 (the token's 2·x(t) and the position's t, alive together to the output); with them
    folded, compile --residual 1 is exact on every input up to length 4 and on random ones at T,
    ``check`` passes, ``sae`` prints JSON, and the dictionary's coordinate holds 2·x(t) − t, the
    plain model's two values so combined, at every hook."""
    plain = plain_float64(NARY_ADD)
    assert features_alive(dense_float64(plain), plain.card) == 2
    program = ifl.parse_program(NARY_ADD, "nary_add.iflow")
    model = ifl.compile(program, samples=200, residual=1, dtype="float64")
    record = model.config["superposition"]
    assert model.d_model == 1 < record["features_alive"] == 2 and record["summed"]
    batches = [every_input(3, n) for n in range(1, 5)] + [ifl.sample_inputs(program, 500, seed=3)]
    for x in batches:
        with torch.no_grad():
            assert float((model(x) - ifl.evaluate(program, x)).abs().max()) <= model.config["eps"]
    found = {f["name"]: f for f in features(model)}
    held = found["tok:2 * x(t)"]
    assert held["sum"] == [["tok:2 * x(t)", 1.0], ["pos:t", -1.0]] and found["pos:t"]["in_sums"] == ["tok:2 * x(t)"]
    assert found["pos:t"]["hooks"] == {}
    x = every_input(3, 4)
    with torch.no_grad():
        wide, narrow = plain.residual_stream(x), model.residual_stream(x)
    index = {label: i for i, label in enumerate(plain.config["residual_labels"])}
    entry = held["hooks"]["blocks.0.hook_resid_pre"]
    want = wide[0][..., index["tok:2 * x(t)"]] - wide[0][..., index["pos:t"]]
    assert torch.equal(read_value(entry, narrow[0]), want)
    path = tmp_path / "nary_add.safetensors"
    ifl.save(model, path)
    assert run_cli(["check", str(path), "--samples", "300"])[0] == 0
    code, out, _ = run_cli(["circuit", str(path), "--features"])
    assert code == 0 and "[its coordinate holds 1·tok:2 * x(t) + -1·pos:t]" in out
    assert "[held only in the sum of tok:2 * x(t)]" in out
    code, out, err = run_cli(["sae", str(path), "--hook", "blocks.0.hook_resid_pre", "--steps", "5", "--json"])
    assert code == 0, err
    assert json.loads(out)["d_model"] == 1


def test_a_number_another_reader_needs_is_not_folded() -> None:
    """COUNT_PLUS: the token's number and the count are read by the output alone, so they fold;
    the token's indicator [x = 1], which the count's head averages, is not among them."""
    plain = plain_float64(COUNT_PLUS)
    tensors, config = dense_float64(plain), plain.card
    labels = list(config.labels)
    alone = {labels[i] for i in read_by_unembedding_alone(tensors, config)}
    assert "x" in alone and "x=1" not in alone
    folded, sums = summed(tensors, config, "output")
    model = CompiledTransformer(config, folded, dtype=torch.float64)
    x = every_input(3, 4)
    with torch.no_grad():
        assert float((model(x) - plain(x)).abs().max()) <= 1e-12
    named = {labels[n] for terms in sums.values() for n, _ in terms}
    assert named <= alone and len(named) >= 2


def test_a_categorical_output_is_never_folded() -> None:
    """Tracr's reverse: the fetched token's indicators, which the unembedding alone reads, are a
    categorical group (read by clean-ups once superposed): none is folded."""
    source = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = x(len + 1 - t)\n'
    plain = plain_float64(source)
    tensors, config = dense_float64(plain), plain.card
    assert summed(tensors, config, "output")[1] == {} and summed(tensors, config, "form")[1] == {}


#: two fetched numbers: each head copies a one-hot [x(1) = v] that only the output reads, as Σ v·[x(1) = v]
FIRST_MINUS_LAST = "input x : token {1, 2, 5}\nlength T = 5\ntarget x(1) - x(len)\n"


def test_a_fetched_one_hot_the_output_reads_in_one_form_is_one_coordinate() -> None:
    """x(1) − x(len): the two fetch heads' groups are read only as Σ v·[x(1) = v] − Σ v·[x(len) = v]
    (v = 1, 2, 5): both dissolve onto one coordinate holding that form (weights relative to the
    first indicator's), and --residual goes below what compress reaches, exact everywhere."""
    plain = plain_float64(FIRST_MINUS_LAST)
    tensors, config = dense_float64(plain), plain.card
    labels = list(config.labels)
    _, sums = summed(tensors, config, "output")
    (held,) = sums.values()
    weights = {labels[i].split(":")[0]: [] for i, _ in held}
    for i, weight in held:
        weights[labels[i].split(":")[0]].append(weight)
    assert sorted(weights.values()) == [[-1.0, -2.0, -5.0], [1.0, 2.0, 5.0]]
    program = ifl.parse_program(FIRST_MINUS_LAST, "first_minus_last.iflow")
    smallest = smallest_residual(program)
    assert smallest < features_alive(tensors, config)
    _exact_everywhere(ifl.compile(program, samples=0, residual=smallest), program, 3)


#: a table of the position times the token: the output reads the product's gate beside odd(t)
ODD_TIMES_X = ("input x : token {1, 2}\nlength T = 4\ntable odd = {1: 1, 2: 0, 3: 1, 4: 0}\n"
               "target(t) = odd(t) * x(t)\n")


def test_a_lone_indicator_beside_its_product_is_folded_onto_by_the_wide_reach() -> None:
    """odd(t)·x(t) = gate + odd(t): odd(t) is a positional 0/1 column alone in its group, read by
    the gate's FFN and then only by the output beside the gate. The narrow reach keeps it a
    group; the wide one folds the gate onto it, so it packs with x: F = 2, D = 1, exact."""
    plain = plain_float64(ODD_TIMES_X)
    tensors, config = dense_float64(plain), plain.card
    labels = list(config.labels)
    assert summed(tensors, config, "output")[1] == {}
    assert [labels[i] for i in summed(tensors, config, "form")[1]] == ["pos:odd(t)"]
    program = ifl.parse_program(ODD_TIMES_X, "odd_times_x.iflow")
    assert features_alive(tensors, config) == 2 and smallest_residual(program) == 1
    _exact_everywhere(ifl.compile(program, samples=0, residual=1), program, 2)


#: a sequence model whose output is a token table of the fetched last token
FLIP_LAST = ('input x : token {"a", "b", "c"}\nlength T = 5\ntable flip = {"a": "c", "b": "a", "c": "b"}\n'
             "target flip(x(len))\n")


def test_a_number_read_at_the_readout_alone_takes_a_direction_zero_there() -> None:
    """flip(x(len)): the fetch head writes x(len)'s one-hot while the token's own indicators,
    which its values read, are still in the stream (F = 10). Only the readout row's output is
    read, and the indicators are 0 there: each fetched indicator is written onto one of them
    (the coordinate holds their sum), the unembedding reads it there; D < F, every token answer
    right on every input up to length 4 and on 500 random ones."""
    plain = plain_float64(FLIP_LAST)
    tensors, config = dense_float64(plain), plain.card
    labels = list(config.labels)
    _, sums = summed(tensors, config, "form")
    hosted = {labels[i]: sorted(labels[k] for k, _ in terms) for i, terms in sums.items()}
    assert sorted(hosted) == ["x=a", "x=b", "x=c"]
    assert all(len(names) == 2 and names[0].startswith("h") for names in hosted.values())
    program = ifl.parse_program(FLIP_LAST, "flip_last.iflow")
    smallest = smallest_residual(program)
    assert smallest < features_alive(tensors, config) == 10
    model = ifl.compile(program, samples=0, residual=smallest)
    for x in [every_input(3, n) for n in range(1, 5)] + [ifl.sample_inputs(program, 500, seed=7)]:
        with torch.no_grad():
            assert torch.equal(model(x).argmax(-1), ifl.evaluate(program, x))


#: x(t) times the max: the product's share reads the max (its factor) and the output reads the
#: max beside it (x·m = Σ (v − lo)·[x = v]·m + lo·m), so after the product's FFN the two are read
#: in one form
MAX_PRODUCT = "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = max_<s> x(s) * x(t)\n"
#: a mean of x(s)·len: a uniform head's values read the product and the table of len in one form
MEAN_TIMES_LEN = "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = mean_<s> x(s) * len\n"
#: Tracr's shuffle_dyck2 (T = 10): its `and` reads six steps, as their signed sum alone
DYCK = (Path(__file__).resolve().parents[3] / "compiled_examples" / "tracr" / "shuffle_dyck2.iflow").read_text()


def _exact_everywhere(model: CompiledTransformer, program: ifl.Program, tokens: int) -> None:
    """Within ε of the reference on every input up to length 4 and on 500 random ones at T."""
    for x in [every_input(tokens, n) for n in range(1, 5)] + [ifl.sample_inputs(program, 500, seed=7)]:
        with torch.no_grad():
            assert float((model(x).double() - ifl.evaluate(program, x)).abs().max()) <= model.config["eps"]


def test_every_later_read_in_one_form_folds_exactly() -> None:
    """The wide fold on the plain models: the product's direction is gone, its writers write a
    third of it onto the max (the form's ratio), and the model computes what the plain one does;
    the narrow fold (the unembedding alone) folds nothing there, since the max is read by the FFN."""
    for source, held in ((MAX_PRODUCT, "h1:retrieval[1]"), (MEAN_TIMES_LEN, "table1")):
        plain = plain_float64(source)
        tensors, config = dense_float64(plain), plain.card
        labels = list(config.labels)
        folded, sums = summed(tensors, config)
        assert [labels[i] for i in sums] == [held] and len(sums[labels.index(held)]) == 2
        assert summed(tensors, config, "output")[1] == {}
        model = CompiledTransformer(config, folded, dtype=torch.float64)
        x = every_input(3, 4)
        with torch.no_grad():
            assert float((model(x) - plain(x)).abs().max()) <= 1e-12


def test_a_product_of_the_max_packs_with_its_factor_once_folded_and_compiles_at_one_dimension(tmp_path: Path) -> None:
    """x·max: F = 2 (x and the max, alive together until the product's FFN). Folded, the max's
    direction holds max + product/3 after that FFN; its values (x's, a sharp head's winners) are
    read by the product's table at that FFN and by nothing past it (``until``), so x and the max
    pack, and D = 1, exact everywhere; check passes."""
    program = ifl.parse_program(MAX_PRODUCT, "max_product.iflow")
    plain = plain_float64(MAX_PRODUCT)
    assert features_alive(dense_float64(plain), plain.card) == 2
    assert smallest_residual(program) == 1
    model = ifl.compile(program, samples=0, residual=1)
    record = model.config["superposition"]
    assert model.d_model == 1 and record["summed"] and record["packed"]["packs"][0]["members"] == [
        "h1:retrieval[1]", "x"]
    _exact_everywhere(model, program, 3)
    ifl.save(model, tmp_path / "m.safetensors")
    assert run_cli(["check", str(tmp_path / "m.safetensors"), "--samples", "300"])[0] == 0


def test_a_source_folded_onto_is_not_read_past_its_fold() -> None:
    """The max's source says its values hold up to stage 2 (the product's FFN, which writes the
    fold): a pack whose table read the max at a later stage is refused by its readers, the same
    pack with the fold's stage later admitted."""
    import dataclasses

    from infoflow_dsl.compiler.superposition.packing import build, plain, readers_allow
    from infoflow_dsl.compiler.superposition.values import until_of

    base = plain_float64(MAX_PRODUCT)
    tensors, config = summed(dense_float64(base), base.card)[0], base.card
    labels = list(config.labels)
    model = plain(tensors, config)
    head, x = labels.index("h1:retrieval[1]"), labels.index("x")
    assert until_of(list(model.sources), head) == 2.0
    pack = build(model, (head, x), (0, 1))
    assert pack is not None and readers_allow(pack, tensors, model)
    assert not readers_allow(dataclasses.replace(pack, until=(1.0, pack.until[1])), tensors, model)


def test_a_mean_of_a_product_and_the_steps_one_and_reads_fold_below_compress() -> None:
    """A mean of x(s)·len compiles below F once the head's two value reads fold; Tracr's
    shuffle_dyck2's six steps, which its `and` reads only as their signed sum, become one
    coordinate holding it; both exact everywhere (shuffle_dyck2 on its four tokens)."""
    for source, tokens, steps in ((MEAN_TIMES_LEN, 3, 2), (DYCK, 4, 6)):
        program = ifl.parse_program(source, "p.iflow")
        plain = plain_float64(source)
        alive = features_alive(dense_float64(plain), plain.card)
        smallest = smallest_residual(program)
        assert smallest < alive
        model = ifl.compile(program, samples=0, dtype="float64", residual=smallest)
        assert max(len(terms) for _, terms in model.config["superposition"]["summed"]) == steps
        _exact_everywhere(model, program, tokens)


def test_an_embedding_column_folded_onto_keeps_its_values_up_to_the_fold() -> None:
    """x(t)·t: the output reads the product and lo·t, so the product folds onto the position's
    column t, which the embedding writes and the product's FFN writes again. The embedding's
    source keeps t's values up to that FFN (per member: x's for ever), so x and t pack there and
    the model compiles at D = 1 < F = 2, exact everywhere."""
    source = "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = x(t) * t\n"
    plain = plain_float64(source)
    tensors, config = dense_float64(plain), plain.card
    assert features_alive(tensors, config) == 2
    labels = list(config.labels)
    folded = summed(tensors, config)[0]
    embedding = next(s for s in sources(folded, config) if s.stage == 0)
    assert embedding.until_of(labels.index("pos:t")) == 2.0 and embedding.until_of(labels.index("x")) == math.inf
    assert embedding.seen_at(3) is not None and labels.index("pos:t") not in embedding.seen_at(3).members
    program = ifl.parse_program(source, "x_times_t.iflow")
    assert smallest_residual(program) == 1
    model = ifl.compile(program, samples=0, residual=1)
    _exact_everywhere(model, program, 3)


#: a two-argument token table of x(t − 1) and x(t): its FFN reads the fetched one-hot in one
#: form, and the fetched "a" in none (its writes dropped: never written under tight lifetimes)
PAIR_TABLE = ('input x : token {"a", "b", "c"}\nlength T = 5\n'
              'table m = {("a", "a"): "b", ("a", "b"): "c", ("b", "a"): "a", _: "a"}\n'
              "target(t : t >= 2) = m(x(t - 1), x(t))\n")


def test_a_group_whose_unread_member_is_never_written_dissolves_onto_one_member() -> None:
    """The fetched one-hot's members the table reads are read in one form (−6·[b] − 12·[c]);
    the member it never reads has no write to share a stage with, and does not keep the group
    from folding onto one member, which holds [b] + 2·[c]; D < F, every answer right on every
    input up to length 4 and on 500 random ones."""
    plain = plain_float64(PAIR_TABLE)
    tensors, config = dense_float64(plain), plain.card
    labels = list(config.labels)
    _, sums = summed(tensors, config, "form")
    held = {labels[i]: [(labels[k], w) for k, w in terms] for i, terms in sums.items()}
    assert held == {"h1:position[2]": [("h1:position[2]", 1.0), ("h1:position[3]", 2.0)]}
    program = ifl.parse_program(PAIR_TABLE, "pair_table.iflow")
    assert smallest_residual(program) < features_alive(tensors, config)
    model = ifl.compile(program, samples=0, residual=smallest_residual(program))
    for x in [every_input(3, n) for n in range(1, 5)] + [ifl.sample_inputs(program, 500, seed=7)]:
        truth = ifl.evaluate(program, x)
        defined = truth >= 0
        with torch.no_grad():
            assert torch.equal(model(x).argmax(-1)[defined], truth[defined].long())
