"""Reading a report page back, for tests: its two embedded JSON blocks (``report/html``)."""

from __future__ import annotations

import json
import re
from typing import Any

_BLOCK = r'<script type="application/json" id="{}">(.*?)</script>'


def page_block(page: str, element_id: str) -> Any:
    """The JSON value of the page's ``<script type="application/json" id=element_id>``, or None."""
    found = re.search(_BLOCK.format(re.escape(element_id)), page, flags=re.DOTALL)
    return None if found is None else json.loads(found.group(1))


def page_data(page: str) -> dict[str, Any]:
    return page_block(page, "ifl-data")


def page_measured(page: str) -> dict[str, Any] | None:
    return page_block(page, "ifl-measured")
