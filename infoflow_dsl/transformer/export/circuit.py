"""The circuit map (``ifl.circuit``) at an exported model's hooks and modules.

A compiled reading ``Σ w_i h[i] + c`` at ``blocks.{l}.hook_resid_{pre,mid,post}`` reads the
same coordinates i of the exported residual (the compiled directions keep their indices) at
exported layer l + offset (the embedding's ReLU block, when there is one, is exported layer 0,
so what the compiled model has at ``blocks.0.hook_resid_pre`` the export has after its layer 0).
Each reading names the TransformerLens bridge hook and the Hugging Face module whose input or
output holds that residual stream, and the rows: token t at position t, the readout at T'+1.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..model import CompiledTransformer
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


def hf_module(hook: str) -> dict[str, str]:
    """The Hugging Face module (and its input or output) holding an exported residual hook."""
    found = RESIDUAL_HOOK.match(hook)
    assert found is not None
    layer, where = found.group(1), found.group(2)
    if where == "mid":
        return {"module": f"transformer.h.{layer}.ln_2", "io": "input"}
    return {"module": f"transformer.h.{layer}", "io": "input" if where == "pre" else "output"}


def _reading(reading: dict[str, Any], offset: int) -> dict[str, Any]:
    hook = exported_hook(reading["hook"], offset)
    return {**reading, "hook": hook, **hf_module(hook)}


def exported_circuit(model: CompiledTransformer, layout: ExportLayout) -> list[dict[str, Any]] | None:
    """Every site of ``ifl.circuit(model)`` at the export's hooks (None for a model without a
    circuit: trained, or its program gone)."""
    if "trained" in model.config:
        return None
    from ...pipeline import StoredProgramError
    from ...reference.circuit_map import circuit

    try:
        sites = circuit(model)
    except StoredProgramError:
        return None
    slots = {(h.compiled_layer, h.compiled_index): h for h in layout.heads}
    out = []
    for site in sites:
        record = site.to_json()
        record |= _reading(record, layout.offset)
        record["positions"] = "1..T'" if site.site == "token" else "T'+1"
        if site.head is not None:
            compiled_layer = int(site.head[0].split(".")[1])
            head = slots[(compiled_layer, site.head[1])]
            record["head"] = {"hook_z": f"blocks.{head.layer}.attn.hook_z", "index": head.slot,
                              "name": head.name}
        if site.argument is not None:
            record["argument"] = _reading(site.argument.to_json(), layout.offset)
        out.append(record)
    return out


def read_site(record: dict[str, Any], residual: Tensor) -> Tensor:
    """A circuit record's value from the exported residual stream at its hook, (B, T'+2, width):
    Σ_i w_i h[..., i] + c at its positions, (B, T') for a token site, (B,) at the readout."""
    h = residual.to(torch.float64)
    weights = torch.tensor(record["weights"], dtype=torch.float64, device=h.device)
    rows = h[..., list(record["index"])] @ weights + record["constant"]  # (B, T'+2)
    return rows[:, 1:-1] if record["site"] == "token" else rows[:, -1]
