"""One call to a Prefect server's REST API, for tests that read what a run left there."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

#: Answers Prefect's own client retries; the server gives 503 when its SQLite store stays
#: locked, which a loaded machine makes likely.
RETRIED = frozenset({429, 502, 503})


def prefect_api(
    url: str, path: str, body: dict[str, Any] | None = None, retry_s: float = 60
) -> Any:
    """POST ``body`` (GET without one) to ``url + path`` and return the decoded answer,
    retrying the answers in :data:`RETRIED` for up to ``retry_s``."""
    data = None if body is None else json.dumps(body).encode()
    deadline = time.monotonic() + retry_s
    while True:
        req = urllib.request.Request(
            f"{url}{path}", data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            if err.code not in RETRIED or time.monotonic() > deadline:
                raise
            time.sleep(1)
