"""What a page shows about a compiled model: its heads, the circuit graph, attention patterns on
example inputs, the measured error, the parameters and the residual directions.

Two kinds of numbers, kept apart. Those of the weights and the config (patterns, β, bounds,
parameter counts) are the same on every machine and go into the page's ``ifl-data`` block:
patterns are computed by a float64 copy of the stored weights (at β ~ 1e5, the float32 scores
of two nearly tied keys round differently from CPU to CPU: min_pairwise's readout pattern moves
by 0.004 between float32 and float64). Those of the float32 forward itself (each
input's |model − reference|, the worst input, the example outputs) move by the model's rounding
share between CPUs (AVX2 against AVX-512 kernels); they go into the ``ifl-measured`` block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..language import typed as ir
from ..measure.vectors import errors_on, model_inputs
from ..measure.workload import measurement_workload
from ..oracle.evaluate import evaluate
from ..oracle.sampling import sample_inputs
from ..transformer.card import BlockCard, ModelCard
from ..transformer.model import CompiledTransformer
from ..transformer.sparse import nonzero_entries
from ..verify.check import writers
from ..verify.sites import CircuitSite, circuit
from .content import ComparisonBox
from .token_measured import token_examples, token_measured_section, token_names

EXAMPLES = 8  # example inputs embedded for the attention patterns
EXAMPLE_SEED = 2024  # their seed (sample_inputs), fixed: the same model gives the same page
UNMEASURED_SAMPLES = 256  # random inputs the page measures for a model whose compile measured none
PATTERN_SCALE = 10_000  # patterns are stored as round(p · PATTERN_SCALE): 4 decimals
_SIDE_NAMES = {"key": "s", "query": "t", "last": "T"}


def _significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def side_text(side: str | int) -> str:
    """A mask side in the page's words: ``query-1`` -> "t−1", ``last`` -> "T", 3 -> "3"."""
    if isinstance(side, int):
        return str(side)
    for name, letter in _SIDE_NAMES.items():
        if side.startswith(name):
            return letter + side[len(name):].replace("-", "−")
    return side


def mask_text(mask: Sequence[Sequence[Any]]) -> str:
    """A head's mask as conditions on key s and query t ("none" when every key is seen)."""
    return " and ".join(f"{side_text(a)} {op} {side_text(b)}" for a, op, b in mask) or "none"


def model_heads(card: ModelCard) -> list[dict[str, Any]]:
    """Every head of the model, in layer order: its layer (1-based), index in the layer, name,
    kind, site (``token`` rows or the ``readout`` row), what it computes, β, mask and the
    residual directions it writes (what it retrieves); ``reads`` is left to the weights
    (:func:`head_reads`)."""
    return [{"layer": index + 1, "index": h, "name": head.name, "kind": head.kind or "",
             "site": head.site or "", "computes": head.computes or "", "beta": head.beta,
             "mask": mask_text(head.conditions), "into": list(head.outputs or ()),
             "reads": [], "bound": head.error}
            for index, layer in enumerate(card.layers) for h, head in enumerate(layer.heads)]


# ---------------------------------------------------------------------------- the graph


def _layer_of_hook(prefix: str) -> int:
    return int(prefix.split(".")[1]) + 1  # "blocks.{l}.attn" -> layer l + 1


def head_reads(model: CompiledTransformer, layer: int, head: int) -> list[int]:
    """The residual directions head ``head`` of ``layer`` (1-based) reads: the rows of its W_Q,
    W_K or W_V with a nonzero entry, in index order."""
    attn = model.blocks[layer - 1].attn
    rows = torch.stack([(_dense(getattr(attn, name))[head] != 0).any(dim=1) for name in ("W_Q", "W_K", "W_V")]).any(0)
    return torch.nonzero(rows).reshape(-1).tolist()


