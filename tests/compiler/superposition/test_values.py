"""The finite values of a token model's numbers read off its weights: a uniform head's outputs
jointly (a count's mean and 1/count), exact rationals; an FFN block's, as its record lists them
or evaluated on its inputs' values."""

from __future__ import annotations

import itertools
from fractions import Fraction

import torch

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition.values import joint, sources

torch.set_num_threads(1)

COUNT = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = sum_<s> [x(s) == "a"]\n'


def test_a_counts_mean_and_reciprocal_take_exactly_the_pairs_of_a_count_over_a_length() -> None:
    model = ifl.compile(ifl.parse_program(COUNT, "p.iflow"), samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}
    labels = model.config["residual_labels"]
    found = sources(tensors, model.card)
    mean, reciprocal = labels.index("h1:uniform[1]"), labels.index("h1:uniform[2]")
    expected = {(Fraction(s, c), Fraction(1, c)) for c in range(1, 6) for s in range(c + 1)}
    assert joint(found, (mean, reciprocal)) == expected  # (S/c, 1/c): 20 pairs, not 11 × 5 from each alone
    indicator = labels.index("x=a")
    assert joint(found, (indicator, mean)) == {(a, m) for a in (Fraction(0), Fraction(1)) for m, _ in expected}
    count = labels.index("steps1")  # the count S = steps1 + b_U, an FFN's output: the values its block records
    constant = Fraction(float(tensors["unembed.b_U"][0]))
    assert joint(found, (count,)) == {(Fraction(k) - constant,) for k in range(6)}
    assert next(s for s in found if count in s.members).error == next(
        b["error"] for layer in model.config["layers"] for b in layer["mlp"] if b["output"] == "steps1")


#: a count of the tokens equal to the maximum: a uniform head averages FFN steps
#: [x(s) == max ≥ k] (its values read an FFN's outputs, not the embedding's)
EQUAL_TO_MAX = "input x : token {1, 2, 3}\nlength T = 5\ntarget(t) = sum_<s> [x(s) == max_<r> x(r)]\n"


def test_a_heads_mean_of_ffn_outputs_takes_values_that_cover_every_one_it_holds() -> None:
    """The head's outputs read FFN steps (values recorded by their blocks) and [s = 1]: their
    joint values (a superset: each step's values at any position) contain every pair the model
    holds on every input up to length 4 (its outputs to within the head's stated error)."""
    model = ifl.compile(ifl.parse_program(EQUAL_TO_MAX, "p.iflow"), samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}
    labels = model.config["residual_labels"]
    head = next(h for h in model.config["layers"][1]["heads"] if h["kind"] == "uniform")
    outputs = tuple(labels.index(o) for o in head["outputs"])
    rows = joint(sources(tensors, model.card), outputs)
    assert rows is not None
    grid = torch.tensor([[float(v) for v in row] for row in sorted(rows)], dtype=torch.float64)  # (R, 2)
    for n in range(1, 5):
        x = torch.tensor(list(itertools.product(range(3), repeat=n)), dtype=torch.int64)
        with torch.no_grad():
            held = model.residual_stream(x)[2][:, :-1, list(outputs)].reshape(-1, len(outputs))  # (B·n, 2)
        nearest = (held[:, None, :] - grid[None]).abs().amax(dim=-1).min(dim=1).values  # (B·n,)
        assert float(nearest.max()) <= head["error"] + 1e-12


#: a running maximum: a sharp head whose key and value read x alone, its query ``one``
RUNNING_MAX = "input x : token {1, 2, 3, 4}\nlength T = 5\ntarget(t) = max_<s : s <= t> x(s)\n"


def test_a_sharp_heads_output_takes_its_keys_values_within_the_stated_tail() -> None:
    """The winners tie on x, so the head's output is one of x's values, within its source's error
    (the tail's weight times x's span) at every token row of every input up to length 4."""
    model = ifl.compile(ifl.parse_program(RUNNING_MAX, "p.iflow"), samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}
    out = model.config["residual_labels"].index("h1:retrieval[1]")
    source = next(s for s in sources(tensors, model.card) if s.members == (out,))
    assert source.rows == {(Fraction(v),) for v in (1, 2, 3, 4)}
    grid = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    for n in range(1, 5):
        x = torch.tensor(list(itertools.product(range(4), repeat=n)), dtype=torch.int64)
        with torch.no_grad():
            held = model.residual_stream(x)[1][:, :-1, out].reshape(-1, 1)  # (B·n, 1)
        assert float((held - grid).abs().min(dim=1).values.max()) <= source.error


