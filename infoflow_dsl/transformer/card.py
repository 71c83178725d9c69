"""The model card: what a compiled model means, typed (docs/design.md, "The model card").

A model file's config (the JSON object under ``"infoflow"`` in its metadata, :mod:`.io`) is
read into a :class:`ModelCard`, a frozen dataclass checked field by field when the file is
loaded: a missing, unknown or ill-typed field is refused then, with its path
(``config['program'] lacks 'source'``), which :func:`~.io.load` reports as a
:class:`~infoflow_dsl.errors.ModelFileError` naming the file. Every reader in the package goes
through the card's attributes; every writer builds a card (a model that changes, by disguise,
training, superposition or export, gets a new card from :func:`dataclasses.replace`), and
``card.to_json()`` is exactly the object the file stores, so a file read and written again keeps
its bytes.

**Versions.** A card is of format ``infoflow/1`` (:data:`CARD_FORMAT`), the one format every
file so far was written in: the file's metadata says so (``"format"``), and so does the card's
own ``format`` field where the compiler or the trainer wrote it (a model built by hand may
leave it out). The fields were added one release at a time and none was ever renamed or
removed, so a file of an earlier release is a card with fewer fields: each field added after
the first files is optional (absent: None). A card of another format, or with a field this
version does not know, was written by a release this one cannot read: refused, naming the
format or the field. docs/design.md lists the fields and when each came.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .card_fields import (
    BOOLEAN,
    COUNTS,
    NONNEGATIVE,
    NUMBER,
    POSITIVE,
    STRING,
    STRINGS,
    CardError,
    Kind,
    Path,
    Record,
    entry,
    is_number,
    list_of,
    record,
    shown,
    specs,
)
from .card_parts import (
    DTYPE,
    FFN,
    INPUT_KIND,
    OUTPUT_SITE,
    ROUTE,
    BlockCard,
    CircuitTruth,
    Disguised,
    ErrorBudget,
    HeadCard,
    KeptCircuit,
    LayerCard,
    Measurement,
    OutputVocabularyCard,
    ProgramRecord,
    Schedule,
    ScheduledHead,
    Superposition,
    Trained,
    VocabularyCard,
)
from .config import ModelConfig

#: the format of every card this version writes and reads
CARD_FORMAT = "infoflow/1"
#: the formats this version reads
FORMATS_READ = (CARD_FORMAT,)

EPS: Kind[float] = Kind("a positive number or null (a trained model)", lambda v: is_number(v) and v > 0)
BOUND: Kind[float] = Kind("a number ≥ 0 or null", NONNEGATIVE.test)


@dataclass(frozen=True)
class ModelCard(Record):
    """A model's meaning: its shape, its circuit's description, its certificate and what was
    done to it since it was compiled. A None field is absent from the config; the fields marked
    *nullable* below may also hold null (kept in ``nulls``)."""

    # -- the shape (required: every model has them; :class:`~.config.ModelConfig` checks them)
    #: the longest input (tokens); the positional code has T + 1 rows
    T: int = entry(POSITIVE)
    #: the token dimension (a token model's: its vocabulary's size V)
    d: int = entry(POSITIVE)
    #: the residual stream's width D
    d_model: int = entry(POSITIVE)
    #: [] for a scalar output, [K] for K components (a token output: V scores)
    output_shape: tuple[int, ...] = entry(COUNTS)
    #: the layers: heads (name, mask, ...) then FFN blocks
    layers: tuple[LayerCard, ...] = entry(list_of(record(LayerCard)))
    # -- the shape's optional fields (absent: the default in brackets)
    #: the card's format, ``infoflow/1`` (absent in hand-made models)
    format: str | None = entry(STRING, optional=True)
    #: the shortest input [1]
    min_length: int | None = entry(POSITIVE, optional=True)
    #: inputs of exactly T tokens only (a program with a ``sum``) [false]
    exact_length_only: bool | None = entry(BOOLEAN, optional=True)
    #: where the output is read: ``readout`` (the readout token) or ``token`` (every token) [readout]
    output: str | None = entry(OUTPUT_SITE, optional=True)
    #: a per-token model's outputs read no later token (written with ``"output": "token"``)
    causal: bool | None = entry(BOOLEAN, optional=True)
    #: ``vectors`` (x: (B, T', d)) or ``tokens`` (ids: (B, T')) [vectors]
    input: str | None = entry(INPUT_KIND, optional=True)
    #: a token model's vocabulary
    vocabulary: VocabularyCard | None = entry(record(VocabularyCard), optional=True)
    #: a token model's output is a token: V scores per site [false]
    token_output: bool | None = entry(BOOLEAN, optional=True)
    #: the tokens a token output answers with, when a table's values are tokens (language v4)
    output_vocabulary: OutputVocabularyCard | None = entry(record(OutputVocabularyCard), optional=True)
    #: a token model's vector view (``export``): V, its ids read as one-hot vectors
    token_view: int | None = entry(POSITIVE, optional=True)
    # -- the circuit's description (a compiled model's)
    #: the embedding's ReLU-block blocks
    embedding_mlp: tuple[BlockCard, ...] | None = entry(list_of(record(BlockCard)), optional=True)
    #: the name of every residual direction (``x[2]``, ``c1:mean[3]``, ``one``), by index
    residual_labels: tuple[str, ...] | None = entry(STRINGS, optional=True)
    #: the positional code's angle step
    theta: float | None = entry(NUMBER, optional=True)
    #: the weights' dtype, ``float32`` or ``float64``
    dtype: str | None = entry(DTYPE, optional=True)
    #: why compile chose float64 for the default dtype
    dtype_rule: str | None = entry(STRING, optional=True)
    #: the square route, ``deep`` or ``auto`` (absent: ``wide``)
    ffn: str | None = entry(FFN, optional=True)
    #: ``gather`` for an inefficient target compiled anyway (absent: ``efficient``)
    route: str | None = entry(ROUTE, optional=True)
    #: how ε was split among the circuit's parts
    error_budget: ErrorBudget | None = entry(record(ErrorBudget), optional=True)
    #: the program compiled or trained on
    program: ProgramRecord | None = entry(record(ProgramRecord), optional=True)
    #: the realised schedule
    schedule: Schedule | None = entry(record(Schedule), optional=True)
    # -- the certificate
    #: the ε the model is certified within (nullable: a trained model's)
    eps: float | None = entry(EPS, optional=True, nullable=True)
    #: the a-priori bound compile proved (nullable: a trained model's)
    a_priori_bound: float | None = entry(BOUND, optional=True, nullable=True)
    #: the measurement against the oracle (nullable: not measured, ``--samples 0``)
    measured_error: Measurement | None = entry(record(Measurement), optional=True, nullable=True)
    # -- what was done to the model since it was compiled
    #: ``compile --residual``'s certificate
    superposition: Superposition | None = entry(record(Superposition), optional=True)
    #: a trained model's run
    trained: Trained | None = entry(record(Trained), optional=True)
    #: the compiled init's graph a ``train --keep-circuit`` model keeps
    kept_circuit: KeptCircuit | None = entry(record(KeptCircuit), optional=True)
    #: ``disguise``'s passes and carried graph
    disguised: Disguised | None = entry(record(Disguised), optional=True)
    #: a stored ground truth (``circuit --truth -o``)
    circuit_truth: CircuitTruth | None = entry(record(CircuitTruth), optional=True)
    #: the optional keys that hold null
    nulls: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, value: Any, path: Path = ()) -> ModelCard:
        """The card of a config; CardError (a ValueError) naming the first fault: an unknown
        format or field first, then the shape's faults (:class:`~.config.ModelConfig`), then
        every other field's."""
        if not isinstance(value, Mapping):
            raise CardError(f"the config must be a JSON object, got {type(value).__name__}")
        if "format" in value and value["format"] not in FORMATS_READ:
            raise CardError(f"config['format'] is {shown(value['format'])}: a card of a version this one cannot "
                            f"read (it reads {' and '.join(FORMATS_READ)})")
        spec = ModelConfig.from_json(value)
        card: ModelCard = super().from_json(value, path)
        card.__dict__["spec"] = spec  # the cached property, already built
        return card

    @classmethod
    def _unknown_hint(cls) -> str:
        return (f" (this version reads {' and '.join(FORMATS_READ)} cards and knows every field they have had: the "
                f"file was written by a later version, or changed by hand)")

    def check(self, path: Path) -> None:
        _null_only_if_trained(self.nulls, self.trained)

    # ------------------------------------------------------------------ derived views

    @cached_property
    def spec(self) -> ModelConfig:
        """The shape, validated: what the forward reads (:class:`~.config.ModelConfig`)."""
        return ModelConfig.from_json(self._shape_json())

    def _shape_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"T": self.T, "d": self.d, "d_model": self.d_model,
                               "output_shape": list(self.output_shape),
                               "layers": [{"heads": [{"name": h.name, "mask": [list(c) for c in h.conditions]}
                                                     for h in layer.heads]} for layer in self.layers]}
        for key in ("min_length", "exact_length_only", "output", "input", "token_output"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        for key in ("vocabulary", "output_vocabulary"):
            part = getattr(self, key)
            if part is not None:
                out[key] = part.to_json()
        return out

    @property
    def per_token(self) -> bool:
        """The model answers at every token (``"output": "token"``)."""
        return self.output == "token"

    @property
    def output_site(self) -> str:
        """``readout`` or ``token``: where the output is read."""
        return self.output or "readout"

    @property
    def labels(self) -> tuple[str, ...]:
        """The residual labels; CardError for a model whose config has none (not compiled)."""
        if self.residual_labels is None:
            raise CardError("the config has no 'residual_labels': the model was not compiled (a trained or "
                            "hand-made model names no residual direction)")
        return self.residual_labels

    @property
    def heads(self) -> tuple[tuple[HeadCard, ...], ...]:
        """Each layer's heads."""
        return tuple(layer.heads for layer in self.layers)

    @property
    def heads_per_layer(self) -> list[int]:
        """How many heads each layer has."""
        return [len(layer.heads) for layer in self.layers]

    @property
    def embedding_blocks(self) -> tuple[BlockCard, ...]:
        """The embedding's blocks (none when the config lists none)."""
        return self.embedding_mlp or ()

    @property
    def program_name(self) -> str | None:
        """The stored program's file name (None: no program stored)."""
        return None if self.program is None else self.program.name

    def with_fields(self, **values: Any) -> ModelCard:
        """This card with ``values`` replaced (:func:`dataclasses.replace`); a nullable field given
        None is written as null, any other None leaves its key out."""
        nullable = {name for name, spec in specs(ModelCard) if spec.nullable}
        nulls = (set(self.nulls) | {k for k, v in values.items() if v is None and k in nullable}) - {
            k for k, v in values.items() if v is not None or k not in nullable}
        return dataclasses.replace(self, **values, nulls=frozenset(nulls))

    def with_layer(self, index: int, **changes: Any) -> ModelCard:
        """This card with layer ``index``'s fields replaced (``heads``, ``mlp``)."""
        layers = list(self.layers)
        layers[index] = dataclasses.replace(layers[index], **changes)
        return dataclasses.replace(self, layers=tuple(layers))

    def with_blocks(self, index: int, *blocks: BlockCard) -> ModelCard:
        """This card with ``blocks`` added after layer ``index``'s FFN blocks."""
        return self.with_layer(index, mlp=(*self.layers[index].blocks, *blocks))

    def without(self, *keys: str) -> ModelCard:
        """This card with the fields ``keys`` absent (not even null)."""
        absent: dict[str, Any] = dict.fromkeys(keys)
        return dataclasses.replace(self, **absent, nulls=self.nulls - set(keys))

    @classmethod
    def of(cls, config: ModelCard | Mapping[str, Any]) -> ModelCard:
        """``config`` as a card: a card as it is, a JSON config read (CardError naming a fault)."""
        return config if isinstance(config, ModelCard) else cls.from_json(config)


@dataclass(frozen=True)
class ExportCard(Record):
    """What an export folder's ``infoflow.json`` says of the model it was exported from, read
    back with it (``exporters.directory.ExportedModel``): the fields ``check`` and ``run`` read
    of a model (T, the export's dtype, the program, ε, the bound, a training run's record)."""

    T: int = entry(POSITIVE)
    dtype: str = entry(DTYPE)
    program: ProgramRecord | None = entry(record(ProgramRecord), nullable=True)
    eps: float | None = entry(EPS, nullable=True)
    a_priori_bound: float | None = entry(BOUND, nullable=True)
    trained: Trained | None = entry(record(Trained), optional=True)
    nulls: frozenset[str] = frozenset()

    def check(self, path: Path) -> None:
        _null_only_if_trained(self.nulls, self.trained)


def _null_only_if_trained(nulls: frozenset[str], trained: Trained | None) -> None:
    """ε and the bound are null in a trained model's card only (CardError otherwise)."""
    for key in ("eps", "a_priori_bound"):
        if key in nulls and trained is None:
            raise CardError(f"config[{key!r}] is null, which only a trained model's may be")


__all__ = ["CARD_FORMAT", "FORMATS_READ", "BlockCard", "CardError", "CircuitTruth", "Disguised", "ErrorBudget",
           "ExportCard", "HeadCard", "KeptCircuit", "LayerCard", "Measurement", "ModelCard", "OutputVocabularyCard",
           "ProgramRecord", "Schedule", "ScheduledHead", "Superposition", "Trained", "VocabularyCard"]