def model_graph(model: CompiledTransformer, sites: tuple[CircuitSite, ...],
                spans: dict[str, str | None]) -> list[ComparisonBox]:
    """One box per comparison node (its components merged), per head that compares nothing (a
    fetch), and per FFN function. A box reads the boxes that write the directions it reads: a
    head those of the nonzero rows of its W_Q, W_K and W_V (:func:`head_reads`), an FFN function
    those of its argument (the embedding's directions have no box)."""
    card = model.card
    heads = model_heads(card)
    head_at = {(h["layer"], h["index"]): h for h in heads}
    writer: dict[str, str] = {}
    for h in heads:
        writer.update(dict.fromkeys(h["into"], h["name"]))
    for block in card.embedding_blocks:
        writer[block.output] = block.name
    for described in card.layers:
        writer.update({block.output: block.name for block in described.blocks})
    layer_of_block = {b.name: 0 for b in card.embedding_blocks}
    layer_of_block |= {b.name: i + 1 for i, described in enumerate(card.layers) for b in described.blocks}
    labels = card.labels

    def boxes_read(indices: Any, own: str) -> tuple[str, ...]:
        found = dict.fromkeys(writer[labels[i]] for i in indices if labels[i] in writer)
        return tuple(name for name in found if name != own)

    nodes: dict[str, ComparisonBox] = {}
    for s in sites:
        if s.kind == "comparison":
            assert s.head is not None
            head = head_at[(_layer_of_hook(s.head[0]), s.head[1])]
            name = s.name.split("[")[0]
            nodes.setdefault(name, ComparisonBox(name=name, kind=head["kind"], text=s.computes, site=s.site,
                                             layer=head["layer"], head=f"L{head['layer']}.H{head['index']}",
                                             bound=s.bound, inputs=boxes_read(head_reads(
                                                 model, head["layer"], head["index"]), name),
                                             source=spans.get(name)))
            continue
        reads = s.argument.index if s.argument is not None else s.value.index  # a token site: what it adds
        layer = _layer_of_hook(s.head[0]) if s.head is not None else layer_of_block.get(s.name.split("+")[0], 0)
        nodes[s.name] = ComparisonBox(name=s.name, kind=f"ffn {s.function}" if s.kind == "ffn" else s.kind,
                                  text=s.computes, site=s.site, layer=layer, head=None, bound=s.bound,
                                  inputs=boxes_read(reads, s.name), source=None)
    for h in heads:
        if h["name"] not in nodes:
            nodes[h["name"]] = ComparisonBox(name=h["name"], kind=h["kind"], text=h["computes"], site=h["site"],
                                         layer=h["layer"], head=f"L{h['layer']}.H{h['index']}", bound=h["bound"],
                                         inputs=boxes_read(head_reads(model, h["layer"], h["index"]), h["name"]),
                                         source=spans.get(h["name"]))
    return list(nodes.values())


# ---------------------------------------------------------------------------- attention


def float64_copy(model: CompiledTransformer) -> CompiledTransformer:
    """The same weights and config in float64 on the CPU (for patterns that every CPU rounds alike)."""
    return CompiledTransformer(model.card, dict(model.state_dict()), device="cpu", dtype=torch.float64)


class _PatternTap:
    """A tap that records each layer's ``hook_pattern`` (B, H, T'+1, T') and changes nothing."""

    def __init__(self) -> None:
        self.patterns: dict[str, torch.Tensor] = {}

    def __call__(self, name: str, value: torch.Tensor) -> torch.Tensor:
        if name.endswith("attn.hook_pattern"):
            self.patterns[name] = value.detach().clone()
        return value

    def listens(self, name: str) -> bool:
        return name.endswith("attn.hook_pattern")


def example_inputs(program: ir.Program) -> torch.Tensor:
    """The EXAMPLES inputs whose patterns the page shows: (EXAMPLES, T, d), float64, seeded; a
    token program's: (EXAMPLES, T) ids."""
    if program.over_tokens:
        return token_examples(program, EXAMPLES, EXAMPLE_SEED)
    return sample_inputs(program, EXAMPLES, seed=EXAMPLE_SEED)


def attention_patterns(model: CompiledTransformer, x: torch.Tensor) -> list[torch.Tensor]:
    """Per layer, the pattern (B, H_l, T'+1, T') of the float64 copy on x: row i < T' is token
    i + 1's query, row T' the readout's; a layer without heads gives H_l = 0."""
    tap = _PatternTap()
    with torch.no_grad():
        float64_copy(model).run(x if model.token_input else x.to(torch.float64), tap=tap)
    return [tap.patterns[f"blocks.{layer}.attn.hook_pattern"] for layer in range(model.n_layers)]


