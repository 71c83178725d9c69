"""TransformerLens interop: a compiled model with ``HookPoint`` s at the conventional names.

>>> hooked = ifl.hooked(model)                       # needs the ``lens`` extra (transformer-lens >= 4)
>>> y, cache = hooked.run_with_cache(x)              # y == model(x), bitwise (a token model: x = ids (B, T'))
>>> cache["blocks.0.attn.hook_pattern"]              # (B, H_0, T'+1, T')
>>> hooked.run_with_hooks(x, fwd_hooks=[("blocks.0.attn.hook_z", patch)])

The hooked model runs the compiled model's own forward (``CompiledTransformer.run``) with a tap
that calls one ``HookPoint`` per name of :data:`~infoflow_dsl.transformer.model.HOOK_SHAPES`; the weights
are the compiled model's (shared, not copied), exposed at TransformerLens's attribute names
(``blocks[l].attn.W_O``, ``W_U``, ...) for the ``ActivationCache`` helpers. Every row of every
layer is computed (the readout-only last layer of ``model(x)`` is off), so every hook holds
(B, T'+1, ...); the readout row is computed in the same products either way, so the output is
bitwise the plain model's. A layer without heads still has its attention hooks, with H = 0.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from .model import HOOK_SHAPES, CompiledTransformer

if TYPE_CHECKING:
    from .arguments import ModelSource

LENS_MISSING = "ifl.hooked needs TransformerLens: install the 'lens' extra (pip install 'infoflow-dsl[lens]')"


def _lens() -> Any:
    """The transformer_lens module, or an ImportError whose message names the extra."""
    try:
        import transformer_lens
        import transformer_lens.hook_points
    except ImportError:
        raise ImportError(LENS_MISSING) from None
    return transformer_lens


EMBED_HOOKS = ("hook_embed", "hook_pos_embed")
BLOCK_HOOKS = tuple(n for n in HOOK_SHAPES if n not in EMBED_HOOKS)


def hook_names(n_layers: int) -> list[str]:
    """Every hook name of a model with ``n_layers`` blocks, in forward order."""
    return [*EMBED_HOOKS, *(f"blocks.{layer}.{n}" for layer in range(n_layers) for n in BLOCK_HOOKS)]


def _sub(prefix: str) -> list[str]:
    """The block hooks under ``prefix`` (``attn.``, ``mlp.`` or ``""`` for the block's own), unprefixed."""
    if not prefix:
        return [n for n in BLOCK_HOOKS if "." not in n]
    return [n[len(prefix):] for n in BLOCK_HOOKS if n.startswith(prefix)]


def lens_config(model: CompiledTransformer) -> Any:
    """A ``TransformerLensConfig`` for the ActivationCache helpers: no normalisation, ReLU FFNs.

    Layers may differ in heads and widths; n_heads, d_head and d_mlp are the largest ones. A
    token model's ``d_vocab`` is its vocabulary's size V (the rows of ``embed.W_E``); a model
    over vectors has no vocabulary (-1).
    """
    from transformer_lens.config import TransformerLensConfig

    heads = [block.attn.W_Q.shape[0] for block in model.blocks]
    widths = [block.attn.W_Q.shape[2] for block in model.blocks] + [block.attn.W_V.shape[2] for block in model.blocks]
    return TransformerLensConfig(
        d_model=model.d_model, d_head=max([1, *widths]), n_layers=model.n_layers, n_ctx=model.T + 1,
        n_heads=max([1, *heads]), d_mlp=max([1, *model.d_mlp]), d_vocab=model.d if model.token_input else -1,
        device=str(model.device),
        act_fn="relu", normalization_type=None, attn_only=False, dtype=model.dtype,
    )


def hooked(model: ModelSource) -> Any:
    """The compiled model as a ``transformer_lens.HookedRootModule`` (see the module docstring).

    Raises ImportError naming the ``lens`` extra when TransformerLens is not installed.

    Args:
        model: a compiled model, or the path of its file.

    Returns:
        A ``transformer_lens.HookedRootModule`` with ``run_with_cache``, hooks and the circuit's names.

    Raises:
        ImportError: TransformerLens (the ``lens`` extra) is not installed.
        ModelFileError: a path that is not a model file.
    """
    from .arguments import model_argument

    model = model_argument(model, "hooked")
    lens = _lens()
    return _hooked_class(lens.HookedRootModule, lens.hook_points.HookPoint, lens.ActivationCache)(model)


def _holder(hook_point: type, names: list[str], weights: dict[str, torch.Tensor]) -> nn.Module:
    """A module with one ``HookPoint`` per name and the given tensors as plain attributes."""
    module = nn.Module()
    for name in names:
        module.add_module(name, hook_point())
    for name, tensor in weights.items():
        object.__setattr__(module, name, tensor)  # shared with the compiled model, not registered twice
    return module


class _HookTap:
    """The tap that runs each intermediate through its ``HookPoint``."""

    def __init__(self, points: dict[str, nn.Module]) -> None:
        self.points = points

    def __call__(self, name: str, value: torch.Tensor) -> torch.Tensor:
        return self.points[name](value)

    def listens(self, name: str) -> bool:
        """Whether a hook is attached to ``name`` (TransformerLens attaches forward and backward
        hooks as forward hooks of the HookPoint)."""
        return bool(self.points[name]._forward_hooks)


@cache
def _hooked_class(root: type, hook_point: type, activation_cache: type) -> type:
    """The HookedRootModule subclass (built once, when TransformerLens is first imported)."""

    class HookedCompiled(root):
        """A compiled model with TransformerLens hook points; ``forward(x)`` = ``model(x)``."""

        def __init__(self, model: CompiledTransformer) -> None:
            super().__init__()
            object.__setattr__(self, "compiled", model)  # not a submodule: its weights appear once, below
            self.cfg = lens_config(model)
            self.hook_embed = hook_point()
            self.hook_pos_embed = hook_point()
            blocks = []
            for block in model.blocks:
                hooked_block = _holder(hook_point, _sub(""), {})
                hooked_block.attn = _holder(hook_point, _sub("attn."), dict(block.attn.named_parameters()))
                hooked_block.mlp = _holder(hook_point, _sub("mlp."), dict(block.mlp.named_parameters()))
                blocks.append(hooked_block)
            self.blocks = nn.ModuleList(blocks)
            object.__setattr__(self, "W_U", model.unembed.W_U)
            object.__setattr__(self, "b_U", model.unembed.b_U)
            self.setup()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            """``model(x)`` (B, T', d) (a token model: ids (B, T') int64) -> (B,), (B, K), or per token
            (B, T'), (B, T', K); every intermediate through its HookPoint."""
            return self.compiled.run(x, tap=_HookTap(self.hook_dict))

        def run_with_cache(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
            """(output, ``ActivationCache``) — HookedRootModule's run_with_cache, its dict wrapped."""
            output, cache = super().run_with_cache(*args, **kwargs)
            return output, activation_cache(cache, self, has_batch_dim=not kwargs.get("remove_batch_dim", False))

    return HookedCompiled
