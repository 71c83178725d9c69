"""Packing's scales and readers: the mixed radix separates every partial sum by at least 1, and a
pack two of whose members a head reads at once is refused."""

from __future__ import annotations

import itertools
from fractions import Fraction

import torch

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition.packing import build, gap, plain, radix, readers_allow

torch.set_num_threads(1)

COUNT = 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = sum_<s> [x(s) == "a"]\n'


def test_the_mixed_radix_separates_every_partial_sum_by_one() -> None:
    rows = frozenset((Fraction(a), Fraction(b, 3), Fraction(c, 7))
                     for a in (0, 1) for b in range(4) for c in (-2, 0, 5))
    scales = radix(rows, (0, 1, 2))
    for size in (1, 2, 3):
        for positions in itertools.combinations(range(3), size):
            assert gap(rows, scales, positions) >= 1


def test_a_pack_a_head_reads_two_members_of_at_once_is_refused_and_a_tables_is_allowed() -> None:
    model = ifl.compile(ifl.parse_program(COUNT, "p.iflow"), samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}
    labels = model.config["residual_labels"]
    found = plain(tensors, model.card)
    index = [labels.index(n) for n in ("x=a", "pos:first", "h1:uniform[1]", "h1:uniform[2]")]
    read_by_the_head = build(found, (index[0], index[1]), (0, 1))
    read_by_the_steps = build(found, (index[2], index[3]), (0, 1))
    assert read_by_the_head is not None and read_by_the_steps is not None
    assert not readers_allow(read_by_the_head, tensors, found)
    assert readers_allow(read_by_the_steps, tensors, found)
