"""Sparse autoencoders on a compiled model's activations, trained with EleutherAI's ``sparsify``
(``eai-sparsify``, the ``sae`` extra), scored against the model's feature dictionary.

Why sparsify: it is the field's library for TopK SAEs (Gao et al.) and has no pin on
TransformerLens, which infoflow needs at ≥ 4 (SAELens 6 requires TransformerLens < 4, so it
cannot share an environment with the ``lens`` extra). Its trainer is built around a Hugging Face
model and a token dataset; a compiled token model's activations come from its own hooks, so the
rows are handed to the library's :class:`sparsify.SparseCoder` directly, with what its trainer
does per step: the decoder bias set to the mean activation and the decoder to unit norm at the
start, the loss its FVU (fraction of variance unexplained), the gradient parallel to the
decoder directions removed before each Adam step (its ``adam`` optimiser, lr 2e-3). The SAE,
its encoder, activation (``topk`` or ``groupmax``: the two architectures), decoder and loss are
the library's; nothing of the autoencoder is written here.

Activations: the residual stream at ``hook`` (a TransformerLens name: ``blocks.{l}.hook_resid_pre``
/ ``_mid`` / ``_post``) on every row of every input up to length 4 (as many as fit 20,000) and
2,000 random inputs at T; the true features are the dictionary's entries alive at that hook.

Without a hook (:func:`choose_hook`) the one with the most superposition is scored: the largest
F_h / D, F_h the dictionary's features alive at the hook with a nonzero direction and D the
model's d_model; ties go to the hook where more of them share a direction with another
(:func:`~.score.shared_directions`), then to the earliest in the stream (``blocks.0.hook_resid_pre``,
``_mid``, ``_post``, ``blocks.1...``). It reads the dictionary alone, no activations.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from ..compiler.superposition.dictionary import features, read_value
from .score import Truth, baselines, score, shared_directions

Tensor = torch.Tensor

ARCHITECTURES = ("topk", "groupmax")
EXHAUSTIVE = 20_000


def model_inputs(model: Any, random: int = 2000, seed: int = 0) -> list[Tensor]:
    """Batches of ids: every sequence up to length min(4, T) while they fit, then ``random`` at T."""
    vocabulary, length = model.vocabulary.size, model.T
    batches, total = [], 0
    for n in range(1, min(4, length) + 1):
        if total + vocabulary ** n > EXHAUSTIVE:
            break
        batches.append(torch.tensor(list(itertools.product(range(vocabulary), repeat=n)), dtype=torch.int64))
        total += vocabulary ** n
    generator = torch.Generator().manual_seed(seed)
    batches.append(torch.randint(0, vocabulary, (random, length), generator=generator, dtype=torch.int64))
    return batches


def hook_rows(model: Any, hook: str, batches: list[Tensor]) -> Tensor:
    """The residual stream at ``hook`` on every row of every input: (rows, D) float64."""
    found = []
    for x in batches:
        seen: dict[str, Tensor] = {}
        with torch.no_grad():
            model.run(x, lambda name, t, seen=seen: seen.setdefault(name, t) if name == hook else t)
        if hook not in seen:
            raise ValueError(f"no residual hook {hook!r} in this model (blocks.L.hook_resid_pre/_mid/_post, "
                             f"L < {model.n_layers})")
        found.append(seen[hook].reshape(-1, model.d_model).to(torch.float64))
    return torch.cat(found)


def truth_at(model: Any, hook: str, activations: Tensor) -> Truth:
    """The dictionary's features alive at ``hook`` with a nonzero direction: unit directions and
    activity (value ≠ 0, a superposed one read by its threshold)."""
    found = features(model)
    names, directions = _alive(found, hook)
    by_name = {feature["name"]: feature for feature in found}
    active = [read_value(by_name[name]["hooks"][hook], activations, by_name[name].get("margin")).abs() > 1e-6
              for name in names]
    return Truth(tuple(names), directions, torch.stack(active, dim=1))


def residual_hooks(layers: int) -> list[str]:
    """Every residual hook of a model of ``layers`` layers, in stream order."""
    return [f"blocks.{layer}.hook_resid_{where}" for layer in range(layers) for where in ("pre", "mid", "post")]


def _alive(found: list[dict[str, Any]], hook: str) -> tuple[list[str], Tensor]:
    """The names and unit directions (F, D) of the features alive at ``hook`` with a nonzero direction."""
    names, directions = [], []
    for feature in found:
        entry = feature["hooks"].get(hook)
        if entry is None or not any(entry["direction"]):
            continue
        direction = torch.tensor(entry["direction"], dtype=torch.float64)
        names.append(feature["name"])
        directions.append(direction / direction.norm())
    return names, torch.stack(directions) if directions else torch.zeros(0, 0, dtype=torch.float64)


def choose_hook(model: Any) -> dict[str, Any]:
    """The hook with the most superposition (module docstring) and why: ``hook``, its ``features``
    F_h, ``d_model``, ``ratio`` F_h / D, ``shared`` (the features sharing a direction there),
    ``reason`` (a sentence) and ``hooks`` {hook: F_h / D} over every residual hook."""
    found = features(model)
    measured = []
    for order, hook in enumerate(residual_hooks(model.n_layers)):
        names, directions = _alive(found, hook)
        groups = shared_directions(Truth(tuple(names), directions, torch.zeros(0, 0))) if names else []
        shared = sum(len(group) for group in groups)
        measured.append((len(names) / model.d_model, shared, -order, hook, len(names)))
    ratio, shared, _, hook, alive = max(measured)
    if alive == 0:
        raise ValueError("no feature of the dictionary is alive at any residual hook")
    reason = (f"the most superposition: {alive} features in d_model = {model.d_model} (F/D = {ratio:.3g})"
              + (f", {shared} of them sharing a direction with another" if shared else ""))
    return {"hook": hook, "features": alive, "d_model": model.d_model, "ratio": ratio, "shared": shared,
            "reason": reason, "hooks": {h: r for r, _, _, h, _ in measured}}


def train_sae(activations: Tensor, size: int, architecture: str, k: int, steps: int, seed: int = 0,
              batch: int = 1024) -> Any:
    """A sparsify SparseCoder of ``size`` latents trained on the rows (module docstring)."""
    from sparsify import SparseCoder, SparseCoderConfig

    torch.manual_seed(seed)
    data = activations.to(torch.float32)
    settings: dict[str, Any] = {"activation": architecture, "num_latents": size, "k": min(k, size)}
    config = SparseCoderConfig(**settings)
    sae = SparseCoder(data.shape[1], config, device="cpu", dtype=torch.float32)
    sae.b_dec.data = data.mean(0)
    sae.set_decoder_norm_to_unit_norm()
    optimiser = torch.optim.Adam(sae.parameters(), lr=2e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        rows = data[torch.randint(0, data.shape[0], (min(batch, data.shape[0]),), generator=generator)]
        loss = sae(rows).fvu
        optimiser.zero_grad()
        loss.backward()
        sae.remove_gradient_parallel_to_decoder_directions()
        optimiser.step()
        sae.set_decoder_norm_to_unit_norm()
    return sae


def latent_activity(sae: Any, activations: Tensor, size: int) -> Tensor:
    """(rows, K) bool: the latents the SAE's encoder keeps for each row."""
    with torch.no_grad():
        encoded = sae.encode(activations.to(torch.float32))
    active = torch.zeros(activations.shape[0], size, dtype=torch.bool)
    active.scatter_(1, encoded.top_indices, encoded.top_acts > 0)
    return active


