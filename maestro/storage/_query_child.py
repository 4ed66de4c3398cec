"""The process one lake query runs in (``query_process.py`` starts it; run as a script).

It reads one request (JSON) from stdin, bounds its own memory, runs the checked query with polars
and writes the result to stdout as an Arrow IPC stream; on failure it writes ``{"error": ...}``
as the last line of stderr and exits 3. It is run by path, not as ``maestro.storage...``, so it
imports polars and nothing of maestro (``maestro.storage`` would import deltalake, pyarrow and
pydantic first: about a second more per query).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import io
import json
import os
import resource
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1
MAX_REQUEST_BYTES = 16 * 1024 * 1024
ERROR_EXIT = 3
#: Threads polars may use unless POLARS_MAX_THREADS says otherwise: each costs ~2 MiB of the
#: data limit, so on a large machine the limit would go to stacks instead of the query.
MAX_THREADS = 8


class ResultTooLarge(Exception):
    """The query's result is larger than the parent may be sent."""


def main() -> int:
    request = json.loads(sys.stdin.buffer.read(MAX_REQUEST_BYTES))
    _die_with(int(request["parent"]))
    memory = int(request["memory_mb"]) * 1024 * 1024
    # RLIMIT_DATA, not RLIMIT_AS: polars maps 1.7 GB of address space it never touches (shared
    # libraries, reserved arenas); the data limit counts the heap and anonymous mappings.
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.environ.setdefault("POLARS_MAX_THREADS", str(min(os.cpu_count() or 1, MAX_THREADS)))
    result = os.dup(1)
    os.dup2(2, 1)  # whatever a library prints goes to stderr, never into the result
    try:
        frame = _run(request)
        # The result is sized before a byte of it is sent: the parent holds what it is sent
        # (twice while decoding it), so a result of a gigabyte would be a gigabyte there.
        buffer = io.BytesIO()
        frame.write_ipc_stream(buffer)
        cap = int(request["result_mb"]) * 1024 * 1024
        if buffer.tell() > cap:
            raise ResultTooLarge(
                f"its result is {buffer.tell() / 2**20:,.1f} MiB ({frame.height:,} rows), over "
                f"the {request['result_mb']} MiB a query may return (add a LIMIT, select fewer "
                "columns, or more: --result-mb, or MAESTRO_LAKE_QUERY_RESULT_MB)"
            )
        with os.fdopen(result, "wb") as out:
            out.write(buffer.getbuffer())
    except BaseException as exc:  # a Rust panic (PanicException) is a BaseException
        if isinstance(exc, ResultTooLarge):
            message = str(exc)
        else:
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        sys.stderr.write("\n" + json.dumps({"error": message[:4000]}) + "\n")
        sys.stderr.flush()
        return ERROR_EXIT
    return 0


def _run(request: dict[str, Any]) -> Any:
    import polars as pl

    options = request.get("storage_options")
    frames: dict[str, pl.LazyFrame] = {}
    for name, source in request["tables"].items():
        if "uri" in source:
            frames[name] = pl.scan_delta(source["uri"], storage_options=options)
        else:  # never written: its declared columns, no rows
            empty = base64.b64decode(source["empty_ipc"])
            frames[name] = pl.read_ipc_stream(io.BytesIO(empty)).lazy()
    return pl.SQLContext(frames).execute(request["sql"], eager=False).collect()


def _die_with(parent: int) -> None:
    """SIGKILL this process when the one that started it dies (its thread waits on us, so the
    thread-scoped signal fires only with the process); exit now if that already happened."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(ERROR_EXIT)


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: polars' threads may still hold memory
