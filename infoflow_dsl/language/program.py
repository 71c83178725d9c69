"""The checked program: what ``check`` hands to every later stage (``ir.Program``), its domain
and its vocabulary. Re-exported, with the nodes, by :mod:`.typed`."""

from __future__ import annotations

from dataclasses import dataclass, field

from .lookup_table import Table
from .nodes import Expr, PositionCondition, Token
from .syntax import SourceProgram


@dataclass(frozen=True)
class Box:
    """Every coordinate of every token in [low, high]."""

    low: float
    high: float


@dataclass(frozen=True)
class Ball:
    """Every token with Euclidean norm at most ``radius``."""

    radius: float


@dataclass(frozen=True)
class Vocabulary:
    """A token input's vocabulary, in its declared order (token ids 0..V−1 follow it).

    ``names`` are the tokens as written (without quotes; a number's own text); ``values`` are
    the numbers of a numeric vocabulary, None for a categorical one."""

    names: tuple[str, ...]
    values: tuple[float, ...] | None = None

    @property
    def categorical(self) -> bool:
        return self.values is None

    @property
    def size(self) -> int:
        return len(self.names)

    def describe(self) -> str:
        """``{"a", "b"}`` or ``{1, 2, 3}``."""
        quoted = (f'"{n}"' if self.categorical else n for n in self.names)
        return "{" + ", ".join(quoted) + "}"


#: The comment that starts a line of ``from_rasp``'s text naming where RASP's evaluator has no
#: output the model gives (:attr:`Program.undefined_in_rasp`).
UNDEFINED_IN_RASP = "# undefined in RASP:"


@dataclass(frozen=True)
class Program:
    """A checked program: everything later stages need, and nothing they must re-derive.

    ``expanded`` is the source AST with macros inlined (what ``infoflowc parse`` prints).
    """

    path: str
    source: str
    input_name: str
    dimension: int
    domain: Box | Ball
    length: int
    margin: float | None
    target: Expr
    expanded: SourceProgram
    token_variable: str | None = None
    token_conditions: tuple[PositionCondition, ...] = ()
    vocabulary: Vocabulary | None = None
    #: (line, what the line was generated from) for a program a translator wrote (``from_rasp``:
    #: the RASP node and where its author's Python built it, ``prog.py:12:5: Aggregate 'frac'``):
    #: a refusal located on such a line names it. No part of the program's identity.
    origins: tuple[tuple[int, str], ...] = field(default=(), compare=False)

    def origin_at(self, line: int) -> str | None:
        """What the source's line ``line`` was generated from (:attr:`origins`), else None."""
        return dict(self.origins).get(line)

    @property
    def over_tokens(self) -> bool:
        """The input is a sequence of tokens of a vocabulary (language v3): the model reads token
        ids (B, T') for any T' in 1..T, and ``len`` is T'."""
        return self.vocabulary is not None

    @property
    def output_scope(self) -> tuple[str, ...]:
        """The position variables an output is indexed by: ``(t,)`` for a per-token target
        ``target(t) = ...``, ``()`` for one value per sequence."""
        return () if self.token_variable is None else (self.token_variable,)

    @property
    def token_vocabulary(self) -> Vocabulary:
        """The vocabulary of a token program (``over_tokens``); a program over vectors has none."""
        if self.vocabulary is None:
            raise ValueError(f"{self.path}: the program reads vectors, not tokens of a vocabulary")
        return self.vocabulary

    @property
    def token_output(self) -> bool:
        """The target's value is a token: of the input (``x(...)``), or of a table of tokens
        (language v4: a word's reversal, tokens the input never had): an id, not a number."""
        return self.vocabulary is not None and (isinstance(self.target, Token) or self.token_table is not None)

    @property
    def token_table(self) -> Table | None:
        """The table of tokens the target applies, when it does (its values are the output's tokens)."""
        table = getattr(self.target, "table", None)
        return table if isinstance(table, Table) and table.tokens else None

    @property
    def output_vocabulary(self) -> Vocabulary:
        """The tokens a token output answers with: the input's, or a table of tokens' values."""
        table = self.token_table
        return self.token_vocabulary if table is None else Vocabulary(table.tokens)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """The value's shape at one output site (one sequence, or one position of a per-token target)."""
        return self.target.type.shape

    @property
    def undefined_in_rasp(self) -> tuple[str, ...]:
        """Where the RASP program this one was translated from has no output that the model
        can give (``from_rasp`` writes each as a comment line ``# undefined in RASP: ...``):
        the model's answer there is the translation's, not RASP's. Empty for other programs."""
        return tuple(line[len(UNDEFINED_IN_RASP):].strip() for line in self.source.splitlines()
                     if line.startswith(UNDEFINED_IN_RASP))

    @property
    def per_token(self) -> bool:
        """A per-token target ``target(t : cond) = expr``: one value at every position t where
        ``cond`` holds (``target`` has ``t`` free), read at the tokens, not at the readout."""
        return self.token_variable is not None
