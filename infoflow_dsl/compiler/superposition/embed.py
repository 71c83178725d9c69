"""The plain token model's weights re-embedded in the superposed layout of :mod:`.layout`.

The new residual is [kept directions | clean slots | storage] (N = K + slots + d_s). Each
writer W (last axis D) becomes W P_s, P_s (D × N) the stage's placement: a kept direction to its
coordinate, a stored categorical feature f to u_f in storage, and f also to its clean slot where
this stage provides the slot (the embedding for window 0, a head for the FFN after it). Each
reader W (axis D) becomes Q_s W, Q_s (N × D) reading a kept direction from its coordinate and a
categorical feature from its clean slot of the window, or from storage (u_f) for the direct
value and score reads. Then the FFNs gain the clean-ups and the erasers (:mod:`.layout`).
"""

from __future__ import annotations

import dataclasses

import torch

from ...transformer.card import BlockCard, ModelCard
from ..compress import stage_tensors
from .layout import Layout, window_of

Tensor = torch.Tensor

CLEAN_UP = "a clean-up: reads a superposed feature through a ReLU threshold with margin m, writes its exact value"
ERASE = "an eraser: sets a window's clean slots back to 0 after their last reader"


class Embedding:
    """Placement (P) and reading (Q) matrices of a :class:`Layout` under the code ``u``."""

    def __init__(self, plan: Layout, u: Tensor) -> None:
        self.plan, self.u = plan, u
        usage = plan.usage
        self.size = len(usage.labels)
        categorical = set(usage.group_of())
        self.kept = [i for i in range(self.size) if i not in categorical]
        self.slot_base = len(self.kept)
        self.storage_base = self.slot_base + plan.slots
        self.width = self.storage_base + u.shape[0]
        self.column = {f: k for k, f in enumerate(plan.stored)}

    def labels(self) -> list[str]:
        usage = self.plan.usage
        return ([usage.labels[i] for i in self.kept] + [f"clean:{k}" for k in range(self.plan.slots)]
                + [f"superposed:{i}" for i in range(self.u.shape[0])])

    def slot(self, window: int, feature: int) -> int:
        return self.slot_base + self.plan.slot(window, feature)

    def _base(self, placing: bool) -> Tensor:
        """The kept directions' part of P (``placing``, D × N) or of Q (N × D)."""
        m = torch.zeros(self.width, self.size, dtype=torch.float64)
        for k, i in enumerate(self.kept):
            m[k, i] = 1.0
        return m.T.clone() if placing else m

    def placement(self, stage: int) -> Tensor:
        """P_s (D × N)."""
        p = self._base(placing=True)
        for f, k in self.column.items():
            p[f, self.storage_base:] = self.u[:, k]
        for w, chosen in enumerate(self.plan.providers):
            for f, how in chosen.items():
                written = self.plan.usage.first_write(f)
                if how == "writer" and written == stage:
                    p[f, self.slot(w, f)] += 1.0
        return p

    def reading(self, stage: int, direct: bool = False) -> Tensor:
        """Q_s (N × D): from the window's clean slots, or (``direct``) from storage."""
        q = self._base(placing=False)
        usage, w = self.plan.usage, window_of(stage)
        for f in usage.group_of():
            if stage <= usage.first_write(f):
                continue
            if direct:
                if f in self.column:
                    q[self.storage_base:, f] = self.u[:, self.column[f]]
            elif f in self.plan.providers[w]:
                q[self.slot(w, f), f] = 1.0
        return q


def _read_heads(tensors: dict[str, Tensor], embedding: Embedding, layer: int) -> None:
    p, stage = f"blocks.{layer}.attn.", 2 * layer + 1
    plain, direct = embedding.reading(stage), embedding.reading(stage, direct=True)
    for name in ("W_Q", "W_K", "W_V"):
        w = tensors[p + name]
        tensors[p + name] = torch.stack([
            (direct if name == "W_V" and (layer, h) in embedding.plan.direct_heads else plain) @ w[h]
            for h in range(w.shape[0])]) if w.shape[0] else w.new_zeros(0, embedding.width, w.shape[2])


def _read_scores(tensors: dict[str, Tensor], embedding: Embedding, stage: int) -> None:
    w = tensors["unembed.W_U"]
    plain, direct = embedding.reading(stage), embedding.reading(stage, direct=True)
    scored = sorted(embedding.plan.direct_scores)
    rows = torch.zeros(w.shape[0], dtype=torch.bool)
    rows[scored] = True
    tensors["unembed.W_U"] = plain @ (w * ~rows[:, None]) + direct @ (w * rows[:, None])


