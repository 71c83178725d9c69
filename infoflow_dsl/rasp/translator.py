"""A RASP program written as an ``.iflow`` program (language v4): ``from_rasp`` and ``infoflowc
from-rasp`` compile what this writes, so the two give the same model, byte for byte.

Every SOp becomes a ``let`` macro of its position (``let frac_prevs(t) = ...``, named by its
label) or, where it is the input's token seen through Maps, stays that token:

- ``tokens`` → ``x(p)``; ``indices`` → ``p - 1`` (RASP counts from 0); ``length`` → ``len``;
  ``Full(v)`` → the number v;
- ``Map(f, a)``: of a token, the same token seen through f (Maps compose; the function is
  written out once, as a table keyed by the vocabulary, where a number is needed); of a
  number, f on a's value set: ``α·a + β`` where f is affine there, else a table (language v4);
- ``SequenceMap(f, a, b)`` (and ``LinearSequenceMap``): affine in two numbers, or a table of
  two arguments over the pairs of their value sets;
- ``Select(keys, queries, predicate)``: a condition on a key position s and a query position t:
  ``s <= t`` for indices against indices, ``k(s) < q(t)`` for numbers, ``x(s) == x(t)`` for
  tokens, else a table of the two values that is 1 where the predicate holds; ``&``, ``|``,
  ``~`` are ``and``, ``or``, ``not``;
- ``SelectorWidth(sel)`` → ``sum_<s> [sel(s, t)]``;
- ``Aggregate(sel, v, default)``: categorical, of a token: the token at
  ``argmax_<s> [sel(s, t)]`` (Tracr compiles a categorical Aggregate only where one position
  is selected; where several are, the output is unspecified, as Tracr's); otherwise the mean
  of v over the selected positions, ``mean_<s : s <= t> v(s)`` where the selector is a
  never-empty range of positions, else Σ_s [sel]·v(s) times ``inverse`` of Σ_s [sel] (a
  table of 1/n), plus the default where nothing is selected.

Values that are not numbers and not the input's token seen through Maps (strings or tuples
made of one or two SOps: a SequenceMap joining two tokens) stay deferred while Maps make
numbers of them; where a selector compares them, an Aggregate fetches them or the output
answers with them, they are written as the index of the value in its sorted value set, by a
table of their parts (``Rendered.codes``). Where a categorical Aggregate may select several
positions, RASP's evaluator averages or raises and the model gives one value: the text says so
in a comment line ``# undefined in RASP: ...`` (``Program.undefined_in_rasp``; ``analyze``).

Each reduction binds its own variable (s1, s2, ...): macros are inlined without hygiene.
What cannot be written is a :class:`TranslationError` (a ``CompileError``, exit 2) naming the
node: such values made of three SOps, a constant sequence or selector, a predicate function
where an SOp is None.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..language.declarations import RESERVED
from ..language.program import UNDEFINED_IN_RASP
from ..language.syntax_errors import KEYWORDS
from .evaluation import kind
from .expressions import RASPExpr
from .fits import affine_fit, affine_sum, snapped
from .literals import TranslationError, is_number, number_text, table_value, token_text, vocabulary_text
from .origins import origin_of
from .values import MAX_VALUES, ValueSetError, ValueSetInference

if TYPE_CHECKING:
    pass

#: The most entries a table written for one Map or SequenceMap may have.
MAX_TABLE = 20_000
#: Names the program writes itself (never a macro's).
OWN_NAMES = {"x", "t", "inverse", "true", "false", "_", "target", *KEYWORDS, *RESERVED}

#: A default label (RASP's class name and a process-wide count), and what a translation appends to it.
DEFAULT_LABEL = re.compile(r"^(map|sequence_map|linear_sequence_map|full|constant_sop|select|constant_selector|"
                           r"selector_and|selector_or|selector_not|aggregate|selector_width)_(\d+)((_\w+)?)$")

#: Tracr's comparisons of (key, query), as the language writes them.
OPERATORS = {"EQ": "==", "LT": "<", "LEQ": "<=", "GT": ">", "GEQ": ">=", "NEQ": "!="}


@dataclass(frozen=True)
class Deferred:
    """An SOp whose values are not numbers (the tuples of ``make_nary_sequencemap``): kept as
    ``function`` of its ``parts`` (distinct SOps) until a Map makes numbers of it."""

    parts: tuple[RASPExpr, ...]
    function: Callable[..., Any]


#: One threshold ``number(p) op cut`` (op ``<`` or ``>=``) of a condition.
Atom = tuple[Callable[[str], str], str, str]


@dataclass(frozen=True)
class Rendered:
    """An SOp as the program reads it at a position: ``at(p)`` is its expression there, a number,
    or, when ``token``, the input's token x(...) whose value ``view`` maps (None: unchanged)."""

    at: Callable[[str], str]
    token: bool = False
    view: Callable[[Any], Any] | None = None
    deferred: Deferred | None = None
    first: int = 1  # the first position it is read at as written (earlier ones: RASP's None)
    condition: Callable[[str], str] | None = None  # a 0/1 SOp written [condition]: the condition
    codes: tuple[Any, ...] | None = None  # values that are not numbers: at(p) is the index of the value here
    #: (the float the model computes, RASP's value) where they differ: a mean written as total · 1/n
    #: computes s·fl(1/n), RASP s/n (2.8000000000000003 and 2.8); a table keyed by RASP's value
    #: is keyed by both (:meth:`Translator.columns`)
    aliases: tuple[tuple[float, Any], ...] = ()
    atoms: tuple[Atom, ...] | None = None  # a condition that is a disjunction of thresholds: each one

    @property
    def plain_token(self) -> bool:
        return self.token and self.view is None

    def value_of(self, token: Any) -> Any:
        return token if self.view is None else self.view(token)


