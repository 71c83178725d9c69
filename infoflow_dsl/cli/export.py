"""``infoflowc export MODEL --to hf-gpt2|hf-llama|tl-native -o DIR``, and ``check`` on an exported directory.

Exit 2 (the user's fault, one line on stderr, nothing written) for a file that is not a model,
an unknown target (argparse's choices), or an existing non-empty DIR without ``--force``; the
directory is written to a temporary sibling and renamed into place
(:mod:`infoflow_dsl.exporters.directory`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..files import check_writable_folder
from .common import (
    EXIT_OK,
    Command,
    add_dtype_flag,
    add_model_argument,
    add_output_flag,
    positive_float,
)

TARGETS = ("hf-gpt2", "hf-llama", "tl-native")
LAYERNORMS = ("exact", "active")


def command_export(arguments: argparse.Namespace) -> int:
    import torch

    from ..errors import ModelFileError
    from ..exporters.directory import ExportError, export, read_info
    from ..transformer.io import load

    check_writable_folder(arguments.output)
    if arguments.model.resolve().is_relative_to(arguments.output.resolve()):
        raise UsageError(f"{arguments.output}: holds the model {arguments.model}, which the export would replace")
    try:
        model = load(arguments.model, device="cpu")
    except ModelFileError as error:
        raise UsageError(str(error)) from None
    dtype = getattr(torch, arguments.dtype) if arguments.dtype else None
    try:
        if arguments.layernorm == "exact" and (arguments.ln_eps is not None or arguments.ln_constant is not None):
            raise ExportError("--ln-eps and --ln-constant are for --layernorm active")
        directory = export(model, arguments.output, to=arguments.to, layernorm=arguments.layernorm, dtype=dtype,
                           force=arguments.force, ln_eps=arguments.ln_eps, ln_constant=arguments.ln_constant,
                           self_contained=arguments.self_contained)
    except ExportError as error:
        raise UsageError(f"infoflowc export: {error}") from None
    except OSError as error:
        raise UsageError(f"{arguments.output}: cannot write: {error.strerror or error}") from None
    info = read_info(directory)
    layout, bound = info["layout"], info["a_priori_bound"]
    print(f"{arguments.model}: exported as {arguments.to} to {directory}")
    embedding = ("no embedding ReLU block" if layout["embedding_layer"] is None
                 else f"embedding ReLU block: layer {layout['embedding_layer']}")
    print(f"  layers {layout['n_layers']} ({embedding}), "
          f"heads {layout['n_head']} × {layout['head_dim']}, n_embd {layout['width']}, n_inner {layout['n_inner']}")
    ln = info["layernorm"]
    if ln["mode"] == "none":
        print("  norms            none (normalization_type null: the compiled model has none)")
    elif ln.get("norm") == "RMSNorm":
        print(f"  RMSNorm          exact (ε = {_power(ln['eps'])}, gain {_power(ln['gain'])}); HF computes it in "
              f"float32, so exact to float32 rounding")
    else:
        print(f"  LayerNorm        {ln['mode']} (ε_LN = {_power(ln['eps'])}, gain {_power(ln['gain'])})")
    if ln["mode"] == "active":
        print(f"  constant C       {ln['constant']:.6g} (K = {ln['K']:.4g} measured: LayerNorm error K/C² = "
              f"{ln['K'] / ln['constant'] ** 2:.3g}; its share of ε {ln['share']:.3g})")
    print(f"  a-priori bound   {'none (a trained model: measured only)' if bound is None else f'{bound:.3g}'}")
    penalties = info.get("self_contained")
    if penalties is not None:
        print(f"  masks            penalties in the weights: P = {_power(penalties['penalty'])} ≥ "
              f"2(2S + {penalties['underflow']:g}), "
              f"scores |β q·k| ≤ S = {penalties['score_bound']:.4g}; is_causal {penalties['is_causal']}; "
              f"inputs of exactly T = {penalties['length']} tokens")
    passed = "inputs_embeds" if penalties is not None else "inputs_embeds, attention_mask"
    given = "ids" if model.token_input else "x"  # a token model's export reads ids (B, T'), as the model does
    shown = "ids = ifl.encode(program, tokens); " if model.token_input else ""
    print(f"  inputs           {shown}ifl.export_inputs({str(directory)!r}, {given}) -> {passed}")
    if arguments.to == "tl-native":
        print(f"  load             infoflow_dsl.exporters.native.load_tl_native({str(directory)!r}) "
              f"-> a TransformerBridge (boot_native + load_state_dict)")
    return EXIT_OK


def _power(value: float) -> str:
    """2^k for an exact power of two k ≥ 8, else the number."""
    import math

    mantissa, exponent = math.frexp(value)
    return f"2^{exponent - 1}" if mantissa == 0.5 and exponent > 8 else f"{value:g}"


def load_checked(path: Path) -> Any:
    """The model ``check`` measures: a model file, or an exported directory (its HF model)."""
    from ..errors import ModelFileError
    from ..transformer.io import load

    if path.is_dir():
        from ..exporters.directory import ExportError, load_exported

        try:
            return load_exported(path)
        except ExportError as error:
            raise UsageError(str(error)) from None
    try:
        return load(path, device="cpu")
    except ModelFileError as error:
        raise UsageError(str(error)) from None


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    """``export MODEL [--to ..] -o DIR [--layernorm ..] [--dtype ..] [--self-contained] [--force]``."""
    add_model_argument(parser)
    parser.add_argument("--to", choices=TARGETS, default="hf-gpt2",
                        help="the architecture: hf-gpt2 (default), hf-llama (RMSNorm, RoPE neutralised; exact to "
                             "float32, where HF computes the norm) or tl-native (TransformerLens 4's boot_native)")
    add_output_flag(parser, "the directory to write", required=True)
    parser.add_argument("--layernorm", choices=LAYERNORMS, default="exact",
                        help="exact: ε_LN = 2^80, gain 2^40, LayerNorm(h) = h exactly (default); active: the "
                             "standard ε_LN and gain 1, a ±C constant pair, C chosen from the share of ε the bound "
                             "leaves")
    parser.add_argument("--ln-eps", type=positive_float, help="the active LayerNorm's ε_LN (default 1e-5)")
    parser.add_argument("--ln-constant", type=positive_float, metavar="C",
                        help="the active LayerNorm's constant C (default: chosen from ε)")
    add_dtype_flag(parser, "the exported weights' dtype (default: the model's)")
    parser.add_argument("--self-contained", action="store_true",
                        help="the structural masks as score penalties in the weights: no attention mask is passed, "
                             "inputs have exactly T tokens (refused where the penalties cannot be exact)")
    parser.add_argument("--force", action="store_true", help="replace an existing non-empty directory")


EXPORT = Command("export", "a compiled model as a standard Hugging Face model directory", _export_arguments,
                 command_export)
