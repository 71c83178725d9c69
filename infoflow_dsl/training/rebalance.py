"""Exact reparametrisations of a padded compiled model before it trains (``train --keep-circuit``).

A compiled model is sharp: a head's β ≈ 47 on O(1) queries and keys, ReLU slopes ≈ 180 read out by
weights of 1, positions written at 121 and one-hot token directions at 1. AdamW moves every entry
by about the learning rate whatever its size, and the starting noise is relative to a tensor's rms,
so such a model either barely moves or breaks. The passes below change the weights, never the
function (in real arithmetic; every node's output is the same, so the circuit and its truth are
too). In the order they run:

1. **balance** (``rounds`` times): ReLU is positively homogeneous, relu(a·z) = a·relu(z), a > 0, so
   a unit's (W_in[:, u], b_in[u]) ↦ a·(…), W_out[u] ↦ W_out[u]/a with a = √(‖W_out[u]‖/‖(W_in[:, u],
   b_in[u])‖) (the norms become equal); a head's β q·k = β′ (a q)·(b k) with β′ = 1/√E (a scratch
   model's β) and a·b = β/β′, a/b = ‖W_K‖/‖W_Q‖; its value direction e: W_V[:, e] ↦ a·W_V[:, e],
   W_O[e] ↦ W_O[e]/a (equal norms); a residual direction i: every writer's column i ↦ d·(…) and
   every reader's row i ↦ (…)/d, d = √(‖readers_i‖/‖writers_i‖) (equal norms; the model has no
   LayerNorm). The balanced state is the one gradient flow keeps (‖W_in[:, u]‖² − ‖W_out[u]‖²
   is conserved by it: Du, Hu & Lee 2018), so no matrix is much sharper than the others. Then,
   at the balanced scale, what computes nothing that reaches an output is drawn afresh
   (:func:`redraw_free`: the free units' input columns, the added heads' W_Q, W_K, W_V) and the
   residual directions the padding added are half read, half written (:func:`fill_dead_directions`).
2. **flip** (active units): a compiled unit u = relu(z), z = w·h + b, active on a fraction p <
   :data:`FLIP_BELOW` of the tokens at T, is rewritten with a free (added) unit of its FFN as

       relu(z) = z + relu(−z) = relu(z + c) − c + relu(−z)      (|z| ≤ c),

   slot u: relu(z + c) (always active), the free slot: relu(−z) (active on 1 − p), the same
   output row, and b_out −= c·W_out[u]. The bound c is ``margin``·(|b| + Σ_s max |w·o_s|) over the
   senders s before the FFN (the embedding, the heads, the earlier FFNs), each sender's largest
   contribution measured on the truth's inputs (every token sequence up to length 4, the
   constant ones, random ones: ``truth.measured_inputs``). A sum of the senders' maxima bounds z
   under any mix of their outputs, so also under the swaps (IIT) and ablations (zero, mean,
   resample) that training and the certification run.
3. **pairs**: the free units left (W_out = 0: they read, write nothing) in pairs u, u′ with the
   same W_in and b_in and output rows w and −w (w ~ N(0, 1/M)): relu(z)·w − relu(z)·w = 0. They
   now write (a trained unit does), and still nothing. Their bias (free: they write nothing) makes
   each pair active on a share drawn around what brings its FFN's mean activity to
   :data:`LAYER_ACTIVITY`, a trained layer's (:func:`free_activity`). Then the units are balanced
   once more (the flipped units' biases, the pairs' rows).
4. **rotate**: the residual stream by a random orthogonal R (``disguise.rotate_residual``): a
   trained model has no privileged residual basis.

What a pass left alone (a head with β = 0 or an all-zero W_Q or W_K: its scores are 0 whatever
the scale; a unit, value direction or residual direction with a zero side) keeps its weights.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ..circuits.disguise import relu_blocks, residual_readers, residual_writers, rotate_residual
from ..circuits.graph import INPUT, EdgeGraph
from ..circuits.patching import EdgeForward
from ..circuits.truth import measured_inputs
from ..errors import TrainError
from ..language import typed as ir
from ..oracle.tokens import random_ids
from ..transformer.model import CompiledTransformer

Tensor = torch.Tensor
PASSES = ("balance", "flip", "pairs", "rotate")
FLIP_SAMPLES = 500  # random inputs (besides every short token sequence) the flip's bounds are measured on
KEPT_ROWS = 4_000  # pre-activation rows a length kept for the free units' biases
LAYER_ACTIVITY = 0.56  # a trained FFN's mean activity (scratch models of bench/trained_realism.py: 0.51 to 0.65)
FREE_ACTIVITY = (0.1, 0.95)  # the free units' mean activity stays within this range ...
SPREAD = 0.15  # ... and each pair's is drawn uniformly within this of it
FLIP_BELOW = 0.25  # a compiled unit active on less than this fraction of the tokens is flipped


@dataclass(frozen=True)
class Rebalancing:
    """Which passes run (of :data:`PASSES`), the flip's margin over its measured bound, the
    balancing rounds and the seed of the pairs' output rows and the rotation."""

    passes: tuple[str, ...] = PASSES
    margin: float = 1.5
    rounds: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if not set(self.passes) <= set(PASSES):
            raise TrainError(f"--rebalance passes are among {', '.join(PASSES)}")
        if not (math.isfinite(self.margin) and self.margin >= 1) or self.rounds < 1:
            raise TrainError("the flip's margin must be ≥ 1 and the balancing rounds ≥ 1")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "passes": list(self.passes)}


