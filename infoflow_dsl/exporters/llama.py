"""``--to hf-llama``: a compiled model as a stock Hugging Face ``LlamaForCausalLM``.

The export is the GPT-2 one (:mod:`.layout`, :mod:`.weights`: the same residual coordinates,
slots, sink, constant pair, logits) moved onto Llama's modules:

    q_proj, k_proj, v_proj = the three thirds of c_attn (transposed), o_proj = attn.c_proj ᵀ
    gate_proj = mlp.c_fc ᵀ, up_proj = 1/c at the constant coordinate +c (every unit: up = 1 on
    every position but the sink), down_proj = mlp.c_proj ᵀ     (a ReLU gated MLP:
    down(relu(gate h) ⊙ up h) = relu(h W_in + b_in) W_out, b_out by its bias unit)
    embed_tokens = 0, lm_head = GPT-2's; no biases (attention_bias = mlp_bias = false)
    every RMSNorm: weight 2^40, rms_norm_eps 2^80

- **RMSNorm**: RMSNorm(h) = g h / √(mean(h²) + ε) = 2^40 h / √(mean(h²) + 2^80) = h while
  mean(h²) < 2^56 (√ rounds to 2^40). But HF's LlamaRMSNorm casts h to float32 first and the
  result back, so a float64 export computes fl32(h) at every norm: exact only to float32
  rounding (a relative 2^-24 on every reader's input; measured in the tests and BENCHMARKS.md).
  Llama's eager attention also takes its softmax in float32; sdpa (the default) keeps float64.
- **Positions**: Llama has no position embedding matrix, so GPT-2's ``wpe`` rows ride the
  inputs: ``export_inputs`` adds them to ``inputs_embeds`` (stored in infoflow.json).
- **RoPE neutralised**: the rotary embedding rotates every pair of q and k dimensions by
  p · inv_freq_i; with the default RoPE inv_freq_0 = 1 whatever rope_theta, so no choice of
  theta removes it. The export uses linear rope scaling, inv_freq_i / factor, with factor
  1e300: in float32 (where HF computes the frequencies) every inv_freq_i / factor underflows
  to exactly 0, so every angle is 0, cos = 1 and sin = 0 exactly, and q cos + rotate_half(q) sin
  = q bit for bit (tested: the rotary embedding gives cos = 1, sin = 0 at every position).
- **Masks**: the same additive 4D per-slot mask as GPT-2's (Llama passes a 4D mask as given).
"""

from __future__ import annotations

from typing import Any

import torch

from .hf import transformers_module
from .layout import ExportLayout

Tensor = torch.Tensor

#: linear rope scaling by this factor: every inverse frequency underflows to 0 in float32
ROPE_FACTOR = 1e300


def llama_config(layout: ExportLayout, dtype: torch.dtype, rms_eps: float) -> Any:
    """The stock LlamaConfig of ``layout`` (ReLU gated MLP, no biases, RoPE neutralised, eager attention)."""
    return transformers_module().LlamaConfig(
        vocab_size=layout.vocab, hidden_size=layout.width, intermediate_size=layout.n_inner,
        num_hidden_layers=layout.n_layers, num_attention_heads=layout.n_head, num_key_value_heads=layout.n_head,
        head_dim=layout.head_dim, hidden_act="relu", max_position_embeddings=layout.n_positions,
        rms_norm_eps=rms_eps, attention_bias=False, mlp_bias=False, attention_dropout=0.0, tie_word_embeddings=False,
        rope_parameters={"rope_type": "linear", "factor": ROPE_FACTOR, "rope_theta": 10000.0}, use_cache=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, dtype=str(dtype).removeprefix("torch."),
        architectures=["LlamaForCausalLM"], attn_implementation="eager",
    )


def llama_state_dict(gpt2: dict[str, Tensor], layout: ExportLayout, constant: float) -> dict[str, Tensor]:
    """The LlamaForCausalLM state dict of a GPT-2 export's tensors (module docstring)."""
    width, dtype = layout.width, gpt2["lm_head.weight"].dtype
    out = {"model.embed_tokens.weight": torch.zeros(layout.vocab, width, dtype=dtype),
           "lm_head.weight": gpt2["lm_head.weight"],
           "model.norm.weight": gpt2["transformer.ln_f.weight"]}
    up = torch.zeros(layout.n_inner, width, dtype=dtype)
    up[:, layout.one_pos] = 1.0 / constant  # up = 1 at every position but the sink
    for layer in range(layout.n_layers):
        g, p = f"transformer.h.{layer}.", f"model.layers.{layer}."
        qkv = gpt2[g + "attn.c_attn.weight"]  # (width, 3·width): Conv1D weights are (in, out)
        out |= {p + "self_attn.q_proj.weight": qkv[:, :width].T,
                p + "self_attn.k_proj.weight": qkv[:, width:2 * width].T,
                p + "self_attn.v_proj.weight": qkv[:, 2 * width:].T,
                p + "self_attn.o_proj.weight": gpt2[g + "attn.c_proj.weight"].T,
                p + "mlp.gate_proj.weight": gpt2[g + "mlp.c_fc.weight"].T, p + "mlp.up_proj.weight": up.clone(),
                p + "mlp.down_proj.weight": gpt2[g + "mlp.c_proj.weight"].T,
                p + "input_layernorm.weight": gpt2[g + "ln_1.weight"],
                p + "post_attention_layernorm.weight": gpt2[g + "ln_2.weight"]}
    return {name: t.contiguous() for name, t in out.items()}
