"""A machine that once ran ``ray start --head``: ``RAY_ADDRESS`` and Ray's address file (its temp
folder's ``ray_current_cluster``) both naming a head that no longer answers."""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed when the socket is: nothing listens there


@contextlib.contextmanager
def dead_ray_head(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """RAY_ADDRESS and a stale ``RAY_TMPDIR/ray/ray_current_cluster`` at a port where nothing
    listens (a short temp folder: Ray's socket paths have a length limit); the dead address.
    Token authentication is off, as for every Ray the tests start in their own process: Ray
    keeps a process's first authentication mode, and a local Ray started with the mode unset
    (token by default) after one with it disabled fails to start its GCS."""
    folder = Path(tempfile.mkdtemp(prefix="ifl-dead-", dir="/tmp"))
    address = f"127.0.0.1:{_closed_port()}"
    (folder / "ray").mkdir()
    (folder / "ray" / "ray_current_cluster").write_text(address, encoding="utf-8")
    monkeypatch.setenv("RAY_TMPDIR", str(folder))
    monkeypatch.setenv("RAY_ADDRESS", address)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as every in-process Ray of the tests: see tests/tools/test_sweep
    try:
        yield address
    finally:
        shutil.rmtree(folder, ignore_errors=True)