def model_tensors(model: CompiledTransformer) -> dict[str, Tensor]:
    """Every tensor of ``model`` (its state dict: the positional code too), dense float64 copies."""
    return {name: (t.to_dense() if t.is_sparse else t).detach().to("cpu", torch.float64).clone()
            for name, t in model.state_dict().items()}


def write_back(model: CompiledTransformer, tensors: dict[str, Tensor]) -> None:
    """Copy ``tensors`` into ``model``'s own (same names and shapes), in place."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            tensor.copy_(tensors[name].to(tensor.dtype))


# ---------------------------------------------------------------------------- 1. flip


def _senders_before(graph: EdgeGraph, layer: int) -> list[str]:
    """The nodes whose outputs the FFN of ``layer`` reads: the input, heads up to ``layer``, FFNs before."""
    return [n.name for n in graph.nodes if n.name == INPUT or (n.kind == "head" and (n.layer or 0) <= layer)
            or (n.kind == "mlp" and (n.layer or 0) < layer)]


@dataclass(frozen=True)
class UnitRanges:
    """One FFN's units measured on the truth's inputs (and, for a token program, as many random
    sequences at T): bound[u] = |b_u| + Σ_s max |o_s·w_u| over the senders s before it, positions
    and inputs; at length T (where the statistics are measured): activity[u], the fraction of
    input-token rows where z_u > 0, and z, the pre-activations of up to :data:`KEPT_ROWS` rows a
    batch (rows, M)."""

    bound: Tensor
    activity: Tensor
    z: Tensor


def unit_ranges(model: CompiledTransformer, graph: EdgeGraph, program: ir.Program,
                samples: int = FLIP_SAMPLES, seed: int = 0) -> dict[int, UnitRanges]:
    """:class:`UnitRanges` of each layer with an FFN, on the truth's inputs of ``program``."""
    forward = EdgeForward(model, graph)
    maxima: dict[int, Tensor] = {}
    active: dict[int, Tensor] = {}
    rows: dict[int, int] = {}
    kept: dict[int, list[Tensor]] = {}
    inputs = list(measured_inputs(program, samples, seed))
    if program.over_tokens:  # the activity is that at T, where the statistics measure it
        inputs.append(random_ids(program, samples, seed=seed + 1, length=program.length))
    for x in inputs:
        outputs = forward.run(x if program.over_tokens else x.to(model.dtype)).outputs
        for layer, block in enumerate(model.blocks):
            w_in = block.mlp.W_in.detach().to(torch.float64)
            if not w_in.shape[1]:
                continue
            parts = [outputs[s] @ w_in for s in _senders_before(graph, layer)]  # each (B, N, M)
            largest = torch.stack([p.abs().amax(dim=(0, 1)) for p in parts]).sum(dim=0)  # (M,)
            maxima[layer] = torch.maximum(maxima.get(layer, largest), largest)
            z = (torch.stack(parts).sum(dim=0)[:, :-1] + block.mlp.b_in.detach().to(torch.float64)).flatten(0, 1)
            if x.shape[1] == program.length:
                active[layer] = active.get(layer, torch.zeros_like(largest)) + (z > 0).sum(dim=0)
                rows[layer] = rows.get(layer, 0) + z.shape[0]
                kept.setdefault(layer, []).append(z[:KEPT_ROWS])
    return {layer: UnitRanges(maxima[layer] + model.blocks[layer].mlp.b_in.detach().to(torch.float64).abs(),
                              active[layer] / rows[layer], torch.cat(kept[layer]))
            for layer in maxima}


