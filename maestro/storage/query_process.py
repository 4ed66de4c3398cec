"""Run one checked lake query in a child process, bounded in time and memory.

The SQL gate (``sql.py``) decides *what* a query may read; this bounds what a query that passes
may *cost*. polars runs a query in the caller's process with no deadline and no memory bound: an
8-way self cross join runs for hours, ``rpad(x, 50000000, 'x')`` allocates 50 MB a row, and
some inputs make polars panic (a ``PanicException``, which ``except Exception`` does not catch)
or crash. So the query runs in a fresh interpreter (``subprocess`` with exec: never a fork of
this process, which may hold deltalake's threads) with ``RLIMIT_DATA`` at ``memory_mb``, killed
at ``timeout_s``, killed with this process (``PR_SET_PDEATHSIG``); its result comes back as an
Arrow IPC stream and every way it can end is a :class:`QueryFailed` naming it.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

CHILD = Path(__file__).with_name("_query_child.py")
ERROR_EXIT = 3
STDERR_TAIL_CHARS = 2000


class QueryFailed(Exception):
    """A query that passed the gate did not give a result: an error polars reported, its
    deadline, its memory limit, or a crash; the message says which."""


@dataclass(frozen=True)
class QueryLimits:
    """What one query may cost: wall seconds from its start, MiB of data memory, and MiB of
    result (Arrow IPC) it may send back."""

    timeout_s: float = 20.0
    memory_mb: int = 1024
    result_mb: int = 64


@dataclass(frozen=True)
class TableSource:
    """Where the child finds one table: a Delta table's URI, or, for a table never written,
    its declared columns (an empty Arrow table)."""

    uri: str | None = None
    empty: pl.DataFrame | None = None

    def to_json(self) -> dict[str, str]:
        if self.uri is not None:
            return {"uri": self.uri}
        assert self.empty is not None
        buffer = io.BytesIO()
        self.empty.write_ipc_stream(buffer)
        return {"empty_ipc": base64.b64encode(buffer.getvalue()).decode("ascii")}


def run_query(
    sql: str,
    tables: Mapping[str, TableSource],
    storage_options: Mapping[str, str] | None,
    limits: QueryLimits,
) -> pl.DataFrame:
    """The result of ``sql`` (already checked by the gate) over ``tables``, computed in a child
    process; :class:`QueryFailed` otherwise."""
    request = json.dumps(
        {
            "parent": os.getpid(),
            "memory_mb": limits.memory_mb,
            "result_mb": limits.result_mb,
            "sql": sql,
            "tables": {name: source.to_json() for name, source in tables.items()},
            # The object store's credentials travel on the pipe, never in argv or the env.
            "storage_options": dict(storage_options) if storage_options else None,
        }
    ).encode()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed as one
            cwd="/",
            env={**os.environ, "RUST_BACKTRACE": "0"},
        )
    except OSError as exc:
        raise QueryFailed(f"the query process did not start: {exc}") from None
    try:
        # Both outputs are bounded: the child sends no result over ``result_mb`` (it sizes it
        # first), and its errors are one line.
        out, err = proc.communicate(request, timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        raise QueryFailed(
            f"it ran past its deadline of {limits.timeout_s:g} s and was stopped "
            "(a larger deadline: --timeout-s, or MAESTRO_LAKE_QUERY_TIMEOUT_S)"
        ) from None
    finally:
        _kill(proc)
    if proc.returncode == 0:
        try:
            return pl.read_ipc_stream(io.BytesIO(out))
        except Exception as exc:
            raise QueryFailed(f"the query process sent an unreadable result: {exc}") from None
    raise QueryFailed(_failure(proc.returncode, err.decode("utf-8", "replace"), limits))


def _failure(code: int, stderr: str, limits: QueryLimits) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    if code == ERROR_EXIT and lines and lines[-1].startswith("{"):
        with contextlib.suppress(ValueError, TypeError, KeyError):
            return str(json.loads(lines[-1])["error"])
    # What a crash printed first says what happened ("memory allocation of N bytes failed").
    first = lines[0][:STDERR_TAIL_CHARS] if lines else ""
    if code < 0:
        try:
            how = f"died of {signal.Signals(-code).name}"
        except ValueError:
            how = f"died of signal {-code}"
    else:
        how = f"exited with status {code}"
    said = f" ({first})" if first else ""
    return (
        f"the query process {how}{said}; it may use {limits.memory_mb} MiB "
        "(more: --memory-mb, or MAESTRO_LAKE_QUERY_MEMORY_MB)"
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
