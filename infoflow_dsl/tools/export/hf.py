"""The Hugging Face side of an export: the GPT2Config, an in-memory GPT-2, batched forwards."""

from __future__ import annotations

from typing import Any

import torch

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
