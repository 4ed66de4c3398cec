"""Lake throughput: episode rows written per second through storage/ (idempotent, batched
commits; ``delta_rows_per_s`` is the insert-if-new path the flows use for episodes, and the full
merge is shown beside it) against writing the same rows with pyarrow to parquet directly; and a data scientist's
query (pass rate per domain and model) over 100k episodes. Prints a JSON object last.

    .venv/bin/python bench/storage.py [--rows 50000] [--batch 10000] [--query-rows 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from maestro.storage import TABLES, Lake, LakeSettings

DOMAINS = ["energy", "hotel", "vetclinic"]
MODELS = ["qwen2.5-0.5b", "qwen3-8b", "gpt-4.1-mini"]


def episode_rows(n: int, start: int, run_id: str) -> list[dict[str, Any]]:
    """Realistic episode rows: 10 messages, two tool calls and their results."""
    rng = random.Random(start)
    rows = []
    for i in range(start, start + n):
        domain, model = DOMAINS[i % 3], MODELS[(i // 3) % 3]
        messages = []
        for turn in range(3):
            messages.append(
                {
                    "role": "user",
                    "content": f"Customer message {turn} about reservation R{i}.",
                    "tool_calls": [],
                }
            )
            if turn < 2:
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"c{turn}",
                                "name": "get_reservation",
                                "arguments": json.dumps({"reservation_id": f"R{i}"}),
                            }
                        ],
                        "latency_s": 0.8,
                        "prompt_tokens": 4000,
                        "completion_tokens": 40,
                    }
                )
                messages.append(
                    {
                        "role": "tool",
                        "content": json.dumps(
                            {
                                "reservation_id": f"R{i}",
                                "status": "confirmed",
                                "nights": 3,
                                "rate": 189.0,
                            }
                        ),
                        "tool_calls": [],
                        "tool_call_id": f"c{turn}",
                        "name": "get_reservation",
                        "status": "ok",
                    }
                )
            messages.append(
                {
                    "role": "assistant",
                    "content": f"Your reservation R{i} is confirmed for 3 nights.",
                    "tool_calls": [],
                    "latency_s": 0.9,
                    "prompt_tokens": 4200,
                    "completion_tokens": 30,
                }
            )
        rows.append(
            {
                "episode_id": f"{run_id}/{domain}/{domain}_{i % 30:03d}/{i}/{model}",
                "domain_id": domain,
                "domain_version": "1.0.0",
                "task_id": f"{domain}_{i % 30:03d}",
                "trial": i,
                "seed": rng.randrange(1 << 31),
                "assistant_model": model,
                "user_model": "qwen2.5-0.5b",
                "termination": "user_stop",
                "duration_s": rng.uniform(5, 60),
                "llm_calls": 8,
                "prompt_tokens": 30000,
                "completion_tokens": 300,
                "n_tool_calls": 2,
                "messages": messages,
            }
        )
    return rows


def bench_writes(rows: int, batch: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="maestro-bench-"))
    try:
        batches = [episode_rows(batch, b * batch, "bench") for b in range(rows // batch)]
        schema = TABLES["episodes"].schema
        timings = {}
        for mode in ("insert", "merge"):
            lake = Lake(LakeSettings(root=str(tmp / f"lake-{mode}")))
            started = time.perf_counter()
            for b in batches:
                lake.write("episodes", b, "bench", mode=mode)  # type: ignore[arg-type]
            timings[mode] = time.perf_counter() - started
            assert lake.read("episodes").select("episode_id").collect().height == rows
        out = tmp / "parquet"
        out.mkdir()
        # The baseline: the cheapest direct pyarrow path for the same rows and stamps.
        body = pa.schema([f for f in schema if f.name not in ("run_id", "written_at")])
        started = time.perf_counter()
        for i, b in enumerate(batches):
            table = pa.Table.from_pylist(b, schema=body)
            n = table.num_rows
            table = table.append_column("run_id", pa.array(["bench"] * n, pa.string()))
            table = table.append_column(
                "written_at", pa.array([datetime.now(UTC)] * n, schema.field("written_at").type)
            )
            pq.write_table(table, out / f"part-{i:05d}.parquet")
        parquet_s = time.perf_counter() - started
        return {
            "delta_rows_per_s": rows / timings["insert"],
            "delta_merge_rows_per_s": rows / timings["merge"],
            "parquet_rows_per_s": rows / parquet_s,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_query(n: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="maestro-bench-"))
    try:
        lake = Lake(LakeSettings(root=str(tmp / "lake")))
        rng = random.Random(1)
        chunk = 20_000
        for start in range(0, n, chunk):
            rows = episode_rows(chunk, start, "q")
            lake.write("episodes", rows, "q", mode="insert")
            lake.write(
                "scores",
                [
                    {
                        "episode_id": r["episode_id"],
                        "domain_id": r["domain_id"],
                        "task_id": r["task_id"],
                        "trial": r["trial"],
                        "assistant_model": r["assistant_model"],
                        "reward": float(rng.random() < 0.4),
                        "complete": True,
                        "passed": False,
                    }
                    for r in rows
                ],
                "q",
                mode="insert",
            )
        sql = (
            "select e.domain_id, e.assistant_model, avg(s.reward) as pass_rate, count(*) as episodes "
            "from episodes e join scores s on e.episode_id = s.episode_id "
            "group by e.domain_id, e.assistant_model order by e.domain_id, e.assistant_model"
        )
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            df = lake.query(sql)
            timings.append(time.perf_counter() - started)
        assert int(df["episodes"].sum()) == n
        return {"query_s": min(timings), "query_rows": n}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--query-rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = [bench_writes(args.rows, args.batch) for _ in range(args.repeat)]
    # Median of each figure over the repeats: single runs vary by 20% on this shared machine.
    w = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    w["ratio_runs"] = [round(r["delta_rows_per_s"] / r["parquet_rows_per_s"], 3) for r in runs]  # type: ignore[assignment]
    print(
        f"writes: delta insert {w['delta_rows_per_s']:.0f} rows/s, delta merge {w['delta_merge_rows_per_s']:.0f} rows/s, parquet {w['parquet_rows_per_s']:.0f} rows/s, ratio {w['delta_rows_per_s'] / w['parquet_rows_per_s']:.2f}",
        flush=True,
    )
    q = bench_query(args.query_rows)
    print(
        f"query: pass rate per domain and model over {q['query_rows']} episodes in {q['query_s']:.2f} s",
        flush=True,
    )
    result = {
        "delta_rows_per_s": round(w["delta_rows_per_s"]),
        "delta_merge_rows_per_s": round(w["delta_merge_rows_per_s"]),
        "parquet_rows_per_s": round(w["parquet_rows_per_s"]),
        "ratio": round(w["delta_rows_per_s"] / w["parquet_rows_per_s"], 3),
        "ratio_runs": w["ratio_runs"],
        "rows": args.rows,
        "batch": args.batch,
        "query_s": round(q["query_s"], 3),
        "query_rows": q["query_rows"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
