"""Cost of a tool call in the sandbox against the same call in process, on a library domain.

Three workloads on the same domain loaded both ways: a read call repeated on one session (one
round trip to the child, nothing to sync; an empty request gives the round trip's floor), the
gold replay of every task (fresh sessions, reads and writes: the sync of writes both ways, each
write checked by the host), and the child's start and restart. ``--all-tasks`` also replays
every library task (90) in the sandbox and in process and counts those whose final state hash or
outcomes differ. Prints a JSON object last; ``sandbox_call_us`` and ``inprocess_call_us`` are
the read call.

    .venv/bin/python bench/sandbox.py [--domain vetclinic] [--calls 2000] [--repeat 5] [--all-tasks]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any

from maestro.domains import Domain, library_ids, library_path, load_domain, replay_gold
from maestro.domains.sandbox import SandboxToolkit, load_sandboxed_domain
from maestro.domains.sandbox.toolkit import call_caps

READ_CALLS = {
    "vetclinic": ("get_owner", {"owner_id": "C1001"}),
    "energy": ("get_customer", {"customer_id": "CU1001"}),
    "hotel": ("list_hotels", {}),
}


def per_call_us(domain: Domain, name: str, args: dict[str, Any], calls: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean time of one call, in microseconds."""
    session = domain.start_session()
    first = domain.toolkit.call(session, name, args)
    assert first.ok or name not in domain.toolkit.specs, f"{name} failed: {first.content}"
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            domain.toolkit.call(session, name, args)
        runs.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(runs)


def gold_replay_us(domain: Domain, repeat: int) -> tuple[float, int]:
    """Median time per gold call over whole replays of every task, and the calls per replay."""
    calls = sum(len(t.gold_actions) for t in domain.tasks)
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        for task in domain.tasks:
            result = replay_gold(domain, task)
            assert result.ok, result.failures
        runs.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(runs), calls


def floor_us(toolkit: SandboxToolkit, calls: int, repeat: int) -> float:
    """One checked round trip to the child that runs nothing (framing, JSON, two switches)."""
    process = toolkit._process
    assert process is not None
    caps = call_caps(toolkit.limits)
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            process.exchange({"op": "ping"}, timeout_s=5.0, caps=caps)
        runs.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(runs)


def all_tasks() -> dict[str, int]:
    """Every library task's gold replay, in the sandbox and in process: how many differ."""
    tasks = different = 0
    for domain_id in library_ids():
        reference = load_domain(library_path(domain_id), check_gold=False)
        with load_sandboxed_domain(library_path(domain_id), check_gold=False) as sandboxed:
            for task in reference.tasks:
                mine, theirs = replay_gold(sandboxed, task), replay_gold(reference, task)
                tasks += 1
                same = mine.session.state_hash() == theirs.session.state_hash() and [
                    (o.status, o.content) for o in mine.outcomes
                ] == [(o.status, o.content) for o in theirs.outcomes]
                different += not same
    return {"library_tasks": tasks, "library_tasks_different": different}


def restart_s(domain: Domain, pause_s: float) -> float:
    """Wall time of the call that follows a killed child ``pause_s`` later.

    The successor starts in the background at the kill, so a pause (an LLM turn) hides it.
    """
    toolkit = domain.toolkit
    assert isinstance(toolkit, SandboxToolkit)
    toolkit._discard_process()
    time.sleep(pause_s)
    name, args = READ_CALLS[domain.id]
    started = time.perf_counter()
    assert toolkit.call(domain.start_session(), name, args).ok
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="vetclinic", choices=sorted(READ_CALLS))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--all-tasks", action="store_true", help="replay all 90 library tasks")
    opts = parser.parse_args()

    path = library_path(opts.domain)
    reference = load_domain(path)
    name, args = READ_CALLS[opts.domain]
    started = time.perf_counter()
    with load_sandboxed_domain(path, check_gold=False) as sandboxed:
        assert isinstance(sandboxed.toolkit, SandboxToolkit)
        sandboxed.toolkit.start()
        start_s = time.perf_counter() - started
        sandboxed.tasks = reference.tasks
        inprocess_us = per_call_us(reference, name, args, opts.calls, opts.repeat)
        sandbox_us = per_call_us(sandboxed, name, args, opts.calls, opts.repeat)
        floor = floor_us(sandboxed.toolkit, opts.calls, opts.repeat)
        gold_in_us, gold_calls = gold_replay_us(reference, opts.repeat)
        gold_sb_us, _ = gold_replay_us(sandboxed, opts.repeat)
        restart = statistics.median(restart_s(sandboxed, 0.0) for _ in range(3))
        restart_paused = statistics.median(restart_s(sandboxed, 2.0) for _ in range(3))
        layers = sandboxed.toolkit.start()

    result = {
        "domain": opts.domain,
        "read_tool": name,
        "sandbox_call_us": round(sandbox_us, 1),
        "inprocess_call_us": round(inprocess_us, 1),
        "ratio": round(sandbox_us / inprocess_us, 1),
        "overhead_us": round(sandbox_us - inprocess_us, 1),
        "round_trip_floor_us": round(floor, 1),
        "gold_replay_calls": gold_calls,
        "gold_sandbox_call_us": round(gold_sb_us, 1),
        "gold_inprocess_call_us": round(gold_in_us, 1),
        "gold_ratio": round(gold_sb_us / gold_in_us, 1),
        "child_start_s": round(start_s, 3),
        "child_restart_s": round(restart, 3),
        "call_2s_after_restart_s": round(restart_paused, 4),
        "layers_active": sorted(k for k, v in layers.items() if v == "active"),
        "calls": opts.calls,
        "repeat": opts.repeat,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    if opts.all_tasks:
        result.update(all_tasks())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
