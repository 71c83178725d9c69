"""A typed view of a compiled model's JSON config, and the tensor shapes it implies.

The config is the JSON object written into the safetensors metadata (``io``); the model keeps
that dict as it was given (so a file is rewritten byte for byte) and reads its fields through
:class:`ModelConfig`, built and validated by :meth:`ModelConfig.from_json`. The keys read are
``T``, ``d``, ``d_model``, ``output_shape`` ([] or [K]), ``min_length`` (default 1),
``output`` (``readout`` or ``token``), ``exact_length_only`` (default false) and ``layers``
(each with its ``heads``: a ``name`` and a ``mask``, :mod:`~infoflow_dsl.transformer.masks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .masks import HeadMask, check_mask

OUTPUT_SITES = ("readout", "token")

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
    are the names and the masks of layer l's heads (a layer without heads: FFN only)."""

    T: int
    d: int
    d_model: int
    output_shape: tuple[int, ...]
    min_length: int
    exact_length_only: bool
    per_token: bool
    head_names: tuple[tuple[str, ...], ...]
    masks: tuple[tuple[HeadMask, ...], ...]

    @classmethod
    def from_json(cls, config: Any) -> ModelConfig:
        """Validate the config keys the model reads; raises ValueError naming the fault."""
        if not isinstance(config, Mapping):
            raise ValueError(f"the config must be a JSON object, got {type(config).__name__}")
        length, d, d_model = (_positive_int(config, key) for key in ("T", "d", "d_model"))
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
        return cls(T=length, d=d, d_model=d_model, output_shape=tuple(shape), min_length=min_length,
                   exact_length_only=exact_length_only, per_token=config.get("output", "readout") == "token",
                   head_names=tuple(tuple(heads_of) for heads_of, _ in heads),
                   masks=tuple(tuple(masks_of) for _, masks_of in heads))

    def expected_shapes(self) -> dict[str, tuple[Dim, ...]]:
        """Every tensor a model with this config holds, with its shape; str dims are free widths."""
        d, dm, t = self.d, self.d_model, self.T
        k = self.output_shape[0] if self.output_shape else 1
        shapes: dict[str, tuple[Dim, ...]] = {
            "embed.W_E": (d + 1, dm), "embed.W_E1": (d + 1, "M_embed"), "embed.b_E1": ("M_embed",),
            "embed.W_E2": ("M_embed", dm), "embed.cls": (dm,), "pos_embed.W_pos": (t + 1, dm),
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
