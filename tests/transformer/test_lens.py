"""TransformerLens interop (infoflow_dsl/lens.py): hook points, caches, patching, ablation."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
from compiled import CANONICAL_EFFICIENT
from handmade_models import UNREAD, mask_allows, random_model, random_token_model, unread_head_model
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.transformer import sparse as sparse_module
from infoflow_dsl.transformer.lens import LENS_MISSING, hook_names, hooked
from infoflow_dsl.transformer.model import HOOK_SHAPES

BATCH = 16


def _inputs(model: ifl.CompiledTransformer, batch: int, length: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, length, model.d, generator=gen, dtype=torch.float64) * 2 - 1).to(model.dtype)


def _expected_shapes(model: ifl.CompiledTransformer, batch: int, length: int) -> dict[str, tuple[int, ...]]:
    """Each hook's shape from the weights (docs/design.md: rows N = T'+1, keys the T' tokens)."""
    n, dm = length + 1, model.d_model
    shapes = {"hook_embed": (batch, n, dm), "hook_pos_embed": (batch, n, dm)}
    for layer, block in enumerate(model.blocks):
        heads, _, width = block.attn.W_Q.shape
        values, hidden = block.attn.W_V.shape[2], block.mlp.W_in.shape[1]
        p = f"blocks.{layer}."
        shapes |= {p + n_: (batch, n, dm) for n_ in ("hook_resid_pre", "hook_attn_out", "hook_resid_mid",
                                                       "hook_mlp_out", "hook_resid_post")}
        shapes |= {p + "attn.hook_q": (batch, n, heads, width), p + "attn.hook_k": (batch, length, heads, width),
                   p + "attn.hook_v": (batch, length, heads, values),
                   p + "attn.hook_attn_scores": (batch, heads, n, length),
                   p + "attn.hook_pattern": (batch, heads, n, length), p + "attn.hook_z": (batch, n, heads, values),
                   p + "mlp.hook_pre": (batch, n, hidden), p + "mlp.hook_post": (batch, n, hidden)}
    return shapes


def _check_cache(model: ifl.CompiledTransformer, x: torch.Tensor) -> None:
    """Output bitwise model(x); every hook with its shape; pattern rows with keys sum to 1, others 0."""
    with torch.no_grad():
        output, cache = hooked(model).run_with_cache(x)
        plain = model(x)
    assert torch.equal(output, plain)
    length = x.shape[1]
    assert {name: tuple(cache[name].shape) for name in cache.keys()} == _expected_shapes(model, x.shape[0], length)
    assert sorted(cache.keys()) == sorted(hook_names(model.n_layers))
    for layer, heads in enumerate(model.config["layers"]):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"].to(torch.float64)  # (B, H, T'+1, T')
        for h, head in enumerate(heads["heads"]):
            for t in range(length + 1):
                has_key = any(mask_allows(head["mask"], s + 1, t + 1, length) for s in range(length))
                sums = pattern[:, h, t].sum(-1)
                torch.testing.assert_close(sums, torch.full_like(sums, float(has_key)), rtol=0, atol=1e-5)
    resid = cache[f"blocks.{model.n_layers - 1}.hook_resid_post"]
    assert torch.equal(model.readout(resid), plain)


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_examples_cache_every_hook_and_give_the_plain_output_bitwise(name):
    model = ifl.load(EXAMPLES_DIR / f"{name}.safetensors")
    _check_cache(model, _inputs(model, BATCH, model.T))
    if not model.exact_length_only and model.min_length < model.T:
        _check_cache(model, _inputs(model, BATCH, model.T - 1, seed=1))  # a shorter input


def test_a_model_holding_its_relu_matrices_sparse_caches_every_hook_and_its_hidden_units(monkeypatch):
    """Held sparse (the size threshold lowered): the same cache as the dense model, bit for bit, and
    a hook on the hidden units still acts on the output."""
    monkeypatch.setattr(sparse_module, "SPARSE_HOLD_SIZE", 64)
    model = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors")
    assert model.blocks[0].mlp.W_out.is_sparse  # 5.5% nonzero (W_in, 11%, stays dense)
    dense = ifl.CompiledTransformer(model.config, {n: t.to_dense() if t.is_sparse else t
                                                   for n, t in model.state_dict().items()}, sparse=False)
    x = _inputs(model, BATCH, model.T)
    _check_cache(model, x)
    with torch.no_grad():
        _, mine = hooked(model).run_with_cache(x)
        _, theirs = hooked(dense).run_with_cache(x)
        assert all(torch.equal(mine[name], theirs[name]) for name in theirs.keys())
        silenced = hooked(model).run_with_hooks(x, fwd_hooks=[("blocks.0.mlp.hook_post", lambda z, hook: z * 0)])
    assert not torch.equal(silenced, model(x))


def test_handmade_model_with_every_mask_kind_and_a_layer_without_heads():
    model = random_model(seed=2)  # 3 layers: 7 heads, 7 heads, none; an FFN of width 0; fully masked rows
    for length in (1, 4, 6):
        _check_cache(model, _inputs(model, 3, length, seed=length))


def test_hook_shapes_are_documented_for_every_hook():
    assert [n.removeprefix("blocks.0.") for n in hook_names(1)] == list(HOOK_SHAPES)


