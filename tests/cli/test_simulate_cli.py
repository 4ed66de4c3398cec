"""``maestro simulate`` and ``maestro llm check`` as console scripts against the scripted server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from maestro.agents.scripted_server import Reply, ScriptedServer, ServerConfig

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )


def endpoints(url: str) -> dict[str, str]:
    return {f"MAESTRO_{r}__BASE_URL": url for r in ("ASSISTANT", "USER", "JUDGE", "CODEGEN")}


def test_simulate_prints_pass_hat_k_for_the_oracle_and_for_doing_nothing() -> None:
    with ScriptedServer(ServerConfig(mode="oracle")) as server:
        proc = run(
            endpoints(server.base_url), "simulate", "--domain", "hotel", "--trials", "2", "--json"
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 60 and report["nl_judged"] is True
    assert report["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert report["terminations"] == {"user_stop": 60}
    with ScriptedServer(ServerConfig(mode="nothing")) as server:
        proc = run(
            endpoints(server.base_url),
            "simulate",
            "--domain",
            "hotel",
            "--tasks",
            "hotel_001,hotel_021",
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hotel: 2 task(s) x 1 trial(s) = 2 episodes" in proc.stdout
    assert "pass^1: 0.000" in proc.stdout


def test_a_failed_episode_says_why_and_is_stored_for_the_viewer(tmp_path: Path) -> None:
    env = {**endpoints(""), "MAESTRO_LAKE_ROOT": str(tmp_path / "lake")}
    with ScriptedServer(ServerConfig(mode="nothing")) as server:
        env.update(endpoints(server.base_url))
        args = ["simulate", "--domain", "hotel", "--tasks", "hotel_001", "--no-judge"]
        proc = run(env, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        as_json = run(env, *args, "--json", "--no-lake")
    out = proc.stdout
    assert "1 episode(s) did not succeed:" in out
    assert "- hotel_001 trial 0: reward 0, ended user_stop" in out
    # each criterion that did not pass, with its reason
    assert "      ACTION fail: unmatched: a1 get_reservation({'reservation_id': 'R30057'})" in out
    assert "      COMMUNICATE fail: not communicated: 15:00; 336.38" in out
    assert "      NL_ASSERTION pending: not yet judged" in out
    run_id = out.split("stored as run ")[1].split(":")[0]
    viewed = run(env, "view", run_id, "--no-serve", "--out", str(tmp_path / "page"))
    assert viewed.returncode == 0, viewed.stderr[-2000:]
    assert f"1 episodes, 1 tasks of run {run_id}" in viewed.stdout
    report = json.loads(as_json.stdout.strip().splitlines()[-1])
    (failure,) = report["failures"]
    assert failure["task_id"] == "hotel_001" and report["run_id"] is None
    assert any(c.startswith("COMMUNICATE fail") for c in failure["criteria"])


def test_simulate_refuses_unknown_tasks_before_any_work() -> None:
    proc = run(
        endpoints("http://127.0.0.1:9/v1"), "simulate", "--domain", "hotel", "--tasks", "hotel_999"
    )
    assert proc.returncode == 2
    assert "domain hotel has no task(s) ['hotel_999']" in proc.stderr


def test_llm_check_says_which_endpoint_and_model_each_role_uses() -> None:
    with ScriptedServer(ServerConfig(mode="script")) as server:
        for role in ("assistant", "user", "judge", "codegen"):
            server.script("", role, [Reply(content="OK")])
        env = {**endpoints(server.base_url), "MAESTRO_JUDGE__MODEL": "judge-model"}
        proc = run(env, "llm", "check", "--json")
        server.assert_done()
    assert proc.returncode == 0, proc.stderr
    rows = {r["role"]: r for r in json.loads(proc.stdout)}
    assert rows["judge"]["model"] == "judge-model" and rows["judge"]["ok"] is True
    assert rows["assistant"]["endpoint"] == server.base_url


def test_llm_check_fails_when_a_role_does_not_answer() -> None:
    proc = run({**endpoints("http://127.0.0.1:9/v1")}, "llm", "check", "--timeout-s", "5")
    assert proc.returncode == 1
    assert "FAILS" in proc.stdout


def test_a_nonsense_deadline_is_refused_before_any_episode() -> None:
    for value in ("-5", "nan", "inf"):
        proc = run(
            endpoints("http://127.0.0.1:9/v1"),
            "simulate",
            "--domain",
            "hotel",
            "--episode-deadline-s",
            value,
        )
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "Invalid value for '--episode-deadline-s'" in proc.stderr
        assert "Traceback" not in proc.stderr and "trial" not in proc.stderr


def test_simulate_starts_the_embedded_model_only_for_roles_it_calls(tmp_path: Path) -> None:
    # The embedded model cannot start here (its weights' package does not exist), so a run that
    # tried to start it would fail; its log in the run folder would say it tried.
    env = {
        "MAESTRO_RUN_DIR": str(tmp_path),
        "MAESTRO_EMBEDDED__PACKAGES": '["no_such_weights_package"]',
    }
    with ScriptedServer(ServerConfig(mode="oracle")) as server:
        for role in ("ASSISTANT", "USER"):
            env[f"MAESTRO_{role}__BASE_URL"] = server.base_url
        args = ["simulate", "--domain", "hotel", "--tasks", "hotel_001,hotel_002", "--json"]
        proc = run(env, *args, "--no-judge")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert not (tmp_path / "embedded-model.log").exists()
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert report["episodes"] == 2 and report["nl_judged"] is False
        # Judging on, the judge has no endpoint: now the embedded model is wanted.
        judged = run(env, *args)
    assert judged.returncode != 0
    assert (tmp_path / "embedded-model.log").exists()
