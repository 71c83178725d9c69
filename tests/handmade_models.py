"""Hand-built compiled models for the tests of model.py and io.py, and a slow reference forward.

``random_model`` builds a small model with random weights and masks of every kind; its layers
cover the edge cases (an FFN-only layer, an FFN of width 0, an embedding without a ReLU block).
``reference_forward`` recomputes a model's output with Python loops over tokens, keys and heads,
evaluating the masks from their conditions directly: an implementation independent of the batched
one in ``infoflow_dsl.transformer.model``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from infoflow_dsl.transformer.model import CompiledTransformer

# Masks of every kind: no condition; key vs query with each operator; "last"; literals on either
# side; two conditions at once; a condition on positions that never holds (fully masked rows);
# a condition without "key" (a whole query row, or the whole head, masked).
MASKS: list[list[list[Any]]] = [
    [],
    [["key", "!=", "query"]],
    [["key", "<", "query"]],
    [["key", "<=", "query"]],
    [["key", ">", "query"]],
    [["key", ">=", "query"]],
    [["key", "==", "last"]],
    [["key", "==", 2]],
    [[3, "<", "key"]],
    [["key", ">=", 2], ["key", "<=", "last"], ["query", "!=", 1]],
    [["key", "==", 99]],
    [["query", "==", "last"]],
    [["last", ">", 3]],
    [["key", "<", "last"], ["query", ">", "key"]],
]


def random_config(
    masks_per_layer: list[list[list[list[Any]]]] | None = None,
    t: int = 6,
    d: int = 2,
    d_model: int = 8,
    output_shape: list[int] | None = None,
    exact_length_only: bool | None = None,
) -> dict[str, Any]:
    if masks_per_layer is None:
        masks_per_layer = [MASKS[:7], MASKS[7:], []]  # 3 layers: 7 heads, 7 heads, FFN only
    config: dict[str, Any] = {
        "T": t,
        "d": d,
        "d_model": d_model,
        "output_shape": [] if output_shape is None else list(output_shape),
        "layers": [
            {"heads": [{"name": f"h{i}.{j}", "mask": mask} for j, mask in enumerate(masks)]}
            for i, masks in enumerate(masks_per_layer)
        ],
        "eps": 1e-3,
        "residual_labels": [f"r{i}" for i in range(d_model)],
    }
    if exact_length_only is not None:
        config["exact_length_only"] = exact_length_only
    return config


def random_tensors(config: dict[str, Any], seed: int = 0, m_embed: int = 3, e: int = 3, v: int = 2,
                   ffn_widths: list[int] | None = None, beta: float = 2.0) -> dict[str, torch.Tensor]:
    """Random float64 tensors for ``config``; weights scaled so the residual stream stays O(1)."""
    gen = torch.Generator().manual_seed(seed)
    d, dm, t = config["d"], config["d_model"], config["T"]
    k = config["output_shape"][0] if config["output_shape"] else 1
    n_layers = len(config["layers"])
    if ffn_widths is None:
        ffn_widths = [4 if i != 1 else 0 for i in range(n_layers)]  # layer 1: an FFN of width 0

    def rnd(*shape: int, scale: float = 1.0) -> torch.Tensor:
        fan_in = shape[-2] if len(shape) >= 2 else 1
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale / math.sqrt(max(fan_in, 1))

    angles = torch.arange(1, t + 2, dtype=torch.float64) * (math.pi / (2 * (t + 1)))
    w_pos = torch.zeros(t + 1, dm, dtype=torch.float64)
    w_pos[:, -2], w_pos[:, -1] = torch.cos(angles), torch.sin(angles)
    tensors = {
        "embed.W_E": rnd(d + 1, dm), "embed.W_E1": rnd(d + 1, m_embed), "embed.b_E1": rnd(m_embed, scale=0.3),
        "embed.W_E2": rnd(m_embed, dm), "embed.cls": rnd(dm), "pos_embed.W_pos": w_pos,
    }
    for i, layer in enumerate(config["layers"]):
        h, m, p = len(layer["heads"]), ffn_widths[i], f"blocks.{i}."
        tensors |= {
            p + "attn.W_Q": rnd(h, dm, e), p + "attn.W_K": rnd(h, dm, e), p + "attn.W_V": rnd(h, dm, v),
            p + "attn.W_O": rnd(h, v, dm, scale=0.5),
            p + "attn.beta": beta * (0.5 + torch.rand(h, generator=gen, dtype=torch.float64)),
            p + "mlp.W_in": rnd(dm, m), p + "mlp.b_in": rnd(m, scale=0.3), p + "mlp.W_out": rnd(m, dm, scale=0.5),
            p + "mlp.b_out": rnd(dm, scale=0.1),
        }
    tensors |= {"unembed.W_U": rnd(dm, k), "unembed.b_U": rnd(k)}
    return tensors


def random_model(seed: int = 0, dtype: torch.dtype = torch.float64, output_shape: list[int] | None = None,
                 masks_per_layer: list[list[list[list[Any]]]] | None = None, **kwargs: Any) -> CompiledTransformer:
    config_keys = ("t", "d", "d_model", "exact_length_only")
    config = random_config(masks_per_layer, output_shape=output_shape,
                           **{k: v for k, v in kwargs.items() if k in config_keys})
    tensors = random_tensors(config, seed, **{k: v for k, v in kwargs.items() if k not in config_keys})
    return CompiledTransformer(config, tensors, dtype=dtype)


# ---------------------------------------------------------------------------- slow reference

_OPS = {
    "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
}


def mask_allows(conds: list[list[Any]], key: int, query: int, last: int) -> bool:
    """Whether a head with these conditions lets query position ``query`` attend to ``key`` (1-based);
    a side may carry an offset (``"query-1"``)."""
    def side(v: Any) -> int:
        if not isinstance(v, str):
            return int(v)
        for base in ("key", "query", "last"):
            if v.startswith(base):
                return {"key": key, "query": query, "last": last}[base] + int(v[len(base):] or 0)
        raise ValueError(f"not a mask side: {v!r}")

    return all(_OPS[op](side(a), side(b)) for a, op, b in conds)


def reference_streams(model: CompiledTransformer, x: torch.Tensor) -> list[torch.Tensor]:
    """The residual stream after the embedding and each layer, by loops over tokens (float64); a
    token model's x is its ids (B, T')."""
    w = {name: t.detach().to(torch.float64) for name, t in model.state_dict().items()}
    cfg = model.config
    batch, length = x.shape[:2]
    x = x if model.token_input else x.to(torch.float64)
    h = torch.zeros(batch, length + 1, cfg["d_model"], dtype=torch.float64)
    for b in range(batch):
        for t in range(length):
            if model.token_input:  # x: ids (B, T'); the id's row of the table
                h[b, t] = w["embed.W_E"][int(x[b, t])] + w["pos_embed.W_pos"][t]
                continue
            xe = torch.cat([x[b, t], torch.ones(1, dtype=torch.float64)])
            hidden = torch.clamp(xe @ w["embed.W_E1"] + w["embed.b_E1"], min=0)
            h[b, t] = xe @ w["embed.W_E"] + hidden @ w["embed.W_E2"] + w["pos_embed.W_pos"][t]
        h[b, length] = w["embed.cls"] + w["pos_embed.W_pos"][length]
    streams = [h.clone()]
    for i, layer in enumerate(cfg["layers"]):
        p = f"blocks.{i}."
        new = h.clone()
        for b in range(batch):
            for t in range(length + 1):  # query row t+1 (1-based); row `length` is the readout token
                for j, head in enumerate(layer["heads"]):
                    keys = [s for s in range(length) if mask_allows(head["mask"], s + 1, t + 1, length)]
                    if not keys:
                        continue
                    q = h[b, t] @ w[p + "attn.W_Q"][j]
                    scores = [float(w[p + "attn.beta"][j]) * float(q @ (h[b, s] @ w[p + "attn.W_K"][j])) for s in keys]
                    top = max(scores)
                    weights = [math.exp(sc - top) for sc in scores]
                    total = sum(weights)
                    values = [h[b, s] @ w[p + "attn.W_V"][j] for s in keys]
                    z = sum((wt / total) * val for wt, val in zip(weights, values, strict=True))
                    new[b, t] += z @ w[p + "attn.W_O"][j]
        h = new
        for b in range(batch):
            for t in range(length + 1):
                hidden = torch.clamp(h[b, t] @ w[p + "mlp.W_in"] + w[p + "mlp.b_in"], min=0)
                h[b, t] = h[b, t] + hidden @ w[p + "mlp.W_out"] + w[p + "mlp.b_out"]
        streams.append(h.clone())
    return streams


def reference_forward(model: CompiledTransformer, x: torch.Tensor) -> torch.Tensor:
    """The output read at the readout token, or at every token for a per-token model."""
    h = reference_streams(model, x)[-1]
    w_u, b_u = model.unembed.W_U.detach().double(), model.unembed.b_U.detach().double()
    rows = range(h.shape[1] - 1) if model.per_token else [h.shape[1] - 1]
    y = torch.stack([torch.stack([h[b, t] @ w_u + b_u for t in rows]) for b in range(h.shape[0])])  # (B, rows, K)
    y = y if model.per_token else y[:, 0]
    return y[..., 0] if not model.config["output_shape"] else y


# ---------------------------------------------------------------------------- a head nothing reads

UNREAD = 5  # the residual coordinate only the unread head writes into and nothing reads


def unread_head_model(seed: int = 3) -> CompiledTransformer:
    """A random model (two layers of three heads, the last of layer 0 being the unread head) in
    which coordinate UNREAD is written only by that head and read by no weight: W_Q, W_K, W_V,
    W_in and W_U have a zero row there, and the head's W_O writes nowhere else."""
    masks = [[MASKS[0], MASKS[2], MASKS[1]], [MASKS[0], MASKS[6], MASKS[3]]]
    config = random_config(masks, t=6, d=2, d_model=8)
    tensors = random_tensors(config, seed)
    for name in tensors:
        if name.endswith(("attn.W_Q", "attn.W_K", "attn.W_V")):
            tensors[name][:, UNREAD] = 0.0
        elif name.endswith(("mlp.W_in", "unembed.W_U")):
            tensors[name][UNREAD] = 0.0
        elif name.endswith("attn.W_O"):
            tensors[name][:, :, UNREAD] = 0.0
    unread = tensors["blocks.0.attn.W_O"][2]  # (V, D)
    unread.zero_()
    unread[:, UNREAD] = 1.0
    return CompiledTransformer(config, tensors)


