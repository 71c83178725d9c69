"""A local Ray's processes end with the command that started them, however it ends.

``ray.init`` for ``--workers`` starts the GCS, the raylet, the workers and two agents. Ray ties
the first ones to the command (Linux's parent-death signal: they die with it, even under
``kill -9``), but not the agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``): they see
the raylet die at once, then wait a minute on a report to the GCS that is already gone, and
outlived a killed ``benchmark`` by minutes.

So beside a local Ray runs a watch: a small process in its own session (a Ctrl-C to the
command's process group does not reach it) that reads a pipe from the command. Meanwhile it
notes, every :data:`PERIOD` seconds, the raylet (the command's child named ``raylet``) and the
raylet's children (the agents and the workers), each with its start time. The pipe ends when
the command closes it after ``ray.shutdown`` or when the command dies, by any signal; the watch
then waits :data:`GRACE` seconds (Ray's own shutdown finishing) and kills, with SIGKILL, each
process noted that is still there (the same pid and start time: never a process that took a
noted pid over). Linux only (``/proc``); elsewhere there is no watch, and Ray's own clean-up is
all there is. (Ray rewrites its processes' command lines and environments, ``setproctitle``:
the family tree is what tells them.)
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: seconds the watch leaves Ray's own shutdown before it kills what is left
GRACE = 2.0
#: seconds between two looks at the command's Ray family
PERIOD = 1.0
PROC = Path("/proc")


def start_watch() -> subprocess.Popen[bytes] | None:
    """The watch over the local Ray this process has started (None without ``/proc``);
    :func:`stop_watch` after ``ray.shutdown``."""
    if not PROC.is_dir():
        return None
    return subprocess.Popen([sys.executable, "-m", __name__, str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_watch(watch: subprocess.Popen[bytes] | None) -> None:
    """End the pipe: the watch clears what Ray left and exits by itself."""
    if watch is not None and watch.stdin is not None:
        watch.stdin.close()


Process = tuple[int, int]  # (pid, start time in clock ticks after boot): one process, never its pid's next owner


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(name, parent pid, start time) of a process from /proc/PID/stat; None once it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
    return name, int(rest[1]), int(rest[19])  # fields 4 (ppid) and 22 (starttime) of proc(5)


def _children() -> dict[int, list[int]]:
    """Each process's children, as /proc has them now."""
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (found := _stat(int(entry.name))) is not None:
            tree.setdefault(found[1], []).append(int(entry.name))
    return tree


def ray_family(command: int) -> set[Process]:
    """The command's raylet and the raylet's children (agents, workers), with their start times."""
    tree = _children()
    raylets = [pid for pid in tree.get(command, []) if (_stat(pid) or ("",))[0] == "raylet"]
    family = set()
    for pid in [*raylets, *(child for raylet in raylets for child in tree.get(raylet, []))]:
        found = _stat(pid)
        if found is not None:
            family.add((pid, found[2]))
    return family


def watch(command: int, stream: Any = None) -> list[int]:
    """The watch itself: note the command's Ray family until the pipe ends, then GRACE seconds
    later SIGKILL each noted process still there; the pids killed."""
    stream = stream or sys.stdin.buffer
    noted = ray_family(command)
    while not select.select([stream], [], [], PERIOD)[0]:
        noted |= ray_family(command)
    noted |= ray_family(command)  # the command closed the pipe: a last look (nothing, once it has died)
    while stream.read(4096):  # the pipe carries nothing: a read returns only at its end
        pass
    time.sleep(GRACE)
    killed = []
    for pid, started in sorted(noted):
        if (_stat(pid) or ("", 0, -1))[2] == started:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
    return killed


if __name__ == "__main__":
    watch(int(sys.argv[1]))
