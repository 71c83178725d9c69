"""Information sets (docs/theory.md §3, after IF): which positions' information each token holds after
each layer. I(t, 0) = {t}, I(T+1, 0) = {T+1}; a retrieval head adds the retrieved position's set,
a position head the fixed position's, a uniform head everyone's. The schedule reports them
symbolically, e.g. I(t,1) = {t, s*(t)}."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..language import typed as ir
from .comparisons import ComparisonTree

TOKEN = "token"


class InformingHead(Protocol):
    """What the information sets read of a head of the schedule (``schedule.Head``): its layer,
    its site (``token`` or ``readout``), its kind, the fixed position a position head fetches,
    the variable a token retrieval reads, and the name of the comparison node it realises."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def site(self) -> str: ...
    @property
    def layer(self) -> int: ...
    @property
    def position(self) -> ir.Position | None: ...
    @property
    def reads(self) -> str: ...


@dataclass(frozen=True)
class InfoSets:
    """The symbolic information sets of an ordinary token and of the readout after ``layer``."""

    layer: int
    token: tuple[str, ...]
    readout: tuple[str, ...]



Element = tuple[str, ...]  # innermost root last: ("s", "t") is s*(t)


def _render(element: Element) -> str:
    text = element[-1]
    for label in reversed(element[:-1]):
        text = f"{label}*({text})"
    return text


def _rooted(elements: set[Element], root: str) -> set[Element]:
    """The token set with the generic ordinary token ``t`` replaced by ``root``."""
    return {(*e[:-1], root) if e[-1] == "t" else e for e in elements}


def information_sets(heads: Sequence[InformingHead], tree: ComparisonTree, layers: int) -> tuple[InfoSets, ...]:
    token: set[Element] = {("t",)}
    readout: set[Element] = {("T+1",)}
    out = []
    for layer in range(1, layers + 1):
        new_token, new_readout = set(token), set(readout)
        for head in heads:
            if head.layer != layer:
                continue
            target = new_token if head.site == TOKEN else new_readout
            target |= _gained(head, tree, token)
        token, readout = new_token, new_readout
        rendered_token = tuple(sorted(_render(e) for e in token))
        out.append(InfoSets(layer, rendered_token, tuple(sorted(_render(e) for e in readout))))
    return tuple(out)


def _gained(head: InformingHead, tree: ComparisonTree, token: set[Element]) -> set[Element]:
    if head.kind == "position":
        return _rooted(token, ir.position_label(head.position))  # type: ignore[arg-type]
    if head.kind in ("presence", "length"):  # a 0/1 guard, a count: no token's information
        return set()
    if head.kind == "uniform":
        return _rooted(token, "1..T")
    variable = head.reads or tree.node(head.name).variables[0]
    if head.site == TOKEN:  # s*(t): the retrieved position as seen from token t
        return {(variable, *e) if e[-1] == "t" else e for e in token} | {(variable, "t")}
    return _rooted(token, f"{variable}*")