def test_activation_cache_helpers_apply():
    """decompose_resid sums to the stream, accumulated_resid stacks it, stack_head_results
    sums to the attention outputs (min_pairwise: one head per layer, no LayerNorm)."""
    model = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors").to(torch.float64)
    x = _inputs(model, 8, model.T)
    _, cache = hooked(model).run_with_cache(x)
    last = cache[f"blocks.{model.n_layers - 1}.hook_resid_post"]
    parts, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "pos_embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out"]
    torch.testing.assert_close(parts.sum(0), last, rtol=0, atol=1e-12)
    stacked = cache.accumulated_resid()
    assert torch.equal(stacked[0], cache["blocks.0.hook_resid_pre"]) and torch.equal(stacked[-1], last)
    heads = cache.stack_head_results()  # (layers × heads, B, T'+1, D)
    attn = sum(cache[f"blocks.{layer}.hook_attn_out"] for layer in range(model.n_layers))
    torch.testing.assert_close(heads.sum(0), attn, rtol=0, atol=1e-12)


def test_run_with_hooks_changes_the_output_and_leaves_no_hook_behind():
    model = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors")
    wrapped = hooked(model)
    x = _inputs(model, 4, model.T)
    zero = wrapped.run_with_hooks(x, fwd_hooks=[("blocks.1.attn.hook_z", lambda z, hook: torch.zeros_like(z))])
    torch.testing.assert_close(zero, torch.zeros_like(zero))  # the output reads only c2's value: 0
    assert torch.equal(wrapped(x), model(x))


def test_a_pattern_hook_that_edits_acts_on_the_output_and_one_that_reads_does_not():
    """z is the fused attention unless a hook replaces the scores or the pattern, or edits one in
    place: then z is that pattern times v (model.py, ``_attention``)."""
    model = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors")
    wrapped = hooked(model)
    x = _inputs(model, 4, model.T)
    name = "blocks.0.attn.hook_pattern"
    seen: list[torch.Tensor] = []
    read = wrapped.run_with_hooks(x, fwd_hooks=[(name, lambda p, hook: seen.append(p.clone()))])
    assert torch.equal(read, model(x)) and seen[0].shape[-1] == model.T  # reading leaves the bits alone

    def uniform(p: torch.Tensor, hook: object) -> torch.Tensor:
        return torch.full_like(p, 1.0 / p.shape[-1])

    def uniform_in_place(p: torch.Tensor, hook: object) -> None:
        p.fill_(1.0 / p.shape[-1])

    replaced = wrapped.run_with_hooks(x, fwd_hooks=[(name, uniform)])
    assert not torch.allclose(replaced, model(x), atol=0.1)  # a mean instead of a min: far off
    assert torch.equal(wrapped.run_with_hooks(x, fwd_hooks=[(name, uniform_in_place)]), replaced)
    # the explicit pattern times v, on the model's own pattern, is the fused attention up to rounding:
    # both are within the model's ε of the reference
    copied = wrapped.run_with_hooks(x, fwd_hooks=[(name, lambda p, hook: p.clone())])
    torch.testing.assert_close(copied, model(x), rtol=0, atol=2 * model.config["eps"])


def test_ablating_a_head_the_output_does_not_read_leaves_it_unchanged_bitwise():
    model = unread_head_model()
    wrapped = hooked(model)
    x = _inputs(model, 5, model.T)
    plain = model(x)

    def ablate(head: int):
        def hook(z: torch.Tensor, hook: object) -> torch.Tensor:
            z = z.clone()
            z[:, :, head] = 0.0  # (B, T'+1, H, V)
            return z
        return [("blocks.0.attn.hook_z", hook)]

    _, cache = wrapped.run_with_cache(x)
    assert cache["blocks.0.attn.hook_z"][:, :, 2].abs().amax() > 0.1  # the head is not idle ...
    ablated = wrapped.run_with_hooks(x, fwd_hooks=ablate(2))
    assert torch.equal(ablated, plain)  # ... but nothing reads coordinate UNREAD
    assert not torch.equal(wrapped.run_with_hooks(x, fwd_hooks=ablate(1)), plain)  # a read head matters
    assert UNREAD < model.d_model


def test_import_does_not_load_transformer_lens_and_hooked_names_the_extra_without_it():
    script = (
        "import sys, infoflow_dsl as ifl\n"
        "print('transformer_lens' in sys.modules)\n"
        "sys.modules['transformer_lens'] = None\n"  # as if not installed
        "m = ifl.load('compiled_examples/min_pairwise.safetensors')\n"
        "try:\n    ifl.hooked(m)\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=EXAMPLES_DIR.parent)
    assert out.stdout.splitlines() == ["False", LENS_MISSING]


def test_readme_interpretability_example_runs(monkeypatch, capsys):
    """The README's worked example (its asserts: c1 within its bound at every token, the patched
    output within the a-priori bound of the numpy prediction) runs as written."""
    text = (EXAMPLES_DIR.parent / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Interpretability.*?```python\n(.*?)```", text, re.DOTALL)
    assert block is not None
    monkeypatch.chdir(EXAMPLES_DIR.parent)
    exec(compile(block.group(1), "README.md", "exec"), {})
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "min_<t2> <x(t1), x(t2)> token blocks.0.hook_resid_post ('blocks.0.attn', 0)"


@pytest.mark.parametrize("per_token", [True, False])
def test_a_token_model_caches_every_hook_on_ids(per_token: bool) -> None:
    """run_with_cache on ids (B, T'): the output bitwise model(ids), every hook with its shape,
    hook_embed the table's rows W_E[ids] (cls on the readout row), d_vocab = V."""
    model = random_token_model(seed=9, per_token=per_token)
    assert hooked(model).cfg.d_vocab == 4
    for length in (1, 3, model.T):
        ids = torch.randint(0, 4, (BATCH, length), generator=torch.Generator().manual_seed(length))
        _check_cache(model, ids)
        _, cache = hooked(model).run_with_cache(ids)
        assert torch.equal(cache["hook_embed"][:, :length], model.embed.W_E[ids])
        assert torch.equal(cache["hook_embed"][:, length], model.embed.cls.expand(BATCH, -1))