def flip_units(tensors: dict[str, Tensor], layer: int, compiled: int, ranges: UnitRanges, margin: float) -> list[int]:
    """Flip the compiled units (index < ``compiled``) of ``layer``'s FFN active on less than half of
    the tokens, the least active first, into the free slots (index ≥ ``compiled``) while there are
    some (the module docstring, pass 1). Returns the flipped units."""
    p = f"blocks.{layer}.mlp."
    w_in, b_in, w_out, b_out = (tensors[p + n] for n in ("W_in", "b_in", "W_out", "b_out"))
    free = list(range(compiled, int(b_in.shape[0])))
    activity = ranges.activity
    chosen = [u for u in sorted(range(compiled), key=lambda u: float(activity[u]))
              if float(activity[u]) < FLIP_BELOW and w_out[u].abs().sum() > 0][:len(free)]
    for u, slot in zip(chosen, free, strict=False):
        c = margin * float(ranges.bound[u])
        w_in[:, slot], b_in[slot], w_out[slot] = -w_in[:, u], -b_in[u], w_out[u]
        b_in[u] += c
        b_out -= c * w_out[u]
    return chosen


# ---------------------------------------------------------------------------- 2. pairs


def _free_bias(z: Tensor, active: float) -> float:
    """The bias shift that makes a unit with pre-activations ``z`` active on the fraction nearest
    ``active``: z takes few values on a finite domain, so the threshold goes halfway between two
    neighbouring values v_(i−1) < v_i (below the least one: v_1 − 1), the i whose P(z ≥ v_i) is
    nearest."""
    values, counts = torch.unique(z, return_counts=True)  # ascending
    at_least = counts.flip(0).cumsum(0).flip(0).to(torch.float64) / z.numel()  # P(z ≥ v_i)
    i = int((at_least - active).abs().argmin())
    return -(float(values[0]) - 1.0 if i == 0 else (float(values[i - 1]) + float(values[i])) / 2)


def free_activity(ranges: UnitRanges, free: list[int], flipped: dict[int, int]) -> float:
    """The mean activity the free units of an FFN are given: what brings the layer's mean to
    :data:`LAYER_ACTIVITY` (the other units as measured, a flipped unit at 1 and its slot at 1 − p;
    ``flipped``: unit -> slot), within :data:`FREE_ACTIVITY`."""
    p = [float(a) for a in ranges.activity]
    slots = set(flipped.values())
    others = [u for u in range(len(p)) if u not in free and u not in slots]
    total = sum(2.0 - p[u] if u in flipped else p[u] for u in others)
    wanted = (LAYER_ACTIVITY * len(p) - total) / max(len(free), 1)
    low, high = FREE_ACTIVITY
    return min(max(wanted, low + SPREAD), high - SPREAD)


def pair_free_units(tensors: dict[str, Tensor], layers: int, free: dict[str, list[int]],
                    ranges: dict[int, tuple[UnitRanges, float]], generator: torch.Generator) -> int:
    """Give the free units of each ReLU block (``free``: W_in's name -> unit indices) cancelling
    output rows in pairs, and, where the pre-activations were measured (``ranges``, by layer, with
    the free units' mean activity), a bias making each pair active on a fraction drawn uniformly
    within :data:`SPREAD` of that mean (pass 2). Returns the number of pairs."""
    pairs = 0
    for layer, (w_in, b_in, w_out) in enumerate(relu_blocks(layers), start=-1):
        units = free.get(w_in, [])
        width = int(tensors[b_in].shape[0])
        for first, second in zip(units[0::2], units[1::2], strict=False):
            row = torch.randn(tensors[w_out].shape[1], generator=generator, dtype=torch.float64) / math.sqrt(width)
            if layer in ranges:
                measured, mean = ranges[layer]
                drawn = mean + SPREAD * (2 * float(torch.rand((), generator=generator, dtype=torch.float64)) - 1)
                tensors[b_in][first] += _free_bias(measured.z[:, first], drawn)
            tensors[w_in][:, second], tensors[b_in][second] = tensors[w_in][:, first], tensors[b_in][first]
            tensors[w_out][first], tensors[w_out][second] = row, -row
            pairs += 1
    return pairs


# ---------------------------------------------------------------------------- 3. balance


def _norm(*parts: Tensor) -> float:
    return math.sqrt(sum(float(p.square().sum()) for p in parts))


