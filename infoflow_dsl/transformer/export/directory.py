"""``ifl.export``: a compiled model as a Hugging Face GPT-2 directory, and that directory read back.

    DIR/config.json         a stock GPT2Config (no remote code): n_embd, n_head, n_inner, n_layer,
                            n_positions = T + 2, activation "relu", layer_norm_epsilon, eager attention
    DIR/model.safetensors   the GPT2LMHeadModel weights (:mod:`.weights`)
    DIR/infoflow.json       the program, ε, the a-priori bound, the input spec, the embedding
                            (W_x, cls_x), every slot's mask, head -> (layer, slot), the position map
                            and the circuit map at the exported model's hooks and modules

The directory is written to a temporary sibling and renamed into place, so a failed export
leaves nothing behind; an existing non-empty DIR is replaced only with ``force``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..model import CompiledTransformer
from .hf import forward_in_batches, gpt2_config, transformers_module
from .inputs import ExportIO
from .layout import ExportLayout, plan
from .weights import EXACT_LN_EPS, EXACT_LN_GAIN, gpt2_state_dict

TARGETS = ("hf-gpt2",)
LAYERNORMS = ("exact", "active")
INFO_FILE = "infoflow.json"
FORMAT = "infoflow-export/1"


class ExportError(ValueError):
    """An export that cannot be made or read (a bad target, an existing folder, not an export)."""


def _layout_json(layout: ExportLayout) -> dict[str, Any]:
    coordinates = {"compiled": [0, layout.d_model], "raw_input": layout.raw_input, "token_flag": layout.token_flag,
                   "one_pos": layout.one_pos, "one_neg": layout.one_neg, "write_balance": layout.write_balance,
                   "read_balance": layout.read_balance}
    return {"width": layout.width, "n_head": layout.n_head, "head_dim": layout.head_dim, "n_inner": layout.n_inner,
            "n_layers": layout.n_layers, "embedding_layer": layout.embedding_layer,
            "layer_of_compiled": [layer + layout.offset for layer in range(layout.n_layers - layout.offset)],
            "bias_units": list(layout.bias_units), "coordinates": coordinates}


def _heads_json(layout: ExportLayout, model: CompiledTransformer) -> list[dict[str, Any]]:
    out = []
    for head in layout.heads:
        start, stop = layout.slot_columns(head.slot, int(model.blocks[head.compiled_layer].attn.W_V.shape[2]))
        out.append({"name": head.name, "compiled_layer": head.compiled_layer, "compiled_index": head.compiled_index,
                    "layer": head.layer, "slot": head.slot, "hook_z": f"blocks.{head.layer}.attn.hook_z",
                    "hook_pattern": f"blocks.{head.layer}.attn.hook_pattern",
                    "module": f"transformer.h.{head.layer}.attn.c_proj",
                    "module_input_columns": [start, stop]})
    return out


def export_info(model: CompiledTransformer, layout: ExportLayout, io: ExportIO, layernorm: dict[str, Any],
                to: str, circuit: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The ``infoflow.json`` object of an export."""
    config = model.config
    trained = "trained" in config
    return {
        "format": FORMAT, "to": to, "program": config.get("program"),
        "eps": None if trained else config.get("eps"),
        "a_priori_bound": None if trained else config.get("a_priori_bound"),
        "measured_error": config.get("measured_error"), "trained": config.get("trained"),
        "compiled": {key: config[key] for key in ("dtype", "ffn", "route") if key in config},
        "dtype": str(io.w_x.dtype).removeprefix("torch."), "layernorm": layernorm,
        "input": io.json(),
        "positions": {"sink": 0, "tokens": "1..T'", "readout": "T'+1", "length_of_sequence": "T'+2"},
        "layout": _layout_json(layout),
        "slots": [{"slot": j, "mask": [list(c) for c in mask]} for j, mask in enumerate(layout.slot_masks)],
        "heads": _heads_json(layout, model),
        "residual_labels": config.get("residual_labels"),
        "embedding": {"W_x": io.w_x.to(torch.float64).tolist(), "cls": io.cls.to(torch.float64).tolist()},
        "circuit": circuit,
    }