@dataclass(frozen=True)
class Predicate:
    """A selector as a condition on a key position and a query position: ``text(s, t)``, or one
    of ALWAYS/NEVER; ``positional`` is the operator of ``s op t`` when it only compares positions."""

    text: Callable[[str, str], str] | None = None
    always: bool = False
    never: bool = False
    positional: str | None = None

    def condition(self, key: str, query: str) -> str:
        assert self.text is not None, "ALWAYS and NEVER have no text: their readers decide without one"
        return self.text(key, query)

    def bracket(self, key: str, query: str) -> str:
        return f"[{self.condition(key, query)}]"


ALWAYS, NEVER = Predicate(always=True), Predicate(never=True)


@dataclass(frozen=True)
class TranslationRules:
    """How each RASP class is written (:mod:`.rules`, :mod:`.selectors`), handed to the
    :class:`Translator` by :mod:`.translate`: the rules build on this module's classes, so this
    module cannot import them."""

    sop: dict[str, Callable[[Translator, RASPExpr], Rendered]]
    selector: dict[str, Callable[[Translator, RASPExpr], Predicate]]
    target_text: Callable[[Translator, RASPExpr], str]


@dataclass(frozen=True)
class Translation:
    """A RASP program's ``.iflow`` text, and the node each of its declaration lines (and the
    target's) was written for, by line (counted from 1): a refusal located on a line of the text
    names that node and where its author built it (:func:`where_built`)."""

    text: str
    written_for: tuple[tuple[int, RASPExpr], ...]

    def node_at(self, line: int) -> RASPExpr | None:
        """The node the text's line ``line`` was written for (None: a header line)."""
        return dict(self.written_for).get(line)

    def origins(self) -> tuple[tuple[int, str], ...]:
        """(line, the node written there and where it was built), for ``Program.origins``."""
        return tuple((line, where_built(node)) for line, node in self.written_for)