def sae_scores(model: Any, hook: str | None = None, size: int | None = None, architecture: str = "topk", k: int = 4,
               steps: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Train an SAE at ``hook`` (None: :func:`choose_hook`'s, recorded as ``hook_choice``) and score
    it and the baselines against the dictionary; ``shared_directions`` lists the groups of true
    features sharing one direction there (:func:`~.score.shared_directions`), on which the cosine
    scores are an upper bound."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r} (expected one of {', '.join(ARCHITECTURES)})")
    choice = None
    if hook is None:
        choice = choose_hook(model)
        hook = choice["hook"]
    activations = hook_rows(model, hook, model_inputs(model, seed=seed))
    truth = truth_at(model, hook, activations)
    size = size or 4 * model.d_model
    sae = train_sae(activations, size, architecture, k, steps, seed)
    with torch.no_grad():
        fvu = float(sae(activations.to(torch.float32)).fvu)
    record = model.card.superposition
    return {"hook": hook, "d_model": model.d_model, "rows": int(activations.shape[0]),
            "true_features": len(truth.names), "features_alive": None if record is None else record.features_alive,
            "superposed": record is not None, "hook_choice": choice,
            "shared_directions": [list(group) for group in shared_directions(truth)],
            "sae": {"architecture": architecture, "k": min(k, size), "steps": steps, "fvu": fvu,
                    **score(truth, sae.W_dec.detach().to(torch.float64), latent_activity(sae, activations, size))},
            "baselines": baselines(truth, activations, size, seed)}
