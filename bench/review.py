"""False rejections of the review gate on the library. Every library task is hand-verified, so a
review that rejects one (a ``task_defect`` whose evidence checks out) is a false rejection.

The reviewer sees what the filter would show it for an unsolved task: failed transcripts, here
the scripted do-nothing and perturbed conversations of each task (both score 0). With no judge
endpoint configured it is the embedded model. Tasks go domain by domain, so the policy's prompt
prefix stays cached. ``--sample N`` reviews N tasks spread over domains and categories.
Prints one line per task, then a JSON object last.

    .venv/bin/python bench/review.py [--sample 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from itertools import zip_longest
from pathlib import Path
from typing import Any

from maestro.agents.client import Endpoints
from maestro.agents.review import ReviewError, review_failures
from maestro.agents.settings import LLMSettings, load_llm_settings
from maestro.domains import Domain, Task, library_ids, library_path, load_domain
from maestro.flows.endpoints import model_endpoints, model_name
from maestro.simulation import null_trajectory, perturbed_trajectory


def transcripts(domain: Domain, task: Task) -> list[str]:
    writes = {n for n, s in domain.toolkit.specs.items() if s.kind == "write"}
    failed = [null_trajectory(domain, task), perturbed_trajectory(domain, task, writes)]
    return [t.transcript() for t in failed if t is not None]


def _spread(items: list[list[Task]]) -> list[Task]:
    """One from each list in turn, until all are used."""
    return [x for row in zip_longest(*items) for x in row if x is not None]


def sample(domains: list[Domain], n: int | None) -> list[tuple[Domain, Task]]:
    """Every task, or ``n`` of them: the domains in turn, each going through its categories in
    turn; grouped by domain again (so a domain's policy prefix stays cached)."""
    if n is None:
        return [(d, t) for d in domains for t in d.tasks]
    by_domain: list[list[tuple[Domain, Task]]] = []
    per_domain = -(-n // max(1, len(domains)))
    for i, d in enumerate(domains):
        groups: dict[str | None, list[Task]] = {}
        for t in d.tasks:
            groups.setdefault(t.category, []).append(t)
        # Each domain starts where the last left off, so a small sample still spans categories.
        shift = (i * per_domain) % max(1, len(groups))
        lists = list(groups.values())
        by_domain.append([(d, t) for t in _spread(lists[shift:] + lists[:shift])])
    picked = [x for row in zip_longest(*by_domain) for x in row if x is not None][:n]
    return sorted(picked, key=lambda dt: (dt[0].id, dt[1].id))


async def review_all(
    settings: LLMSettings, tasks: list[tuple[Domain, Task]]
) -> list[dict[str, Any]]:
    rows = []
    async with Endpoints() as endpoints:
        client = endpoints.client("judge", settings.judge)
        for domain, task in tasks:
            t0 = time.perf_counter()
            try:
                review = await review_failures(
                    client, domain.policy, task, transcripts(domain, task), episode=task.id
                )
                row = {
                    "cause": review.cause,
                    "claimed": review.claimed,
                    "reason": review.reason,
                    "evidence": review.evidence,
                    "about": review.about,
                }
            except ReviewError as exc:
                row = {"cause": "review_failed", "claimed": None, "reason": str(exc)}
            row |= {"task": task.id, "s": round(time.perf_counter() - t0, 1)}
            print(
                f"{task.id}: {row['cause']} (said {row['claimed']}) {row['s']} s:"
                f" {row['reason'][:300]}",
                flush=True,
            )
            rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sample", type=int, default=None, help="review N tasks, not all 90")
    ap.add_argument("--run-dir", type=Path, default=Path("runs"))
    ap.add_argument("--out", type=Path, default=None, help="write every review here (JSON)")
    args = ap.parse_args()
    domains = [load_domain(library_path(i)) for i in library_ids()]
    tasks = sample(domains, args.sample)
    started = time.perf_counter()
    with model_endpoints(load_llm_settings(), ["judge"], args.run_dir) as settings:
        rows = asyncio.run(review_all(settings, tasks))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    causes = Counter(r["cause"] for r in rows)
    summary = {
        "tasks": len(rows),
        "model": model_name(settings, "judge"),
        "false_rejections": causes["task_defect"],
        "claimed_task_defect": sum(1 for r in rows if r["claimed"] == "task_defect"),
        "causes": dict(causes),
        "mean_review_s": round(sum(r["s"] for r in rows) / max(1, len(rows)), 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "false_rejected_tasks": [r["task"] for r in rows if r["cause"] == "task_defect"],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