@dataclass
class WrittenDeclarations:
    """The declarations written so far (``texts``), the names they took, and the node each was
    written for (``owners``, by name): the node being written is the innermost of ``writing``."""

    texts: list[str] = field(default_factory=list)
    owners: dict[str, RASPExpr] = field(default_factory=dict)
    writing: list[RASPExpr] = field(default_factory=list)
    names: set[str] = field(default_factory=lambda: set(OWN_NAMES))

    def fresh_name(self, label: str) -> str:
        """A name for ``label``, unique in the program. A default label's number (``map_27``: the
        count of every expression built so far in the process) is dropped, and the names are
        numbered in the program's own order (map, map_2, ...): the same program built twice
        is written the same."""
        base = re.sub(r"[^A-Za-z0-9_]", "_", label) or "sop"
        base = DEFAULT_LABEL.sub(r"\1\3", base)
        if base[0].isdigit():
            base = "sop_" + base
        if base.lower().startswith(("argmin_", "argmax_", "min_", "max_", "sum_", "mean_", "top")):
            base = "v_" + base
        name, counter = base, 2
        while name in self.names or re.fullmatch(r"s\d+", name):
            name, counter = f"{base}_{counter}", counter + 1
        self.names.add(name)
        return name

    @contextlib.contextmanager
    def node(self, expr: RASPExpr) -> Iterator[None]:
        """While ``expr`` is written: the declarations made are its own, and a refusal with no
        place yet is located where ``expr`` was built."""
        self.writing.append(expr)
        try:
            yield
        except TranslationError as refusal:
            raise refusal.at(expr) from None
        finally:
            self.writing.pop()

    def add(self, name: str, text: str) -> None:
        """Add the declaration ``text`` of ``name``, written for the innermost node being written."""
        self.texts.append(text)
        if self.writing:
            self.owners[name] = self.writing[-1]


