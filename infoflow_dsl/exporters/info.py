"""``infoflow.json``, what an export records beside the weights: the layout (the compiled
model's heads, layers and residual directions on the export's), the program and its bound, the
circuit's sites on the export's hooks, the feature dictionary, and a stored truth's edges."""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ExportError
from ..transformer.card import ModelCard
from ..transformer.model import CompiledTransformer
from .inputs import ExportIO
from .layout import ExportLayout
from .native import NativeLayout

FORMAT = "infoflow-export/1"


#: the module whose input columns are a head's z, by target
HEAD_MODULES = {"hf-gpt2": "transformer.h.{}.attn.c_proj", "tl-native": "layers.{}.attn.o",
                "hf-llama": "model.layers.{}.self_attn.o_proj"}


def layout_json(layout: ExportLayout | NativeLayout) -> dict[str, Any]:
    """The ``layout`` entry: the shape (n_head, head_dim, n_inner under GPT-2's names for every
    target) and the extra residual coordinates."""
    if isinstance(layout, NativeLayout):
        coordinates: dict[str, Any] = {"compiled": [0, layout.d_model], "raw_input": layout.raw_input,
                                       "token_flag": layout.token_flag, "one": layout.one}
        shape = {"n_head": layout.n_heads, "head_dim": layout.d_head, "n_inner": layout.d_mlp}
    else:
        coordinates = {"compiled": [0, layout.d_model], "raw_input": layout.raw_input,
                       "token_flag": layout.token_flag, "one_pos": layout.one_pos, "one_neg": layout.one_neg,
                       "write_balance": layout.write_balance, "read_balance": layout.read_balance}
        if layout.positions is not None:
            coordinates["positions"] = [layout.positions, layout.positions + layout.n_positions]
        shape = {"n_head": layout.n_head, "head_dim": layout.head_dim, "n_inner": layout.n_inner}
    out: dict[str, Any] = {
        "width": layout.width, **shape, "n_layers": layout.n_layers, "embedding_layer": layout.embedding_layer,
        "layer_of_compiled": [layer + layout.offset for layer in range(layout.n_layers - layout.offset)]}
    if isinstance(layout, ExportLayout):
        out["bias_units"] = list(layout.bias_units)
    return out | {"coordinates": coordinates}


def heads_json(layout: ExportLayout | NativeLayout, model: CompiledTransformer, to: str) -> list[dict[str, Any]]:
    out = []
    for head in layout.heads:
        start, stop = layout.slot_columns(head.slot, int(model.blocks[head.compiled_layer].attn.W_V.shape[2]))
        out.append({"name": head.name, "compiled_layer": head.compiled_layer, "compiled_index": head.compiled_index,
                    "layer": head.layer, "slot": head.slot, "hook_z": f"blocks.{head.layer}.attn.hook_z",
                    "hook_pattern": f"blocks.{head.layer}.attn.hook_pattern",
                    "module": HEAD_MODULES[to].format(head.layer),
                    "module_input_columns": [start, stop]})
    return out


def export_info(model: CompiledTransformer, layout: ExportLayout | NativeLayout, io: ExportIO,
                layernorm: dict[str, Any], to: str, circuit: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The ``infoflow.json`` object of an export."""
    card = model.card
    trained = card.trained is not None
    positions = {"sink": 0, "tokens": "1..T'", "readout": "T'+1", "length_of_sequence": "T'+2"}
    if not io.sink:
        positions = {"sink": None, "tokens": "0..T'-1", "readout": "T'", "length_of_sequence": "T'+1"}
    embedding = {"W_x": io.w_x.to(torch.float64).tolist(), "cls": io.cls.to(torch.float64).tolist()}
    if io.positions is not None:
        embedding["positions"] = io.positions.to(torch.float64).tolist()
    return {
        "format": FORMAT, "to": to, "program": _json(card.program),
        "eps": None if trained else card.eps,
        "a_priori_bound": None if trained else card.a_priori_bound,
        "measured_error": _json(card.measured_error), "trained": _json(card.trained),
        "compiled": {key: getattr(card, key) for key in ("dtype", "ffn", "route") if getattr(card, key) is not None},
        "dtype": str(io.w_x.dtype).removeprefix("torch."), "layernorm": layernorm,
        "input": io.json(),
        "positions": positions,
        "layout": layout_json(layout),
        "slots": [{"slot": j, "mask": [list(c) for c in mask]} for j, mask in enumerate(layout.slot_masks)],
        "heads": heads_json(layout, model, to),
        "residual_labels": None if card.residual_labels is None else list(card.residual_labels),
        "embedding": embedding,
        "circuit": circuit,
        "features": None if trained else _dictionary(model),
        **stored_truth(card, layout, model, to),
    }


def _json(part: Any) -> Any:
    """A card's part as JSON (None: absent or null)."""
    return None if part is None else part.to_json()


def _dictionary(model: CompiledTransformer) -> list[dict[str, Any]] | None:
    """The compiled model's feature dictionary (``ifl.features``) on the compiled residual, a
    token model's only (a model over vectors: None)."""
    if model.vocabulary is None and model.card.token_view is None:
        return None
    from ..compiler.superposition.dictionary import features

    return features(model)


def stored_truth(card: ModelCard, layout: ExportLayout | NativeLayout, model: CompiledTransformer,
                 to: str) -> dict[str, Any]:
    """A model's stored truth (``infoflowc circuit --truth -o``) as ``circuit_truth`` and its
    edges on the export's hooks as ``circuit_edges``; nothing when it has none."""
    record = card.circuit_truth
    if record is None:
        return {}
    from ..circuits.formats import exported_edges
    from ..circuits.graph import stored_graph
    from ..errors import StoredProgramError

    try:
        graph = stored_graph(model, record.graph, "truth's")
    except StoredProgramError as error:
        raise ExportError(str(error)) from None
    layers = layout_json(layout)
    return {"circuit_truth": record.to_json(), "circuit_edges": exported_edges(
        graph, heads_json(layout, model, to), layers["layer_of_compiled"], layers["n_layers"])}
