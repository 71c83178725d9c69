"""Compression of the residual stream below its number of features: each dimension carries several
features, one after another over the depth, with erasers that free a dimension when its feature's
last reader has read it.

A compiled model gives every feature (every residual direction the compiler named) a dimension of
its own for the whole forward. Most features live a short while: a table's value is written by
one FFN and read by the next head; after that reader nothing looks at it. Number the stages in the
order they run — 0 the embedding, 2l+1 the heads of layer l, 2l+2 its FFN, 2L+1 the unembedding —
and give feature i its lifetime [w_i, e_i]: w_i its first write; e_i the FFN stage at or after its
last read r_i (r_i itself when an FFN reads it last, r_i + 1 when heads do). At e_i an **eraser**
(two ReLU units of that FFN, reading the dimension with weights +1 and −1 and writing −1 and +1:
−relu(h) + relu(−h) = −h) sets the dimension back to 0, so a feature first written after e_i can
take it. A feature whose last read is the unembedding's keeps its dimension to the end (so does
one written again after its last read, a write nothing reads, where (i) below does not drop it);
a feature never written is always 0, so its readers read nothing and it gets no dimension.

Lifetimes are intervals, so the greedy assignment in order of first write (a freed dimension
to the next feature that starts after it is free) uses the fewest dimensions any such assignment
can: the largest number of features alive at one stage. With A the (D × D') 0/1 assignment,
every writer W ↦ W A and every reader W ↦ Aᵀ W. No writer and no reader touches two features of
one dimension (their lifetimes do not overlap; a reader at or before a feature's first write reads
0 of it, and its row is dropped), so every sum the assignment forms is x + 0 and the residual
stream after each stage, at dimension d, is the plain model's at the feature of d alive there:
the compressed model computes the same function, exactly in real arithmetic. In floats the
products run over the dimensions in another order, so the output moves by rounding (float32
models: at most 3.8e-6 on the shipped ones, 18 of 29 not a bit); ``check`` measures it.

**Tight lifetimes** (what ``disguise --compress`` and ``compile --residual`` both use): (i) a
write at or after a feature's last read is dropped (its writer's column set to 0: a stage reads
before it writes, so nothing reads what it writes), and a feature never read after its first
write gets no dimension at all (the constant ``one`` where no reader needs a bias); (ii) a
dimension freed by an eraser at FFN stage e goes to a feature whose first write is that same FFN:
the FFN reads the old feature (the new one's rows read 0 there, as any feature's before its first
write) and adds −old + new, so the dimension holds the new value after it, exactly in real
arithmetic (in floats old + (new − old), one rounding more). Lifetimes are then half-open
intervals [w_i, e_i), and the same greedy is again optimal for them: the count it reaches, the
largest number of features alive at one stage, is F, the baseline ``compile --residual`` is
measured against. Directions in ``keep`` are exempt from (i) (``disguise``'s distractors and
merged programs, written so that nothing reads them: dropping their writes would undo those
passes); they keep their dimension to the end as above.

This is superposition over depth, not at one depth: at any stage a dimension carries one feature.
Superposition at one depth (more features alive than dimensions, on nearly orthogonal
directions) breaks every compiled model (``bench/superposition_probe.py``: their readers are
exact linear maps, and every overlap reaches them at full weight), so a pass over compiled
weights cannot keep the certificate that way. The erasers are new parts of the circuit: an edge
from a feature's writer to its eraser, and from the eraser (and the writer) to the next feature's
readers, carry the cancelled value; the truth measures which of them an ablation needs (ablating
an eraser's input leaves the old feature in the dimension under the next one).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from ..transformer.card import BlockCard, ModelCard

Tensor = torch.Tensor

#: the residual stream's writers (their last dimension is D) and readers (their second-to-last is D)
WRITERS = ("embed.W_E", "embed.W_E2", "embed.cls", "pos_embed.W_pos")
LAYER_WRITERS = ("attn.W_O", "mlp.W_out", "mlp.b_out")
LAYER_READERS = ("attn.W_Q", "attn.W_K", "attn.W_V", "mlp.W_in")
ERASER = "an eraser: sets a dimension back to 0 after its feature's last reader, for the next feature"
COMPRESSED = "compression: a dimension shared over the depth (a feature, its eraser, the next feature)"


@dataclass(frozen=True)
class Lifetime:
    """Feature ``index`` (its label) lives from its first write to stage ``end`` (an FFN stage where an
    eraser frees its dimension; ``math.inf``: to the end of the forward)."""

    index: int
    label: str
    start: int
    end: float


@dataclass(frozen=True)
class Compression:
    """Which dimension each feature got (``slots[i]``: the features of dimension i, in the order they
    hold it) and where the erasers run (layer → the features its FFN erases)."""

    features: int
    slots: tuple[tuple[Lifetime, ...], ...]

    @property
    def dimensions(self) -> int:
        return len(self.slots)

    def erasers(self) -> dict[int, list[tuple[int, int]]]:
        """layer -> [(dimension, feature index)] erased by its FFN: every occupant but a dimension's last."""
        found: dict[int, list[tuple[int, int]]] = {}
        for dimension, occupants in enumerate(self.slots):
            for feature in occupants[:-1]:
                found.setdefault((int(feature.end) - 2) // 2, []).append((dimension, feature.index))
        return found

    def labels(self) -> list[str]:
        """Each dimension's name: its features in the order they hold it."""
        return [" | ".join(f.label for f in occupants) for occupants in self.slots]

    def to_json(self) -> dict[str, Any]:
        return {"features": self.features, "dimensions": self.dimensions,
                "erased": sum(len(v) for v in self.erasers().values())}


def stage_tensors(layers: int) -> list[tuple[int, list[str], list[str]]]:
    """(stage, the tensors reading the residual there, the tensors writing it there), in order."""
    stages: list[tuple[int, list[str], list[str]]] = [(0, [], list(WRITERS))]
    for layer in range(layers):
        p = f"blocks.{layer}."
        stages.append((2 * layer + 1, [p + n for n in LAYER_READERS[:3]], [p + "attn.W_O"]))
        stages.append((2 * layer + 2, [p + "mlp.W_in"], [p + "mlp.W_out", p + "mlp.b_out"]))
    stages.append((2 * layers + 1, ["unembed.W_U"], []))
    return stages


def is_ffn_stage(stage: int) -> bool:
    """Whether an FFN block reads the residual at ``stage`` (2·layer + 2 in :func:`stage_tensors`)."""
    return stage >= 2 and stage % 2 == 0


def ffn_block(stage: int) -> int:
    """The (0-based) layer whose FFN block reads the residual at ``stage``: stage = 2·layer + 2."""
    assert is_ffn_stage(stage), stage
    return stage // 2 - 1


def touched(tensor: Tensor, axis: int) -> Tensor:
    """(D,) bool: the residual indices along ``axis`` where ``tensor`` has a nonzero entry."""
    tensor = tensor if tensor.dim() > 1 else tensor[None]
    return tensor.movedim(axis, -1).reshape(-1, tensor.shape[axis]).ne(0).any(dim=0)


def stage_map(tensors: dict[str, Tensor], size: int, layers: int) -> tuple[list[list[int]], list[list[int]]]:
    """(writes, reads): for every residual index, the stages writing and reading it."""
    writes: list[list[int]] = [[] for _ in range(size)]
    reads: list[list[int]] = [[] for _ in range(size)]
    for stage, readers, writers in stage_tensors(layers):
        for names, found, axis in ((readers, reads, -2), (writers, writes, -1)):
            for name in names:
                for i in torch.nonzero(touched(tensors[name], axis)).flatten().tolist():
                    if stage not in found[i]:
                        found[i].append(stage)
    return writes, reads


def drop_unread_writes(tensors: dict[str, Tensor], size: int, layers: int,
                       keep: frozenset[int] = frozenset()) -> None:
    """Tight lifetimes (i), in place: every write of a feature at or after its last read (after
    its first write) is set to 0, every write of a feature never read so; the features
    in ``keep`` untouched."""
    writes, reads = stage_map(tensors, size, layers)
    late = {}
    for i in (i for i in range(size) if i not in keep):
        read = max((r for r in reads[i] if writes[i] and r > min(writes[i])), default=-1)
        late[i] = [w for w in writes[i] if w >= read]  # a read at a stage comes before its write
    for stage, _, writers in stage_tensors(layers):
        dropped = [i for i, stages in late.items() if stage in stages]
        for name in writers if dropped else ():
            tensors[name] = tensors[name].clone()
            tensors[name][..., dropped] = 0.0


def lifetimes(tensors: dict[str, Tensor], labels: list[str], layers: int) -> list[Lifetime]:
    """Every feature's lifetime (see the module docstring); a feature never written has none."""
    size, last = len(labels), 2 * layers + 1
    writes, reads = stage_map(tensors, size, layers)
    out = []
    for i in range(size):
        if not writes[i]:
            continue
        # never read after its first write: kept to the end, as a write after its last read
        read = max((r for r in reads[i] if r > min(writes[i])), default=math.inf)
        end = math.inf if read == last or read == math.inf or max(writes[i]) >= read else read + (read % 2)
        out.append(Lifetime(i, labels[i], min(writes[i]), end))
    return out


def assign(features: int, alive: list[Lifetime]) -> Compression:
    """The dimensions: in order of first write, each feature takes the lowest dimension free when
    it starts (its last occupant erased at or before the feature's first write), else a new one."""
    slots: list[list[Lifetime]] = []
    for feature in sorted(alive, key=lambda f: (f.start, f.index)):
        free = next((s for s in slots if s[-1].end <= feature.start), None)
        if free is None:
            slots.append([feature])
        else:
            free.append(feature)
    slots.sort(key=lambda s: s[0].index)
    return Compression(features, tuple(tuple(s) for s in slots))


def compress_residual(tensors: dict[str, Tensor], card: ModelCard,
                      keep: frozenset[int] = frozenset()) -> tuple[Compression, ModelCard]:
    """Compress ``tensors`` (dense float64, changed in place: writes nothing reads dropped but
    those of ``keep``, readers lose the rows of features not written before them, which read 0)
    with tight lifetimes as the module docstring says: the compression, and ``card`` with its
    residual labels, d_model and the FFNs that gain erasers."""
    labels, layers = list(card.labels), len(card.layers)
    drop_unread_writes(tensors, len(labels), layers, keep)
    plan = assign(len(labels), lifetimes(tensors, labels, layers))
    a = torch.zeros(len(labels), plan.dimensions, dtype=torch.float64)  # (D, D'): feature -> its dimension
    for dimension, occupants in enumerate(plan.slots):
        for feature in occupants:
            a[feature.index, dimension] = 1.0
    start = torch.full((len(labels),), float(2 * layers + 2), dtype=torch.float64)
    for feature in (f for occupants in plan.slots for f in occupants):
        start[feature.index] = feature.start
    for stage, readers, writers in stage_tensors(layers):
        early = (start >= stage).to(torch.float64)[:, None]  # (D, 1): features not written before this stage read 0
        for name in readers:
            tensors[name] = tensors[name] * (1.0 - early)
        for name in writers:  # (..., D) -> (..., D')
            tensors[name] = tensors[name] @ a
        for name in readers:  # (..., D, E) -> (..., D', E)
            tensors[name] = a.T @ tensors[name]
    names = plan.labels()
    for layer, erased in sorted(plan.erasers().items()):
        _add_erasers(tensors, layer, [dimension for dimension, _ in erased], plan.dimensions)
        card = card.with_blocks(layer, BlockCard(
            name=f"eraser:{layer}", computes=f"{ERASER} ({', '.join(labels[i] for _, i in erased)})",
            units=2 * len(erased), error=0.0, output=names[erased[0][0]]))
    return plan, dataclasses.replace(card, residual_labels=tuple(names), d_model=plan.dimensions)


def _add_erasers(tensors: dict[str, Tensor], layer: int, dimensions: list[int], size: int) -> None:
    """Two units per dimension in block ``layer``'s FFN: relu(h_d) writing −1 and relu(−h_d) writing
    +1 to d, so the block adds −h_d: W_in (D', U) gains columns, b_in zeros, W_out (U, D') rows."""
    p = f"blocks.{layer}.mlp."
    count = 2 * len(dimensions)
    w_in = torch.zeros(size, count, dtype=torch.float64)
    w_out = torch.zeros(count, size, dtype=torch.float64)
    for k, dimension in enumerate(dimensions):
        w_in[dimension, 2 * k], w_in[dimension, 2 * k + 1] = 1.0, -1.0
        w_out[2 * k, dimension], w_out[2 * k + 1, dimension] = -1.0, 1.0
    tensors[p + "W_in"] = torch.cat([tensors[p + "W_in"], w_in], dim=1)
    tensors[p + "b_in"] = torch.cat([tensors[p + "b_in"], torch.zeros(count, dtype=torch.float64)])
    tensors[p + "W_out"] = torch.cat([tensors[p + "W_out"], w_out])
