"""Reading a job's REST API in tests on Ray: GET as JSON, and polling until the API serves
what a test waits for (metrics reach the job master with the heartbeats)."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, Callable

import pytest

__all__ = ["get_json", "until_served"]


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def until_served(fetch: Callable[[], Any], test: Callable[[Any], Any], what: str,
                 timeout_s: float = 90.0) -> Any:
    """Poll ``fetch()`` until ``test(value)`` is truthy and return that; fail naming
    ``what`` with the last value served."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = fetch()
        found = test(last)
        if found:
            return found
        time.sleep(0.2)  # (polling the API; the assertion is on what it serves)
    pytest.fail(f"{what}: not served within {timeout_s:.0f} s; last: {str(last)[:800]}")
