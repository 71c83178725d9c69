"""The Hugging Face side of an export: the GPT2Config, an in-memory GPT-2, batched forwards, and
the exported model read back from its one safetensors file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ..errors import ExportError
from .inputs import ExportIO
from .layout import ExportLayout

EXPORT_MISSING = "ifl.export needs Hugging Face transformers: install the 'export' extra " \
                 "(pip install 'infoflow-dsl[export]')"
FORWARD_ELEMENTS = 1 << 21  # numbers per activation of one forward batch (16 MiB in float64)


def transformers_module() -> Any:
    """The transformers module, or an ImportError whose message names the extra."""
    try:
        import transformers
    except ImportError:
        raise ImportError(EXPORT_MISSING) from None
    return transformers


def gpt2_config(layout: ExportLayout, dtype: torch.dtype, ln_eps: float) -> Any:
    """The stock GPT2Config of ``layout`` (dropout 0, ReLU, √head_dim scaling, eager attention;
    ``is_causal: false`` for a self-contained export whose slots read later keys: :mod:`.penalty`)."""
    penalties = layout.penalties
    bidirectional = {"is_causal": False} if penalties is not None and penalties.bidirectional else {}
    return transformers_module().GPT2Config(
        vocab_size=layout.vocab, n_positions=layout.n_positions, n_embd=layout.width, n_layer=layout.n_layers,
        n_head=layout.n_head, n_inner=layout.n_inner, activation_function="relu", resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=ln_eps, scale_attn_weights=True,
        scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False, tie_word_embeddings=False,
        use_cache=False, bos_token_id=None, eos_token_id=None, dtype=str(dtype).removeprefix("torch."),
        architectures=["GPT2LMHeadModel"], attn_implementation="eager", **bidirectional,
    )


def in_memory(layout: ExportLayout, tensors: dict[str, torch.Tensor], dtype: torch.dtype, ln_eps: float) -> Any:
    """A GPT2LMHeadModel holding ``tensors`` (eval mode, eager attention), never written to disk."""
    transformers = transformers_module()
    model = transformers.GPT2LMHeadModel(gpt2_config(layout, dtype, ln_eps)).to(dtype)
    model.load_state_dict(tensors, strict=True)
    return model.eval()


def forward_in_batches(hf: Any, io: ExportIO, x: torch.Tensor, hidden: bool = False,
                       shape: tuple[int, int, int] | None = None) -> Any:
    """y for x (B, T', d) through ``hf`` (a Hugging Face model or a TransformerLens bridge: its
    logits or an output with ``.logits``), in batches of at most FORWARD_ELEMENTS numbers per
    activation; ``shape`` = (n_inner, n_head, width), by default GPT-2's config's; with
    ``hidden`` (Hugging Face models), (y, the largest ‖h‖² over every position and layer input)."""
    if shape is None:
        shape = (hf.config.n_inner, hf.config.n_head, hf.config.n_embd)
    inner, heads, width = shape
    rows = x.shape[1] + 2
    widest = max(inner, heads * rows, 3 * width)
    step = max(1, FORWARD_ELEMENTS // (rows * widest))
    parts, largest = [], 0.0
    weight = next(hf.parameters())
    device, dtype = weight.device, weight.dtype
    more = {"output_hidden_states": True} if hidden else {}
    with torch.no_grad():
        for start in range(0, x.shape[0], step):
            arguments = io.arguments(x[start:start + step].to(device, dtype))
            if hasattr(hf, "run_with_cache"):  # a TransformerBridge: the embeddings are its positional input
                out = hf(arguments.pop("inputs_embeds"), **arguments)
            else:
                out = hf(**arguments, **more)
            parts.append(io.outputs(out.logits if hasattr(out, "logits") else out))
            if hidden:
                largest = max([largest, *(float(h.double().square().sum(-1).max()) for h in out.hidden_states)])
    y = torch.cat(parts) if parts else io.outputs(torch.zeros(0, rows, 2, dtype=dtype))
    return (y, largest) if hidden else y


#: the attention each target's model is read back with: GPT-2's eager (its softmax in the weights'
#: dtype); Llama's sdpa (its eager softmax is float32)
ATTENTION = {"hf-gpt2": "eager", "hf-llama": "sdpa"}


#: the one weights file of an export; a pickle (``pytorch_model.bin``) or a sharded index is never read
WEIGHTS_FILE = "model.safetensors"
FOREIGN_WEIGHTS = ("pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json",
                   "tf_model.h5", "flax_model.msgpack")


def load_export_model(directory: str | os.PathLike[str], to: str, dtype: torch.dtype) -> Any:
    """The exported model: ``AutoModelForCausalLM`` (hf-gpt2, hf-llama) or a TransformerBridge
    (tl-native), from ``model.safetensors`` alone: a directory without it, or with a pickle or a
    sharded index beside it (which could point outside the directory), is refused
    (ExportError) and ``from_pretrained`` is told ``use_safetensors=True``: nothing is unpickled."""
    folder = Path(directory)
    if not (folder / WEIGHTS_FILE).is_file():
        raise ExportError(f"{folder}: no {WEIGHTS_FILE} (an infoflow export holds its weights there, and only there)")
    foreign = [name for name in FOREIGN_WEIGHTS if (folder / name).exists()]
    if foreign:
        raise ExportError(f"{folder}: holds {', '.join(foreign)} beside {WEIGHTS_FILE}; an infoflow export holds "
                          f"one safetensors file and nothing is read from a pickle or a shard index")
    if to == "tl-native":
        from .native import load_tl_native

        return load_tl_native(Path(directory), dtype)
    transformers = transformers_module()
    transformers.utils.logging.disable_progress_bar()
    return transformers.AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype, use_safetensors=True,
                                                             attn_implementation=ATTENTION[to]).eval()
