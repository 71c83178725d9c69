"""The circuit map (``ifl.circuit``) at an exported model's hooks and modules.

A compiled reading ``Σ w_i h[i] + c`` at ``blocks.{l}.hook_resid_{pre,mid,post}`` reads the
same coordinates i of the exported residual (the compiled directions keep their indices) at
exported layer l + offset (the embedding's ReLU block, when there is one, is exported layer 0,
so what the compiled model has at ``blocks.0.hook_resid_pre`` the export has after its layer 0).
Each reading names the TransformerLens bridge hook and the Hugging Face module whose input or
output holds that residual stream, and the rows: token t at position t, the readout at T'+1
(tl-native, which has no sink: ``first_row`` 0, token t at row t − 1, the readout at T', the
modules ``layers.{L}`` and ``layers.{L}.ln2``).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..transformer.model import CompiledTransformer
from .layout import ExportLayout

Tensor = torch.Tensor

RESIDUAL_HOOK = re.compile(r"^blocks\.([0-9]+)\.hook_resid_(pre|mid|post)$")


def exported_hook(hook: str, offset: int) -> str:
    """The exported model's hook for a compiled residual hook."""
    found = RESIDUAL_HOOK.match(hook)
    if found is None:
        raise ValueError(f"not a residual hook: {hook!r}")
    layer, where = int(found.group(1)), found.group(2)
    if offset and layer == 0 and where == "pre":
        return "blocks.0.hook_resid_post"
    return f"blocks.{layer + offset}.hook_resid_{where}"


#: (a block's module, its second norm) by target: the modules whose input or output hold the residual
MODULES = {"hf-gpt2": ("transformer.h.{}", "transformer.h.{}.ln_2"), "tl-native": ("layers.{}", "layers.{}.ln2"),
           "hf-llama": ("model.layers.{}", "model.layers.{}.post_attention_layernorm")}


def hf_module(hook: str, to: str = "hf-gpt2") -> dict[str, str]:
    """The module (and its input or output) holding an exported residual hook."""
    found = RESIDUAL_HOOK.match(hook)
    assert found is not None
    layer, where = found.group(1), found.group(2)
    block, norm = MODULES[to]
    if where == "mid":
        return {"module": norm.format(layer), "io": "input"}
    return {"module": block.format(layer), "io": "input" if where == "pre" else "output"}


def _reading(reading: dict[str, Any], offset: int, to: str) -> dict[str, Any]:
    hook = exported_hook(reading["hook"], offset)
    return {**reading, "hook": hook, **hf_module(hook, to)}


def exported_circuit(model: CompiledTransformer, layout: ExportLayout | Any,
                     to: str = "hf-gpt2") -> list[dict[str, Any]] | None:
    """Every site of ``ifl.circuit(model)`` at the export's hooks (None for a trained model,
    which has no circuit); ``layout``: any layout with ``heads`` and ``offset``. A compiled
    model whose stored program no longer checks is refused (ExportError), as ``check``,
    ``circuit`` and ``report`` refuse it: its export would carry neither circuit nor reference."""
    card = model.card
    if card.trained is not None or card.disguised is not None or card.superposition is not None:
        return None  # a disguised model's graph is in its card, a superposed one's features in "features"
    from ..errors import ExportError, StoredProgramError
    from ..verify.sites import circuit

    try:
        sites = circuit(model, verify_weights=False)  # export checked the model itself, before its view
    except StoredProgramError as error:
        raise ExportError(str(error)) from None
    slots = {(h.compiled_layer, h.compiled_index): h for h in layout.heads}
    out = []
    for site in sites:
        record = site.to_json()
        record |= _reading(record, layout.offset, to)
        sink = to != "tl-native"
        record["positions"] = ("1..T'" if sink else "0..T'-1") if site.site == "token" else ("T'+1" if sink else "T'")
        if not sink:
            record["first_row"] = 0
        if site.head is not None:
            compiled_layer = int(site.head[0].split(".")[1])
            head = slots[(compiled_layer, site.head[1])]
            record["head"] = {"hook_z": f"blocks.{head.layer}.attn.hook_z", "index": head.slot,
                              "name": head.name}
        if site.argument is not None:
            record["argument"] = _reading(site.argument.to_json(), layout.offset, to)
        out.append(record)
    return out


def read_site(record: dict[str, Any], residual: Tensor) -> Tensor:
    """A circuit record's value from the exported residual stream at its hook, (B, T'+2, width)
    ((B, T'+1, width) with ``first_row`` 0: tl-native): Σ_i w_i h[..., i] + c at its positions,
    (B, T') for a token site, (B,) at the readout."""
    h = residual.to(torch.float64)
    weights = torch.tensor(record["weights"], dtype=torch.float64, device=h.device)
    rows = h[..., list(record["index"])] @ weights + record["constant"]  # (B, N)
    return rows[:, record.get("first_row", 1):-1] if record["site"] == "token" else rows[:, -1]
