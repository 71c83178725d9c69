"""The rule of each RASP class in :mod:`.translator`: how an SOp is read at a position
(:data:`SOP_RULES`) and a selector as a condition on a key and a query (:data:`SELECTOR_RULES`)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..language.typed import offset_text
from .conditions import band, disjunction_atoms, few_true, nowhere, parenthesised
from .encodings import is_categorical
from .evaluation import kind
from .expressions import RASPExpr
from .fits import (
    affine_fit,
    affine_sum,
    bilinear_fit,
    bilinear_text,
    change_between,
    cut_between,
    integer_order,
    linear_text,
    snapped,
)
from .literals import TranslationError, is_number, number_text, operand, table_value, token_text
from .selectors import comparison_name, index_shift, numeric_side
from .structure import as_grid, structured
from .translator import MAX_TABLE, Deferred, Predicate, Rendered, Translator, describe, function_grid
from .values import ValueSetError, mean_values, selects_one

# ----------------------------------------------------------------------------- SOps


def _map(tr: Translator, expr: Any) -> Rendered:
    """Of a token: the token seen through f; of anything else: f of its parts (:func:`_combined`)."""
    inner = tr.sop(expr.inner)
    if inner.token:
        outer, view = expr.f, inner.view
        return Rendered(inner.at, token=True, view=outer if view is None else (lambda v: defined(outer, view(v))),
                        first=inner.first)
    parts, function = _parts(expr.inner, inner)
    return _combined(tr, expr, parts, lambda *values: defined(expr.f, function(*values)))


def _sequence_map(tr: Translator, expr: Any) -> Rendered:
    """A LinearSequenceMap of two numbers: its factors, with no value set needed; else f of the
    two SOps' parts (:func:`_combined`)."""
    if kind(expr) == "LinearSequenceMap" and expr.fst is not expr.snd:
        left, right = tr.sop(expr.fst), tr.sop(expr.snd)
        numeric = all(not (tr.categorical and side.token) or all(is_number(side.value_of(v)) for v in tr.vocabulary)
                      for side in (left, right))  # a token seen through a Map to numbers: a table of it
        if left.deferred is None and right.deferred is None and numeric:
            affine = ([float(expr.fst_fac), float(expr.snd_fac)], 0.0)
            merged = _merged_means(tr, expr, (expr.fst, expr.snd), affine)
            numbers = [tr.number(expr.fst), tr.number(expr.snd)]
            return merged or Rendered(tr.macro(expr.label, lambda p: affine_sum(affine, [n(p) for n in numbers])),
                                      first=max(left.first, right.first))
    first_parts, first = _parts(expr.fst, tr.sop(expr.fst))
    second_parts, second = _parts(expr.snd, tr.sop(expr.snd))
    by_id = {p.unique_id: p for p in (*first_parts, *second_parts)}  # each distinct SOp once (== builds an SOp)
    parts, order = tuple(by_id.values()), list(by_id)
    where_first = [order.index(p.unique_id) for p in first_parts]
    where_second = [order.index(p.unique_id) for p in second_parts]
    return _combined(tr, expr, parts, lambda *values: defined(expr.f, first(*(values[i] for i in where_first)),
                                                              second(*(values[i] for i in where_second))))


def defined(function: Callable[..., Any], *arguments: Any) -> Any:
    """``function`` of ``arguments``, or None where one is None: RASP's evaluator propagates None
    through Maps and SequenceMaps without calling their functions."""
    return None if any(a is None for a in arguments) else function(*arguments)


def _parts(expr: RASPExpr, rendered: Rendered) -> tuple[tuple[RASPExpr, ...], Callable[..., Any]]:
    if rendered.deferred is not None:
        return rendered.deferred.parts, rendered.deferred.function
    return (expr,), lambda value: value