# ---------------------------------------------------------------------------- token models (language v3)
#
# Small token models built by hand from their programs' meaning (not from expected outputs):
# the residual stream holds V one-hot directions (x(t) == token k), a constant, the answer
# directions and a 2-d positional code. Tests compare them with the reference evaluator.

TOKEN_SOURCES: dict[str, str] = {
    "identity": 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = x(t)\n',
    "fraction": 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget(t) = mean_<s : s <= t> [x(s) == "a"]\n',
    "mean": 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget mean_<s> [x(s) == "a"]\n',
    "first": 'input x : token {"a", "b", "c"}\nlength T = 5\ntarget x(1)\n',
    "numeric": "input x : token {1, 2.5, 4}\nlength T = 4\ntarget(t) = 2 * x(t)\n",
}


def token_program(name: str) -> Any:
    """The checked program of one of :data:`TOKEN_SOURCES`."""
    from infoflow_dsl.language.load import parse_program

    return parse_program(TOKEN_SOURCES[name], f"{name}.iflow")


def token_config(name: str, d_model: int, answer: int, heads: list[list[Any]]) -> dict[str, Any]:
    """The config of a token model for program ``name``: ``answer`` output components (V for a
    token output), one layer per entry of ``heads`` (each a list of masks)."""
    program = token_program(name)
    vocabulary = program.vocabulary
    return {
        "T": program.length, "d": vocabulary.size, "d_model": d_model, "input": "tokens",
        "vocabulary": {"names": list(vocabulary.names),
                       "values": None if vocabulary.values is None else list(vocabulary.values)},
        "token_output": program.token_output,
        "output_shape": [answer] if program.token_output else [],
        "output": "token" if program.per_token else "readout",
        "layers": [{"heads": [{"name": f"h{i}.{j}", "mask": mask} for j, mask in enumerate(masks)]}
                   for i, masks in enumerate(heads)],
        "eps": 1e-9, "dtype": "float64", "a_priori_bound": 0.0, "measured_error": None,
        "residual_labels": [f"r{i}" for i in range(d_model)],
        "program": {"name": f"{name}.iflow", "source": program.source, "margin": program.margin},
    }


