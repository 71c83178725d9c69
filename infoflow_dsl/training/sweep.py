"""``sweep``: a grid of ``train`` runs, in-process or as Ray tasks, resumable.

The grid is the product of its axes: head budgets (each with its number of layers), lengths T,
widths d_model, step counts and seeds; every other setting is shared. Each run has a key that
names all its settings; when a run finishes, its model is written (atomically) to
``DIR/models/<id>.safetensors`` and then its row is appended to ``DIR/results.csv`` (flush +
fsync), so a sweep killed at any moment loses at most the runs still in flight: started again
with the same flags, it skips every run whose key is in results.csv (a torn last line is
dropped) and runs the others. A row holds the run's best and last-step validation NMSE and the
last step's NMSE on inputs uniform on the declared domain (``declared_nmse``). At the end it
writes ``DIR/summary.md`` (per configuration the seed count, the best and median over the seeds
of each seed's best NMSE, analyze's verdict for that head budget, the compiled model's NMSE and
size for reference) and ``DIR/nmse.png``.

Runs of one shape (the same program, T, widths, layers, steps, batch, distribution; seeds, peak
learning rates and heads per layer may differ) train as one stacked model by default
(:mod:`.train_many`: each the same run as alone, to float rounding); ``--no-batch`` trains them
one after another. ``workers == 1`` runs in this process without Ray. Otherwise each group
is cut into ``workers`` parts (each still one stacked model) and each part (or run) is a Ray
task (one CPU, and a quarter of a GPU with ``--device cuda``):
``ray.init(address=...)`` joins an existing cluster (:mod:`.cluster`: the address is checked
and refused in seconds when no head answers), without an address a local Ray with ``workers``
CPUs is started. The folder is made by the first finished run: a sweep that cannot start
leaves nothing behind. A task gets the program's text (not its path) and returns the
model's bytes, so workers need the package but no shared disk.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import SweepError
from ..files import append_line, complete_lines, write_bytes_atomically
from ..language import typed as ir
from .train import Distribution, TrainSettings, draw_inputs, head_budget, model_nmse, validation_seed

COLUMNS = ["run", "config", "heads", "layers", "T", "d_model", "d_head", "d_mlp", "steps", "batch", "lr", "dist",
           "seed", "best_nmse", "best_step", "final_nmse", "declared_nmse", "parameters", "seconds", "cpu_seconds",
           "model"]
#: results.csv files of the earlier protocol (one ``nmse``: the last step's) still read and resume.
LEGACY_COLUMNS = (["run", "config", "heads", "layers", "T", "d_model", "d_head", "d_mlp", "steps", "batch", "lr",
                   "dist", "seed", "nmse", "parameters", "seconds", "model", "cpu_seconds"],
                  ["run", "config", "heads", "layers", "T", "d_model", "d_head", "d_mlp", "steps", "batch", "lr",
                   "dist", "seed", "nmse", "parameters", "seconds", "model"])


GPU_SHARE = 0.25  # with --device cuda, four runs share one GPU (the models are small)


# ---------------------------------------------------------------------------- the grid


@dataclass(frozen=True)
class Run:
    """One training run of the grid: the program's text at length ``length`` and its settings."""

    path: str
    source: str
    length: int
    settings: TrainSettings
    init: bytes | None = None

    @property
    def config_key(self) -> str:
        """Every setting but the seed: runs with the same config key are seeds of one configuration
        (a run started from an init model names the model's bytes by their SHA-1)."""
        s = self.settings
        init = f";init={hashlib.sha1(self.init).hexdigest()[:12]}" if self.init is not None else ""
        return (f"heads={','.join(map(str, s.heads))};T={self.length};d_model={s.d_model};d_head={s.d_head};"
                f"d_mlp={s.d_mlp};steps={s.steps};batch={s.batch};lr={s.lr:g};dist={s.dist}{init}")

    @property
    def key(self) -> str:
        return f"{self.config_key};seed={self.settings.seed}"

    @property
    def file_id(self) -> str:
        return hashlib.sha1(self.key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Grid:
    """The sweep's axes; ``base`` holds the shared settings (its heads and seed are replaced)."""

    heads: tuple[tuple[int, ...], ...]
    layers: tuple[int | None, ...]
    lengths: tuple[int, ...]
    d_models: tuple[int, ...]
    steps: tuple[int, ...]
    seeds: int
    base: TrainSettings


def expand(grid: Grid, path: str, source: str, init: bytes | None = None) -> list[Run]:
    """Every run of the grid, in a fixed order (configurations first, seeds innermost)."""
    runs: list[Run] = []
    budgets: list[tuple[int, ...]] = []
    for heads, layers in itertools.product(grid.heads, grid.layers):
        budget = head_budget(heads, layers)
        if budget not in budgets:
            budgets.append(budget)
    for budget, length, d_model, steps in itertools.product(budgets, grid.lengths, grid.d_models, grid.steps):
        for seed in range(grid.base.seed, grid.base.seed + grid.seeds):
            settings = replace(grid.base, heads=budget, d_model=d_model, steps=steps, seed=seed)
            runs.append(Run(path, source, length, settings, init))
    return runs


# ---------------------------------------------------------------------------- one run


def run_job(job: tuple[Sequence[Run], bool]) -> list[tuple[dict[str, Any], bytes]]:
    """:func:`run_group` of a (group, compile) pair: what a Ray task runs."""
    return run_group(*job)


def run_group(runs: Sequence[Run], compile: bool = False) -> list[tuple[dict[str, Any], bytes]]:
    """Train runs of one :func:`batch_groups` group, as one stacked model when there are several
    (``train_many``), else alone (``train``): each run's (row without the model path, model bytes).
    A batched run's ``seconds`` and ``cpu_seconds`` are the group's over its run count."""
    import torch

    from ..language.load import parse_program
    from ..transformer.io import model_from_bytes
    from .train import train
    from .train_many import train_many

    torch.set_num_threads(1)
    first = runs[0]
    program = parse_program(first.source, first.path, length=first.length)
    cpu_start = time.process_time()  # one thread: its wall time on a core of its own
    if len(runs) > 1:
        results = train_many(program, [run.settings for run in runs], quiet=True, compile=compile)
    else:
        init = model_from_bytes(first.init, device="cpu") if first.init is not None else None
        results = [train(program, first.settings, init, quiet=True)]
    cpu_seconds = (time.process_time() - cpu_start) / len(runs)
    return [_row_and_model(run, program, result, cpu_seconds) for run, result in zip(runs, results, strict=True)]


def _row_and_model(run: Run, program: ir.Program, result: Any, cpu_seconds: float) -> tuple[dict[str, Any], bytes]:
    from ..oracle.sampling import sample_inputs
    from ..transformer.io import model_to_bytes

    s = run.settings
    declared = sample_inputs(program, s.validation, seed=validation_seed(s.seed), device=s.device)
    declared_nmse = model_nmse(result.model, program, declared)  # the last step's model on the declared domain
    row = {"run": run.key, "config": run.config_key, "heads": ",".join(map(str, s.heads)), "layers": len(s.heads),
           "T": run.length, "d_model": s.d_model, "d_head": s.d_head, "d_mlp": s.d_mlp, "steps": s.steps,
           "batch": s.batch, "lr": f"{s.lr:g}", "dist": str(s.dist), "seed": s.seed,
           "best_nmse": f"{result.best_nmse:.6g}", "best_step": result.best_step,
           "final_nmse": f"{result.final_nmse:.6g}", "declared_nmse": f"{declared_nmse:.6g}",
           "nmse": f"{result.final_nmse:.6g}", "parameters": result.parameters, "seconds": f"{result.seconds:.1f}",
           "cpu_seconds": f"{cpu_seconds:.3f}"}
    return row, model_to_bytes(result.model)


def batch_groups(runs: Sequence[Run], batch: bool = True, parts: int = 1) -> list[list[Run]]:
    """The runs that train as one model (:func:`~.train_many.batch_key`, and the same program and
    T), in grid order of their first run, each group cut into ``parts`` consecutive groups of
    (nearly) equal size (so that ``parts`` workers each have one); each run alone with ``batch``
    False or ``--init``."""
    from .train_many import batch_key

    groups: dict[Any, list[Run]] = {}
    for index, run in enumerate(runs):
        key = batch_key(run.settings)
        shared = (run.path, run.source, run.length, key) if batch and key is not None else index
        groups.setdefault(shared, []).append(run)
    cut = []
    for group in groups.values():
        count = min(parts, len(group))
        cut += [group[i * len(group) // count:(i + 1) * len(group) // count] for i in range(count)]
    return cut


def best_of(row: dict[str, str]) -> float:
    """A row's best validation NMSE; a row of the earlier protocol recorded only its last step's."""
    return float(row.get("best_nmse") or row["nmse"])


def final_of(row: dict[str, str]) -> float:
    """A row's last-step validation NMSE (``nmse`` in the earlier protocol's files)."""
    return float(row.get("final_nmse") or row["nmse"])


# ---------------------------------------------------------------------------- results.csv


def read_results(path: Path) -> list[dict[str, str]]:
    """The finished rows of results.csv (none when absent). A torn last line (a sweep killed while
    appending) is cut off the file; a file with other columns is a SweepError."""
    data = complete_lines(path)
    reader = csv.DictReader(io.StringIO(data.decode("utf-8")))
    if data and reader.fieldnames not in (COLUMNS, *LEGACY_COLUMNS):
        raise SweepError(f"{path}: not a results file of this sweep (columns {reader.fieldnames})")
    return list(reader)


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append one row (the header first when the file is new), flushed and fsynced; a file of the
    earlier protocol keeps its columns (``nmse``: the last step's)."""
    new = not path.exists() or path.stat().st_size == 0
    columns = COLUMNS
    if not new:
        with open(path, encoding="utf-8") as stream:
            columns = next(csv.reader(stream), COLUMNS)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    if new:
        writer.writeheader()
    writer.writerow(row)
    append_line(path, text.getvalue())


def record(folder: Path, row: dict[str, Any], model: bytes, run: Run) -> None:
    """Write the run's model, then its row: a row in results.csv always has its model on disk.
    The folder is made here, by the first finished run (a sweep that fails to start leaves none)."""
    models = folder / "models"
    models.mkdir(parents=True, exist_ok=True)
    target = models / f"{run.file_id}.safetensors"
    write_bytes_atomically(target, model)
    append_row(folder / "results.csv", {**row, "model": f"models/{target.name}"})


# ---------------------------------------------------------------------------- execution


def execute(runs: Sequence[Run], folder: Path, workers: int = 1, address: str | None = None,
            on_finished: Callable[[dict[str, Any]], None] | None = None, batch: bool = True,
            compile: bool = False) -> list[dict[str, str]]:
    """Run every run not yet in ``folder/results.csv``; return all finished rows. A folder
    holding runs that are not of this grid is refused (SweepError): its summary would drop
    them; a grid that extends the folder's (more seeds, another T) resumes it. With ``batch``
    the runs of one shape train as one stacked model (:func:`batch_groups`; on Ray cut into
    ``workers`` tasks, each batched), else one after another; ``compile``: ``torch.compile`` for
    the stacked steps."""
    done = {row["run"] for row in read_results(folder / "results.csv")}
    foreign = done - {run.key for run in runs}
    if foreign:
        raise SweepError(f"{folder}: its results.csv holds {len(foreign)} run(s) of another grid; give another -o, "
                         f"or the flags of that sweep (or a grid that contains it) to resume it")
    todo = [run for run in runs if run.key not in done]
    in_process = workers == 1 and address is None
    jobs = [(group, compile) for group in batch_groups(todo, batch, 1 if in_process else workers)]
    finished = _in_process(jobs) if in_process else _with_ray(jobs, workers, address)
    for run, (row, model) in finished:
        record(folder, row, model, run)
        if on_finished is not None:
            on_finished(row)
    return read_results(folder / "results.csv")


Job = tuple[list[Run], bool]
Finished = Iterable[tuple[Run, tuple[dict[str, Any], bytes]]]


def _in_process(jobs: Sequence[Job]) -> Finished:
    for job in jobs:
        yield from zip(job[0], run_job(job), strict=True)


def _with_ray(jobs: Sequence[Job], workers: int, address: str | None) -> Finished:
    """Ray tasks, one a group, yielded as they finish (:func:`.cluster.ray_map`); on a GPU four
    tasks share one."""
    from .cluster import ray_map

    gpus = GPU_SHARE if jobs and jobs[0][0][0].settings.device.startswith("cuda") else 0.0
    for (group, _), results in ray_map(run_job, jobs, workers, address, gpus):
        yield from zip(group, results, strict=True)


# ---------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class ConfigSummary:
    """One configuration's line in summary.md."""

    config: str
    heads: str
    length: int
    d_model: int
    steps: int
    nmse: tuple[float, ...]  # each finished seed's best validation NMSE, in seed order
    final: tuple[float, ...]  # each finished seed's last-step validation NMSE, in seed order
    parameters: int
    verdict: str

    @property
    def best(self) -> float:
        """The best over the seeds of each seed's best validation NMSE."""
        return min(self.nmse)

    @property
    def median(self) -> float:
        """The median over the seeds of each seed's best validation NMSE."""
        return statistics.median(self.nmse)


@dataclass(frozen=True)
class CompiledReference:
    """The compiled model at one T: its NMSE on the declared domain and its size."""

    length: int
    eps: float
    nmse: float | None
    parameters: int | None
    nonzero: int | None
    note: str


def summarise(rows: Sequence[dict[str, str]], runs: Sequence[Run],
              verdict: Callable[[tuple[int, ...], int], str]) -> list[ConfigSummary]:
    """One summary per configuration of ``runs`` (grid order) that has finished rows."""
    by_config: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_config.setdefault(row["config"], []).append(row)
    out: list[ConfigSummary] = []
    seen: set[str] = set()
    for run in runs:
        if run.config_key in seen or run.config_key not in by_config:
            continue
        seen.add(run.config_key)
        found = sorted(by_config[run.config_key], key=lambda r: int(r["seed"]))
        s = run.settings
        out.append(ConfigSummary(config=run.config_key, heads=",".join(map(str, s.heads)), length=run.length,
                                 d_model=s.d_model, steps=s.steps, nmse=tuple(best_of(r) for r in found),
                                 final=tuple(final_of(r) for r in found), parameters=int(found[0]["parameters"]),
                                 verdict=verdict(s.heads, run.length)))
    return out


def analyze_verdict(program_at: Callable[[int], ir.Program]) -> Callable[[tuple[int, ...], int], str]:
    """analyze's verdict for a head budget at a length (cached)."""
    from functools import cache

    from ..pipeline.analyzing import analyze

    @cache
    def verdict(heads: tuple[int, ...], length: int) -> str:
        return analyze(program_at(length), heads).verdict

    return verdict


def compiled_reference(program: ir.Program, base: TrainSettings, eps: float) -> CompiledReference:
    """Compile at ``eps`` (when analyze calls the target efficient) and measure its NMSE on
    inputs uniform on the declared domain, where its guarantee holds."""
    from ..errors import CompileError
    from ..pipeline.analyzing import analyze
    from ..pipeline.compiling import compile_program

    report = analyze(program)
    if report.verdict != "efficient":
        return CompiledReference(program.length, eps, None, None, None, "not compiled: analyze calls it inefficient")
    try:
        model = compile_program(program, eps=eps, dtype="float64", device="cpu", samples=0)
    except CompileError as error:
        return CompiledReference(program.length, eps, None, None, None, f"not compiled: {error}")
    x = draw_inputs(program, Distribution(), base.validation, validation_seed(base.seed))  # the declared domain
    return CompiledReference(program.length, eps, model_nmse(model, program, x), model.parameter_count(),
                             model.nonzero_parameter_count(), "")


def render_summary(title: str, protocol: str, configs: Sequence[ConfigSummary],
                   references: Sequence[CompiledReference]) -> str:
    """summary.md: the protocol, one table row per configuration, the compiled references."""
    lines = [f"# Sweep: {title}", "", protocol, "",
             "NMSE per seed: its best validation point; best and median over the seeds; last step: the median "
             "over the seeds of the last step's NMSE.", "",
             "| heads | T | d_model | steps | seeds | best NMSE | median NMSE | last step (median) | parameters | "
             "analyze verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in configs:
        lines.append(f"| {c.heads} | {c.length} | {c.d_model} | {c.steps} | {len(c.nmse)} | {c.best:.3g} | "
                     f"{c.median:.3g} | {statistics.median(c.final):.3g} | {c.parameters} | {c.verdict} |")
    lines += ["", "Compiled model for reference (NMSE on inputs uniform on the declared domain, where its "
              "guarantee holds):", "",
              "| T | ε | NMSE | parameters | nonzero | note |", "|---|---|---|---|---|---|"]
    for r in references:
        shown = f"{r.nmse:.3g}" if r.nmse is not None else "—"
        lines.append(f"| {r.length} | {r.eps:g} | {shown} | {r.parameters or '—'} | {r.nonzero or '—'} | "
                     f"{r.note} |")
    return "\n".join(lines) + "\n"


def plot_nmse(title: str, configs: Sequence[ConfigSummary], path: Path) -> None:
    """nmse.png: each seed's NMSE (dots) and the best (bar) per configuration, log scale, coloured
    by analyze's verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"efficient": "#2ca02c", "inefficient": "#d62728"}
    figure, axes = plt.subplots(figsize=(max(4.0, 1.1 * len(configs) + 2.0), 4.0), dpi=100)
    for i, c in enumerate(configs):
        color = colors.get(c.verdict, "#7f7f7f")
        axes.bar(i, c.best, color=color, alpha=0.6, width=0.6)
        axes.scatter([i] * len(c.nmse), c.nmse, color="black", s=10, zorder=3)
    axes.set_yscale("log")
    axes.set_xticks(range(len(configs)))
    axes.set_xticklabels([f"h={c.heads}\nT={c.length}\nE={c.d_model}" for c in configs], fontsize=7)
    axes.set_ylabel("validation NMSE (best: bar, seeds: dots)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=color, alpha=0.6, label=f"analyze: {name}")
               for name, color in colors.items()]
    axes.legend(handles=handles, fontsize=7, frameon=False)
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(figure)
    write_bytes_atomically(path, buffer.getvalue())


def protocol_text(grid: Grid) -> str:
    b = grid.base
    init = f", started from `{b.init}` (`--init`)" if b.init else ""
    return (f"Protocol: AdamW (lr {b.lr:g}, weight decay {b.weight_decay:g}), linear warm-up over 5% of the steps "
            f"then cosine decay, batch {b.batch}, fresh inputs each step from `{b.dist}`, targets standardised "
            f"(mean and standard deviation of a fixed draw; the NMSE is unchanged by it), d_head {b.d_head}, "
            f"d_mlp {b.d_mlp}{init}, {grid.seeds} seed(s) from {b.seed}, validation NMSE on {b.validation} "
            f"held-out inputs at step 0 and 20 points over the run.")


def finish(folder: Path, title: str, grid: Grid, runs: Sequence[Run], rows: Sequence[dict[str, str]],
           program_at: Callable[[int], ir.Program], compare_eps: float) -> list[ConfigSummary]:
    """Write summary.md and nmse.png for the finished rows."""
    configs = summarise(rows, runs, analyze_verdict(program_at))
    references = [compiled_reference(program_at(length), grid.base, compare_eps) for length in grid.lengths]
    text = render_summary(title, protocol_text(grid), configs, references)
    folder.mkdir(parents=True, exist_ok=True)
    write_bytes_atomically(folder / "summary.md", text.encode("utf-8"))
    plot_nmse(title, configs, folder / "nmse.png")
    return configs
