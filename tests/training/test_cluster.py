"""tools/cluster.py: Ray's start-up notices stay out of a log (on a terminal they are shown)."""

from __future__ import annotations

import io
import logging

from infoflow_dsl.training.cluster import _notices_on_terminals_only

NOTICE = "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out."


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _logged(stderr: io.StringIO, monkeypatch) -> list[str]:
    """What Ray's token-authentication notice leaves with stderr ``stderr`` while Ray starts."""
    monkeypatch.setattr("sys.stderr", stderr)
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        with _notices_on_terminals_only():
            logger.warning(NOTICE)
        return seen
    finally:
        logger.removeHandler(handler)


def test_rays_token_notice_is_kept_out_of_a_log_and_shown_on_a_terminal(monkeypatch) -> None:
    before = logging.getLogger("ray._private.authentication").level
    assert _logged(io.StringIO(), monkeypatch) == []
    assert _logged(_Terminal(), monkeypatch) == [NOTICE]
    assert logging.getLogger("ray._private.authentication").level == before