def _token_table(size: int, d_model: int, t: int) -> dict[str, torch.Tensor]:
    """Embedding tensors: W_E one-hot in directions 0..V−1 and 1 in direction V (the constant);
    the positional code (cos, sin) in the last two; an empty ReLU block; cls = the constant."""
    w_e = torch.zeros(size, d_model, dtype=torch.float64)
    w_e[torch.arange(size), torch.arange(size)] = 1.0
    w_e[:, size] = 1.0
    angles = torch.arange(1, t + 2, dtype=torch.float64) * 0.3
    w_pos = torch.zeros(t + 1, d_model, dtype=torch.float64)
    w_pos[:, -2], w_pos[:, -1] = torch.cos(angles), torch.sin(angles)
    cls = torch.zeros(d_model, dtype=torch.float64)
    cls[size] = 1.0
    empty = {"embed.W_E1": (size, 0), "embed.b_E1": (0,), "embed.W_E2": (0, d_model)}
    return {"embed.W_E": w_e, **{name: torch.zeros(shape, dtype=torch.float64) for name, shape in empty.items()},
            "embed.cls": cls, "pos_embed.W_pos": w_pos}


def _copy_head(d_model: int, reads: list[int], writes: list[int]) -> dict[str, torch.Tensor]:
    """A layer with one uniform head (β = 0) whose value copies directions ``reads`` into
    ``writes``, and an FFN of zero units."""
    width = len(reads)
    w_v, w_o = torch.zeros(1, d_model, width, dtype=torch.float64), torch.zeros(1, width, d_model, dtype=torch.float64)
    w_v[0, reads, torch.arange(width)] = 1.0
    w_o[0, torch.arange(width), writes] = 1.0
    z = torch.zeros
    return {"attn.W_Q": z(1, d_model, 1, dtype=torch.float64), "attn.W_K": z(1, d_model, 1, dtype=torch.float64),
            "attn.W_V": w_v, "attn.W_O": w_o, "attn.beta": z(1, dtype=torch.float64),
            "mlp.W_in": z(d_model, 0, dtype=torch.float64), "mlp.b_in": z(0, dtype=torch.float64),
            "mlp.W_out": z(0, d_model, dtype=torch.float64), "mlp.b_out": z(d_model, dtype=torch.float64)}