def _combined(tr: Translator, expr: Any, parts: tuple[RASPExpr, ...], function: Callable[..., Any]) -> Rendered:
    """``function`` of the parts' values as a number: affine in numbers (a + b, 2·x − 1), else a
    table of one or two arguments over their value sets; kept deferred while its values are
    not numbers (tuples)."""
    known = tr.value_set(expr)  # None: too many values to list, all numbers (sums, means)
    rendered = [tr.sop(p) for p in parts]
    first = max(r.first for r in rendered)
    if known is not None and not all(is_number(v) for v in known if v is not None):
        return Rendered(lambda p: "", deferred=Deferred(parts, function), first=first)
    columns = [tr.columns(p, r) for p, r in zip(parts, rendered, strict=True)]
    coded = any(r.codes is not None for r in rendered)  # keyed by the index of a value, not the value
    size = math.prod(len(c) for c in columns)
    if size > MAX_GRID or (size > MAX_TABLE and (coded or any(r.token and tr.categorical for r in rendered))):
        raise _past_table(expr, columns)
    grid = function_grid(columns, function)
    tr.require_numbers(expr, list(grid.values()))
    grid = tr.filled(expr, grid)
    if len(parts) == 1 and rendered[0].condition is not None and all(v == out for ((_, v),), out in grid.items()):
        return rendered[0]  # the identity on a condition (any_negative's numerical Map): the condition itself
    if not coded and not any(r.token and tr.categorical for r in rendered):
        numbers = [tr.number(p) for p in parts]
        defined = {keys: v for keys, v in grid.items() if all(a is not None for _, a in keys)}  # None: any value
        points, values = [tuple(float(v) for _, v in keys) for keys in defined], [float(v) for v in defined.values()]
        affine = affine_fit(points, values)
        if affine is None and expr.unique_id in tr.order_only:  # compared only: any increasing map will do
            whole = integer_order(points, values)
            affine = None if whole is None else ([float(w) for w in whole], 0.0)
            _note_lexicographic(tr, expr, parts, points, whole)
        if affine is not None:
            merged = _merged_means(tr, expr, parts, affine)
            return merged or Rendered(tr.macro(expr.label, lambda p: affine_sum(affine, [n(p) for n in numbers])),
                                     first=first)
        boolean = all(v in (0, 1) for v in values)  # a 0/1 function of two SOps: a condition (few_true), not u·v
        product = bilinear_fit(points, values) if len(parts) == 2 and not boolean else None
        if product is not None:  # u·v (a mean times the length): one product, not a table of |U|·|V| entries
            return Rendered(tr.macro(expr.label, lambda p: bilinear_text(product, *(n(p) for n in numbers))),
                            first=first)
        conditions = any(r.condition is not None for r in rendered)  # conditions join as one bracket (few_true)
        pairs = as_grid(defined) if len(parts) == 2 and not conditions else None
        shaped = None if pairs is None else structured(tr, expr.label, numbers, pairs)
        if shaped is not None:  # max/min, g(u ± v), g(u) + h(v): not a table of every pair
            return Rendered(tr.macro(expr.label, shaped), first=first)
    if size > MAX_TABLE:
        raise _past_table(expr, columns)
    if len(parts) == 1 and not rendered[0].token and not coded:
        steps = _steps([(v, out) for ((_, v),), out in grid.items()])
        if steps is not None:
            number = tr.number(parts[0])
            extreme = nowhere(tr, parts[0], steps)
            if extreme is not None:  # the mean over every position of thresholds, tested against 0
                return Rendered(tr.macro(expr.label, lambda p: f"[{extreme(p)}]"), first=first, condition=extreme)
            threshold = band(steps, number)
            if threshold is not None:  # a 0/1 function of a number: one condition, which a bracket can join
                condition, atoms = threshold
                return Rendered(tr.macro(expr.label, lambda p: f"[{condition(p)}]"), first=first,
                                condition=condition, atoms=atoms)
            return Rendered(tr.macro(expr.label, lambda p: _steps_text(steps, number(p))), first=first)
    joined = few_true(grid, rendered)
    if joined is not None:
        return Rendered(tr.macro(expr.label, lambda p: f"[{joined(p)}]"), first=first, condition=joined,
                        atoms=disjunction_atoms(grid, rendered))
    if len(parts) > 2:
        raise TranslationError(f"{describe(expr)}: a function of {len(parts)} SOps that is not affine is not "
                               f"compiled yet (a table holds one or two)", expr)
    entries = {tuple(k for k, _ in keys): table_value(v, describe(expr)) for keys, v in grid.items()}
    # a number key: the compiler's value set of the argument may hold values RASP's does not
    default = None if all(r.token for r in rendered) else "0"
    name = tr.table(f"{expr.label}_table", entries, default)
    return Rendered(tr.macro(expr.label, lambda p: f"{name}({', '.join(r.at(p) for r in rendered)})"), first=first)


#: The most pairs a function of two SOps is evaluated at (to find its structure; a table is at most MAX_TABLE).
MAX_GRID = 1_000_000


