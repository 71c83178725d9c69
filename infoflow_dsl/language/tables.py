"""Tables (language v4): ``table f = {k1: v1, (k1, j1): v, _: v0}`` checked into an ``ir.Table``.

A table is a finite function of one or two values, RASP's ``Map`` and ``SequenceMap`` written
out over the values their arguments can take. Its keys are quoted tokens of the vocabulary
(read as the token's id, as a categorical token's value is everywhere in the IR) or numbers,
one kind per column; its values are numbers, ``true`` (1) or ``false`` (0); ``_: v`` as the
last entry gives every other key's value. Whether the keys cover every value a table's
argument can take is a question about the program, answered where the table is applied
(:func:`uncovered_values`).

A table of tokens (``table flip = {"apple": "elppa", ...}``: RASP Maps to new tokens) gives
ids into its own tokens, in the order they first appear; it is the target's value only (the
model then answers with those tokens), which :func:`check_table_uses` checks.
"""

from __future__ import annotations

from fractions import Fraction

from . import syntax as ast
from . import typed as ir
from .value_sets import value_set, vocabulary_domain

BOOLEANS = {"true": 1.0, "false": 0.0}


def check_table(declaration: ast.TableDecl, vocabulary: ir.Vocabulary | None, error: ast.Report) -> ir.Table | None:
    """The checked table, or None (each fault reported at its entry)."""
    failed = False
    keys: list[tuple[float, ...]] = []
    values: list[float] = []
    default: float | None = None
    columns: list[bool] | None = None
    seen: dict[tuple[float, ...], ast.Span] = {}
    tokens: list[str] | None = [] if isinstance(declaration.entries[0].value, ast.String) else None
    for position, entry in enumerate(declaration.entries):
        value = _value(entry.value, tokens, error)
        if not entry.keys:
            if position != len(declaration.entries) - 1:
                error(entry.span, "the default `_: value` is the last entry of a table")
                failed = True
            default = value
            failed |= value is None
            continue
        found = [_key(atom, vocabulary, error) for atom in entry.keys]
        parsed = [p for p in found if p is not None]
        if value is None or len(parsed) < len(found):
            failed = True
            continue
        kinds = [kind for kind, _ in parsed]
        if columns is None:
            columns = kinds
        elif len(kinds) != len(columns):
            error(entry.span, f"every key of table '{declaration.name}' has {len(columns)} part(s), as its first")
            failed = True
            continue
        elif kinds != columns:
            error(entry.span, "a table's keys are all tokens or all numbers in each position, as its first entry's")
            failed = True
            continue
        key = tuple(number for _, number in parsed)
        if key in seen:
            error(entry.span, f"this key is already in the table (line {seen[key].line}, column {seen[key].column})")
            failed = True
            continue
        seen[key] = entry.span
        keys.append(key)
        values.append(value)
    if columns is None and not failed:
        error(declaration.span, f"table '{declaration.name}' has no keys: write at least one `key: value`")
        failed = True
    if failed or columns is None:
        return None
    return ir.Table(declaration.name, tuple(keys), tuple(values), default, tuple(columns), tuple(tokens or ()))


def _value(atom: ast.TableAtom, tokens: list[str] | None, error: ast.Report) -> float | None:
    """A value's number; in a table of tokens (``tokens`` not None), a quoted token's id among
    the table's tokens in the order they first appear."""
    if tokens is not None:
        if not isinstance(atom, ast.String):
            error(atom.span, "a table's values are all numbers (true, false) or all quoted tokens")
            return None
        if atom.text not in tokens:
            tokens.append(atom.text)
        return float(tokens.index(atom.text))
    if isinstance(atom, ast.SignedNumber):
        return _finite(atom, error)
    if isinstance(atom, ast.Name) and atom.name in BOOLEANS:
        return BOOLEANS[atom.name]
    if isinstance(atom, ast.String):
        error(atom.span, "a table's values are all numbers (true, false) or all quoted tokens")
        return None
    error(atom.span, f"a table's value is a number, true or false, not '{atom.name}'")
    return None


def _finite(atom: ast.SignedNumber, error: ast.Report) -> float | None:
    value = atom.value
    if value != value or abs(value) == float("inf"):
        error(atom.span, f"{atom.text} is not a finite number")
        return None
    return value


def _key(atom: ast.TableAtom, vocabulary: ir.Vocabulary | None, error: ast.Report) -> tuple[bool, float] | None:
    """(keyed by a categorical token, the key's number), or None (reported)."""
    if isinstance(atom, ast.String):
        if vocabulary is None or not vocabulary.categorical:
            error(atom.span, f'"{atom.text}" is a token key: the input must be a categorical vocabulary '
                             f'of quoted names')
            return None
        if atom.text not in vocabulary.names:
            error(atom.span, f'token "{atom.text}" is not in the vocabulary {vocabulary.describe()}')
            return None
        return True, float(vocabulary.names.index(atom.text))
    if isinstance(atom, ast.SignedNumber):
        number = _finite(atom, error)
        return None if number is None else (False, number)
    if atom.name in BOOLEANS:
        return False, BOOLEANS[atom.name]
    error(atom.span, f"a table's key is a quoted token, a number, true or false, not '{atom.name}'"
                     + (" (the default `_` is a whole entry: `_: value`)" if atom.name == "_" else ""))
    return None


def check_table_uses(target: ir.Expr, vocabulary: ir.Vocabulary, length: int, error: ast.Report) -> None:
    """Each table applied in ``target``, checked where it is applied (an error at the use):

    - it has a key (or the default) for every value its arguments can take there, by the value
      sets of the finite analysis (exact rationals; a key matches the value its decimal
      is). The checker reads the analysis's value sets here: what a token program can
      compute is the question;
    - a table of tokens is the whole target only: its ids mean nothing in arithmetic or beside
      the input's tokens."""
    domain = vocabulary_domain(vocabulary, length)
    for node in (target, *ir.sub_nodes(target)):
        if not isinstance(node, ir.TableLookup):
            continue
        if node.table.tokens and node is not target:
            error(node.span, f"table {node.table.name} gives tokens: it is the target's value only "
                             f"(target(t) = {node.table.name}(...)), not a part of an expression yet")
        missing = uncovered_values(node.table, [value_set(a, domain) for a in node.arguments])
        if missing is not None:
            shown = ", ".join(f'"{vocabulary.names[int(k)]}"' if token else f"{k:g}"
                              for k, token in zip(missing, node.table.token_columns, strict=True))
            plural = "s" * (len(missing) > 1)
            error(node.span, f"table {node.table.name} has no entry for ({shown}), a value its argument{plural} "
                             f"can take here, and no default `_: value`")


def uncovered_values(table: ir.Table, arguments: list[frozenset[Fraction] | None]) -> tuple[float, ...] | None:
    """A key tuple some argument values form that the table has no entry for (and no default),
    or None when every combination is covered (or an argument's set is unknown)."""
    known = [a for a in arguments if a is not None]
    if table.default is not None or len(known) < len(arguments):
        return None
    present = set(table.keys)
    combinations: list[tuple[float, ...]] = [()]
    for values in known:
        combinations = [(*c, float(v)) for c in combinations for v in sorted(values)]
    return next((c for c in combinations if c not in present), None)
