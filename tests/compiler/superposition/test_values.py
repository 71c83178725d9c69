"""The finite values of a token model's numbers read off its weights: a uniform head's outputs
jointly (a count's mean and 1/count), exact rationals; an FFN block's, as its record lists them."""

from __future__ import annotations

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
    found = sources(tensors, model.config)
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
