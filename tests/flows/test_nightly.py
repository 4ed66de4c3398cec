"""The nightly flow end to end, as the console script, against the scripted server: artifacts in
Prefect, rows in the lake, resuming after SIGKILL, two runs at once, bad input before any write."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.cli.nightly import STAGE_NAMES
from maestro.flows.nightly import STAGE_FLOWS
from maestro.storage import Lake, LakeSettings
from maestro.storage.rows import LLMCallRow, TaskSetRow, TaskVerdictRow

MAESTRO = str(Path(sys.executable).with_name("maestro"))
FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def oracle() -> Iterator[ScriptedServer]:
    with ScriptedServer(ServerConfig(mode="oracle", latency_s=0.02)) as server:
        yield server


def env_for(server: ScriptedServer, tmp: Path, prefect_home: str = "prefect") -> dict[str, str]:
    # The lake, Prefect's home and the reports derive from the run folder.
    env = {**os.environ, "MAESTRO_RUN_DIR": str(tmp)}
    for derived in ("MAESTRO_LAKE_ROOT", "PREFECT_HOME", "PREFECT_API_URL"):
        env.pop(derived, None)
    if prefect_home != "prefect":
        env["PREFECT_HOME"] = str(tmp / prefect_home)
    # Episodes run in the flow's process here, so each run skips Ray's start (~5 s, ~1 GB); the
    # Ray test below turns the default back on.
    env["MAESTRO_RAY_WORKERS"] = "0"
    for role in ("ASSISTANT", "USER", "JUDGE", "CODEGEN"):
        env[f"MAESTRO_{role}__BASE_URL"] = server.base_url
        env[f"MAESTRO_{role}__MODEL"] = "scripted-oracle"
    return env


#: The nightly synthesizes a brief by default; these tests run it without (the synthesis stage
#: has its own test, with a scripted team).
NO_SYNTHESIS = ("--synthesize", "0")


def nightly(env: dict[str, str], *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    wanted = args if "--synthesize" in args else (*NO_SYNTHESIS, *args)
    return subprocess.run(
        [MAESTRO, "nightly", *wanted], env=env, capture_output=True, text=True, timeout=600, **kw
    )  # type: ignore[call-overload]


def test_nightly_writes_every_stage_and_shows_in_prefect(
    oracle: ScriptedServer, tmp_path: Path
) -> None:
    proc = nightly(
        env_for(oracle, tmp_path),
        "--run-id",
        "n1",
        "--tasks-per-domain",
        "5",
        "--trials",
        "2",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # Every log reached the run's Prefect server before it stopped (sent after, they were
    # retried for ~70 s against a closed port).
    assert "Error logging to API" not in proc.stderr
    assert "Prefect UI for this run" in proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["run_id"] == "n1"
    assert summary["funnel"][-1] == {"stage": "accepted", "tasks": 15}
    assert {r["domain"]: r["pass^2"] for r in summary["pass_hat_k"]} == {
        "energy": 1.0,
        "hotel": 1.0,
        "vetclinic": 1.0,
    }
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    counts = {t.name: t.rows for t in lake.tables()}
    assert counts["domains"] == 3 and counts["tasks"] == 90
    assert counts["episodes"] == counts["scores"] == 30
    assert counts["task_verdicts"] == 15
    judge_calls = lake.read("llm_calls").filter(pl.col("role") == "judge").collect().height
    assert judge_calls > 0
    task_set = lake.read("task_sets").collect().to_dicts()[0]
    assert len(task_set["tasks"]) == 15
    assert {b["table"] for b in task_set["built_from"]} == {
        "domains",
        "tasks",
        "episodes",
        "scores",
        "task_verdicts",
    }
    html = Path(summary["html"])
    assert html.is_file() and html.parent == tmp_path / "reports"
    assert "<svg" in html.read_text() and "Funnel" in html.read_text()
    # The flow run and its artifacts are in Prefect's database.
    db = sqlite3.connect(tmp_path / "prefect" / "prefect.db")
    runs = db.execute("select name, state_type from flow_run").fetchall()
    assert [r[1] for r in runs] == ["COMPLETED"]
    artifacts = dict(db.execute("select key, type from artifact").fetchall())
    assert artifacts["maestro-nightly-n1"] == "markdown"
    assert artifacts["maestro-nightly-n1-pass-k"] == "table"
    (markdown,) = db.execute(
        "select data from artifact where key = 'maestro-nightly-n1'"
    ).fetchone()
    assert "## Funnel" in markdown and str(html) in markdown


def _episodes(root: Path, run_id: str) -> pl.DataFrame:
    return (
        Lake(LakeSettings(root=str(root)))
        .read("episodes")
        .filter(pl.col("run_id") == run_id)
        .collect()
    )


def test_a_killed_run_resumes_without_missing_or_duplicate_rows(tmp_path: Path) -> None:
    with ScriptedServer(ServerConfig(mode="oracle", latency_s=0.15)) as slow:
        env = env_for(slow, tmp_path)
        args = [
            "--run-id",
            "crash",
            "--domain",
            "hotel",
            "--all-tasks",
            "--trials",
            "4",
            "--concurrency",
            "4",
            "--chunk-size",
            "8",
            "--no-judge",
        ]
        proc = subprocess.Popen(
            [MAESTRO, "nightly", *NO_SYNTHESIS, *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        written = 0
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            try:
                written = _episodes(tmp_path / "lake", "crash").height
            except Exception:
                continue
            if written >= 16:
                break
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert 16 <= written < 120
        again = nightly(env, *args, "--json")
        assert again.returncode == 0, again.stderr[-4000:]
    df = _episodes(tmp_path / "lake", "crash")
    assert df.height == 120
    assert df["episode_id"].n_unique() == 120
    scores = (
        Lake(LakeSettings(root=str(tmp_path / "lake")))
        .read("scores")
        .filter(pl.col("run_id") == "crash")
        .collect()
    )
    assert scores.height == 120 and scores["episode_id"].n_unique() == 120
    assert (
        scores["reward"] == 1.0
    ).all()  # NL assertions not judged in this run: reward on the rest


def test_two_runs_at_once_lose_nothing(oracle: ScriptedServer, tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [
                MAESTRO,
                "nightly",
                *NO_SYNTHESIS,
                "--run-id",
                run_id,
                "--tasks-per-domain",
                "3",
                "--no-judge",
            ],
            env=env_for(oracle, tmp_path, prefect_home=f"prefect-{run_id}"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-4000:]
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    for run_id in ("a", "b"):
        for table, n in (("episodes", 9), ("scores", 9), ("task_verdicts", 9), ("task_sets", 1)):
            rows = lake.read(table).filter(pl.col("run_id") == run_id).collect()
            assert rows.height == n, (table, run_id, rows.height)
    assert lake.read("domains").collect().height == 3


def test_bad_input_is_refused_before_any_write(oracle: ScriptedServer, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "domain.json").write_text("{")
    env = env_for(oracle, tmp_path)
    proc = nightly(env, "--domain", str(FIXTURES / "toy"), "--domain", str(broken))
    assert proc.returncode == 2
    assert "domain.json" in proc.stderr and "invalid JSON" in proc.stderr
    proc = nightly(env, "--task", "hotel_999")
    assert proc.returncode == 2 and "no domain has task(s) ['hotel_999']" in proc.stderr
    proc = nightly(env, "--run-id", "bad id with spaces")
    assert proc.returncode == 2 and "run_id" in proc.stderr
    proc = nightly(env, "--trials", "0")
    assert proc.returncode == 2
    assert not (tmp_path / "lake").exists()


@pytest.mark.slow
def test_nightly_fans_episodes_out_over_a_local_ray_by_default(
    oracle: ScriptedServer, tmp_path: Path
) -> None:
    env = env_for(oracle, tmp_path)
    del env["MAESTRO_RAY_WORKERS"]
    env["MAESTRO_RAY_NUM_CPUS"] = "2"
    proc = nightly(
        env,
        "--run-id",
        "ray",
        "--domain",
        "hotel",
        "--tasks-per-domain",
        "4",
        "--trials",
        "3",
        "--no-judge",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["terminations"] == {"user_stop": 12}
    assert summary["ray_workers"] == 2  # one per CPU of the local Ray it started
    eps = _episodes(tmp_path / "lake", "ray")
    assert eps.height == 12 and eps["episode_id"].n_unique() == 12


def _verdicts(lake: Lake, run_id: str) -> list[dict[str, object]]:
    rows = lake.rows(TaskVerdictRow, run_id=run_id)
    return sorted((r.model_dump(exclude={"run_id", "written_at"}) for r in rows), key=str)


def test_each_stage_runs_alone_as_its_own_flow_and_they_equal_the_nightly(
    tmp_path: Path,
) -> None:
    # Episodes that fail: every task is unsolved, so the filter asks the LLM review.
    with ScriptedServer(ServerConfig(mode="nothing")) as nothing:
        env = env_for(nothing, tmp_path)
        common = ["--domain", "hotel", "--tasks-per-domain", "3"]
        assert tuple(STAGE_FLOWS) == STAGE_NAMES  # the CLI checks names without Prefect
        for name in STAGE_NAMES:
            proc = subprocess.run(
                [MAESTRO, "stage", name, "--run-id", "staged", *common],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, (name, proc.stderr[-3000:])
        whole = nightly(env, "--run-id", "whole", *common)
        assert whole.returncode == 0, whole.stderr[-3000:]
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    assert lake.read("scores").filter(pl.col("run_id") == "staged").collect().height == 3
    # `maestro stage filter` is the nightly's filter, the LLM review included.
    staged = _verdicts(lake, "staged")
    assert staged == _verdicts(lake, "whole") and len(staged) == 3
    assert all(v["review_cause"] == "review_failed" for v in staged)  # asked, answer unusable

    def reviews(run_id: str) -> list[str]:
        calls = lake.rows(LLMCallRow, run_id=run_id, role="judge")
        return sorted(str(c.episode) for c in calls if str(c.episode).endswith("/review"))

    assert reviews("staged") and reviews("staged") == reviews("whole")
    tasks_of = {r.run_id: len(r.tasks or []) for r in lake.rows(TaskSetRow)}
    assert tasks_of["staged"] == tasks_of["whole"]
    names = {
        r[0]
        for r in sqlite3.connect(tmp_path / "prefect" / "prefect.db")
        .execute("select name from flow")
        .fetchall()
    }
    assert {
        "maestro-ingest",
        "maestro-simulate",
        "maestro-score",
        "maestro-filter",
        "maestro-curate",
        "maestro-report",
    } <= names
    proc = subprocess.run(
        [MAESTRO, "stage", "explode", "--run-id", "x", *common],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no stage 'explode'" in proc.stderr
