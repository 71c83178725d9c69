"""The parts of the model card (:mod:`.card`): its layers, heads and FFN blocks, its vocabulary,
error budget, measurement, program and schedule, and the records of what changed a model since
it was compiled (superposition, training, disguise, a stored truth).

Each is a :class:`~.card_fields.Record`: a frozen dataclass whose fields are the JSON keys of its
object, read and checked by ``from_json`` and written back unchanged by ``to_json``. A field
that is None is absent from the object (a field marked *nullable* may also hold null). Values a
higher layer owns (a circuit graph, a superposition feature) are opaque JSON here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .card_fields import (
    BOOLEAN,
    COUNT,
    COUNTS,
    JSON_LIST,
    NONNEGATIVE,
    NUMBER,
    NUMBERS,
    OBJECT,
    POSITIVE,
    REAL,
    STRING,
    STRINGS,
    CardError,
    Kind,
    Path,
    Record,
    entry,
    list_of,
    one_of,
    record,
    require_group,
    where,
)


def _mask(value: Any, path: Path) -> tuple[tuple[Any, ...], ...]:
    """A head's mask as tuples; :func:`~.masks.check_mask` checks its conditions (``ModelConfig``)."""
    if not isinstance(value, list | tuple) or not all(isinstance(c, list | tuple) for c in value):
        raise CardError(f"{where(path)} must be a list of conditions [left, op, right], got {value!r}"[:300])
    return tuple(tuple(condition) for condition in value)


#: A head's mask: conditions (left, op, right), see :mod:`.masks`.
MASK: Kind[tuple[tuple[Any, ...], ...]] = Kind("a list of conditions", read=_mask,
                                               write=lambda mask: [list(c) for c in mask])


@dataclass(frozen=True)
class HeadCard(Record):
    """One attention head. Only ``name`` is required (a trained or hand-made model's heads hold
    a name and a mask); a compiled head also says what it is and does."""

    #: the head's name in the circuit (``c1``, ``p1``, ``L1H2`` for a trained model's)
    name: str = entry(STRING)
    #: the conditions of its mask (absent: none, every key is seen)
    mask: tuple[tuple[Any, ...], ...] | None = entry(MASK, optional=True)
    #: the construction: ``position``, ``token retrieval``, ``mean``, ``distractor``, ...
    kind: str | None = entry(STRING, optional=True)
    #: where its query sits: ``token`` (every token's row) or ``readout``
    site: str | None = entry(STRING, optional=True)
    #: its inverse temperature β (the ``attn.beta`` entry it was compiled with)
    beta: float | None = entry(NUMBER, optional=True)
    #: what it computes, as a formula of the program
    computes: str | None = entry(STRING, optional=True)
    #: its share of the error budget
    error: float | None = entry(NONNEGATIVE, optional=True)
    #: the residual directions it writes
    outputs: tuple[str, ...] | None = entry(STRINGS, optional=True)
    #: why ``disguise`` added it (a merged program's head, a distractor); absent for compiled heads
    added: str | None = entry(STRING, optional=True)

    @property
    def conditions(self) -> tuple[tuple[Any, ...], ...]:
        """The mask's conditions (none when the head has no mask)."""
        return self.mask or ()


@dataclass(frozen=True)
class BlockCard(Record):
    """One FFN block (a group of consecutive hidden units of one layer's FFN, or of the
    embedding's ReLU block) and the residual direction it writes."""

    #: its name (``f1``, ``eraser:2``, ``table:...``, ``distractor:0``)
    name: str = entry(STRING)
    #: what it computes
    computes: str = entry(STRING)
    #: how many hidden units it holds (the blocks of an FFN hold its units in order)
    units: int = entry(COUNT)
    #: its share of the error budget
    error: float = entry(NONNEGATIVE)
    #: the residual direction it writes (a label of ``residual_labels``)
    output: str = entry(STRING)
    #: the values that direction alone takes (a token program's steps, gates and tables), if known
    values: tuple[float, ...] | None = entry(NUMBERS, optional=True)
    #: the categorical group its indicator belongs to (at most one of a group is 1 at a token)
    group: str | None = entry(STRING, optional=True)


@dataclass(frozen=True)
class LayerCard(Record):
    """One layer: its heads, then its FFN's blocks (absent in a trained model's layers)."""

    heads: tuple[HeadCard, ...] = entry(list_of(record(HeadCard)))
    mlp: tuple[BlockCard, ...] | None = entry(list_of(record(BlockCard)), optional=True)

    @property
    def blocks(self) -> tuple[BlockCard, ...]:
        """The FFN's blocks (none when the layer lists none)."""
        return self.mlp or ()


