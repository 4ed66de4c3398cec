"""BFCL episode throughput against the scripted server, beside the library domains.

Imports a BFCL multi-turn category into a temporary folder, then runs the oracle (the gold
calls of each scripted turn, then an answer; the library's gold conversation) at 100 ms per LLM
call, in one process, at each concurrency; then scores every episode: maestro's card (both
replays, in the sandbox for BFCL) and, for BFCL, its own checker (in a sandbox child). The
scripted server runs in its own process. Prints the table, then a JSON object last.

    .venv/bin/python bench/bfcl.py [--category multi_turn_base] [--packages 6]
        [--concurrency 1 10 100] [--latency 0.1] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from simulation import ServerProcess

from maestro.agents.scripted_server import ServerConfig
from maestro.agents.settings import LLMSettings, RoleSettings
from maestro.domains import Domain, library_ids, library_path, load_domain
from maestro.domains.importers.bfcl import import_category
from maestro.scoring import Scorer, external_checker
from maestro.simulation.runner import (
    BatchConfig,
    BatchResult,
    DomainCache,
    EpisodeJob,
    make_jobs,
    run_batch,
)


def jobs_for(domains: list[Domain], episodes: int) -> list[EpisodeJob]:
    pool = [j for d in domains for j in make_jobs(d, None, trials=1)]
    return [
        pool[i % len(pool)].model_copy(update={"trial": i // len(pool)}) for i in range(episodes)
    ]


def score(batch: BatchResult, domains: dict[str, Domain]) -> dict[str, Any]:
    """Both scores of every episode, timed apart."""
    card_s, check_s, rewards, passes = [], [], [], []
    checkers = {d: external_checker(dom) for d, dom in domains.items()}
    try:
        for e in batch.episodes:
            domain = domains[e.domain_id]
            task = domain.task(e.task_id)
            t0 = time.perf_counter()
            rewards.append(Scorer(domain).score(task, e.trajectory).reward)
            card_s.append(time.perf_counter() - t0)
            checker = checkers[e.domain_id]
            if checker is not None:
                t0 = time.perf_counter()
                passes.append(checker.check(task, e.trajectory).status == "pass")
                check_s.append(time.perf_counter() - t0)
    finally:
        for c in checkers.values():
            if c is not None:
                c.close()
    return {
        "mean_reward": round(sum(rewards) / len(rewards), 3),
        "card_ms_per_episode": round(1000 * statistics.mean(card_s), 1),
        "checker_pass_rate": round(sum(passes) / len(passes), 3) if passes else None,
        "checker_ms_per_episode": round(1000 * statistics.mean(check_s), 1) if check_s else None,
    }


def run_config(
    label: str,
    domains: list[Domain],
    concurrency: int,
    base_url: str,
    seconds: float,
    latency: float,
) -> dict[str, Any]:
    calls = statistics.mean(
        len(t.gold_actions) + max(1, len(t.user_turns)) + (0 if t.user_turns else 2)
        for d in domains
        for t in d.tasks
    )
    episodes = int(max(10, min(concurrency / (calls * latency) * seconds, 5_000)))
    jobs = jobs_for(domains, episodes)
    rs = RoleSettings(
        base_url=base_url, max_concurrency=max(concurrency, 1), timeout_s=60, deadline_s=600
    )
    settings = LLMSettings(assistant=rs, user=rs, judge=rs, codegen=rs)
    cache = DomainCache()
    for d in domains:  # loaded before the clock starts, as a worker holds them
        cache.get(str(d.path))
    started = time.perf_counter()
    try:
        batch = asyncio.run(
            run_batch(jobs, settings, None, BatchConfig(concurrency=concurrency), cache)
        )
    finally:
        cache.close()
    wall = time.perf_counter() - started
    tools = [
        m.latency_s
        for e in batch.episodes
        for m in e.trajectory.messages
        if m.role == "tool" and m.latency_s is not None
    ]
    row = {
        "domains": label,
        "concurrency": concurrency,
        "episodes": len(batch.episodes),
        "completed": sum(e.termination.value == "user_stop" for e in batch.episodes),
        "llm_calls": len(batch.llm_calls),
        "tool_calls": len(tools),
        "wall_s": round(wall, 2),
        "llm_calls_per_s": round(len(batch.llm_calls) / wall, 1),
        "episodes_per_hour": round(len(batch.episodes) / wall * 3600),
        "tool_call_ms": round(1000 * statistics.mean(tools), 2) if tools else None,
    }
    row.update(score(batch, {d.id: d for d in domains}))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--category", default="multi_turn_base")
    parser.add_argument("--packages", type=int, default=6, help="BFCL packages (most tasks first)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="maestro-bench-bfcl-"))
    t0 = time.perf_counter()
    imported = import_category(args.category, folder)
    import_s = time.perf_counter() - t0
    bfcl = [load_domain(p, check_gold=False) for p in imported.packages]
    bfcl = sorted(bfcl, key=lambda d: -len(d.tasks))[: args.packages]
    library = [load_domain(library_path(i), check_gold=False) for i in library_ids()]
    rows = []
    try:
        for label, domains in (("bfcl", bfcl), ("library", library)):
            paths = [str(d.path) for d in domains]
            server = ServerProcess(
                ServerConfig(mode="oracle", latency_s=args.latency, domain_paths=paths)
            )
            try:
                for c in args.concurrency:
                    row = run_config(label, domains, c, server.base_url, args.seconds, args.latency)
                    rows.append(row)
                    print(
                        f"{label:<8} c={c:<4} {row['episodes']:>5} episodes {row['llm_calls']:>6}"
                        f" calls {row['tool_calls']:>6} tool calls {row['wall_s']:>7.2f} s"
                        f" {row['episodes_per_hour']:>8} episodes/h  tool {row['tool_call_ms']} ms"
                        f"  card {row['card_ms_per_episode']} ms  checker"
                        f" {row['checker_ms_per_episode']} ms  reward {row['mean_reward']}"
                        f" checker pass {row['checker_pass_rate']}",
                        flush=True,
                    )
            finally:
                server.stop()
    finally:
        for d in [*bfcl, *library]:
            d.close()
    print(
        json.dumps(
            {
                "category": args.category,
                "bfcl_tasks": sum(len(d.tasks) for d in bfcl),
                "import_s": round(import_s, 1),
                "latency_s": args.latency,
                "cpu_count": os.cpu_count(),
                "table": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