def _past_table(expr: Any, columns: list[list[tuple[str, Any]]]) -> TranslationError:
    return TranslationError(f"{describe(expr)}: a table of {' × '.join(str(len(c)) for c in columns)} values is "
                            f"past {MAX_TABLE:,} entries, and the function is not max, min, of u ± v or of u and v "
                            f"apart", expr)


def _note_lexicographic(tr: Translator, expr: Any, parts: tuple[RASPExpr, ...], points: list[tuple[float, ...]],
                        whole: list[int] | None) -> None:
    """Record ``expr`` = w·major + index (w > the largest index gap, major whole-numbered): its
    comparisons are (major, position) in lexicographic order."""
    if whole is None or len(parts) != 2 or kind(parts[1]) != "IndicesType" or whole[1] != 1:
        return
    majors = {p[0] for p in points}
    if whole[0] >= tr.length and all(float(m).is_integer() for m in majors):
        tr.lexicographic[expr.unique_id] = parts[0]


#: The most value changes a Map of a number is written with as brackets ([a >= c]) rather than a table.
MAX_STEPS = 3


def _steps(points: list[tuple[Any, Any]]) -> tuple[float, list[tuple[str, float]]] | None:
    """f on its sorted arguments as f(v₀) + Σₖ Δₖ·[a >= cₖ], cₖ a short decimal in the middle
    half of the gap where f changes (no value of a lies there, and a decimal literal is a binary
    float that an exact value never equals), when f changes at most MAX_STEPS times; else None."""
    ordered = sorted(points, key=lambda p: float(p[0]))
    start, steps = snapped(ordered[0][1]), []
    for (previous, before), (argument, after) in itertools.pairwise(ordered):
        if float(after) != float(before):
            steps.append((cut_between(snapped(previous), snapped(argument)), change_between(before, after)))
    return (start, steps) if len(steps) <= MAX_STEPS else None


def _steps_text(steps: tuple[float, list[tuple[str, float]]], argument: str) -> str:
    start, changes = steps
    return linear_text([(change, f"[{argument} >= {parenthesised(cut)}]") for cut, change in changes], start)


def _full(tr: Translator, expr: Any) -> Rendered:
    if not is_number(expr.fill):
        raise TranslationError(f"{describe(expr)}: a constant token {expr.fill!r} is not compiled yet (a constant "
                               f"number is)", expr)
    return Rendered(lambda p: operand(expr.fill))


def _refused(why: str) -> Callable[[Translator, Any], Rendered]:
    def rule(tr: Translator, expr: Any) -> Rendered:
        raise TranslationError(f"{describe(expr)}: {why}", expr)

    return rule


def _selector_width(tr: Translator, expr: Any) -> Rendered:
    predicate = tr.selector(expr.selector)
    if predicate.always:
        return Rendered(lambda p: "len")
    if predicate.never:
        return Rendered(lambda p: "0")
    s = tr.binder()
    return Rendered(tr.macro(expr.label, lambda p: f"sum_<{s}> {predicate.bracket(s, p)}"))


def _aggregate(tr: Translator, expr: Any) -> Rendered:
    """The Aggregate as :func:`_aggregate_read` writes it, defined from :func:`_first_defined` on."""
    value, position = tr.value(expr.sop), _selected_position(tr, expr.selector)
    shift = index_shift(tr, expr.selector)
    rendered = _aggregate_read(tr, expr, value, position, shift)
    return replace(rendered, first=_first_defined(tr, expr, value, position, shift))


def _first_defined(tr: Translator, expr: Any, value: Rendered, position: str | None, shift: int | None) -> int:
    """The first position from which RASP defines the Aggregate as written (Rendered.first).
    Shifted by k (shift_by: one key, t − k, per query t), it is None at positions 1..k, where
    nothing is selected and the default is None, and where it reads a value that is None there
    (positions below value.first + k): defined from value.first + k (from 1 where the default
    is a value and the value is defined everywhere; a default under a shifted value that is
    itself shifted is counted undefined, a loss of precision only). Read at its own position, it
    is as defined as the value. Any other Aggregate of a value undefined at the first positions
    selects one of them at some query (RASP's value None there, or its evaluator raises): noted
    as undefined in RASP, the model's answer there unspecified."""
    if shift is not None:
        return 1 if expr.default is not None and value.first == 1 else value.first + shift
    if position == "{p}":
        return value.first
    if value.first > 1:
        tr.undefined.append(f"{describe(expr)}, where it selects a position before {value.first}, at which "
                            f"{describe(expr.sop)} is None: RASP's value there is None (or its evaluator raises); "
                            f"the model's answer there is unspecified")
    return 1


