"""Ray for ``sweep``: a local Ray, or a cluster joined at ``--address``, refused in seconds.

An address is one of the forms ``ray.init`` takes:

- ``auto``: the cluster this machine runs (Ray finds it through ``RAY_ADDRESS`` or the head
  started here by ``ray start --head``);
- ``HOST:PORT``: a head's GCS port (``ray start --head`` prints it, 6379 by default), the driver
  joining the cluster as a node would;
- ``ray://HOST:PORT``: the head's Ray Client server (port 10001 by default), from a machine
  outside the cluster (the ``ray`` extra installs ``ray[client]`` for it).

Before ``ray.init`` is called, a ``HOST:PORT`` or ``ray://`` address must accept a TCP
connection within :data:`CONNECT_TIMEOUT` seconds: Ray itself waits a minute or more for a head
that is not there (a GCS address with nothing listening blocks for minutes). Every failure is a
:class:`~infoflow_dsl.errors.SweepError` that names the address and what to do, raised before
the sweep's folder is made.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..errors import SweepError

#: seconds a head's port gets to accept a TCP connection
CONNECT_TIMEOUT = 5.0
Job = TypeVar("Job")
Result = TypeVar("Result")

_ENDPOINT = re.compile(r"^(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})$")
_HINT = ("start one with `ray start --head` (its GCS address HOST:6379, or ray://HOST:10001 for Ray Client), "
         "or leave out --address for a local Ray with --workers CPUs")
_LOCAL_HINT = ("--workers 1 runs in this process without Ray; `ray stop` ends a Ray left running on this machine, "
               "and Ray's logs are in its temp folder (/tmp/ray/session_latest/logs by default)")


def address_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``HOST:PORT`` or ``ray://HOST:PORT`` address; None for ``auto``.
    Anything else is a SweepError."""
    if address == "auto":
        return None
    match = _ENDPOINT.match(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise SweepError(f"--address {address!r}: expected auto, HOST:PORT (a head's GCS port) or "
                         f"ray://HOST:PORT (its Ray Client port)")
    return match["host"].strip("[]"), int(match["port"])


def named_head(address: str) -> str:
    """The head ``address`` names: itself, or for ``auto`` the one ``RAY_ADDRESS`` names, else
    the last head ``ray start --head`` started on this machine (the address file in Ray's temp
    folder). Ray's own ``auto`` would, failing both, join any Ray running here (a local Ray of
    another command) and wait a minute on a head long gone; here it is a SweepError at once."""
    if address != "auto":
        return address
    named = os.environ.get("RAY_ADDRESS", "")
    if named and named != "auto":
        return named
    from ray._private.utils import read_ray_address

    found = read_ray_address()
    if not found:
        raise SweepError(f"--address auto: no Ray head was started on this machine (no RAY_ADDRESS, no address "
                         f"file of `ray start --head`); {_HINT}")
    return found


def check_reachable(address: str) -> None:
    """SweepError unless the address's port accepts a TCP connection within CONNECT_TIMEOUT
    (``auto``: the head :func:`named_head` finds)."""
    endpoint = address_endpoint(named_head(address))
    if endpoint is None:
        return
    try:
        with socket.create_connection(endpoint, timeout=CONNECT_TIMEOUT):
            pass
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else (error.strerror or str(error))
        raise SweepError(f"--address {address}: no Ray head answers at {endpoint[0]}:{endpoint[1]} ({reason}); "
                         f"{_HINT}") from None


def start_ray(workers: int, address: str | None) -> None:
    """``ray.init``: a fresh local Ray of ``workers`` CPUs (its workers import this very package),
    or the cluster at ``address`` (checked first). SweepError when Ray cannot start or join.

    Without ``--address`` the local Ray is asked for by name (``address="local"``): a bare
    ``ray.init`` would follow ``RAY_ADDRESS`` or the address file of the last ``ray start`` on
    this machine (``ray_current_cluster`` in Ray's temp folder), even a head long gone, and then
    refuse ``num_cpus`` for an existing cluster."""
    import ray

    try:
        if address is None:
            package_root = str(Path(__file__).resolve().parent.parent.parent)
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
            with _notices_on_terminals_only():
                ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
        else:
            check_reachable(address)
            with _notices_on_terminals_only():
                ray.init(address=named_head(address), log_to_driver=False, configure_logging=False)
    except SweepError:
        raise
    except Exception as error:  # Ray raises ConnectionError, RuntimeError, TimeoutError, ValueError ...
        where = "a local Ray" if address is None else f"--address {address}"
        hint = _LOCAL_HINT if address is None else _HINT
        raise SweepError(f"{where}: Ray did not start: {type(error).__name__}: {_first_line(error)}; {hint}") from None


def _first_line(error: BaseException) -> str:
    """The first line of Ray's message (some carry a whole traceback of Ray's own after it)."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")


#: Ray's loggers whose notices at start-up ("Token authentication is enabled for this Ray
#: cluster ...") are for a person at a terminal, not for a log file
_NOTICES = ("ray._private.authentication",)


@contextlib.contextmanager
def _notices_on_terminals_only() -> Iterator[None]:
    """Ray's start-up notices (:data:`_NOTICES`) shown on a terminal and kept out of a log:
    below ERROR they are dropped while Ray starts when stderr is not a terminal."""
    quiet = not getattr(sys.stderr, "isatty", lambda: False)()
    loggers = [logging.getLogger(name) for name in _NOTICES] if quiet else []
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def ray_map(function: Callable[[Job], Result], jobs: Sequence[Job], workers: int, address: str | None,
            gpus: float = 0.0) -> Iterator[tuple[Job, Result]]:
    """``function(job)`` for every job as a Ray task (one CPU, ``gpus`` of a GPU), yielded
    (job, result) as they finish, on a local Ray of ``workers`` CPUs or the cluster at
    ``address`` (:func:`start_ray`); Ray is shut down after the last one or an error."""
    import ray

    if not jobs:
        return
    start_ray(workers, address)
    from .ray_watch import start_watch, stop_watch

    watch = start_watch() if address is None else None  # a local Ray ends with this process (:mod:`.ray_watch`)
    try:
        task = ray.remote(num_cpus=1, num_gpus=gpus)(function)
        pending = {task.remote(job): job for job in jobs}
        where = "a local Ray" if address is None else f"--address {address}"
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ready[0])
            yield job, task_result(ray.get, ready[0], where)
    finally:
        ray.shutdown()
        stop_watch(watch)


def task_result(get: Callable[[Any], Any], ref: Any, where: str) -> Any:
    """A finished Ray task's result (``get(ref)``). A run's own error passes as the run raised
    it; a failure of Ray itself (a raylet or a node that died, a cluster torn down under the
    run) is a SweepError, exit 2: the runs finished before it are on disk, and the same
    command resumes from them."""
    from ray.exceptions import RayError, RayTaskError

    try:
        return get(ref)
    except RayTaskError:
        raise
    except RayError as error:
        raise SweepError(f"{where}: Ray failed during the run ({type(error).__name__}: {error}); the runs "
                         f"finished so far are kept: run the same command to resume") from None
