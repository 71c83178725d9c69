"""tools/ray_watch.py: a local Ray's processes end within seconds of the command that started
it, even when that command is killed with SIGKILL (Ray's agents outlived it by minutes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from infoflow_dsl.training.ray_watch import GRACE, _stat, ray_family

ROOT = Path(__file__).resolve().parents[2]
#: a driver whose two Ray tasks sleep: killed while they run
DRIVER = """
import time
from infoflow_dsl.training.cluster import ray_map

def nap(n):
    time.sleep(120)
    return n

for _ in ray_map(nap, [1, 2], 2, None):
    pass
"""


def _alive(process: tuple[int, int]) -> bool:
    found = _stat(process[0])
    return found is not None and found[2] == process[1] and not _zombie(process[0])


def _zombie(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_killed_command_leaves_no_ray_process_behind(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline, family = time.monotonic() + 90, set()
        while time.monotonic() < deadline and len(family) < 5:  # the raylet, two agents, two workers
            time.sleep(0.5)
            family = ray_family(driver.pid)
        assert len(family) >= 5, family
        time.sleep(3)  # the watch (started as the tasks were) has looked at least once
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    deadline = time.monotonic() + GRACE + 8
    while time.monotonic() < deadline and any(_alive(p) for p in family):
        time.sleep(0.5)
    left = [p for p in family if _alive(p)]
    for pid, _ in left:  # the test's own clean-up, whatever it found
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} of Ray's processes outlived the killed command"