def _aggregate_read(tr: Translator, expr: Any, value: Rendered, position: str | None, shift: int | None) -> Rendered:
    """A categorical Aggregate of a token (the input's, or a string of it): the token at the one
    selected position (``x(t - k)``, ``x(len + 1 - t)``, else by a retrieval score); of coded
    values: the index, fetched as a number; everything else, numbers of a token included where
    several positions may be selected: the mean of the selected values (:func:`_aggregate_number`)."""
    if value.codes is not None:  # a categorical Aggregate of coded values reads the index
        _note_several(tr, expr, "the model's answer there is unspecified (a mean of indices)")
        return replace(_aggregate_number(tr, expr, position, value), codes=value.codes)
    if shift is not None and expr.unique_id in tr.row_only and is_categorical(expr) and value.token \
            and re.fullmatch(r"\w+\(p\)", value.at("p")):
        # read at the output's position only: x(t - k) (or a token macro's NAME(t - k): a shifted shift),
        # and the target starts where RASP's value is defined (:func:`_first_defined`)
        return Rendered(lambda p: value.at(f"{p}{offset_text(-shift)}"), token=True, view=value.view)
    if position is not None and value.token and value.at("p") == "x(p)":
        return Rendered(lambda p: f"x({position.replace('{p}', p)})", token=True, view=value.view)
    averaged = value.view is not None and all(is_number(value.value_of(v)) for v in tr.vocabulary) \
        and not selects_one(expr.selector, tr.length)
    if position is None and is_categorical(expr) and value.token and value.at("p") == "x(p)" and not averaged:
        # a token (the input's, or a string of it): the selected one; numbers of a token, where the
        # selector may select several positions, are averaged below, as RASP's evaluator does
        predicate = tr.selector(expr.selector)
        if not predicate.never:
            s = tr.binder()
            score = _retrieval_score(tr, expr.selector, predicate, s)
            at = tr.macro(expr.label, lambda p: f"x({score.replace('{p}', p)})")
            _note_several(tr, expr, "the model answers the token at the first of them")
            return Rendered(at, token=True, view=value.view)
    return _aggregate_number(tr, expr, position, value)


def _note_several(tr: Translator, expr: Any, answer: str) -> None:
    """Record where a categorical Aggregate of tokens may select several positions (unless
    :func:`selects_one` shows it never does): RASP's evaluator averages the values there
    (numbers) or raises (strings), and the model gives one of them."""
    if selects_one(expr.selector, tr.length):
        return
    tr.undefined.append(f"{describe(expr)}, where its selector selects several positions: RASP's evaluator "
                        f"averages them (numbers) or raises (other values); {answer}")


def _aggregate_number(tr: Translator, expr: Any, position: str | None, value: Rendered) -> Rendered:
    """The Aggregate as a number: the value at the one selected position, else the mean."""
    if position in ("{p}", "len", "1"):
        number, inner = tr.number(expr.sop), value.condition

        def at(p: str) -> str:
            return position.replace("{p}", p)

        return Rendered(lambda p: number(at(p)), condition=None if inner is None else (lambda p: inner(at(p))))
    predicate = tr.selector(expr.selector)
    default = expr.default if is_number(expr.default) else 0
    if predicate.never:
        return Rendered(lambda p: operand(default))
    number = tr.number(expr.sop)
    s = tr.binder()
    if predicate.positional == "==":
        return Rendered(number)
    if predicate.always or predicate.positional in ("<=", ">="):  # never empty: the query's own position is in it
        tr.means[expr.unique_id] = ("all" if predicate.always else str(predicate.positional), expr.sop)
        return Rendered(tr.macro(expr.label, lambda p: f"{_mean_head(tr.means[expr.unique_id][0], s, p)} {number(s)}"))
    r = tr.binder()
    width = tr.macro(f"{expr.label}_width", lambda p: f"sum_<{s}> {predicate.bracket(s, p)}")
    total = tr.macro(f"{expr.label}_total", lambda p: f"sum_<{r}> {predicate.bracket(r, p)} * {number(r)}")
    inverse = tr.inverse()
    rest = "" if not default else f" + {operand(default)} * [{width('{p}')} == 0]"
    return Rendered(tr.macro(expr.label, lambda p: f"{total(p)} * {inverse}({width(p)})" + rest.replace("{p}", p)),
                    aliases=mean_aliases(tr, expr.sop))


