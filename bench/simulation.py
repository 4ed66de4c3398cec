"""Simulation throughput: complete episodes (tool execution, trajectory recording and scoring
included) against the scripted server with 100 ms latency per call.

Configurations: concurrency 1, 10, 100, 1000; one process, and 2 Ray workers; two shapes:
``oracle`` (the gold conversation of every library task) and ``minimal`` (user opens, assistant
makes one read call, answers, user stops: 4 LLM calls). The scripted server runs in its own
process. Prints the table, then a JSON object last.

    .venv/bin/python bench/simulation.py [--concurrency 1 10 100 1000] [--latency 0.1] [--no-ray]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from maestro.agents.scripted_server import ServerConfig
from maestro.agents.settings import LLMSettings, RoleSettings
from maestro.domains import library_ids, library_path, load_domain
from maestro.scoring import Scorer
from maestro.simulation.runner import (
    BatchConfig,
    BatchResult,
    EpisodeJob,
    make_jobs,
    run_batch,
    run_on_ray,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """The scripted server in a child process, so it has a core of its own."""

    def __init__(self, config: ServerConfig) -> None:
        self.port = free_port()
        self.cfg_file = Path(tempfile.mkstemp(suffix=".json")[1])
        self.cfg_file.write_text(config.model_dump_json())
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "maestro.agents.scripted_server",
                "--config",
                str(self.cfg_file),
                "--port",
                str(self.port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.base_url}/models", timeout=1).read()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("scripted server did not start")

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/admin/stats", timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.cfg_file.unlink(missing_ok=True)


def jobs_for(shape: str, episodes: int) -> list[EpisodeJob]:
    """``episodes`` jobs cycling over the library's tasks (read tasks for the minimal shape)."""
    pool: list[EpisodeJob] = []
    for domain_id in library_ids():
        domain = load_domain(library_path(domain_id), check_gold=False)
        tasks = [t.id for t in domain.tasks if shape == "oracle" or t.category == "read"]
        pool.extend(make_jobs(domain, tasks, trials=1))
    return [
        pool[i % len(pool)].model_copy(update={"trial": i // len(pool)}) for i in range(episodes)
    ]


def score_all(batch: BatchResult, scorers: dict[str, Scorer]) -> float:
    rewards = []
    for e in batch.episodes:
        scorer = scorers[e.domain_id]
        rewards.append(scorer.score(scorer.domain.task(e.task_id), e.trajectory).reward)
    return sum(rewards) / len(rewards)


def run_config(
    shape: str,
    concurrency: int,
    workers: int,
    base_url: str,
    scorers: dict[str, Scorer],
    seconds: float,
) -> dict[str, Any]:
    calls_per_episode = 4 if shape == "minimal" else 6
    # Enough episodes to keep every slot busy for about `seconds` at the ideal rate.
    ideal_eps = concurrency / (calls_per_episode * 0.1)
    episodes = int(max(10, min(ideal_eps * seconds, 20_000)))
    jobs = jobs_for(shape, episodes)
    rs = RoleSettings(
        base_url=base_url, max_concurrency=max(concurrency, 1), timeout_s=60, deadline_s=600
    )
    settings = LLMSettings(assistant=rs, user=rs, judge=rs, codegen=rs)
    config = BatchConfig(concurrency=concurrency)
    started = time.perf_counter()
    if workers:
        batch = run_on_ray(jobs, settings, None, config, workers=workers)
    else:
        batch = asyncio.run(run_batch(jobs, settings, None, config))
    mean_reward = score_all(batch, scorers)
    wall = time.perf_counter() - started
    n_calls = len(batch.llm_calls)
    ok = sum(e.termination.value == "user_stop" for e in batch.episodes)
    return {
        "shape": shape,
        "concurrency": concurrency,
        "processes": f"{workers} Ray workers" if workers else "1 process",
        "episodes": len(batch.episodes),
        "completed": ok,
        "llm_calls": n_calls,
        "wall_s": round(wall, 2),
        "llm_calls_per_s": round(n_calls / wall, 1),
        "episodes_per_hour": round(len(batch.episodes) / wall * 3600),
        "mean_reward": round(mean_reward, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--shapes", nargs="+", default=["minimal", "oracle"])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="target duration of each configuration"
    )
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()

    scorers = {d: Scorer(load_domain(library_path(d))) for d in library_ids()}
    rows = []
    for shape in args.shapes:
        server = ServerProcess(
            ServerConfig(mode="oracle" if shape == "oracle" else "minimal", latency_s=args.latency)
        )
        try:
            for workers in [0] if args.no_ray else [0, 2]:
                if workers:
                    from maestro.simulation.ray_support import ensure_ray

                    ensure_ray(Path("runs"), num_cpus=2)
                for c in args.concurrency:
                    row = run_config(shape, c, workers, server.base_url, scorers, args.seconds)
                    rows.append(row)
                    print(
                        f"{row['shape']:<8} c={row['concurrency']:<5} {row['processes']:<14} {row['episodes']:>6} episodes "
                        f"{row['llm_calls']:>7} calls {row['wall_s']:>7.2f} s  {row['llm_calls_per_s']:>8.1f} calls/s "
                        f"{row['episodes_per_hour']:>9} episodes/h  reward {row['mean_reward']}",
                        flush=True,
                    )
        finally:
            server.stop()
    best = max(rows, key=lambda r: r["llm_calls_per_s"])
    minimal = [r for r in rows if r["shape"] == "minimal"]
    best_minimal = max(minimal, key=lambda r: r["llm_calls_per_s"]) if minimal else best
    print(
        json.dumps(
            {
                "llm_calls_per_s": best["llm_calls_per_s"],
                "episodes_per_hour": best["episodes_per_hour"],
                "best": best,
                "best_minimal": best_minimal,
                "latency_s": args.latency,
                "cpu_count": os.cpu_count(),
                "table": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
