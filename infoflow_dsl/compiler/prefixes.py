"""The shortest input a gather-route model takes: a causal target's prefixes, where that is proved.

The gather route (:mod:`infoflow_dsl.analysis.gather`) fetches every slot x(1), ..., x(T) by a
head of mask ``key == j``, so its circuit reads position T and, by the rule of the other routes
(a model that reads x(k) needs inputs of length ≥ k), took inputs of length exactly T only:
``input length 8 is below the minimum length 16``, where docs/language.md promises that a
causal per-token target's model gives, on a prefix x(1..T'), the first T' outputs.

That promise is kept where it can be proved, and only there. At a query t ≤ T' of a prefix, a
head whose mask confines its keys to ≤ t sees what it sees in the full run; a slot head
``key == j`` with j > T' has no key and gives 0 (:mod:`infoflow_dsl.transformer.model`), which is
what it gives on the full input padded with zero tokens when its value reads only the input's
coordinates. So the prefix's outputs are the model's outputs on that padded input, layer by
layer; when the domain holds the zero token, the padded input is one the a-priori bound covers,
and a causal target that does not name T has the same value at t ≤ T' on both. A gathered
model of such a target takes any length from its own fixed reads (x(k): k) up to T; every other
gathered model (a target that is not causal, names T, or a domain without 0: an absent slot
would feed the slot's functions a value outside the range they were built on) keeps length T,
which ``infoflowc compile`` prints (``inputs  length 16 only``) and docs/compiling.md states.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..analysis.causality import is_causal
from ..language import typed as ir
from .circuit import AttentionHead, Circuit, input_direction

#: a mask side that is the query, with its offset: ``query``, ``query-1``
_QUERY = re.compile(r"^query([+-][0-9]+)?$")
#: key OP query+k keeps key ≤ t exactly when k is at most this
_MOST_OFFSET = {"<=": 0, "==": 0, "<": 1}
_FLIPPED = {">=": "<=", ">": "<", "==": "==", "<=": ">=", "<": ">", "!=": "!="}


def gathered_min_length(program: ir.Program, circuit: Circuit) -> int:
    """The shortest input the gathered ``circuit`` of ``program`` takes: its own fixed reads'
    largest position where prefixes are proved (module docstring), else ``circuit.min_length``."""
    if not serves_prefixes(program, circuit):
        return circuit.min_length
    return max((n.position.index for n in _nodes(program) if isinstance(n, ir.Token)
                and isinstance(n.position, ir.FixedPosition)), default=1)


def serves_prefixes(program: ir.Program, circuit: Circuit) -> bool:
    """Whether ``circuit``'s outputs on every prefix x(1..T') are its outputs on the input padded
    with zero tokens, and so within its bound of the causal target on the prefix."""
    if not (is_causal(program) and circuit.output_site == "token" and _holds_zero(program.domain)):
        return False
    if any(isinstance(n, ir.LastPosition) for n in _nodes(program)):
        return False  # T: the reference on a prefix reads it as T'
    inputs = {input_direction(i) for i in range(program.dimension)}
    return all(_head_sees_no_later_key(head, inputs) for head in circuit.heads)


def _nodes(program: ir.Program) -> Iterable[object]:
    for root in (program.target, *program.token_conditions):
        yield root
        yield from ir.sub_nodes(root)


def _holds_zero(domain: ir.Box | ir.Ball) -> bool:
    return isinstance(domain, ir.Ball) or domain.low <= 0.0 <= domain.high


def _head_sees_no_later_key(head: AttentionHead, inputs: set[str]) -> bool:
    """Keys ≤ the query only, or a fixed slot whose value is 0 on a zero token; never ``last``."""
    sides = [side for condition in head.mask for side in (condition[0], condition[2])]
    if any(isinstance(side, str) and side.startswith("last") for side in sides):
        return False  # T' on a prefix, T on the padded input
    if any(_bounds_by_query(condition) for condition in head.mask):
        return True
    slot = any(c[1] == "==" and "key" in (c[0], c[2]) and isinstance(c[2] if c[0] == "key" else c[0], int)
               for c in head.mask)
    return slot and all(not form.constant and {d for d, _ in form.terms} <= inputs for form in head.value)


def _bounds_by_query(condition: tuple[str | int, str, str | int]) -> bool:
    """``key op query±k`` (either way round) holds for keys ≤ the query only."""
    left, operator, right = condition
    if right == "key":
        left, operator, right = right, _FLIPPED[operator], left
    match = _QUERY.match(right) if left == "key" and isinstance(right, str) else None
    if match is None or operator not in _MOST_OFFSET:
        return False
    return int(match.group(1) or 0) <= _MOST_OFFSET[operator]
