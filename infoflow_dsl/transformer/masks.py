"""The attention-mask vocabulary: how a head's mask is written into the config and read back.

A head's mask is a tuple of conditions ``(left, op, right)``, all of which must hold for query
position t to see key position s. A side is ``"key"`` (s), ``"query"`` (t) or ``"last"`` (T',
this batch's length), each optionally offset (``"query-1"`` is t − 1), or an integer position.
Positions are 1-based; the readout token's query position is T'+1. The mask
``(("key", "==", "query-1"),)`` is a previous-token head.

The writer side (:func:`mask_side`, :func:`position_side`, :func:`conditions_mask`,
:func:`presence_mask`, :func:`fetch_mask`) turns the typed program's position conditions into
such tuples, and :func:`mask_json` into the config's JSON; the reader side (:func:`check_mask`)
validates them from the JSON config, and :func:`allowed_pairs` evaluates them on position
indices at run time (never stored as a T × T matrix).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..language import typed as ir

if TYPE_CHECKING:  # the vocabulary is torch-free (analyze's plot reads it); allowed_pairs imports torch
    import torch
    from torch import Tensor

#: A mask side: ``key``, ``query``, ``last`` (optionally offset: ``query-1``) or a 1-based position.
Side = str | int
#: One condition ``(left, op, right)`` of a head's mask.
Condition = tuple[Side, str, Side]
#: A head's mask: every condition must hold.
HeadMask = tuple[Condition, ...]

MASK_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
}
MASK_SIDES = ("key", "query", "last")
MASK_SIDE = re.compile(rf"^({'|'.join(MASK_SIDES)})([+-][0-9]+)?$")  # a side, optionally offset: "query-1"


# ---------------------------------------------------------------------------- writing


def mask_side(side: str, offset: int) -> str:
    """A side with an offset: ``query``, ``key``, ``last``, or ``query-1``, ``last-2``, ``key+1``."""
    return f"{side}{offset:+d}" if offset else side


def position_side(label: str) -> Side:
    """The side a fetch label names: ``t - 1`` -> ``query-1``, ``T - 2`` -> ``last-2``, ``3`` -> 3."""
    if label.isdigit():
        return int(label)
    side = "query" if label.startswith("t") else "last"
    offset = label[1:].replace(" ", "")
    return mask_side(side, int(offset) if offset else 0)


def term_side(term: ir.PositionTerm, key: str | int) -> Side:
    """The side of a position term when ``key`` (a variable's name, or a fixed slot's index) is
    the key: that variable or slot is ``key`` (with the term's offset), any other variable is
    the query, ``T`` is ``last`` and any other fixed position its index."""
    if isinstance(term, ir.PositionVariable):
        return mask_side("key" if term.name == key else "query", term.offset)
    if isinstance(term, (ir.LastPosition, ir.RunLength)):  # T, or len in a token program: T'
        return mask_side("last", term.offset)
    return "key" if term.index == key else term.index


def conditions_mask(conditions: Sequence[ir.PositionCondition], key: str | int) -> HeadMask:
    """The position conditions as mask conditions, ``key`` read as the key (:func:`term_side`):
    for a head reducing over variable s, ``conditions_mask(range, "s")``."""
    return tuple((term_side(c.left, key), c.operator, term_side(c.right, key)) for c in conditions)


def presence_mask(index: int, conditions: Sequence[ir.PositionCondition]) -> HeadMask:
    """The mask of ``present(index : conditions)``: key == index, plus the conditions with slot
    ``index`` read as the key and the token's variable as the query."""
    return (("key", "==", index), *conditions_mask(conditions, index))


def fetch_mask(label: str, causal: bool) -> HeadMask:
    """The mask of a head fetching x(label): key == the label's side (:func:`position_side`);
    with ``causal``, also key <= query (no key after the query)."""
    mask: HeadMask = (("key", "==", position_side(label)),)
    return (*mask, ("key", "<=", "query")) if causal else mask


def mask_json(mask: HeadMask) -> list[list[Side]]:
    """A head's mask as the config stores it: a JSON list of ``[left, op, right]``."""
    return [list(condition) for condition in mask]


# ---------------------------------------------------------------------------- reading


def check_condition(cond: Any, where: str) -> Condition:
    """One condition of the config as a tuple; raises ValueError naming the fault."""
    if not isinstance(cond, (list, tuple)) or len(cond) != 3:
        raise ValueError(f"{where}: a mask condition must be [left, op, right], got {cond!r}")
    left, op, right = cond
    if op not in MASK_OPS:
        raise ValueError(f"{where}: unknown mask operator {op!r} (expected one of {', '.join(MASK_OPS)})")
    for side in (left, right):
        is_literal = isinstance(side, int) and not isinstance(side, bool)
        if not is_literal and not (isinstance(side, str) and MASK_SIDE.match(side)):
            raise ValueError(f"{where}: a mask side must be 'key', 'query', 'last' (optionally with an offset, "
                             f"'query-1') or an integer, got {side!r}")
    return left, op, right


def check_mask(conditions: Any, where: str, head: str) -> HeadMask:
    """A head's ``mask`` entry of the config (``where``: the layer and head, ``head``: its name)."""
    if not isinstance(conditions, (list, tuple)):
        raise ValueError(f"{where}: 'mask' must be a list of conditions, got {conditions!r}")
    return tuple(check_condition(c, f"{where} ({head})") for c in conditions)


def side_position(side: Side, query: Any, key: Any, last: Any) -> Any:
    """The position a side names for (query, key) at length ``last``: integers for one pair, or
    tensors that broadcast for all pairs at once."""
    if not isinstance(side, str):
        return side
    base, offset = MASK_SIDE.match(side).groups()  # type: ignore[union-attr]
    return {"key": key, "query": query, "last": last}[base] + int(offset or 0)


def admitted(mask: HeadMask, query: Any, key: Any, last: Any) -> Any:
    """Every condition of ``mask`` at (query, key, last): a bool for one pair, a bool tensor for
    broadcast tensors of positions (True where the mask has no condition)."""
    allowed: Any = True
    for left, op, right in mask:
        allowed = allowed & MASK_OPS[op](side_position(left, query, key, last), side_position(right, query, key, last))
    return allowed


def admits(mask: HeadMask, query: int, key: int, last: int) -> bool:
    """Does ``mask`` let query position ``query`` see key ``key`` at length ``last``?"""
    return bool(admitted(mask, query, key, last))


def allowed_pairs(masks: Sequence[HeadMask], length: int, rows: slice | None = None,
                  device: torch.device | str | None = None) -> Tensor:
    """Allowed (query, key) pairs of each head: bool (H, N, T') for the query rows ``rows`` of
    the T'+1 (all of them by default), query t = row + 1, key s = 1..T', last = T'."""
    import torch

    rows = rows or slice(0, length + 1)
    query = torch.arange(rows.start + 1, rows.stop + 1, device=device).unsqueeze(1)  # (N, 1)  positions t
    key = torch.arange(1, length + 1, device=device).unsqueeze(0)  # (1, T')     positions s
    count = rows.stop - rows.start
    heads = [torch.zeros(0, count, length, dtype=torch.bool, device=device)]  # H = 0 still stacks
    for conditions in masks:
        allowed = torch.ones(count, length, dtype=torch.bool, device=device) & admitted(conditions, query, key, length)
        heads.append(allowed[None])
    return torch.cat(heads)