def _check_target(directory: Path, to: str, layernorm: str, force: bool) -> None:
    if to not in TARGETS:
        raise ExportError(f"unknown export target {to!r} (expected one of {', '.join(TARGETS)})")
    if layernorm not in LAYERNORMS:
        raise ExportError(f"unknown LayerNorm mode {layernorm!r} (expected one of {', '.join(LAYERNORMS)})")
    if directory.exists() and not directory.is_dir():
        raise ExportError(f"{directory}: exists and is not a folder")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise ExportError(f"{directory}: the folder exists and is not empty (use --force to replace it)")
    if not directory.resolve().parent.is_dir():
        raise ExportError(f"{directory}: the folder {directory.resolve().parent} does not exist")


def export(model: CompiledTransformer, directory: str | os.PathLike[str], to: str = "hf-gpt2",
           layernorm: str = "exact", dtype: torch.dtype | None = None, force: bool = False,
           ln_eps: float | None = None, ln_constant: float | None = None, self_contained: bool = False) -> Path:
    """Write ``model`` as a Hugging Face GPT-2 directory (module docstring); returns its path.

    ``dtype`` is the exported weights' (default: the model's). ``layernorm``: ``exact``
    (ε_LN = 2^80, gain 2^40: LayerNorm(h) = h) or ``active`` (ε_LN = ``ln_eps``, default 1e-5,
    gain 1, a ±C pair, C from the share of ε the compiled bound leaves or ``ln_constant``:
    :mod:`.active`; the stored bound adds the LayerNorm's share). Raises :class:`ExportError`
    for a bad target or LayerNorm mode, or an existing non-empty ``directory`` without ``force``.
    ``self_contained``: the structural masks as score penalties in the weights (:mod:`.penalty`):
    no attention mask is passed, inputs have exactly T tokens; ExportError where the penalties
    cannot be exact."""
    directory = Path(directory)
    _check_target(directory, to, layernorm, force)
    dtype = model.dtype if dtype is None else dtype
    from .penalty import PenaltyError

    try:
        layout = plan(model, self_contained, dtype)
    except PenaltyError as error:
        raise ExportError(str(error)) from None
    trained = "trained" in model.config
    bound = None if trained else model.config.get("a_priori_bound")
    if layernorm == "active":
        from .active import STANDARD_LN_EPS, choose

        try:
            active = choose(model, layout, STANDARD_LN_EPS if ln_eps is None else ln_eps, ln_constant)
        except ValueError as error:
            raise ExportError(str(error)) from None
        tensors, w_x, cls = gpt2_state_dict(model, layout, dtype, 1.0, active.constant, active.reader_scale)
        ln, ln_eps = active.json(), active.eps
        bound = None if bound is None else bound + active.share
    else:
        tensors, w_x, cls = gpt2_state_dict(model, layout, dtype, EXACT_LN_GAIN)
        ln, ln_eps = {"mode": "exact", "eps": EXACT_LN_EPS, "gain": EXACT_LN_GAIN, "constant": 1.0}, EXACT_LN_EPS
    io = ExportIO.of(model, layout.slot_masks, w_x, cls, self_contained)
    from .circuit import exported_circuit

    info = export_info(model, layout, io, ln, to, exported_circuit(model, layout))
    info["self_contained"] = None if layout.penalties is None else layout.penalties.json()
    info["a_priori_bound"], info["compiled_bound"] = bound, None if trained else model.config.get("a_priori_bound")
    _write(directory, gpt2_config(layout, dtype, ln_eps), tensors, info, force)
    return directory