def attention_section(model: CompiledTransformer, program: ir.Program) -> dict[str, Any]:
    """The example inputs (4 decimals) and, per example and head (in :func:`model_heads` order),
    the flattened pattern as integers round(p · PATTERN_SCALE), rows queries 1..T+1, columns keys."""
    x = example_inputs(program)
    patterns = attention_patterns(model, x)
    flat = [[torch.round(layer[b, h] * PATTERN_SCALE).to(torch.int64).reshape(-1).tolist()
             for layer in patterns for h in range(layer.shape[1])] for b in range(x.shape[0])]
    inputs = token_names(program, x) if program.over_tokens else [
        [[round(float(v), 4) for v in token] for token in example] for example in x]
    return {"examples": inputs, "rows": x.shape[1] + 1, "columns": x.shape[1], "scale": PATTERN_SCALE,
            "seed": EXAMPLE_SEED, "patterns": flat}


# ---------------------------------------------------------------------------- the error


def _rounded(values: torch.Tensor) -> Any:
    """A tensor as nested lists of floats to 4 significant digits (NaN, undefined, as None)."""
    if values.dim() == 0:
        value = float(values)
        return None if value != value else _significant(value)
    return [_rounded(v) for v in values]


def measured_section(model: CompiledTransformer, program: ir.Program) -> dict[str, Any]:
    """|model − reference| on the inputs the compile measured (its config's samples, seed and
    corners; UNMEASURED_SAMPLES random inputs and the corners for a model compiled with
    ``samples=0``), each to 3 significant digits (the inputs the margin leaves out are counted only);
    the worst input with both outputs; the model's and the reference's outputs on the examples."""
    stored = model.card.measured_error
    samples, seed = (UNMEASURED_SAMPLES, 0) if stored is None else (stored.samples, stored.seed)
    remeasure = "the report measures again on the inputs its compile measured: compile with fewer --samples"
    measurement_workload(model, program, samples, remeasure).refuse_if_unaffordable()
    if program.over_tokens:
        return token_measured_section(model, program, samples, seed, example_inputs(program))
    x = model_inputs(program, samples, seed)
    error, kept = errors_on(model, program, x)
    covered = error[kept]
    worst = int(torch.nonzero(kept)[int(covered.argmax())]) if covered.numel() else 0
    examples = example_inputs(program)
    with torch.no_grad():
        outputs = model(examples.to(model.device, model.dtype)).to("cpu", torch.float64)
        worst_output = model(x[worst:worst + 1].to(model.device, model.dtype)).to("cpu", torch.float64)[0]
    return {
        "errors": [float(f"{e:.3g}") for e in covered.tolist()],
        "excluded_by_margin": int((~kept).sum()),
        "worst": {"index": worst, "error": float(f"{float(error[worst]):.3g}"), "input": _rounded(x[worst]),
                  "model": _rounded(worst_output), "reference": _rounded(evaluate(program, x[worst:worst + 1])[0])},
        "examples": {"model": _rounded(outputs), "reference": _rounded(evaluate(program, examples))},
    }


# ---------------------------------------------------------------------------- parameters


def _count(tensors: list[torch.Tensor]) -> tuple[int, int]:
    return sum(nonzero_entries(t) for t in tensors), sum(t.numel() for t in tensors)


