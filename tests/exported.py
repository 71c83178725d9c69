"""Shared helpers of the export tests: shipped examples in float64, exports read back, errors."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch
from compiled import model as compiled_model
from compiled import program
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.exporters.circuit import read_site
from infoflow_dsl.measure.vectors import errors_on, model_inputs
from infoflow_dsl.oracle.evaluate import retrieval_margin
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.transformer.model import CompiledTransformer
from infoflow_dsl.verify.sites import node_reference

SHIPPED = sorted(path.stem for path in EXAMPLES_DIR.glob("*.safetensors"))

#: the inputs an export test reads: EXPORT_SAMPLES random ones (WIDE_SAMPLES for the three widest
#: shipped examples, FFNs of 1,712 to 3,006 units), then EXPORT_CORNERS of the domain's corners
#: (the constant corner sequences among them). An export is exact (a gap ≤ 1e-12 on every input,
#: a property of the weights' mapping), so a few hundred inputs show it; bench/bench_export.py
#: measures every shipped example on 2,000.
EXPORT_SAMPLES = 150
WIDE_SAMPLES = {"intrinsic_4": 40, "intrinsic_5": 40, "intrinsic_6": 40}
EXPORT_CORNERS = 64


@cache
def shipped(name: str, dtype: torch.dtype = torch.float64) -> CompiledTransformer:
    """A shipped compiled example, its weights in ``dtype``."""
    model = ifl.load(EXAMPLES_DIR / f"{name}.safetensors", device="cpu")
    return model if model.dtype == dtype else CompiledTransformer(model.config, model.state_dict(), dtype=dtype)


def export_check_inputs(model: CompiledTransformer, name: str | None = None) -> torch.Tensor:
    """The inputs an export test checks ``model`` on (see EXPORT_SAMPLES), seed 5."""
    samples = WIDE_SAMPLES.get(name, EXPORT_SAMPLES) if name else EXPORT_SAMPLES
    return model_inputs(program_of(model), samples, seed=5, corners=EXPORT_CORNERS)


def export_and_load(model: CompiledTransformer, directory: Path) -> torch.nn.Module:
    """``ifl.export`` to ``directory``, read back through AutoModelForCausalLM (an ExportedModel)."""
    ifl.export(model, directory)
    return ifl.load_exported(directory)


def largest_error(model: torch.nn.Module, compiled: CompiledTransformer, x: torch.Tensor) -> float:
    """The largest error against the reference over the inputs the guarantee covers."""
    error, kept = errors_on(model, program_of(compiled), x)
    return float(error[kept].max())


def largest_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| over the defined entries (a per-token target's undefined positions are NaN in both)."""
    assert torch.equal(a.isnan(), b.isnan())
    return float((a - b).abs().nan_to_num().max())


def float32_export_gap(directory: Path, **options) -> tuple[float, float]:
    """(|float32 export − float64 model|, |float32 model − float64 model|), largest over 300 inputs
    of min_pairwise, the export written to ``directory`` with ``options`` (``ifl.export``'s)."""
    model32, model64 = shipped("min_pairwise", torch.float32), shipped("min_pairwise")
    ifl.export(model32, directory, **options)
    exported = ifl.load_exported(directory)
    assert exported.dtype == torch.float32
    x = model_inputs(program_of(model64), 300, seed=7)
    with torch.no_grad():
        y, y32, y64 = exported(x).double(), model32(x.float()).double(), model64(x)
    return largest_gap(y, y64), largest_gap(y32, y64)


def bridge_cache(bridge: torch.nn.Module, directory: Path, x: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """(logits, cache) of a TransformerLens bridge's ``run_with_cache`` on the export's inputs for x."""
    arguments = ifl.export_inputs(directory, x)
    with torch.no_grad():
        return bridge.run_with_cache(arguments["inputs_embeds"], attention_mask=arguments["attention_mask"])


def table_model(name: str, route: str) -> CompiledTransformer:
    """A table program compiled at ε = 1e-2 in float64 by ``route``: wide, deep or gather."""
    if route == "gather":
        return ifl.compile(program(name, 4), eps=1e-2, dtype="float64", samples=0, allow_inefficient=True)
    return compiled_model(name, 1e-2, "float64", ffn=route)


def assert_comparison_nodes_at_their_hooks(info: dict, cache, model: CompiledTransformer, x: torch.Tensor,
                                           empty_rows: bool = False) -> None:
    """Every comparison node of ``info["circuit"]``, read at its hook from a run_with_cache
    ``cache`` on x, equals the reference within the node's bound (on the inputs the guarantee
    covers); each row of the node's head's pattern sums to 1 (or, with ``empty_rows``, to exactly
    0: a query with no allowed key, in an export without a sink)."""
    target = program_of(model)
    kept = torch.ones(x.shape[0], dtype=torch.bool)
    if target.margin is not None:
        kept = retrieval_margin(target, x) >= target.margin
    reference = node_reference(target, x)
    nodes = [record for record in info["circuit"] if record["kind"] == "comparison"]
    assert {r["name"].partition("[")[0] for r in nodes} == set(reference)
    for record in nodes:
        node, _, component = record["name"].partition("[")
        want = reference[node] if not component else reference[node][..., int(component[:-1]) - 1]
        got = read_site(record, cache[record["hook"]])
        if record["site"] == "token" and want.dim() == 1:
            want = want[:, None].expand_as(got)
        covered = kept if kept.dim() == want.dim() else kept.reshape(-1, *[1] * (want.dim() - 1)).expand_as(want)
        defined = torch.isfinite(want) & covered
        assert float((got - want)[defined].abs().max()) <= record["bound"], record["name"]
        head = record["head"]
        pattern = cache[head["hook_z"].replace("hook_z", "hook_pattern")][:, head["index"]]  # (B, N, N)
        sums = pattern.sum(-1)  # (B, N)
        ones = torch.isclose(sums, torch.ones((), dtype=sums.dtype))
        assert bool((ones | (sums == 0)).all() if empty_rows else ones.all())


class AsModel(torch.nn.Module):
    """A function of x (B, T', d) -> y as a model :func:`errors_on` measures (CPU, float64;
    ``d_model`` sizes its batches)."""

    def __init__(self, function, d_model: int = 256) -> None:
        super().__init__()
        self.function = function
        self.device, self.dtype, self.d_model = torch.device("cpu"), torch.float64, d_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.function(x)