class Translator:
    """Writes the declarations of one program, children first, each SOp once."""

    def __init__(self, vocabulary: Iterable[Hashable], max_seq_len: int, program: RASPExpr,
                 rules: TranslationRules) -> None:
        self.rules = rules
        self.vocabulary: list[Any] = sorted_values(set(vocabulary))
        self.length = max_seq_len
        self.vocabulary_text, self.categorical = vocabulary_text(self.vocabulary)
        self.inference = ValueSetInference(frozenset(self.vocabulary), max_seq_len, strict=False)
        self.written = WrittenDeclarations()
        self.rendered: dict[int, Rendered] = {}
        self.predicates: dict[int, Predicate] = {}
        self.binders = itertools.count(1)
        self.inverse_written = False
        parents = parents_of(program)
        self.order_only = order_only_sops(parents)
        self.row_only = row_only_sops(program, parents)
        #: an order-only SOp that is w·major + index with w above every index gap: compared as
        #: (major, position) lexicographically (make_sort's keys: x + i/N)
        self.lexicographic: dict[int, RASPExpr] = {}
        #: a mean over a never-empty range of positions (``<=``, ``>=``, ``all``), and of what
        self.means: dict[int, tuple[str, RASPExpr]] = {}
        #: where RASP's evaluator has no output the model gives (written as comments, in order)
        self.undefined: list[str] = []

    # ------------------------------------------------------------------ names and declarations

    def binder(self) -> str:
        return f"s{next(self.binders)}"

    def macro(self, label: str, body: Callable[[str], str]) -> Callable[[str], str]:
        """``let NAME(t) = body(t)``; the SOp at p is then ``NAME(p)``."""
        name = self.written.fresh_name(label)
        self.written.add(name, f"let {name}(t) = {body('t')}")
        return lambda p: f"{name}({p})"

    def table(self, label: str, entries: dict[tuple[str, ...], str], default: str | None) -> str:
        name = self.written.fresh_name(label)
        texts = [f"{k[0] if len(k) == 1 else '(' + ', '.join(k) + ')'}: {v}" for k, v in entries.items()]
        if default is not None:
            texts.append(f"_: {default}")
        self.written.add(name, f"table {name} = {{{', '.join(texts)}}}")
        return name

    def inverse(self) -> str:
        """The table ``inverse`` of 1/n for n = 1..N (0 elsewhere), written once."""
        if not self.inverse_written:
            entries = ", ".join(f"{n}: {number_text(1 / n)}" for n in range(1, self.length + 1))
            self.written.add("inverse", f"table inverse = {{{entries}, _: 0}}")
            self.inverse_written = True
        return "inverse"

    # ------------------------------------------------------------------ values

    def value_set(self, expr: RASPExpr) -> frozenset[Any] | None:
        """``expr``'s value set (None: past MAX_VALUES); a function that raises on one of its
        argument's values is a TranslationError naming the node and the value."""
        try:
            self.inference.visit(expr)
        except ValueSetError as error:
            raise TranslationError(str(error), error.node) from None
        return self.inference.sets[expr.unique_id]

    def values_of(self, expr: RASPExpr) -> list[Any]:
        found = self.value_set(expr)
        if found is None:
            raise TranslationError(f"{describe(expr)} takes more than {MAX_VALUES:,} values: a table or a "
                                   f"comparison of it cannot be written", expr)
        return sorted_values(v for v in found if v is not None)

    def columns(self, expr: RASPExpr, rendered: Rendered) -> list[tuple[str, Any]]:
        """A table column for ``expr``: (key as written, the SOp's value there) per key."""
        if rendered.deferred is not None:
            raise TranslationError(f"{describe(expr)}: its values ({self.values_of(expr)[0]!r}, ...) are not numbers",
                                   expr)
        if rendered.codes is not None:
            return [(number_text(index), value) for index, value in enumerate(rendered.codes)]
        if rendered.token:
            return [(self.token_key(v), rendered.value_of(v)) for v in self.vocabulary]
        values = self.values_of(expr)
        if not all(is_number(v) for v in values):
            raise TranslationError(f"{describe(expr)}: its values {values[:4]!r} are not numbers or tokens of the "
                                   f"input", expr)
        return [(number_text(snapped(v)), v) for v in values] + [(number_text(a), v) for a, v in rendered.aliases]

    def token_key(self, token: Any) -> str:
        return token_text(token, "the vocabulary") if self.categorical else number_text(token)

    def number(self, expr: RASPExpr) -> Callable[[str], str]:
        """``expr`` as a number at a position (a token through its view by a table, or affinely)."""
        with self.written.node(expr):
            return self._number(expr)

    def _number(self, expr: RASPExpr) -> Callable[[str], str]:
        rendered = self.sop(expr)
        if rendered.deferred is None and (not rendered.token or (rendered.plain_token and not self.categorical)):
            return rendered.at
        outputs = self.columns(expr, rendered)  # a token's: one key per token, its value through the view
        self.require_numbers(expr, [v for _, v in outputs])
        outputs = list(self.filled(expr, dict(outputs)).items())
        if not self.categorical:
            affine = affine_fit([(float(t),) for t in self.vocabulary], [float(v) for _, v in outputs])
            if affine is not None:
                return lambda p: affine_sum(affine, [rendered.at(p)])
        name = self.table(expr.label, {(k,): table_value(v, describe(expr)) for k, v in outputs}, None)
        return lambda p: f"{name}({rendered.at(p)})"

    def filled(self, expr: RASPExpr, entries: dict[Any, Any]) -> dict[Any, Any]:
        """``entries`` (a table's, by key) with None, RASP's undefined value, replaced by a defined
        entry (the model's answer there is unspecified), and the place noted for ``analyze``."""
        if all(v is not None for v in entries.values()):
            return entries
        self.undefined.append(f"{describe(expr)}, where its function gives None: RASP's value there is None "
                              f"(undefined), and so is every value computed from it; the model's answer there is "
                              f"unspecified")
        stand_in = next((v for v in entries.values() if v is not None), 0)
        return {k: stand_in if v is None else v for k, v in entries.items()}

    def require_numbers(self, expr: RASPExpr, values: list[Any]) -> None:
        odd = [v for v in values if v is not None and not is_number(v)]
        if odd:
            raise TranslationError(f"{describe(expr)}: its value {odd[0]!r} is a new token, read here as a number: "
                                   f"new tokens are compiled as the program's output only (a table of tokens)", expr)

    # ------------------------------------------------------------------ SOps

    def sop(self, expr: RASPExpr) -> Rendered:
        if expr.unique_id not in self.rendered:
            rule = self.rules.sop.get(kind(expr) or "")
            if rule is None:
                raise TranslationError(f"{describe(expr)}: a {type(expr).__name__} is not an SOp from_rasp can write",
                                       expr)
            with self.written.node(expr):
                self.value_set(expr)  # a function that raises is reported before anything reads it
                self.rendered[expr.unique_id] = rule(self, expr)
        return self.rendered[expr.unique_id]

    def value(self, expr: RASPExpr) -> Rendered:
        """``expr`` as a selector or an Aggregate reads it: a deferred SOp (strings or tuples made
        of one or two SOps: a SequenceMap joining two tokens) is written now, as the index of
        its value in its sorted value set (``codes``), by a table of its parts; its readers
        compare, fetch and map the index, and the output table turns it back into the value."""
        rendered = self.sop(expr)
        if rendered.deferred is None:
            return rendered
        with self.written.node(expr):
            return self._coded(expr, rendered.deferred)

    def _coded(self, expr: RASPExpr, deferred: Deferred) -> Rendered:
        parts, function = deferred.parts, deferred.function
        if len(parts) > 2:
            raise TranslationError(f"{describe(expr)}: its values ({self.values_of(expr)[0]!r}, ...) come from "
                                   f"{len(parts)} SOps: a table holds one or two", expr)
        readers = [self.sop(part) for part in parts]
        columns = [self.columns(part, reader) for part, reader in zip(parts, readers, strict=True)]
        grid = self.filled(expr, function_grid(columns, function))
        codes = tuple(sorted_values(set(grid.values())))
        index = {value: position for position, value in enumerate(codes)}
        entries = {tuple(k for k, _ in keys): number_text(index[v]) for keys, v in grid.items()}
        table = self.table(f"{expr.label}_code", entries, None if all(r.token for r in readers) else "0")
        at = self.macro(expr.label, lambda p: f"{table}({', '.join(r.at(p) for r in readers)})")
        self.rendered[expr.unique_id] = Rendered(at, codes=codes, first=max(r.first for r in readers))
        return self.rendered[expr.unique_id]

    def selector(self, expr: RASPExpr) -> Predicate:
        if expr.unique_id not in self.predicates:
            rule = self.rules.selector.get(kind(expr) or "")
            if rule is None:
                raise TranslationError(f"{describe(expr)}: a {type(expr).__name__} is not compiled yet "
                                       f"(a selector from keys, queries and a predicate is)", expr)
            with self.written.node(expr):
                self.predicates[expr.unique_id] = rule(self, expr)
        return self.predicates[expr.unique_id]

    def source(self, program: RASPExpr) -> str:
        """The whole ``.iflow`` program whose per-token target is ``program``."""
        return self.translation(program).text

    def translation(self, program: RASPExpr) -> Translation:
        """The whole ``.iflow`` program whose per-token target is ``program``, and the node each
        declaration line was written for (the target's line: ``program``)."""
        with self.written.node(program):
            output = self.rules.target_text(self, program)
            first = self.sop(program).first
        head = [f"# {program.label}: translated from RASP by infoflowc from-rasp",
                *(f"{UNDEFINED_IN_RASP} {where}" for where in dict.fromkeys(self.undefined)),
                f"input x : token {self.vocabulary_text}", f"length T = {self.length}"]
        where = f"t : t >= {first}" if first > 1 else "t"
        target = f"target({where}) = {output}"
        body = used_declarations(self.written.texts, target)
        owners = self.written.owners
        written_for = [(len(head) + number, owners[declared_name(text)])
                       for number, text in enumerate(body, start=1) if declared_name(text) in owners]
        lines = [*head, *body, target]
        return Translation("\n".join(lines) + "\n", (*written_for, (len(lines), program)))