def _balance_units(tensors: dict[str, Tensor], layers: int) -> None:
    """Every unit's input side (weights and bias) and output row to equal norms."""
    for w_in, b_in, w_out in relu_blocks(layers):
        for u in range(int(tensors[b_in].shape[0])):
            inside, outside = _norm(tensors[w_in][:, u], tensors[b_in][u]), _norm(tensors[w_out][u])
            if inside > 0 and outside > 0:
                a = math.sqrt(outside / inside)
                tensors[w_in][:, u] *= a
                tensors[b_in][u] *= a
                tensors[w_out][u] /= a


def _balance_heads(tensors: dict[str, Tensor], layers: int) -> None:
    """Every head's β to 1/√E, W_Q and W_K to equal norms, and each value direction's W_V column and
    W_O row to equal norms."""
    for layer in range(layers):
        p = f"blocks.{layer}.attn."
        w_q, w_k, w_v, w_o, beta = (tensors[p + n] for n in ("W_Q", "W_K", "W_V", "W_O", "beta"))
        target = 1.0 / math.sqrt(max(int(w_q.shape[-1]), 1))
        for h in range(int(beta.shape[0])):
            q, k, b = _norm(w_q[h]), _norm(w_k[h]), float(beta[h])
            if q > 0 and k > 0 and b > 0:
                a = math.sqrt(b / target * k / q)
                w_q[h] *= a
                w_k[h] *= b / target / a
                beta[h] = target
            for e in range(int(w_v.shape[-1])):
                v, o = _norm(w_v[h][:, e]), _norm(w_o[h][e])
                if v > 0 and o > 0:
                    w_v[h][:, e] *= math.sqrt(o / v)
                    w_o[h][e] /= math.sqrt(o / v)


def _balance_residual(tensors: dict[str, Tensor], layers: int) -> None:
    """Every residual direction's writers (column i) and readers (row i) to equal norms."""
    writers, readers = residual_writers(layers), residual_readers(layers)
    written = sum(tensors[n].reshape(-1, tensors[n].shape[-1]).square().sum(dim=0) for n in writers)
    read = sum(tensors[n].movedim(-2, -1).reshape(-1, tensors[n].shape[-2]).square().sum(dim=0) for n in readers)
    assert isinstance(written, Tensor) and isinstance(read, Tensor)
    scale = torch.where((written > 0) & (read > 0), (read / written.clamp_min(1e-300)) ** 0.25, 1.0)
    for name in writers:
        tensors[name] *= scale
    for name in readers:
        tensors[name] /= scale[:, None]


def balance(tensors: dict[str, Tensor], layers: int, rounds: int) -> None:
    """Pass 3, ``rounds`` times: heads, units, then the residual directions."""
    for _ in range(rounds):
        _balance_heads(tensors, layers)
        _balance_units(tensors, layers)
        _balance_residual(tensors, layers)


def _gaussian(shape: tuple[int, ...], norm: float, generator: torch.Generator) -> Tensor:
    """A Gaussian tensor of Frobenius norm about ``norm`` (entries N(0, norm²/numel))."""
    count = math.prod(shape)
    return torch.randn(shape, generator=generator, dtype=torch.float64) * norm / math.sqrt(max(count, 1))


def _rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else 0.0


def redraw_free(tensors: dict[str, Tensor], layers: int, free: dict[str, list[int]], heads: list[int],
                generator: torch.Generator) -> None:
    """After balancing: the free units' input columns (they write nothing yet) and the added heads'
    W_Q, W_K, W_V (their W_O is 0) drawn afresh, Gaussian at the balanced circuit's scale (the rms
    norm of the other units' columns of the block, else of the model's; of the compiled heads'
    matrices), so that the circuit's low-rank part does not stand alone in its matrices. Exact:
    nothing they compute reaches an output. ``heads``: the compiled heads per layer."""
    blocks = relu_blocks(layers)
    columns = {w_in: [_norm(tensors[w_in][:, u]) for u in range(int(tensors[b_in].shape[0]))
                      if u not in free.get(w_in, [])] for w_in, b_in, _ in blocks}
    overall = _rms([n for norms in columns.values() for n in norms])
    for w_in, b_in, _ in blocks:
        scale = _rms(columns[w_in]) or overall
        for u in free.get(w_in, []) if scale > 0 else []:
            tensors[w_in][:, u] = _gaussian((int(tensors[w_in].shape[0]),), scale, generator)
            tensors[b_in][u] = 0.0
    for name in ("W_Q", "W_K", "W_V"):
        scale = _rms([_norm(tensors[f"blocks.{layer}.attn.{name}"][h]) for layer in range(min(layers, len(heads)))
                      for h in range(heads[layer])])
        for layer in range(layers) if scale > 0 else []:
            t = tensors[f"blocks.{layer}.attn.{name}"]
            for h in range(heads[layer] if layer < len(heads) else 0, int(t.shape[0])):
                t[h] = _gaussian(tuple(t.shape[1:]), scale, generator)


