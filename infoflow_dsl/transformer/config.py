"""The shape of a model: the part of its card that fixes its tensors and its forward.

The config is the JSON object written into the safetensors metadata (``io``), read as the
model's card (:mod:`.card`, every field typed and checked); the card's shape fields are checked
here, by :meth:`ModelConfig.from_json`, and the forward reads them through :class:`ModelConfig`
(``card.spec``, ``model.spec``). The keys read are
``T``, ``d``, ``d_model``, ``output_shape`` ([] or [K]), ``min_length`` (default 1),
``output`` (``readout`` or ``token``), ``exact_length_only`` (default false) and ``layers``
(each with its ``heads``: a ``name`` and a ``mask``, :mod:`~infoflow_dsl.transformer.masks`).

A **token model** (language v3, docs/design.md, "The compiled model") has ``"input": "tokens"``: it reads
token ids (B, T') in 0..V−1, and its config also holds ``"vocabulary": {"names": [...],
"values": [...] or null}`` (the program's :class:`~infoflow_dsl.language.typed.Vocabulary`,
V names) with ``"d": V``; ``"output_vocabulary": {"names": [...]}`` when a token output
answers with a table's tokens (language v4) rather than the input's;
``"token_output": true`` (default false) when the target's value is
a token, and then ``output_shape`` is [V] (a score per token). Its embedding is a table, one
row per id: ``embed.W_E`` is [V, d_model] (the constant direction already in each row) and the
ReLU block is empty (``embed.W_E1`` [V, 0]: any function of the own token is a row of the
table). Its masks never read the run-time length (no ``last``): a real transformer cannot see
T' in a mask, and the compiler computes the length from the input where it needs it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..language.declarations import MAX_LENGTH
from ..language.typed import Vocabulary
from .masks import HeadMask, check_mask

OUTPUT_SITES = ("readout", "token")
INPUT_KINDS = ("vectors", "tokens")

# A dimension in an expected shape: an int fixed by the config, or a symbol (str) that every
# tensor using it must agree on (the head widths E_l, V_l, the FFN widths M0, M_l).
Dim = int | str


@dataclass(frozen=True)
class ModelConfig:
    """The fields of a model's config that fix its shapes and its forward.

    ``T`` is the longest input, ``d`` the token dimension, ``d_model`` the residual width;
    ``output_shape`` is () for a scalar output or (K,); inputs have lengths ``min_length``..T
    (exactly T with ``exact_length_only``); ``per_token`` models read out every token
    (``"output": "token"``) rather than the readout token; ``head_names[l]`` and ``masks[l]``
    are the names and the masks of layer l's heads (a layer without heads: FFN only).
    ``vocabulary`` is a token model's vocabulary (None for a model over vectors; ``d`` is then
    V), and ``token_output`` says its outputs are V scores, one per token."""

    T: int
    d: int
    d_model: int
    output_shape: tuple[int, ...]
    min_length: int
    exact_length_only: bool
    per_token: bool
    head_names: tuple[tuple[str, ...], ...]
    masks: tuple[tuple[HeadMask, ...], ...]
    vocabulary: Vocabulary | None = None
    token_output: bool = False

    @property
    def token_input(self) -> bool:
        """The model reads token ids (B, T'), not vectors (B, T', d)."""
        return self.vocabulary is not None

    @classmethod
    def from_json(cls, config: Any) -> ModelConfig:
        """Validate the config keys the model reads; raises ValueError naming the fault."""
        if not isinstance(config, Mapping):
            raise ValueError(f"the config must be a JSON object, got {type(config).__name__}")
        length, d, d_model = (_positive_int(config, key) for key in ("T", "d", "d_model"))
        if length > MAX_LENGTH:
            raise ValueError(f"config['T'] is {length:,}; a model is compiled for T up to {MAX_LENGTH:,}")
        shape = config.get("output_shape")
        if not isinstance(shape, (list, tuple)) or len(shape) > 1 or any(
            isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in shape
        ):
            raise ValueError(f"config['output_shape'] must be [] or [K] with K >= 1, got {shape!r}")
        min_length = config.get("min_length", 1)
        if isinstance(min_length, bool) or not isinstance(min_length, int) or not 1 <= min_length <= length:
            raise ValueError(f"config['min_length'] must be an integer in 1..T, got {min_length!r}")
        if config.get("output", "readout") not in OUTPUT_SITES:
            raise ValueError(f"config['output'] must be 'readout' or 'token', got {config['output']!r}")
        exact_length_only = config.get("exact_length_only", False)
        if not isinstance(exact_length_only, bool):
            raise ValueError(f"config['exact_length_only'] must be true or false, got {config['exact_length_only']!r}")
        layers = config.get("layers")
        if not isinstance(layers, (list, tuple)):
            raise ValueError(f"config['layers'] must be a list, got {layers!r}")
        heads = [_heads(layer, i) for i, layer in enumerate(layers)]
        vocabulary, token_output = _token_fields(config, d, tuple(shape))
        if vocabulary is not None:
            _check_length_free(heads)
        return cls(T=length, d=d, d_model=d_model, output_shape=tuple(shape), min_length=min_length,
                   exact_length_only=exact_length_only, per_token=config.get("output", "readout") == "token",
                   head_names=tuple(tuple(heads_of) for heads_of, _ in heads),
                   masks=tuple(tuple(masks_of) for _, masks_of in heads),
                   vocabulary=vocabulary, token_output=token_output)

    def expected_shapes(self) -> dict[str, tuple[Dim, ...]]:
        """Every tensor a model with this config holds, with its shape; str dims are free widths."""
        d, dm, t = self.d, self.d_model, self.T
        k = self.output_shape[0] if self.output_shape else 1
        # a token model's embedding: a table of V rows (d = V), no ReLU block (M_embed = 0)
        rows, m0 = (d, 0) if self.token_input else (d + 1, "M_embed")
        shapes: dict[str, tuple[Dim, ...]] = {
            "embed.W_E": (rows, dm), "embed.W_E1": (rows, m0), "embed.b_E1": (m0,),
            "embed.W_E2": (m0, dm), "embed.cls": (dm,), "pos_embed.W_pos": (t + 1, dm),
        }
        for i, heads in enumerate(self.masks):
            h, e, v, m = len(heads), f"E_{i}", f"V_{i}", f"M_{i}"  # heads, query/key, value, FFN widths
            p = f"blocks.{i}."
            shapes |= {
                p + "attn.W_Q": (h, dm, e), p + "attn.W_K": (h, dm, e), p + "attn.W_V": (h, dm, v),
                p + "attn.W_O": (h, v, dm), p + "attn.beta": (h,),
                p + "mlp.W_in": (dm, m), p + "mlp.b_in": (m,), p + "mlp.W_out": (m, dm), p + "mlp.b_out": (dm,),
            }
        shapes |= {"unembed.W_U": (dm, k), "unembed.b_U": (k,)}
        return shapes

    def check_tensor_shapes(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        """Check that exactly the expected tensors are present, each with the shape the config
        implies (free widths consistent across the tensors sharing them). Raises ValueError
        naming the fault."""
        expected = self.expected_shapes()
        missing = [name for name in expected if name not in shapes]
        if missing:
            raise ValueError(f"missing tensor(s): {', '.join(missing)}")
        extra = sorted(name for name in shapes if name not in expected)
        if extra:
            raise ValueError(f"unexpected tensor(s): {', '.join(extra)}")
        bound: dict[str, tuple[int, str]] = {}
        for name, want in expected.items():
            got = tuple(shapes[name])
            if len(got) != len(want):
                raise ValueError(f"tensor {name} has shape {list(got)}, expected rank {len(want)} ({_show(want)})")
            for g, w in zip(got, want, strict=True):
                if isinstance(w, int) and g != w:
                    raise ValueError(f"tensor {name} has shape {list(got)}, expected {_show(want)}")
                if isinstance(w, str):
                    if w in bound and bound[w][0] != g:
                        raise ValueError(
                            f"tensor {name} has shape {list(got)}, but width {w} is {bound[w][0]} in {bound[w][1]}"
                        )
                    bound.setdefault(w, (g, name))


def _positive_int(config: Mapping[str, Any], key: str) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"config[{key!r}] must be a positive integer, got {value!r}")
    return value


def _token_fields(config: Mapping[str, Any], d: int, shape: tuple[int, ...]) -> tuple[Vocabulary | None, bool]:
    """(vocabulary, token_output) of a token model (``"input": "tokens"``), (None, False) for a
    model over vectors; raises ValueError naming the fault (see the module docstring)."""
    kind = config.get("input", "vectors")
    if kind not in INPUT_KINDS:
        raise ValueError(f"config['input'] must be 'vectors' or 'tokens', got {kind!r}")
    token_output = config.get("token_output", False)
    if not isinstance(token_output, bool):
        raise ValueError(f"config['token_output'] must be true or false, got {token_output!r}")
    if kind == "vectors":
        if token_output or "vocabulary" in config:
            raise ValueError("config['token_output'] and config['vocabulary'] need \"input\": \"tokens\"")
        return None, False
    vocabulary = _vocabulary(config.get("vocabulary"))
    if vocabulary.size != d:
        raise ValueError(f"a token model's d is its vocabulary's size {vocabulary.size}, got d = {d}")
    scored = d
    if "output_vocabulary" in config:  # a table of tokens' values (language v4), not the input's
        if not token_output:
            raise ValueError("config['output_vocabulary'] needs \"token_output\": true")
        scored = _vocabulary({"names": (config["output_vocabulary"] or {}).get("names")
                              if isinstance(config["output_vocabulary"], Mapping) else None, "values": None}).size
    if token_output and shape != (scored,):
        raise ValueError(f"a token output scores the V = {scored} tokens: config['output_shape'] must be "
                         f"[{scored}], got {list(shape)}")
    return vocabulary, token_output


def _vocabulary(entry: Any) -> Vocabulary:
    """config['vocabulary'] as a Vocabulary: distinct string names, and for a numeric vocabulary
    one finite number per name (JSON has no NaN or infinity to give)."""
    names = entry.get("names") if isinstance(entry, Mapping) else None
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names) or len(
            set(names)) != len(names):
        raise ValueError(f"config['vocabulary'] must be an object with 'names', a non-empty list of distinct strings, "
                         f"got {entry!r}")
    values = entry.get("values")
    if values is None:
        return Vocabulary(tuple(names))
    if not isinstance(values, (list, tuple)) or len(values) != len(names) or any(
            isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) for v in values) or len(
            set(values)) != len(values):
        raise ValueError(f"config['vocabulary']['values'] must be null or {len(names)} distinct numbers, one per "
                         f"name, got {values!r}")
    return Vocabulary(tuple(names), tuple(float(v) for v in values))


def _check_length_free(heads: list[tuple[list[str], list[HeadMask]]]) -> None:
    """A token model's masks read positions only, never the run-time length ``last``."""
    for index, (names, masks) in enumerate(heads):
        for head, (name, mask) in enumerate(zip(names, masks, strict=True)):
            if any(isinstance(side, str) and side.startswith("last") for condition in mask
                   for side in (condition[0], condition[2])):
                raise ValueError(f"layer {index} head {head} ({name}): a token model's mask cannot read the "
                                 f"run-time length ('last')")


def _heads(layer: Any, index: int) -> tuple[list[str], list[HeadMask]]:
    """(names, masks) of layer ``index``'s heads."""
    if not isinstance(layer, Mapping) or not isinstance(layer.get("heads"), (list, tuple)):
        raise ValueError(f"config['layers'][{index}] must be an object with a list 'heads'")
    names, masks = [], []
    for h, head in enumerate(layer["heads"]):
        where = f"layer {index} head {h}"
        if not isinstance(head, Mapping) or not isinstance(head.get("name"), str):
            raise ValueError(f"{where}: a head must be an object with a string 'name'")
        names.append(head["name"])
        masks.append(check_mask(head.get("mask", []), where, head["name"]))
    return names, masks


def _show(shape: tuple[Dim, ...]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"