@dataclass(frozen=True)
class VocabularyCard(Record):
    """A token model's vocabulary: ``names`` (ids 0..V−1 in order) and, for a numeric
    vocabulary, the number each name stands for (``values``, null otherwise)."""

    names: tuple[str, ...] = entry(STRINGS)
    values: tuple[float, ...] | None = entry(NUMBERS, optional=True, nullable=True)
    #: the optional keys that held null (so that ``to_json`` writes them back)
    nulls: frozenset[str] = frozenset()

    @classmethod
    def of(cls, names: tuple[str, ...], values: tuple[float, ...] | None) -> VocabularyCard:
        """The vocabulary as compile writes it (``values`` always present, null for names)."""
        return cls(names=names, values=values, nulls=frozenset({"values"}))


@dataclass(frozen=True)
class OutputVocabularyCard(Record):
    """The tokens a token output answers with when a table's values are tokens (language v4)."""

    names: tuple[str, ...] = entry(STRINGS)


def _pair(value: Any, path: Path) -> tuple[Any, ...]:
    if not (isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[0], str)):
        raise CardError(f"{where(path)} must be a pair [name, share], got {value!r}"[:300])
    return (value[0], NUMBER.parse(value[1], (*path, 1)))


@dataclass(frozen=True)
class ErrorBudget(Record):
    """How compile split ε: the ``bound`` it proved, each part's ``shares`` [[name, share]],
    and the float rounding it reserved."""

    eps: float = entry(NUMBER)
    bound: float = entry(NUMBER)
    rounding: float = entry(NUMBER)
    shares: tuple[tuple[Any, ...], ...] = entry(list_of(Kind("a pair [name, share]", read=_pair, write=list)))


#: a token measurement's counts (present together, with ``exhaustive``)
TOKEN_COUNTS = ("inputs", "exhaustive", "exhaustive_length", "sites")
#: a token output's answers (present together)
ANSWERS = ("wrong", "accuracy", "min_margin")


@dataclass(frozen=True)
class Measurement(Record):
    """The compile's measurement against the oracle (``measure``): the largest error over
    ``samples`` random inputs (seeded by ``seed``) and ``corners`` (a token model: constant
    sequences), with ``excluded_by_margin`` inputs under the declared margin left out; a token
    model also counts every input and site, and a token output its wrong answers."""

    max_error: float = entry(NONNEGATIVE)
    samples: int = entry(COUNT)
    corners: int = entry(COUNT)
    seed: int = entry(COUNT)
    excluded_by_margin: int = entry(COUNT)
    #: a token model's: every input measured, the sequences of the exhaustive lengths, the longest such
    #: length and the sites (positions answered) measured
    inputs: int | None = entry(COUNT, optional=True)
    exhaustive: int | None = entry(COUNT, optional=True)
    exhaustive_length: int | None = entry(COUNT, optional=True)
    sites: int | None = entry(COUNT, optional=True)
    #: a token output's: wrong answers, their complement's share, the smallest score margin (null: none)
    wrong: int | None = entry(COUNT, optional=True)
    accuracy: float | None = entry(NUMBER, optional=True)
    min_margin: float | None = entry(NUMBER, optional=True, nullable=True)
    nulls: frozenset[str] = frozenset()

    def check(self, path: Path) -> None:
        require_group(self, path, TOKEN_COUNTS, "a token model's measurement")
        require_group(self, path, ANSWERS, "a token output's measurement")

    @classmethod
    def from_record(cls, value: dict[str, Any]) -> Measurement:
        """The measurement of a record ``measure`` wrote (``min_margin`` null where it has one)."""
        return cls.from_json(value, ("measured_error",))


@dataclass(frozen=True)
class ProgramRecord(Record):
    """The program compiled (or trained on): its file ``name``, its ``source`` (from which
    ``check`` rebuilds the reference and the circuit) and its declared ``margin`` (null: none)."""

    name: str = entry(STRING)
    source: str = entry(STRING)
    margin: float | None = entry(NUMBER, nullable=True)


@dataclass(frozen=True)
class ScheduledHead(Record):
    """One row of the realised schedule: a head, its layer (1-based), kind and site, and what it
    compares."""

    head: str = entry(STRING)
    layer: int = entry(COUNT)
    kind: str = entry(STRING)
    site: str = entry(STRING)
    compares: str = entry(STRING)


@dataclass(frozen=True)
class Schedule(Record):
    """The realised schedule (``analyze``'s, as built): layers, heads per layer, the comparison
    tree's order, the dimension, the verdict (``efficient``, ...) and the table of heads."""

    layers: int = entry(COUNT)
    heads: tuple[int, ...] = entry(COUNTS)
    order: int = entry(COUNT)
    dimension: int = entry(COUNT)
    verdict: str = entry(STRING)
    table: tuple[ScheduledHead, ...] = entry(list_of(record(ScheduledHead)))


