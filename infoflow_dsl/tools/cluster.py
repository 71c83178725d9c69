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

import os
import re
import socket
from pathlib import Path

from ..errors import SweepError

#: seconds a head's port gets to accept a TCP connection
CONNECT_TIMEOUT = 5.0

_ENDPOINT = re.compile(r"^(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})$")
_HINT = ("start one with `ray start --head` (its GCS address HOST:6379, or ray://HOST:10001 for Ray Client), "
         "or leave out --address for a local Ray with --workers CPUs")


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


def check_reachable(address: str) -> None:
    """SweepError unless the address's port accepts a TCP connection within CONNECT_TIMEOUT
    (``auto`` is left to Ray, which answers in seconds)."""
    endpoint = address_endpoint(address)
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
    """``ray.init``: a local Ray of ``workers`` CPUs (its workers import this very package), or
    the cluster at ``address`` (checked first). SweepError when Ray cannot start or join."""
    import ray

    try:
        if address is None:
            package_root = str(Path(__file__).resolve().parent.parent.parent)
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            check_reachable(address)
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except SweepError:
        raise
    except Exception as error:  # Ray raises ConnectionError, RuntimeError, TimeoutError, ValueError ...
        where = "a local Ray" if address is None else f"--address {address}"
        raise SweepError(f"{where}: Ray did not start: {type(error).__name__}: {error}"
                         + ("" if address is None else f"; {_HINT}")) from None
