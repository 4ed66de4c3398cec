"""Tool calls per second over MCP (streamable HTTP) against in-process ``Toolkit.call``.

The server runs as users run it (``maestro serve-mcp DOMAIN``, its own process) and the SDK's
client calls one read tool of a library domain, sequentially on one session and then from
several concurrent sessions. The in-process figure is the same call on a session, in a loop.
Prints a JSON object last.

    .venv/bin/python bench/mcp.py [--domain hotel] [--calls 1000] [--clients 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

# This script is named like the MCP SDK's package; keep its folder off the import path so that
# ``import mcp`` finds the SDK and not this file.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from mcp import Client  # noqa: E402

from maestro.domains import library_path, load_domain  # noqa: E402
from maestro.domains.mcp_server import free_port  # noqa: E402

MAESTRO = str(Path(sys.executable).with_name("maestro"))
CALLS = {"hotel": ("get_reservation", {"reservation_id": "R30057"})}


def pick_call(domain_id: str) -> tuple[str, dict[str, Any]]:
    """A read call that succeeds on the domain's database: the first gold read of a task."""
    if domain_id in CALLS:
        return CALLS[domain_id]
    domain = load_domain(library_path(domain_id), check_gold=False)
    for task in domain.tasks:
        for action in task.gold_actions:
            if domain.toolkit.kind(action.name) == "read" and not task.initial_state:
                return action.name, action.arguments
    raise SystemExit(f"{domain_id}: no gold read call to benchmark")


def inprocess(domain_id: str, name: str, args: dict[str, Any], calls: int) -> float:
    domain = load_domain(library_path(domain_id), check_gold=False)
    session = domain.start_session()
    assert domain.toolkit.call(session, name, args).ok
    started = time.perf_counter()
    for _ in range(calls):
        domain.toolkit.call(session, name, args)
    return calls / (time.perf_counter() - started)


async def over_mcp(url: str, name: str, args: dict[str, Any], calls: int, clients: int) -> float:
    async def one(n: int) -> None:
        async with Client(url, mode="legacy", read_timeout_seconds=10) as c:
            first = await c.call_tool(name, args, 10)
            assert not first.is_error, first.content
            for _ in range(n):
                await c.call_tool(name, args, 10)

    per = calls // clients
    started = time.perf_counter()
    await asyncio.gather(*(one(per) for _ in range(clients)))
    return per * clients / (time.perf_counter() - started)


def wait_up(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"serve-mcp exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1.0)
            return
        except urllib.error.HTTPError:  # any HTTP answer means it is listening
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"serve-mcp did not answer at {url} within {timeout_s:g} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", default="hotel")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    a = parser.parse_args()
    name, args = pick_call(a.domain)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = subprocess.Popen([MAESTRO, "serve-mcp", a.domain, "--port", str(port)])
    try:
        wait_up(url, proc)
        seq = asyncio.run(asyncio.wait_for(over_mcp(url, name, args, a.calls, 1), 300))
        par = asyncio.run(asyncio.wait_for(over_mcp(url, name, args, a.calls, a.clients), 300))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    local = inprocess(a.domain, name, args, a.calls * 10)
    result = {
        "domain": a.domain,
        "tool": name,
        "calls": a.calls,
        "mcp_calls_per_s": round(seq, 1),
        "mcp_calls_per_s_concurrent": round(par, 1),
        "mcp_clients": a.clients,
        "inprocess_calls_per_s": round(local, 1),
        "mcp_overhead_ms_per_call": round(1000 / seq - 1000 / local, 3),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