@dataclass(frozen=True)
class Superposition(Record):
    """``compile --residual D``'s certificate (:mod:`~infoflow_dsl.compiler.superposition`):
    F (``features_alive``), D (``d_model``), F/D, the storage and its interference against the
    margin, the exact folds made first, and the feature dictionary (``features``). The reads,
    folds and features are records the superposition modules write and read."""

    features_alive: int = entry(COUNT)
    d_model: int = entry(COUNT)
    ratio: float = entry(NUMBER)
    superposed: int = entry(COUNT)
    storage: int = entry(COUNT)
    clean_slots: int = entry(COUNT)
    margin: float = entry(NUMBER)
    coherence: float = entry(NUMBER)
    max_interference: float = entry(NUMBER)
    max_bound: float = entry(NUMBER)
    #: the read of the largest bound: {feature, stage, kind}; null without any storage read
    worst: dict[str, Any] | None = entry(OBJECT, nullable=True)
    holds: bool = entry(BOOLEAN)
    reads: tuple[Any, ...] = entry(JSON_LIST)
    #: the tight lifetimes' sharing of coordinates (``compress``'s record)
    compression: dict[str, Any] = entry(OBJECT)
    features: tuple[Any, ...] = entry(JSON_LIST)
    #: the D asked for (``--residual``); absent in the first superposed files (then ``d_model``)
    residual: int | None = entry(POSITIVE, optional=True)
    features_alive_folded: int | None = entry(COUNT, optional=True)
    duplicates: tuple[Any, ...] | None = entry(JSON_LIST, optional=True)
    spanned: tuple[Any, ...] | None = entry(JSON_LIST, optional=True)
    queries: tuple[Any, ...] | None = entry(JSON_LIST, optional=True)
    summed: tuple[Any, ...] | None = entry(JSON_LIST, optional=True)
    readout: dict[str, Any] | None = entry(OBJECT, optional=True)
    packed: dict[str, Any] | None = entry(OBJECT, optional=True)


@dataclass(frozen=True)
class Trained(Record):
    """A trained model's record (``train``): the run's settings and what it reached. Its keys are
    the ones ``TrainSettings.to_json`` and the trainers write (:mod:`~infoflow_dsl.training` owns
    them, and they grew over versions): kept in ``extra``, but for the two read here."""

    #: the input distribution trained on (``uniform``, ``normal:σ``)
    dist: str | None = entry(STRING, optional=True)
    #: the validation NMSE the run ended at
    final_nmse: float | None = entry(REAL, optional=True)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, settings: dict[str, Any]) -> Trained:
        """The record of a run's settings (``TrainSettings.to_json``)."""
        return cls.from_json(settings, ("trained",))

    def updated(self, **values: Any) -> Trained:
        """This record with ``values`` (JSON, by key) added or replaced."""
        return Trained.from_json(self.to_json() | values, ("trained",))


@dataclass(frozen=True)
class KeptCircuit(Record):
    """``train --keep-circuit``: the compiled init's edge graph kept by the trained model (the
    graph's JSON, read by :mod:`~infoflow_dsl.circuits.graph`), its ε, the init program's name
    (null: none stored) and, once certified, the certification's record."""

    graph: dict[str, Any] = entry(OBJECT)
    eps: float = entry(NUMBER)
    init: str | None = entry(STRING, nullable=True)
    certified: dict[str, Any] | None = entry(OBJECT, optional=True)


@dataclass(frozen=True)
class Disguised(Record):
    """``disguise``'s record: the passes run (merged programs, distractors, compression, head and
    unit splits, shuffle, rotation) with their seed, the edge graph carried through them, and
    what ``--compress`` saved. ``merged``, ``distract`` and ``compress`` came after the first
    disguised files."""

    split_heads: int = entry(POSITIVE)
    split_neurons: int = entry(POSITIVE)
    shuffle: bool = entry(BOOLEAN)
    rotate: bool = entry(BOOLEAN)
    seed: int = entry(Kind("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)))
    graph: dict[str, Any] = entry(OBJECT)
    merged: tuple[str, ...] | None = entry(STRINGS, optional=True)
    distract: int | None = entry(COUNT, optional=True)
    compress: bool | None = entry(BOOLEAN, optional=True)
    compression: dict[str, Any] | None = entry(OBJECT, optional=True)


@dataclass(frozen=True)
class CircuitTruth(Record):
    """A stored ground truth (``circuit --truth -o``): the edge graph, each ablation's truth and
    how they were measured (samples, seed, length); the circuits modules read them."""

    graph: dict[str, Any] = entry(OBJECT)
    ablations: dict[str, Any] = entry(OBJECT)
    measured: dict[str, Any] = entry(OBJECT)


DTYPE = one_of("float32", "float64")
FFN = one_of("wide", "deep", "auto")
ROUTE = one_of("efficient", "gather")
OUTPUT_SITE = one_of("readout", "token")
INPUT_KIND = one_of("vectors", "tokens")