def mean_aliases(tr: Translator, values: RASPExpr) -> tuple[tuple[float, Any], ...]:
    """(s·fl(1/n), s/n) for each sum s of n ≤ N values of ``values`` where the two floats differ:
    the model's mean Σ·inverse(n) is the first (exact in its arithmetic, then read as a float),
    RASP's evaluator's the second. None where the sums pass MAX_VALUES (no aliases: a table of
    such a mean is then keyed by RASP's values alone)."""
    numbers = [float(v) for v in tr.values_of(values) if is_number(v)]
    sums, found = set(numbers), {}
    for count in range(1, tr.length + 1):
        if count > 1:
            sums = {s + v for s in sums for v in numbers}
        if len(sums) > MAX_ALIASES:
            return ()
        for total in sums:
            model, rasp_mean = total * (1 / count), total / count
            if model != rasp_mean:
                found[model] = rasp_mean
    return tuple(sorted(found.items()))


#: The most sums :func:`mean_aliases` lists per count.
MAX_ALIASES = 20_000


def _mean_head(op: str, s: str, p: str) -> str:
    return f"mean_<{s}>" if op == "all" else f"mean_<{s} : {s} {op} {p}>"


def _merged_means(tr: Translator, expr: Any, parts: tuple[RASPExpr, ...],
                  affine: tuple[list[float], float]) -> Rendered | None:
    """An affine function of means over the same never-empty range is one mean of the affine
    function of their values (the weights sum to 1): pair_balance's opens − closes."""
    ranges = {tr.means[p.unique_id][0] for p in parts if p.unique_id in tr.means}
    if len(ranges) != 1 or not all(p.unique_id in tr.means for p in parts):
        return None
    (op,) = ranges
    averaged = [tr.means[p.unique_id][1] for p in parts]
    _set_mean_values(tr, expr, averaged, affine)
    values = [tr.number(v) for v in averaged]
    s = tr.binder()
    body = affine_sum(affine, [v(s) for v in values])
    return Rendered(tr.macro(expr.label, lambda p: f"{_mean_head(op, s, p)} {body}"))


def _set_mean_values(tr: Translator, expr: Any, averaged: list[Any], affine: tuple[list[float], float]) -> None:
    """The merged mean's value set: means of the affine function of the values at one position
    (of one token, when every averaged SOp reads the token alone), not RASP's every pair of the
    two means' sets, which grows as T⁴ (pair_balance at T = 40: past 100,000)."""
    rendered = [tr.sop(v) for v in averaged]
    if all(r.token for r in rendered):
        points = [tuple(r.value_of(token) for r in rendered) for token in tr.vocabulary]
    else:
        points = list(itertools.product(*(tr.values_of(v) for v in averaged)))
    alphas, gamma = affine
    per_position = frozenset(sum(a * float(v) for a, v in zip(alphas, point, strict=True)) + gamma
                             for point in points)
    try:
        tr.inference.sets[expr.unique_id] = mean_values(per_position, tr.length, expr)
    except ValueSetError:
        tr.inference.sets[expr.unique_id] = None


def _retrieval_score(tr: Translator, selector: Any, predicate: Predicate, s: str) -> str:
    """Where a categorical Aggregate reads its token: the selected position, as
    ``argmin_<s> |k(s) - q(t)|`` for numbers compared by EQ (Tracr compiles it where exactly one
    key matches: the distance is 0 there and at least the values' gap elsewhere), position 1
    for a selector of every position, else ``argmax_<s> [selector]``."""
    if predicate.always:  # every position: RASP defines the output only at length 1 (a mean of strings)
        return "1"
    if kind(selector) == "Select" and comparison_name(selector.predicate) == "EQ":
        keys, queries = tr.sop(selector.keys), tr.sop(selector.queries)
        if numeric_side(tr, selector.keys, keys) and numeric_side(tr, selector.queries, queries):
            k, q = tr.number(selector.keys), tr.number(selector.queries)
            return f"argmin_<{s}> |{k(s)} - {q('{p}')}|"
    return f"argmax_<{s}> {predicate.bracket(s, '{p}')}"


#: The positions a selector of one key per query can name, by (a, b, k) of P = a·t + b·len + k.
POSITIONS: dict[tuple[float, float, float], str] = {(1, 0, 0): "{p}", (-1, 1, 1): "len + 1 - {p}", (0, 1, 0): "len",
                                                   (0, 0, 1): "1"}