#: a prefix sum times the token: the product x(t)·mean_<s ≤ t> x(s), an FFN over a head's mean,
#: records no values (its factor is no embedding column)
SUM_TIMES_X = "input x : token {1, 2, 3}\nlength T = 5\ntarget(t) = sum_<s : s <= t> x(s) * x(t)\n"


def test_an_ffn_recording_no_values_is_evaluated_on_its_inputs_values() -> None:
    """The product's block records nothing; evaluated on its inputs' joint values (x's and the
    mean's, exact rationals) its output takes values within the source's error of what the model
    holds at every token row of every input up to length 4; and the error is no smaller than the
    Lipschitz bound of the inputs' errors (the mean's, read through the units' weights)."""
    model = ifl.compile(ifl.parse_program(SUM_TIMES_X, "p.iflow"), samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}
    labels = model.config["residual_labels"]
    block = next(b for b in model.config["layers"][0]["mlp"] if b["output"] == "product1")
    assert "values" not in block
    out = labels.index("product1")
    found = sources(tensors, model.card)
    source = next(s for s in found if s.members == (out,))
    mean = next(s for s in found if labels.index("h1:uniform[1]") in s.members)
    assert 0 < mean.error <= source.error and len(source.rows) > 3
    grid = torch.tensor(sorted(float(r[0]) for r in source.rows), dtype=torch.float64)
    for n in range(1, 5):
        x = torch.tensor(list(itertools.product(range(3), repeat=n)), dtype=torch.int64)
        with torch.no_grad():
            held = model.residual_stream(x)[1][:, :-1, out].reshape(-1, 1)  # (B·n, 1)
        assert float((held - grid).abs().min(dim=1).values.max()) <= source.error


#: the last token's equals in the sequence: x(len) fetched by the score 2p·s − s² (p = len, a
#: table's output), a sharp head of two score dimensions whose values are the token's one-hot
COUNT_AS_LAST = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget sum_<s> [x(s) == x(len)]\n'


def test_a_scored_fetchs_outputs_take_a_keys_one_hot_within_the_tail_times_its_span() -> None:
    """One key wins the fetch, so its outputs are that key's one-hot (the values module's superset:
    any position's rows, the class token's zero among them), within the source's error at every
    row (the readout row's query fetches too) of every input up to length 4."""
    model = ifl.compile(ifl.parse_program(COUNT_AS_LAST, "p.iflow"), samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}
    labels = model.config["residual_labels"]
    head = next(h for layer in model.config["layers"] for h in layer["heads"] if h["kind"] == "position")
    outputs = tuple(labels.index(o) for o in head["outputs"])
    source = next(s for s in sources(tensors, model.card) if s.members == outputs)
    one_hot = {tuple(Fraction(int(i == k)) for i in range(3)) for k in range(3)}
    assert one_hot <= source.rows <= one_hot | {(Fraction(0),) * 3}
    assert head["error"] <= source.error <= head["error"] * 1.0000001  # the span of a one-hot is 1
    grid = torch.tensor([[float(v) for v in row] for row in sorted(source.rows)], dtype=torch.float64)  # (R, 3)
    after = 1 + next(i for i, layer in enumerate(model.config["layers"]) if head in layer["heads"])  # after its layer
    for n in range(1, 5):
        x = torch.tensor(list(itertools.product(range(3), repeat=n)), dtype=torch.int64)
        with torch.no_grad():
            held = model.residual_stream(x)[after][:, :, list(outputs)].reshape(-1, 3)  # (B·(n+1), 3)
        nearest = (held[:, None, :] - grid[None]).abs().amax(dim=-1).min(dim=1).values  # (B·(n+1),)
        assert float(nearest.max()) <= source.error