def _units(tensors: dict[str, Tensor], layer: int, w_in: Tensor, b_in: Tensor, w_out: Tensor) -> None:
    p = f"blocks.{layer}.mlp."
    tensors[p + "W_in"] = torch.cat([tensors[p + "W_in"], w_in], dim=1)
    tensors[p + "b_in"] = torch.cat([tensors[p + "b_in"], b_in])
    tensors[p + "W_out"] = torch.cat([tensors[p + "W_out"], w_out])


def clean_ups(embedding: Embedding, window: int, margin: float) -> tuple[Tensor, Tensor, Tensor, list[int]]:
    """(W_in, b_in, W_out, features) of window ``window``'s clean-ups: per feature two units
    relu((r − m)/(1 − 2m)) − relu((r − 1 + m)/(1 − 2m)) of r = <u_f, h>, into its slot."""
    features = [f for f, how in embedding.plan.providers[window].items() if how == "cleaner"]
    scale = 1.0 / (1.0 - 2.0 * margin)
    w_in = torch.zeros(embedding.width, 2 * len(features), dtype=torch.float64)
    b_in = torch.zeros(2 * len(features), dtype=torch.float64)
    w_out = torch.zeros(2 * len(features), embedding.width, dtype=torch.float64)
    for k, f in enumerate(features):
        for unit, (threshold, sign) in enumerate(((margin, 1.0), (1.0 - margin, -1.0))):
            w_in[embedding.storage_base:, 2 * k + unit] = embedding.u[:, embedding.column[f]] * scale
            b_in[2 * k + unit] = -threshold * scale
            w_out[2 * k + unit, embedding.slot(window, f)] = sign
    return w_in, b_in, w_out, features


def erasers(embedding: Embedding, window: int) -> tuple[Tensor, Tensor, Tensor, list[int]]:
    """(W_in, b_in, W_out, slots) setting window ``window``'s occupied slots back to 0:
    −relu(h_s) + relu(−h_s) = −h_s."""
    slots = [embedding.slot(window, f) for f in embedding.plan.copies[window]]
    w_in = torch.zeros(embedding.width, 2 * len(slots), dtype=torch.float64)
    w_out = torch.zeros(2 * len(slots), embedding.width, dtype=torch.float64)
    for k, s in enumerate(slots):
        w_in[s, 2 * k], w_in[s, 2 * k + 1] = 1.0, -1.0
        w_out[2 * k, s], w_out[2 * k + 1, s] = -1.0, 1.0
    return w_in, torch.zeros(2 * len(slots), dtype=torch.float64), w_out, slots


def rewrite(tensors: dict[str, Tensor], config: ModelCard, plan: Layout, u: Tensor,
            margin: float) -> tuple[dict[str, Tensor], ModelCard, Embedding]:
    """The superposed model's (tensors, card) from the plain model's (dense float64)."""
    embedding = Embedding(plan, u)
    out = dict(tensors)
    layers = plan.usage.layers
    for stage, readers, writers in stage_tensors(layers):
        for name in writers:
            out[name] = out[name] @ embedding.placement(stage)
        if stage == 2 * layers + 1:
            _read_scores(out, embedding, stage)
        elif stage % 2 == 1:
            _read_heads(out, embedding, window_of(stage))
        else:
            for name in readers:
                out[name] = embedding.reading(stage) @ out[name]
    labels = embedding.labels()
    for layer in range(layers):
        w_in, b_in, w_out, features = clean_ups(embedding, layer + 1, margin)
        if features:
            _units(out, layer, w_in, b_in, w_out)
            names = ", ".join(plan.usage.labels[f] for f in features)
            config = config.with_blocks(layer, BlockCard(
                name=f"clean:{layer + 1}", computes=f"{CLEAN_UP} ({names})", units=int(w_in.shape[1]), error=0.0,
                output=labels[embedding.slot(layer + 1, features[0])]))
        w_in, b_in, w_out, slots = erasers(embedding, layer)
        if slots:
            _units(out, layer, w_in, b_in, w_out)
            config = config.with_blocks(layer, BlockCard(name=f"erase:{layer}", computes=ERASE,
                                                         units=int(w_in.shape[1]), error=0.0, output=labels[slots[0]]))
    return out, dataclasses.replace(config, residual_labels=tuple(labels), d_model=embedding.width), embedding