def _selected_position(tr: Translator, selector: Any) -> str | None:
    """The position ``Select(indices, q, EQ)`` selects when q depends on positions and length
    alone (evaluated at every length, then fitted exactly by P = a·t + b·len + k) and P is a
    position every query can read (its own, the last, the first, the mirror of its own)."""
    if kind(selector) != "Select" or kind(selector.keys) != "IndicesType":
        return None
    if comparison_name(selector.predicate) != "EQ":
        return None
    if _reads_tokens(tr, selector.queries):
        return None
    from .evaluation import evaluate

    grid = {}
    for n in range(1, tr.length + 1):
        values = evaluate(selector.queries, [tr.vocabulary[0]] * n)
        if not all(is_number(v) for v in values):
            return None
        grid.update({(t, n): float(v) + 1 for t, v in enumerate(values, start=1)})
    if tr.length < 2:
        return None
    b = grid[1, 2] - grid[1, 1]  # the triangle t ≤ n is no grid: solve at (1, 1), (1, 2), (2, 2), then check
    a = grid[2, 2] - grid[1, 2]
    k = grid[1, 1] - a - b
    if any(a * t + b * n + k != value for (t, n), value in grid.items()):
        return None
    return POSITIONS.get((a, b, k))


def _reads_tokens(tr: Translator, expr: Any) -> bool:
    """Whether ``expr`` can change with the tokens, not only with positions and length. A
    SelectorWidth of a selector of every position is the length (Tracr's ``make_length()``, which
    its library uses where ``rasp.length`` would do), though its Select compares tokens."""
    if kind(expr) == "SelectorWidth" and tr.selector(expr.selector).always:
        return False
    return kind(expr) == "TokensType" or any(_reads_tokens(tr, child) for child in expr.children)


def target_text(tr: Translator, program: RASPExpr) -> str:
    """The target: a token of the input, new tokens by a table of tokens (a Map or a
    SequenceMap to strings: the model answers with them), or a number."""
    rendered = tr.sop(program)
    if rendered.plain_token:
        return rendered.at("t")  # a token output: the model answers with a token of the vocabulary
    parts: tuple[RASPExpr, ...]
    if rendered.codes is not None:  # the index of a value: one token per index, the first where none is
        coded: dict[tuple[str, ...], str] = {(number_text(i),): token_text(v, describe(program))
                                             for i, v in enumerate(rendered.codes)}
        name = tr.table(f"{program.label}_tokens", coded, token_text(rendered.codes[0], describe(program)))
        return f"{name}({rendered.at('t')})"
    if rendered.token and not all(is_number(rendered.value_of(v)) or rendered.value_of(v) is None
                                  for v in tr.vocabulary):
        parts, function = (program,), lambda value: value
        columns = [tr.columns(program, rendered)]
        arguments = [rendered.at]
    elif rendered.deferred is not None:
        parts, function = rendered.deferred.parts, rendered.deferred.function
        columns = [tr.columns(p, tr.sop(p)) for p in parts]
        arguments = [tr.sop(p).at for p in parts]
    else:
        return tr.number(program)("t")
    if len(parts) > 2:
        raise TranslationError(f"{describe(program)}: new tokens from {len(parts)} SOps: a table holds one or two",
                               program)
    entries = {tuple(k for k, _ in keys): token_text(value, describe(program))
               for keys, value in tr.filled(program, function_grid(columns, function)).items()}
    # a number key: the compiler's value set may hold values RASP's does not (a mean's default 0)
    default = None if all(tr.sop(p).token for p in parts) else next(iter(entries.values()))
    name = tr.table(f"{program.label}_tokens", entries, default)
    return f"{name}({', '.join(at('t') for at in arguments)})"


SOP_RULES: dict[str, Callable[[Translator, Any], Rendered]] = {
    "TokensType": lambda tr, expr: Rendered(lambda p: f"x({p})", token=True),
    "IndicesType": lambda tr, expr: Rendered(lambda p: f"({p} - 1)"),
    "LengthType": lambda tr, expr: Rendered(lambda p: "len"),
    "Map": _map,
    "SequenceMap": _sequence_map,
    "LinearSequenceMap": _sequence_map,
    "Full": _full,
    "ConstantSOp": _refused("a constant sequence is not compiled yet (its values depend on the input's length)"),
    "Aggregate": _aggregate,
    "SelectorWidth": _selector_width,
}