def _dense(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to_dense() if tensor.is_sparse else tensor.detach()


def _row(name: str, kind: str, layer: int, tensors: list[torch.Tensor]) -> dict[str, Any]:
    nonzero, total = _count(tensors)
    return {"name": name, "kind": kind, "layer": layer, "nonzero": nonzero, "total": total}


def _blocks(blocks: tuple[BlockCard, ...], w_in: torch.Tensor, b_in: torch.Tensor, w_out: torch.Tensor,
            layer: int) -> list[dict[str, Any]]:
    """One row per FFN block: its units' columns of W_in, entries of b_in and rows of W_out
    (blocks hold consecutive units, in the config's order)."""
    rows, start = [], 0
    for block in blocks:
        units = slice(start, start + block.units)
        rows.append(_row(block.name, "ffn", layer, [w_in[:, units], b_in[units], w_out[units]]))
        start = units.stop
    if start != w_in.shape[1]:
        raise ValueError(f"the FFN blocks of layer {layer} hold {start} units, its W_in {w_in.shape[1]}")
    return rows


def parameters_section(model: CompiledTransformer) -> dict[str, Any]:
    """Nonzero and total weights per layer (the embedding, each layer's attention and FFN, the
    readout) and per construction (each head: its slices of W_Q, W_K, W_V, W_O and β; each FFN
    block: its units; the shared rest: W_E, the cls vector, each FFN's output bias, W_U, b_U).
    Both tables sum to ``parameter_count`` and ``nonzero_parameter_count`` (W_pos is a fixed
    code, not counted)."""
    card = model.card
    embed = {name: _dense(getattr(model.embed, name)) for name in ("W_E", "W_E1", "b_E1", "W_E2", "cls")}
    layers = [_row("embedding", "embedding", 0, list(embed.values()))]
    constructions = [_row("token embedding W_E, cls", "shared", 0, [embed["W_E"], embed["cls"]]),
                     *_blocks(card.embedding_blocks, embed["W_E1"], embed["b_E1"], embed["W_E2"], 0)]
    for index, block in enumerate(model.blocks):
        attn = {name: _dense(getattr(block.attn, name)) for name in ("W_Q", "W_K", "W_V", "W_O", "beta")}
        mlp = {name: _dense(getattr(block.mlp, name)) for name in ("W_in", "b_in", "W_out", "b_out")}
        layers += [_row(f"layer {index + 1} attention", "attention", index + 1, list(attn.values())),
                   _row(f"layer {index + 1} FFN", "ffn", index + 1, list(mlp.values()))]
        for h, head in enumerate(card.layers[index].heads):
            constructions.append(_row(f"head {head.name}", head.kind or "head", index + 1,
                                      [attn[name][h] for name in ("W_Q", "W_K", "W_V", "W_O", "beta")]))
        constructions += _blocks(card.layers[index].blocks, mlp["W_in"], mlp["b_in"], mlp["W_out"], index + 1)
        constructions.append(_row(f"layer {index + 1} FFN output bias b_out", "shared", index + 1, [mlp["b_out"]]))
    readout = [_dense(model.unembed.W_U), _dense(model.unembed.b_U)]
    layers.append(_row("readout W_U, b_U", "readout", len(model.blocks) + 1, readout))
    constructions.append(_row("readout W_U, b_U", "shared", len(model.blocks) + 1, readout))
    return {"layers": layers, "constructions": constructions,
            "total": model.parameter_count(), "nonzero": model.nonzero_parameter_count()}


def residual_section(card: ModelCard) -> list[dict[str, Any]]:
    """Each residual direction by index and name, with the layer and the construction that writes it
    (the embedding writes the input coordinates and the constant ``one``)."""
    written = {direction: (layer, who) for (layer, direction), who in writers(card).items()}
    return [{"index": i, "name": label, "layer": written.get(label, (0, ""))[0],
             "writer": written.get(label, (0, "the embedding"))[1]}
            for i, label in enumerate(card.labels)]


def model_sections(model: CompiledTransformer, program: ir.Program,
                   spans: dict[str, str | None]) -> dict[str, Any]:
    """The model's sections that the weights and the config fix (the measured block aside)."""
    sites = circuit(model)  # first: the weights and the config are checked to be the stored program's
    card = model.card
    measured = card.measured_error
    return {
        "model": {"eps": card.eps, "a_priori_bound": card.a_priori_bound, "dtype": card.dtype,
                  "measured_error": None if measured is None else measured.max_error,
                  "samples": None if measured is None else measured.samples,
                  "corners": None if measured is None else measured.corners,
                  "seed": None if measured is None else measured.seed, "T": card.T,
                  "d_model": card.d_model, "layers": len(card.layers),
                  "output": card.output_site, "output_shape": list(card.output_shape)},
        "graph": [n.to_json() for n in model_graph(model, sites, spans)],
        "heads": [{**h, "reads": [card.labels[i] for i in head_reads(model, h["layer"], h["index"])]}
                  for h in model_heads(card)],
        "attention": attention_section(model, program),
        "parameters": parameters_section(model),
        "residual": residual_section(card),
    }
