"""The rule of each RASP selector class in :mod:`.translator` (:data:`SELECTOR_RULES`): a
selector as a condition on a key position s and a query position t, and what the SOp rules
(:mod:`.rules`) ask of selectors (a Comparison's name, an index shift, a numeric side)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..language.typed import offset_text
from .evaluation import kind
from .expressions import RASPExpr
from .literals import TranslationError, is_number
from .translator import ALWAYS, MAX_TABLE, NEVER, OPERATORS, Predicate, Rendered, Translator, describe

#: (strictly, or-equal) ordering of a lexicographic comparison, by the comparison's operator.
LEXICOGRAPHIC = {"<": ("<", "<"), "<=": ("<", "<="), ">": (">", ">"), ">=": (">", ">=")}


def _lexicographic(tr: Translator, major: RASPExpr, op: str) -> Callable[[str, str], str]:
    """k(s) op k(t) for k = w·m + index: ``m(s) < m(t) or (m(s) == m(t) and s < t)``."""
    m = tr.number(major)
    if op in ("==", "!="):
        return lambda s, t: f"{m(s)} {op} {m(t)} {'and' if op == '==' else 'or'} {s} {op} {t}"
    strict, last = LEXICOGRAPHIC[op]
    return lambda s, t: f"{m(s)} {strict} {m(t)} or ({m(s)} == {m(t)} and {s} {last} {t})"




def comparison_name(predicate: object) -> str | None:
    """The name of a Comparison (this package's or Tracr's enum), or None for a function."""
    name = getattr(predicate, "name", None)
    return name if name in (*OPERATORS, "TRUE", "FALSE") else None


def _select(tr: Translator, expr: Any) -> Predicate:
    combined = getattr(expr, "combined", None)
    if combined is not None:  # merged by & | ~ (selector_logic): its parts' conditions joined
        return _joined(tr, combined)
    name = comparison_name(expr.predicate)
    if name == "TRUE":
        return ALWAYS
    if name == "FALSE":
        return NEVER
    keys, queries = expr.keys, expr.queries
    if name is not None and kind(keys) == kind(queries) == "IndicesType":
        return _positional(ORDERINGS[OPERATORS[name]])
    key, query = tr.value(keys), tr.value(queries)
    none_side = next((side for side, r in ((keys, key), (queries, query))
                      if not r.token and None in (tr.value_set(side) or ())), None)
    if name is None and none_side is not None:
        raise TranslationError(f"{describe(expr)}: {describe(none_side)} is None where a Map gives None, and RASP "
                               f"calls the predicate function on None: compare it with a Comparison "
                               f"(rasp.Comparison.EQ, ...), which is undefined there", expr)
    if name is None and max(key.first, query.first) > 1:
        raise TranslationError(f"{describe(expr)}: its {'keys' if key.first > 1 else 'queries'} are None at the "
                               f"first positions (a shifted SOp), where RASP calls the predicate function on None: "
                               f"compare them with a Comparison (rasp.Comparison.EQ, ...), which is undefined there",
                               expr)
    if max(key.first, query.first) > 1:  # a Comparison of None: RASP's evaluator raises on every such input
        tr.undefined.append(f"{describe(expr)}, whose {'keys' if key.first > 1 else 'queries'} are None at the first "
                            f"positions (a shifted SOp): RASP's evaluator raises there (a Comparison of None); the "
                            f"model's answer on such inputs is unspecified")
    if name is not None and keys is queries and keys.unique_id in tr.lexicographic:
        return Predicate(_lexicographic(tr, tr.lexicographic[keys.unique_id], OPERATORS[name]))
    if name in ("EQ", "NEQ") and key.plain_token and query.plain_token:
        op = OPERATORS[name]
        return Predicate(lambda s, t: f"{key.at(s)} {op} {query.at(t)}")
    if name is not None and numeric_side(tr, keys, key) and numeric_side(tr, queries, query):
        op, k, q = OPERATORS[name], tr.number(keys), tr.number(queries)
        return Predicate(lambda s, t: f"{k(s)} {op} {q(t)}")
    return _predicate_table(tr, expr, key, query)


def numeric_side(tr: Translator, expr: RASPExpr, rendered: Rendered) -> bool:
    if rendered.token:
        return all(is_number(rendered.value_of(v)) for v in tr.vocabulary)
    return all(is_number(v) for v in tr.values_of(expr))


def _predicate_table(tr: Translator, expr: Any, key: Rendered, query: Rendered) -> Predicate:
    """Any predicate of (key, query) as a table of true/false over their values."""
    keys, queries = tr.columns(expr.keys, key), tr.columns(expr.queries, query)
    if len(keys) * len(queries) > MAX_TABLE:
        raise TranslationError(f"{describe(expr)}: a predicate table of {len(keys)} × {len(queries)} pairs is past "
                               f"{MAX_TABLE:,} entries", expr)
    entries: dict[tuple[str, ...], str] = {}
    for (kk, kv), (qk, qv) in ((k, q) for k in keys for q in queries):
        try:
            entries[kk, qk] = "true" if expr.predicate(kv, qv) else "false"
        except Exception as error:  # the user's predicate: what it raises is reported with its values
            if kv is None or qv is None:  # a Comparison of None: RASP's evaluator raises, the input is undefined
                entries[kk, qk] = "false"
                continue
            raise TranslationError(f"{describe(expr)}: its predicate raises {type(error).__name__} on key {kv!r}, "
                                   f"query {qv!r} ({error})", expr) from None
    holds = {pair: entry == "true" for pair, entry in entries.items()}
    if not any(holds.values()):
        return NEVER
    if all(holds.values()):
        return ALWAYS
    if kind(expr.keys) == kind(expr.queries) == "IndicesType":
        relation = _index_relation({(float(k), float(q)): v for (k, q), v in holds.items()})
        if relation is not None:  # k − q op c: with c = 0, a comparison of positions (a mean's range)
            return _positional(ORDERINGS[relation[0]]) if relation[1] == 0 else Predicate(_offset_text(*relation))
    for side, rendered, column, index in ((expr.keys, key, keys, 0), (expr.queries, query, queries, 1)):
        other = queries if index == 0 else keys
        if all(len({holds[(k, o) if index == 0 else (o, k)] for o, _ in other}) == 1 for k, _ in column):
            truth = {k: holds[(k, other[0][0]) if index == 0 else (other[0][0], k)] for k, _ in column}
            return Predicate(_on_side(_one_sided(tr, expr, side, rendered, truth), index))
    coded = key.codes is not None or query.codes is not None  # an index may be a mean where RASP is undefined
    name = tr.table(f"{expr.label}_predicate", entries, "0" if coded else None)
    return Predicate(lambda s, t: f"{name}({key.at(s)}, {query.at(t)}) == 1")


def _on_side(condition: Callable[[str], str], side: int) -> Callable[[str, str], str]:
    """A condition on (key s, query t) that reads the key (side 0) or the query (side 1) only."""
    return lambda s, t: condition(s if side == 0 else t)


def _one_sided(tr: Translator, expr: Any, side: RASPExpr, rendered: Rendered,
               truth: dict[str, bool]) -> Callable[[str], str]:
    """A predicate that reads one side only: ``x(s) == "a"`` (or a few such), else a table of it."""
    true = [k for k, v in truth.items() if v]
    if rendered.plain_token and len(true) <= 3:
        return lambda p: " or ".join(f"{rendered.at(p)} == {k}" for k in true)
    name = tr.table(f"{expr.label}_predicate", {(k,): "true" if v else "false" for k, v in truth.items()},
                    None if rendered.token else "0")
    return lambda p: f"{name}({rendered.at(p)}) == 1"


#: The comparisons ``s op t + c`` a predicate of two indices may be (key s, query t).
OFFSET_TESTS = {"==": lambda d, c: d == c, "<": lambda d, c: d < c, "<=": lambda d, c: d <= c,
                ">": lambda d, c: d > c, ">=": lambda d, c: d >= c, "!=": lambda d, c: d != c}


def _index_relation(holds: dict[tuple[float, float], bool]) -> tuple[str, int] | None:
    """(op, c) with the predicate of (key index k, query index q) ⇔ k − q op c (``s == t - 2``),
    when one fits every pair."""
    differences = sorted({k - q for k, q in holds}, key=lambda d: (abs(d), d))  # c = 0 first: s <= t, not s < t + 1
    for c in differences:
        for op, test in OFFSET_TESTS.items():
            if all(test(k - q, c) == v for (k, q), v in holds.items()):
                return op, int(c)
    return None


def index_shift(tr: Translator, selector: Any) -> int | None:
    """k ≥ 1 when ``selector`` selects exactly position t − k at query t (shift_by)."""
    if kind(selector) != "Select" or kind(selector.keys) != "IndicesType" or kind(selector.queries) != "IndicesType":
        return None
    if comparison_name(selector.predicate) is not None:
        return None
    indices = range(tr.length)
    try:
        holds = {(float(k), float(q)): bool(selector.predicate(k, q)) for k in indices for q in indices}
    except Exception:  # the user's predicate: the general rule reports it
        return None
    relation = _index_relation(holds)
    return -relation[1] if relation is not None and relation[0] == "==" and relation[1] < 0 else None


def _offset_text(op: str, offset: int) -> Callable[[str, str], str]:
    return lambda s, t: f"{s} {op} {t}{offset_text(offset)}"


def _joined(tr: Translator, combined: tuple[Any, ...]) -> Predicate:
    """A Select merged from others (``("and", a, b)``, ``("or", a, b)``, ``("not", a)``)."""
    if combined[0] == "not":
        return _negation(tr.selector(combined[1]))
    first, second = tr.selector(combined[1]), tr.selector(combined[2])
    return _conjunction(first, second) if combined[0] == "and" else _disjunction(first, second)


def _both(tr: Translator, expr: Any) -> Predicate:
    return _conjunction(tr.selector(expr.fst), tr.selector(expr.snd))


#: A comparison of the key's position s with the query's t as the orderings it holds on.
ORDERINGS = {"<": frozenset("<"), "<=": frozenset("<="), "==": frozenset("="), "!=": frozenset("<>"),
             ">": frozenset(">"), ">=": frozenset(">=")}


def _positional(orderings: frozenset[str]) -> Predicate:
    """``s op t`` for the orderings of s and t it holds on (all three: ALWAYS, none: NEVER)."""
    if len(orderings) == 3:
        return ALWAYS
    if not orderings:
        return NEVER
    op = next(o for o, holds in ORDERINGS.items() if holds == orderings)
    return Predicate(lambda s, t: f"{s} {op} {t}", positional=op)


def _conjunction(first: Predicate, second: Predicate) -> Predicate:
    if first.positional and second.positional:  # s < t and s != t: s < t
        return _positional(ORDERINGS[first.positional] & ORDERINGS[second.positional])
    if first.never or second.never:
        return NEVER
    if first.always or second.always:
        return second if first.always else first
    return Predicate(lambda s, t: f"({first.condition(s, t)}) and ({second.condition(s, t)})")


def _either(tr: Translator, expr: Any) -> Predicate:
    return _disjunction(tr.selector(expr.fst), tr.selector(expr.snd))


def _disjunction(first: Predicate, second: Predicate) -> Predicate:
    if first.positional and second.positional:  # s < t or s == t: s <= t
        return _positional(ORDERINGS[first.positional] | ORDERINGS[second.positional])
    if first.always or second.always:
        return ALWAYS
    if first.never or second.never:
        return second if first.never else first
    return Predicate(lambda s, t: f"({first.condition(s, t)}) or ({second.condition(s, t)})")


def _negated(tr: Translator, expr: Any) -> Predicate:
    return _negation(tr.selector(expr.inner))


def _negation(inner: Predicate) -> Predicate:
    if inner.positional:  # not s > t: s <= t
        return _positional(frozenset("<=>") - ORDERINGS[inner.positional])
    if inner.always or inner.never:
        return NEVER if inner.always else ALWAYS
    return Predicate(lambda s, t: f"not ({inner.condition(s, t)})")


SELECTOR_RULES: dict[str, Callable[[Translator, Any], Predicate]] = {
    "Select": _select,
    "SelectorAnd": _both,
    "SelectorOr": _either,
    "SelectorNot": _negated,
}