def function_grid(columns: list[list[tuple[str, Any]]], function: Callable[..., Any]
                  ) -> dict[tuple[tuple[str, Any], ...], Any]:
    """``function`` at every combination of its arguments' columns ((key, value) pairs), keyed by
    the combination: a table's entries before they are written. None where an argument is None
    (RASP propagates None without calling the function)."""
    return {keys: None if any(v is None for _, v in keys) else function(*(v for _, v in keys))
            for keys in itertools.product(*columns)}


def sorted_values(values: Iterable[Any]) -> list[Any]:
    """Values in one fixed order: by type, then by value (by text where values of a type do not
    compare: tuples of mixed types)."""
    found = list(values)
    try:
        return sorted(found, key=lambda v: (str(type(v)), v))
    except TypeError:
        return sorted(found, key=lambda v: (str(type(v)), repr(v)))


def used_declarations(declarations: list[str], target: str) -> list[str]:
    """The declarations the target reads, directly or through others (a rule may write a macro
    that a later, better form leaves unread: make_sort's keys once compared lexicographically)."""
    names = [declared_name(d) for d in declarations]
    needed, frontier = set(), [target]
    while frontier:
        text = frontier.pop()
        for name, declaration in zip(names, declarations, strict=True):
            if name not in needed and re.search(rf"\b{name}\(", text):
                needed.add(name)
                frontier.append(declaration.split("=", 1)[1])
    return [d for name, d in zip(names, declarations, strict=True) if name in needed]


