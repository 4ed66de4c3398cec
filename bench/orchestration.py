"""Orchestration overhead: the share of the nightly run's wall time spent outside simulation,
with the scripted server at 100 ms per call, over about 1,000 episodes (the 90 library tasks x
12 trials). The nightly runs as users run it (`maestro nightly`, a fresh process); the wall time
counts from process start to exit, Prefect's start, ingest, scoring with the judge, filtering,
lake writes and the report included. Prints a JSON object last.

    .venv/bin/python bench/orchestration.py [--trials 12] [--concurrency 10] [--latency 0.1]
        [--prefect standing|run] [--cold-home] [--ray-workers N]

--prefect standing: a Prefect server already running (PREFECT_API_URL), as a deployed nightly
has; --prefect run: none configured, so the run starts its own (what `maestro nightly` does on
the embedded defaults). Its Prefect home is warm (its database already made, as from the second
night on) unless --cold-home. Episodes fan out over a local Ray (the default) unless
--ray-workers 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from simulation import ServerProcess

from maestro.agents.scripted_server import ServerConfig
from maestro.flows.prefect_server import LocalPrefectServer

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--chunk-size", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--prefect", choices=("standing", "run"), default="standing")
    parser.add_argument("--cold-home", action="store_true", help="a new, empty Prefect home")
    parser.add_argument("--ray-workers", type=int, default=None)
    args = parser.parse_args()

    server = ServerProcess(ServerConfig(mode="oracle", latency_s=args.latency))
    tmp = Path(tempfile.mkdtemp(prefix="maestro-orch-"))
    if args.prefect == "run" and not args.cold_home:
        LocalPrefectServer(tmp / "prefect").start().stop()  # makes the database, untimed
    prefect = LocalPrefectServer(tmp / "prefect").start() if args.prefect == "standing" else None
    try:
        env = {
            **os.environ,
            "MAESTRO_LAKE_ROOT": str(tmp / "lake"),
            "PREFECT_HOME": str(tmp / "prefect"),
        }
        env.pop("PREFECT_API_URL", None)
        if prefect is not None:
            env["PREFECT_API_URL"] = prefect.api_url
        for role in ("ASSISTANT", "USER", "JUDGE", "CODEGEN"):
            env[f"MAESTRO_{role}__BASE_URL"] = server.base_url
            env[f"MAESTRO_{role}__MAX_CONCURRENCY"] = str(max(64, args.concurrency))
        cmd = [
            MAESTRO, "nightly", "--run-id", "bench", "--synthesize", "0", "--all-tasks",
            "--trials", str(args.trials),
            "--concurrency", str(args.concurrency), "--chunk-size", str(args.chunk_size), "--json",
        ]  # fmt: skip
        if args.ray_workers is not None:
            cmd += ["--ray-workers", str(args.ray_workers)]
        started = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"nightly failed:\n{proc.stderr[-4000:]}")
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        server.stop()
        if prefect is not None:
            prefect.stop()
    episodes = sum(summary["terminations"].values())
    simulate_s = summary["timings"]["simulate_s"]
    flow_s = summary["timings"]["flow_s"]
    result = {
        "episodes": episodes,
        "wall_s": round(wall, 2),
        "flow_s": round(flow_s, 2),
        "simulate_s": round(simulate_s, 2),
        "outside_simulation_s": round(wall - simulate_s, 2),
        "overhead_share": round((wall - simulate_s) / wall, 4),
        "overhead_share_in_flow": round((flow_s - simulate_s) / flow_s, 4),
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "prefect": "standing server"
        if args.prefect == "standing"
        else f"started by the run ({'cold' if args.cold_home else 'warm'} home)",
        "ray_workers": summary["ray_workers"],
        "stages_s": {k: round(v, 2) for k, v in summary["timings"].items()},
    }
    print(
        f"{episodes} episodes: wall {wall:.1f} s (flow {flow_s:.1f} s), simulation {simulate_s:.1f} s, "
        f"outside simulation {wall - simulate_s:.1f} s = {result['overhead_share']:.1%} of the wall time",
        flush=True,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
