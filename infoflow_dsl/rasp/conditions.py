"""0/1 SOps as conditions that a bracket can join (:mod:`.rules` asks): a Map of a number with
one or two changes is ``a < c``, ``a >= c`` or a band; a 0/1 function of conditions and tokens
is a disjunction or a few conjunctions of them; and "no position satisfies a disjunction of
thresholds" (RASP's mean over every position of such a 0/1 SOp, tested against 0) is a
conjunction of minima and maxima over positions (Tracr's make_shuffle_dyck: ``has_neg``, the
mean of ``balance < 0`` over every position, is 0 exactly where ``min_<s> balance(s) >= 0``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .translator import Atom, Rendered, Translator

#: The most argument tuples a 0/1-valued function is written for as a bracket of equalities.
MAX_TRUE = 3
#: The threshold a condition's atom negates to.
NEGATED = {"<": ">=", ">=": "<"}


def few_true(grid: dict[tuple[tuple[str, Any], ...], Any], rendered: list[Rendered]) -> Callable[[str], str] | None:
    """A 0/1-valued function of tokens and of SOps written as conditions, true on at most MAX_TRUE
    tuples, as ``(a == "x" and b == "y") or ...``, or false at one tuple only, as the disjunction
    of the other values of its parts (a token's indicator is free, a condition joins the
    bracket: detect_pattern's three tests are one bracket); else None (a number's equality costs
    more than a table's steps)."""
    if not all(r.token or r.condition is not None for r in rendered):
        return None
    if not all(isinstance(v, bool) or v in (0, 1) for v in grid.values()):
        return None
    true = [keys for keys, value in grid.items() if value]
    false = [keys for keys, value in grid.items() if not value]
    if len(rendered) > 1 and len(false) == 1 and len(true) == len(grid) - 1:
        (keys,) = false
        return lambda p: " or ".join(_other(r, k, p) for r, (k, _) in zip(rendered, keys, strict=True))
    if not true or len(true) > MAX_TRUE:
        return None

    def test(r: Rendered, key: str, p: str) -> str:
        if r.condition is None:
            return f"{r.at(p)} == {key}"
        return f"({r.condition(p)})" if float(key) else f"not ({r.condition(p)})"

    def condition(p: str) -> str:
        conjunctions = [" and ".join(test(r, k, p) for r, (k, _) in zip(rendered, keys, strict=True))
                        for keys in true]
        return " or ".join(f"({c})" if len(true) > 1 and len(rendered) > 1 else c for c in conjunctions)

    return condition


def disjunction_atoms(grid: dict[tuple[tuple[str, Any], ...], Any],
                      rendered: list[Rendered]) -> tuple[Atom, ...] | None:
    """The thresholds of a 0/1 function that is the disjunction of its parts (false where every
    part is 0, true elsewhere), each part a disjunction of thresholds itself; else None."""
    if any(r.atoms is None for r in rendered):
        return None
    if any(bool(value) != any(float(k) for k, _ in keys) for keys, value in grid.items()):
        return None
    return tuple(atom for r in rendered for atom in r.atoms or ())


def _other(r: Rendered, key: str, p: str) -> str:
    """A part's value is not ``key``: a token's inequality, a condition's own truth or its negation."""
    if r.condition is None:
        return f"{r.at(p)} != {key}"
    return f"not ({r.condition(p)})" if float(key) else f"({r.condition(p)})"


def band(steps: tuple[float, list[tuple[str, float]]],
         number: Callable[[str], str]) -> tuple[Callable[[str], str], tuple[Atom, ...] | None] | None:
    """A 0/1 function of a number with at most two changes, as a condition on it: ``a >= c``,
    ``a < c`` (one threshold: its atom), ``a >= c1 and a < c2`` or ``a < c1 or a >= c2``; else
    None."""
    start, changes = steps
    values = [start]
    for _, change in changes:
        values.append(values[-1] + change)
    if not changes or any(v not in (0.0, 1.0) for v in values) or len(changes) > 2:
        return None
    cuts = [parenthesised(cut) for cut, _ in changes]
    if len(changes) == 1:
        op = ">=" if start == 0.0 else "<"
        return (lambda p: f"{number(p)} {op} {cuts[0]}"), ((number, op, cuts[0]),)
    if start == 0.0:
        return (lambda p: f"{number(p)} >= {cuts[0]} and {number(p)} < {cuts[1]}"), None
    return (lambda p: f"{number(p)} < {cuts[0]} or {number(p)} >= {cuts[1]}"), None


def nowhere(tr: Translator, mean: Any, steps: tuple[float, list[tuple[str, float]]]) -> Callable[[str], str] | None:
    """``[m < c]`` (or ``[m >= c]``) for m the mean over every position of a disjunction of
    thresholds and c between 0 and m's smallest positive value: no position (some position)
    satisfies it, ``min_<s> a(s) >= c₁ and max_<s> b(s) < c₂ ...`` (its negation); else None."""
    averaged = tr.means.get(mean.unique_id)
    if averaged is None or averaged[0] != "all":
        return None
    atoms = tr.sop(averaged[1]).atoms
    start, changes = steps
    positive = [v for v in tr.values_of(mean) if v > 0]
    if atoms is None or len(changes) != 1 or not positive or not 0 < float(changes[0][0]) < min(positive):
        return None
    nothing = start == 1.0  # 1 where the mean is 0: no position satisfies any threshold
    extremes = []
    for number, op, cut in atoms:  # no s with a(s) < c ⇔ min a >= c; none with a(s) >= c ⇔ max a < c
        s = tr.binder()
        extremes.append((f"{'min' if op == '<' else 'max'}_<{s}> {number(s)}", NEGATED[op], cut))
    if nothing:
        return lambda p: " and ".join(f"{extreme} {op} {cut}" for extreme, op, cut in extremes)
    return lambda p: " or ".join(f"{extreme} {NEGATED[op]} {cut}" for extreme, op, cut in extremes)


def parenthesised(number: str) -> str:
    """A decimal as an operand: a negative one in parentheses."""
    return f"({number})" if number.startswith("-") else number
