"""The mask vocabulary (infoflow_dsl/transformer/masks.py): the conditions the lowering writes mean,
at run time, what the program's position conditions mean in the reference evaluator; the conditions
read from a config are validated; and a model's heads see exactly the keys their masks allow."""

from __future__ import annotations

import json

import pytest
import torch
from handmade_models import MASKS, mask_allows, random_model, reference_forward
from hypothesis import given, settings
from hypothesis import strategies as st

from infoflow_dsl.language import typed as ir
from infoflow_dsl.oracle.evaluate import ReferenceEvaluator
from infoflow_dsl.transformer.masks import (
    allowed_pairs,
    check_condition,
    check_mask,
    conditions_mask,
    fetch_mask,
    mask_json,
    mask_side,
    position_side,
    presence_mask,
    term_side,
)

OPERATORS = ["!=", "<", "<=", ">", ">=", "=="]


def inputs(batch: int, length: int, d: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, length, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ---------------------------------------------------------------------------- writing


def test_sides_name_offsets_and_fetch_labels() -> None:
    assert [mask_side("query", 0), mask_side("query", -1), mask_side("last", -2), mask_side("key", 1)] == [
        "query", "query-1", "last-2", "key+1"]
    assert [position_side(label) for label in ("t", "t - 1", "t + 2", "T", "T - 2", "3")] == [
        "query", "query-1", "query+2", "last", "last-2", 3]


def _term(variables: tuple[str, ...]) -> st.SearchStrategy:
    return st.one_of(
        st.builds(lambda name, offset: ir.PositionVariable(name, offset=offset), st.sampled_from(variables),
                  st.integers(-2, 2)),
        st.builds(ir.FixedPosition, st.integers(1, 6)),
        st.builds(lambda offset: ir.LastPosition(offset=offset), st.integers(-2, 0)),
    )


def _conditions(variables: tuple[str, ...]) -> st.SearchStrategy:
    condition = st.builds(ir.PositionCondition, _term(variables), st.sampled_from(OPERATORS), _term(variables))
    return st.lists(condition, max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(conditions=_conditions(("s", "t")), length=st.integers(1, 6))
def test_a_reductions_mask_allows_the_pairs_its_conditions_keep(conditions, length: int) -> None:
    """min_<s : conditions> at token t: key s is allowed at query t exactly where the reference
    evaluator keeps the tuple (t, s)."""
    allowed = allowed_pairs([conditions_mask(conditions, "s")], length)[0, :length]  # (T', T') query t, key s
    kept = ReferenceEvaluator(inputs(1, length)).mask(conditions, ("t", "s"))[0]  # (T', T')
    assert torch.equal(allowed, kept.expand(length, length))


@settings(max_examples=60, deadline=None)
@given(index=st.integers(1, 6), conditions=_conditions(("t",)), length=st.integers(1, 6))
def test_a_presence_mask_allows_its_slot_where_the_conditions_hold(index: int, conditions, length: int) -> None:
    """present(j : conditions) at token t: the one key j, where the conditions hold for (j, t)."""
    linked = tuple(ir.PositionCondition(ir.FixedPosition(index), c.operator, c.right) for c in conditions)
    allowed = allowed_pairs([presence_mask(index, linked)], length)[0, :length]  # (T', T')
    holds = ReferenceEvaluator(inputs(1, length)).mask(linked, ("t",))[0]  # (T',)
    key_is_slot = torch.arange(1, length + 1) == index
    assert torch.equal(allowed, holds.expand(length)[:, None] & key_is_slot[None, :])


FETCHED = {"t": lambda t, n: t, "t - 1": lambda t, n: t - 1, "t + 2": lambda t, n: t + 2, "T": lambda t, n: n,
           "T - 2": lambda t, n: n - 2, "3": lambda t, n: 3}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("label", list(FETCHED))
def test_a_fetch_mask_allows_the_one_position_its_label_names(label: str, causal: bool) -> None:
    for length in (1, 4, 6):
        allowed = allowed_pairs([fetch_mask(label, causal)], length)[0]  # (T'+1, T')
        for t in range(1, length + 2):
            want = {FETCHED[label](t, length)} & set(range(1, (min(t, length) if causal else length) + 1))
            assert {s + 1 for s in range(length) if allowed[t - 1, s]} == want, (label, causal, length, t)


# ---------------------------------------------------------------------------- reading


def test_allowed_pairs_are_the_conditions_on_every_query_row_and_key() -> None:
    masks = [tuple(tuple(c) for c in m) for m in MASKS]
    for length in (1, 3, 5):
        allowed = allowed_pairs(masks, length)  # (H, T'+1, T')
        want = torch.tensor([[[mask_allows(m, s, t, length) for s in range(1, length + 1)]
                              for t in range(1, length + 2)] for m in MASKS])
        assert torch.equal(allowed, want)
        assert torch.equal(allowed_pairs(masks, length, slice(length, length + 1)), want[:, -1:])  # the readout row
    assert allowed_pairs([], 4).shape == (0, 5, 4)


@pytest.mark.parametrize(("condition", "message"), [
    (["key", "<>", "query"], "unknown mask operator '<>'"),
    (["key", "<", "first"], "a mask side must be"),
    (["key", "<", "query*2"], "a mask side must be"),
    (["key", "<", True], "a mask side must be"),
    (["key", "<"], r"a mask condition must be \[left, op, right\]"),
    ("key < query", r"a mask condition must be \[left, op, right\]"),
])
def test_bad_conditions_are_named(condition: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"layer 0 head 1: {message}"):
        check_condition(condition, "layer 0 head 1")


def test_a_written_mask_reads_back_through_json() -> None:
    mask = (*fetch_mask("t - 1", causal=True), ("last-1", ">=", 2))
    written = json.loads(json.dumps(mask_json(mask)))
    assert written == [["key", "==", "query-1"], ["key", "<=", "query"], ["last-1", ">=", 2]]
    assert check_mask(written, "layer 0 head 0", "h") == mask


def test_a_mask_reads_as_tuples_and_must_be_a_list() -> None:
    assert check_mask([["key", "<=", "query-1"], [2, "!=", "last+1"]], "layer 0 head 0", "h") == (
        ("key", "<=", "query-1"), (2, "!=", "last+1"))
    with pytest.raises(ValueError, match=r"layer 0 head 0 \(h\): unknown mask operator"):
        check_mask([["key", "=", "query"]], "layer 0 head 0", "h")
    with pytest.raises(ValueError, match="'mask' must be a list of conditions"):
        check_mask({"key": "query"}, "layer 0 head 0", "h")


# ---------------------------------------------------------------------------- in the model


def test_reference_covers_every_mask_kind() -> None:
    """The hand-picked masks exercise fully masked rows, rows that see a single key, and open rows."""
    length = 4
    counts = [[sum(mask_allows(m, s, t, length) for s in range(1, length + 1)) for t in range(1, length + 2)]
              for m in MASKS]
    assert any(0 in c for c in counts) and any(1 in c for c in counts) and any(length in c for c in counts)
    assert all(c == [0] * (length + 1) for c, m in zip(counts, MASKS, strict=True) if m == [["key", "==", 99]])


conditions = st.tuples(
    st.one_of(st.sampled_from(["key", "query", "last"]), st.integers(0, 7)),
    st.sampled_from(["!=", "<", "<=", ">", ">=", "=="]),
    st.one_of(st.sampled_from(["key", "query", "last"]), st.integers(0, 7)),
).map(list)


@settings(max_examples=25, deadline=None)
@given(masks=st.lists(st.lists(conditions, max_size=3), min_size=1, max_size=4), length=st.integers(1, 5),
       seed=st.integers(0, 1000))
def test_random_masks_match_reference(masks: list[list[list]], length: int, seed: int) -> None:
    model = random_model(seed=seed, masks_per_layer=[masks], t=5, ffn_widths=[2])
    x = inputs(2, length, seed=seed)
    torch.testing.assert_close(model(x), reference_forward(model, x), rtol=0, atol=1e-12)


def test_fully_masked_rows_get_nothing_and_no_nan() -> None:
    """A head that sees no key adds exactly 0, in the forward and in the gradient."""
    masks = [[[["key", "==", 99]], [["key", ">", "query"]]]]
    model = random_model(seed=5, masks_per_layer=masks, ffn_widths=[0])
    x = inputs(2, 4)
    streams = model.residual_stream(x)
    # head 0 never attends; head 1 attends only from query rows t < last: rows t = last and the readout get 0
    assert torch.equal(streams[1][:, 3:], streams[0][:, 3:] + model.blocks[0].mlp.b_out)
    for p in model.parameters():
        p.requires_grad_(True)
    model(x).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert torch.count_nonzero(model.blocks[0].attn.W_Q.grad[0]) == 0


def test_every_mask_side_is_written_by_one_rule() -> None:
    """term_side writes every lowering's masks (nodes, fetches, presences): the key variable,
    another variable (the query), T and a literal position, each with its offset."""
    cases = [
        (ir.PositionVariable("s"), "key"), (ir.PositionVariable("s", offset=1), "key+1"),
        (ir.PositionVariable("t"), "query"), (ir.PositionVariable("t", offset=-2), "query-2"),
        (ir.LastPosition(), "last"), (ir.LastPosition(offset=-3), "last-3"), (ir.FixedPosition(4), 4),
    ]
    assert [term_side(term, "s") for term, _ in cases] == [side for _, side in cases]
    assert term_side(ir.PositionVariable("s"), "") == "query"  # no key: every variable is the query