def _write(directory: Path, config: Any, tensors: dict[str, torch.Tensor], info: dict[str, Any], force: bool) -> None:
    """config.json, model.safetensors and infoflow.json into a temporary sibling, then renamed."""
    from safetensors.torch import save_file

    parent = directory.resolve().parent
    temporary = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=parent))
    try:
        config.save_pretrained(temporary)
        save_file(tensors, str(temporary / "model.safetensors"), metadata={"format": "pt"})
        (temporary / INFO_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        if directory.exists():
            if not force and any(directory.iterdir()):
                raise ExportError(f"{directory}: the folder exists and is not empty (use --force to replace it)")
            old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".old", dir=parent))
            os.replace(directory, old / "previous")
            os.replace(temporary, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temporary, directory)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


# ---------------------------------------------------------------------------- reading back


def read_info(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``infoflow.json`` of an export; ExportError when the folder is not one."""
    path = Path(directory) / INFO_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportError(f"{directory}: not an infoflow export ({INFO_FILE}: {error})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ExportError(f"{directory}: not an infoflow export ({INFO_FILE} has no format {FORMAT!r})")
    return info


def export_io(target: Any) -> ExportIO:
    """The inputs/outputs helper of an export directory, an :class:`ExportedModel`, or a compiled
    model (its export layout, computed on the spot)."""
    if isinstance(target, ExportedModel):
        return target.io
    if isinstance(target, CompiledTransformer):
        layout = plan(target)
        from .weights import embedding_of

        w_x, cls = embedding_of(target, layout)
        return ExportIO.of(target, layout.slot_masks, w_x.to(target.dtype), cls.to(target.dtype))
    return ExportIO.from_json(read_info(target))


def export_inputs(target: Any, x: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """``hf_model(**export_inputs(DIR, x))``: inputs_embeds (B, T'+2, width) and the attention
    mask (B, n_head, T'+2, T'+2) for x (B, T', d) (:mod:`.inputs`)."""
    return export_io(target).arguments(x)


def export_outputs(target: Any, outputs: Any) -> torch.Tensor:
    """y from the HF model's outputs (or its logits): (B,), (B, K), per token (B, T'), (B, T', K)."""
    logits = outputs.logits if hasattr(outputs, "logits") else outputs
    return export_io(target).outputs(logits)


class ExportedModel(nn.Module):
    """An export read back: ``forward(x)`` = the HF model's output for x, as ``model(x)`` gives
    it; ``config`` holds the export's ε, bound and program (what ``check`` reads)."""

    def __init__(self, directory: str | os.PathLike[str], dtype: torch.dtype | None = None) -> None:
        super().__init__()
        info = read_info(directory)
        transformers = transformers_module()
        self.info = info
        self.io = ExportIO.from_json(info)
        transformers.utils.logging.disable_progress_bar()
        try:
            self.hf = transformers.AutoModelForCausalLM.from_pretrained(
                str(directory), dtype=dtype or self.io.w_x.dtype, attn_implementation="eager")
        except (OSError, ValueError) as error:
            raise ExportError(f"{directory}: cannot load the exported model ({error})") from None
        self.hf.eval()
        self.T, self.d = self.io.T, self.io.d
        self.d_model = int(info["layout"]["width"])
        self.config = {"program": info["program"], "eps": info["eps"], "a_priori_bound": info["a_priori_bound"],
                       "T": self.T, "dtype": info["dtype"]}
        if info.get("trained") is not None:
            self.config["trained"] = info["trained"]

    @property
    def dtype(self) -> torch.dtype:
        return self.hf.lm_head.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.hf.lm_head.weight.device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y for x (B, T', d), in batches (:func:`~.hf.forward_in_batches`)."""
        return forward_in_batches(self.hf, self.io, x)


def load_exported(directory: str | os.PathLike[str], dtype: torch.dtype | None = None) -> ExportedModel:
    """An export directory read back as an :class:`ExportedModel`."""
    return ExportedModel(directory, dtype)
