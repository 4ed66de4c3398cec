"""The embedded model on BFCL tasks, scored both ways: maestro's card and BFCL's checker.

Imports a category into a temporary folder, takes N tasks from its largest packages (tasks of
one package share the system prompt and the tool list, so the embedded model's prompt cache
serves them; on a loaded 2-core machine a BFCL prompt of 2-5k tokens otherwise costs minutes),
or round-robin over all packages with ``--spread``, runs them with the embedded local model as
the assistant (the tasks script their user), scores every episode both ways as it ends, and
prints one line per episode, the agreement counts and rate, then a JSON object last.

    .venv/bin/python bench/bfcl_embedded.py [--category multi_turn_base] [--tasks 20]
        [--spread] [--max-steps 6] [--deadline-s 1800]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from maestro.agents.settings import LLMSettings, Role
from maestro.domains import Domain
from maestro.domains.importers.bfcl import import_category
from maestro.flows.endpoints import model_endpoints
from maestro.scoring import Scorer, agreement, external_checker
from maestro.simulation.episode import EpisodeLimits, EpisodeResult
from maestro.simulation.runner import BatchConfig, DomainCache, EpisodeJob, make_jobs, run_batch


def pick(domains: list[Domain], n: int, spread: bool) -> list[EpisodeJob]:
    """N tasks: from the largest packages first, or round-robin over all of them."""
    if not spread:
        largest = sorted(domains, key=lambda d: (-len(d.tasks), d.id))
        return [j for d in largest for j in make_jobs(d, None, trials=1)][:n]
    queues = [make_jobs(d, None, trials=1) for d in sorted(domains, key=lambda d: d.id)]
    jobs: list[EpisodeJob] = []
    while len(jobs) < n and any(queues):
        for q in queues:
            if q and len(jobs) < n:
                jobs.append(q.pop(0))
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--category", default="multi_turn_base")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--spread", action="store_true", help="round-robin over all packages")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--deadline-s", type=float, default=1800.0)
    parser.add_argument("--run-dir", type=Path, default=Path("runs"))
    args = parser.parse_args()
    # A timeout's SIGTERM unwinds the with-blocks, so the embedded model and the sandbox
    # children stop with this process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    folder = Path(tempfile.mkdtemp(prefix="maestro-bfcl-embedded-"))
    imported = import_category(args.category, folder)
    cache = DomainCache()  # the batch and the scoring share each domain's sandbox child
    domains = {d.id: d for d in (cache.get(str(p)) for p in imported.packages)}
    jobs = pick(list(domains.values()), args.tasks, args.spread)
    limits = EpisodeLimits(
        max_turns=20, max_steps_per_turn=args.max_steps, deadline_s=args.deadline_s
    )
    config = BatchConfig(concurrency=1, limits=limits, batch_deadline_s=24 * 3600.0)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    checkers: dict[str, Any] = {}

    def scored(e: EpisodeResult) -> None:
        """Score each episode both ways as it ends, so a run cut short still reports."""
        domain = domains[e.domain_id]
        task = domain.task(e.task_id)
        card = Scorer(domain).score(task, e.trajectory)
        if e.domain_id not in checkers:
            checkers[e.domain_id] = external_checker(domain)
        verdict = checkers[e.domain_id].check(task, e.trajectory)
        row = {
            "task": e.task_id,
            "domain": e.domain_id,
            "termination": e.termination.value,
            "error": (e.error or "")[:200] or None,
            "llm_calls": e.llm_calls,
            "tool_calls": e.tool_calls,
            "duration_s": round(e.duration_s),
            "maestro_reward": card.reward,
            "maestro_failed": [c.criterion.value for c in card.failures()],
            "bfcl": verdict.status,
            "bfcl_error_type": verdict.error_type,
        }
        rows.append(row)
        print(json.dumps(row), f"({time.perf_counter() - started:.0f} s in)", flush=True)

    try:
        # The tasks script their user: only the assistant is called.
        assistant: list[Role] = ["assistant"]
        with model_endpoints(LLMSettings(), assistant, args.run_dir) as settings:
            batch = asyncio.run(run_batch(jobs, settings, None, config, cache, on_episode=scored))
    finally:
        for c in checkers.values():
            c.close()
        cache.close()
    wall = time.perf_counter() - started
    counts = agreement(
        (r["maestro_reward"] == 1.0, {"pass": True, "fail": False}.get(str(r["bfcl"])))
        for r in rows
    )
    print(f"agreement: {counts.model_dump()} rate {counts.rate}", flush=True)
    print(
        json.dumps(
            {
                "category": args.category,
                "episodes": len(rows),
                "wall_s": round(wall, 1),
                "llm_calls": len(batch.llm_calls),
                "agreement": counts.model_dump(),
                "agreement_rate": counts.rate,
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