def _reading(d_model: int, reads: list[int]) -> dict[str, torch.Tensor]:
    """The unembedding that outputs directions ``reads`` (one output component each)."""
    w_u = torch.zeros(d_model, len(reads), dtype=torch.float64)
    w_u[reads, torch.arange(len(reads))] = 1.0
    return {"unembed.W_U": w_u, "unembed.b_U": torch.zeros(len(reads), dtype=torch.float64)}


def token_model(name: str, dtype: torch.dtype = torch.float64, shuffle_output: bool = False) -> CompiledTransformer:
    """The hand-built model of program ``name`` (:data:`TOKEN_SOURCES`):

    - ``identity`` (x(t), a per-token token output): no layer; W_U reads the V one-hot directions.
    - ``numeric`` (2 x(t) over the vocabulary {1, 2.5, 4}): no layer; W_E writes twice each
      token's number into the answer direction, which W_U reads.
    - ``fraction`` (mean_<s : s <= t> [x(s) == "a"]): one uniform head over keys s <= t copies the
      indicator of "a" (one-hot direction 0) into the answer direction: the mean over s <= t.
    - ``mean`` (mean_<s> [x(s) == "a"], a sequence target): the same head, unmasked, read at the readout.
    - ``first`` (x(1), a sequence token output): one head with mask key == 1 copies the V one-hot
      directions into V answer directions, which W_U reads as the scores.

    ``shuffle_output`` rotates the token scores by one (a wrong model, for the checks' failures)."""
    program = token_program(name)
    size, t = program.vocabulary.size, program.length
    if name in ("identity", "numeric"):
        d_model = size + 4  # one-hot, constant, answer, positional code
        config = token_config(name, d_model, size, [])
        tensors = _token_table(size, d_model, t)
        if name == "numeric":
            tensors["embed.W_E"][:, size + 1] = 2.0 * torch.tensor(program.vocabulary.values, dtype=torch.float64)
        reads = list(range(size)) if name == "identity" else [size + 1]
    elif name in ("fraction", "mean"):
        d_model = size + 4
        mask = [["key", "<=", "query"]] if name == "fraction" else []
        config = token_config(name, d_model, 1, [[mask]])
        tensors = _token_table(size, d_model, t) | {f"blocks.0.{k}": v
                                                    for k, v in _copy_head(d_model, [0], [size + 1]).items()}
        reads = [size + 1]
    elif name == "first":
        d_model = 2 * size + 3  # one-hot, constant, V answer directions, positional code
        config = token_config(name, d_model, size, [[[["key", "==", 1]]]])
        answer = list(range(size + 1, 2 * size + 1))
        tensors = _token_table(size, d_model, t) | {f"blocks.0.{k}": v for k, v in
                                                    _copy_head(d_model, list(range(size)), answer).items()}
        reads = answer
    else:
        raise ValueError(f"no hand-built token model {name!r}")
    if shuffle_output:
        reads = reads[1:] + reads[:1]
    return CompiledTransformer(config, tensors | _reading(d_model, reads), dtype=dtype)