def _fill(tensor: Tensor, live: int, filled: list[int], cleared: list[int], axis: int,
          generator: torch.Generator) -> None:
    """``tensor``'s residual indices ``filled`` (along ``axis``) Gaussian at the rms of its live
    indices (< ``live``), its indices ``cleared`` 0; a 3-D tensor head by head."""
    for part in tensor if tensor.dim() == 3 else [tensor]:
        moved = part.movedim(axis, 0)  # a view: (D, ...)
        rms = float(moved[:live].square().mean().sqrt()) if moved[:live].numel() else 0.0
        if rms > 0 and filled:
            moved[filled] = torch.randn(moved[filled].shape, generator=generator, dtype=torch.float64) * rms
        moved[cleared] = 0.0


def fill_dead_directions(tensors: dict[str, Tensor], layers: int, live: int, generator: torch.Generator) -> None:
    """The residual directions from ``live`` on (added by the padding: nothing writes them, so they
    hold 0) split in two: the even ones read (every reader's row Gaussian at its live rows' rms,
    every writer's column 0) and the odd ones written (the writers' columns Gaussian, the readers'
    rows 0). A direction nothing writes holds 0 whatever reads it, and one nothing reads changes
    nothing whatever is written into it: exact. The compiled circuit's few directions then share
    every matrix with as many random ones."""
    dead = list(range(live, int(tensors["unembed.W_U"].shape[0])))
    read, written = dead[0::2], dead[1::2]
    for name in residual_readers(layers):
        _fill(tensors[name], live, read, written, 0, generator)
    for name in residual_writers(layers):
        _fill(tensors[name], live, written, read, -1, generator)


# ---------------------------------------------------------------------------- the passes


def compiled_widths(init: CompiledTransformer) -> dict[str, int]:
    """Each ReLU block's units in the compiled model (its W_in's name -> count): the padded
    model's units from that index on are free."""
    widths = {"embed.W_E1": init.d_mlp_embedding}
    widths |= {f"blocks.{i}.mlp.W_in": units for i, units in enumerate(init.d_mlp)}
    return widths


def rebalance(model: CompiledTransformer, init: CompiledTransformer, graph: EdgeGraph, program: ir.Program,
              settings: Rebalancing) -> dict[str, Any]:
    """Run the passes of ``settings`` on ``model`` (the padded model of ``init``, with ``graph``), in
    place. Returns what they did: the units flipped per layer, the pairs."""
    layers = len(model.blocks)
    generator = torch.Generator().manual_seed(settings.seed)
    tensors = model_tensors(model)
    widths = compiled_widths(init)
    free = {w_in: list(range(widths.get(w_in, 0), int(tensors[b_in].shape[0])))
            for w_in, b_in, _ in relu_blocks(layers)}
    record: dict[str, Any] = {"flipped": {}, "pairs": 0}
    if "balance" in settings.passes:
        balance(tensors, layers, settings.rounds)
        redraw_free(tensors, layers, free, init.card.heads_per_layer, generator)
        fill_dead_directions(tensors, layers, init.d_model, generator)
        write_back(model, tensors)  # the units' ranges below are measured on the balanced model
    ranges = unit_ranges(model, graph, program, seed=settings.seed) if {"flip", "pairs"} & set(settings.passes) else {}
    flips: dict[int, dict[int, int]] = {}
    if "flip" in settings.passes:
        for layer, measured in ranges.items():
            name = f"blocks.{layer}.mlp.W_in"
            flips[layer] = dict(zip(flip_units(tensors, layer, widths.get(name, 0), measured, settings.margin),
                                    free[name], strict=False))  # unit -> the slot it took
            free[name] = free[name][len(flips[layer]):]
            if flips[layer]:
                record["flipped"][str(layer)] = list(flips[layer])
    if "pairs" in settings.passes:
        means = {layer: (measured, free_activity(measured, free[f"blocks.{layer}.mlp.W_in"], flips.get(layer, {})))
                 for layer, measured in ranges.items()}
        record["pairs"] = pair_free_units(tensors, layers, free, means, generator)
    if "balance" in settings.passes:
        _balance_units(tensors, layers)  # the flipped units' shifted biases, the pairs' new rows
    if "rotate" in settings.passes:
        rotate_residual(tensors, layers, generator)
    write_back(model, tensors)
    return record
