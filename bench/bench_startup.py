"""Benchmark: start-up of ``import infoflow_dsl`` and of the light CLI commands, as wall time.

    python bench/bench_startup.py            # writes its section of BENCHMARKS.md

Each command runs in a fresh process (stdout to /dev/null), the commands taking turns each
round, best of REPEATS rounds after one untimed warm-up round (which also writes the bytecode
caches, as an installed package has them: PYTHONDONTWRITEBYTECODE is dropped). Beside the wall
time: the child's CPU time (user + system, less inflated by other processes on a shared
machine), the ratio to ``python -c pass``, and the same command on the package at BASELINE
(read from git), where every command imported torch.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from report import write_section

BASELINE = "a6f9cb8"  # the package before the lazy imports: every command imported torch
ROOT = Path(__file__).resolve().parent.parent
REPEATS = 10
LIMIT = 0.5  # seconds of wall time the light commands must stay under (issue 24)
EXAMPLE = str(ROOT / "compiled_examples" / "min_pairwise.iflow")


def console_command() -> list[str]:
    """The installed ``infoflowc`` script beside this Python, else ``python -m infoflow_dsl.cli.main``."""
    script = Path(sys.executable).parent / "infoflowc"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "infoflow_dsl.cli.main"]


#: (label, argv, held to LIMIT): the reference interpreter, the import, the light commands.
CASES: tuple[tuple[str, list[str], bool], ...] = (
    ("`python -c pass`", [sys.executable, "-c", "pass"], False),
    ("`python -c 'import infoflow_dsl'`", [sys.executable, "-c", "import infoflow_dsl"], True),
    ("`infoflowc --help`", [*console_command(), "--help"], True),
    (f"`infoflowc parse {Path(EXAMPLE).name}`", [*console_command(), "parse", EXAMPLE], True),
    (f"`infoflowc analyze {Path(EXAMPLE).name}`", [*console_command(), "analyze", EXAMPLE], True),
    (f"`infoflowc analyze --json {Path(EXAMPLE).name}`", [*console_command(), "analyze", "--json", EXAMPLE], True),
    ("`python -c 'import torch'`", [sys.executable, "-c", "import torch"], False),
)


@dataclass(frozen=True)
class Timing:
    """Best wall and CPU seconds of one command over the rounds."""

    wall: float
    cpu: float


def environment(package_root: Path) -> dict[str, str]:
    """The process environment with ``package_root`` first on the path and bytecode caches on."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(package_root)
    return env


def run_once(argv: Sequence[str], package_root: Path) -> Timing:
    """One fresh process on the package at ``package_root`` (also its working folder, which
    ``python -c`` puts first on the path): its wall time and its CPU time (user + system)."""
    env = environment(package_root)
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=package_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    with process.stderr or open(os.devnull, "rb") as stream:
        error = stream.read().decode()
    if process.returncode != 0 or error:
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}: {error}")
    return Timing(wall, usage.ru_utime + usage.ru_stime)


def measure(cases: Sequence[tuple[str, list[str], bool]], package_roots: Sequence[Path],
            repeats: int) -> list[list[Timing]]:
    """Per package root, per case: the best Timing of ``repeats`` rounds after a warm-up round;
    every (root, case) pair runs once per round, in turn."""
    best = [[Timing(float("inf"), float("inf")) for _ in cases] for _ in package_roots]
    for round_ in range(repeats + 1):
        for r, root in enumerate(package_roots):
            for c, (_, argv, _) in enumerate(cases):
                timing = run_once(argv, root)
                if round_ > 0:  # round 0 warms the caches
                    old = best[r][c]
                    best[r][c] = Timing(min(old.wall, timing.wall), min(old.cpu, timing.cpu))
    return best


def unpack_baseline(folder: Path) -> Path:
    """The package and grammar at BASELINE, unpacked into ``folder``."""
    archive = subprocess.run(["git", "archive", BASELINE, "infoflow_dsl", "grammar"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def render(cases: Sequence[tuple[str, list[str], bool]], now: list[Timing], before: list[Timing] | None,
           repeats: int) -> str:
    reference = now[0].wall
    header = "| command | wall (s) | / `python -c pass` | CPU (s) |"
    rule = "|---|---|---|---|"
    if before is not None:
        header += f" wall at {BASELINE} (s) | CPU at {BASELINE} (s) |"
        rule += "---|---|"
    lines = [header, rule]
    for c, (label, _, _) in enumerate(cases):
        row = f"| {label} | {now[c].wall:.3f} | {now[c].wall / reference:.1f} | {now[c].cpu:.3f} |"
        if before is not None:
            row += f" {before[c].wall:.3f} | {before[c].cpu:.3f} |"
        lines.append(row)
    held = [now[c].wall for c, (_, _, limited) in enumerate(cases) if limited]
    verdict = "every one under" if max(held) < LIMIT else "NOT every one under"
    machine = f"{platform.machine()}, {os.cpu_count()} logical cores, Python {platform.python_version()}"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    intro = (f"*Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine} (load average "
             f"{load} at the end: a shared machine).* Each command in a fresh process, stdout to /dev/null, the "
             f"commands in turn each round, best of {repeats} rounds after a warm-up round (bytecode caches "
             f"written, as installed). CPU: the child's user + system time. `import infoflow_dsl`, `--help`, "
             f"`parse` and `analyze` import no torch (tests/test_package.py, tests/cli/test_main.py); the light "
             f"commands' wall times: {verdict} {LIMIT} s (max {max(held):.3f} s).")
    return intro + "\n\n" + "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    repeats = int(arguments[0]) if arguments else REPEATS
    with tempfile.TemporaryDirectory(prefix="infoflow-baseline-") as folder:
        timings = measure(CASES, [ROOT, unpack_baseline(Path(folder))], repeats)
    write_section("Start-up (bench/bench_startup.py)", render(CASES, timings[0], timings[1], repeats))


if __name__ == "__main__":
    main()