def declared_name(declaration: str) -> str:
    """The name a declaration declares: ``let NAME(t) = ...``, ``table NAME = {...}``."""
    return declaration.split()[1].split("(")[0]


def parents_of(program: RASPExpr) -> dict[int, list[Any]]:
    """Every expression's readers in ``program``, by the expression's id."""
    uses: dict[int, list[Any]] = {}
    seen: set[int] = set()
    stack = [program]
    while stack:
        node = stack.pop()
        if node.unique_id in seen:
            continue
        seen.add(node.unique_id)
        for child in node.children:
            uses.setdefault(child.unique_id, []).append(node)
            stack.append(child)
    return uses


def row_only_sops(program: RASPExpr, parents: dict[int, list[Any]]) -> set[int]:
    """The SOps read only at the output's own position: the program, and what only Maps and
    SequenceMaps of such SOps read (no selector or Aggregate reads them at another position)."""
    found = {program.unique_id}
    changed = True
    while changed:
        changed = False
        for sop, readers in parents.items():
            if sop not in found and all(kind(r) in ("Map", "SequenceMap", "LinearSequenceMap")
                                        and r.unique_id in found for r in readers):
                found.add(sop)
                changed = True
    return found


def order_only_sops(uses: dict[int, list[Any]]) -> set[int]:
    """The SOps (by id) read only as both the keys and the queries of Selects that compare them
    (Select(k, k, LT), as make_sort's keys): any strictly increasing map of their values selects
    the same, so they may be written scaled (:func:`integer_order`)."""
    return {sop for sop, parents in uses.items()
            if all(kind(p) == "Select" and p.keys is p.queries and str(getattr(p.predicate, "name", "")) in OPERATORS
                   for p in parents)}


def describe(expr: RASPExpr) -> str:
    """``Aggregate 'frac'``: how a message names a RASP node."""
    return f"{kind(expr) or type(expr).__name__} {expr.label!r}"


def where_built(expr: RASPExpr) -> str:
    """``prog.py:12:5: Aggregate 'frac'``: a node and where its author built it (the node alone
    where that is unknown)."""
    origin = origin_of(expr)
    return describe(expr) if origin is None else f"{origin}: {describe(expr)}"