#: the masks of :data:`MASKS` that do not read the run-time length (a token model's)
LENGTH_FREE_MASKS = [m for m in MASKS if not any(isinstance(side, str) and side.startswith("last")
                                                   for c in m for side in (c[0], c[2]))]


def random_token_model(seed: int = 0, names: tuple[str, ...] = ("a", "b", "c", "d"), t: int = 6, d_model: int = 8,
                       token_output: bool = True, per_token: bool = True,
                       values: tuple[float, ...] | None = None,
                       dtype: torch.dtype = torch.float64) -> CompiledTransformer:
    """A random token model over ``names`` (a numeric vocabulary with ``values``): the random
    layers of :func:`random_model` with the masks that do not read the length, and a random
    table W_E [V, d_model] with no ReLU block; V scores per output site with ``token_output``."""
    size = len(names)
    masks = [LENGTH_FREE_MASKS[:5], LENGTH_FREE_MASKS[5:], []]
    config = random_config(masks, t=t, d=size, d_model=d_model, output_shape=[size] if token_output else [])
    config |= {"input": "tokens", "vocabulary": {"names": list(names), "values": None if values is None else
                                                 list(values)}, "token_output": token_output}
    if per_token:
        config["output"] = "token"
    tensors = random_tensors(config, seed, m_embed=0)
    gen = torch.Generator().manual_seed(seed + 1)
    tensors["embed.W_E"] = torch.randn(size, d_model, generator=gen, dtype=torch.float64)
    tensors["embed.W_E1"] = torch.zeros(size, 0, dtype=torch.float64)
    return CompiledTransformer(config, tensors, dtype=dtype)
