"""``maestro train`` then ``maestro evaluate``: real Prefect flows, a real Ray job on a local
cluster (accelerate entrypoint), the trained model served over HTTP and scored on held-out
tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.flows.training import TrainingStageSettings, training_stage
from maestro.storage import Lake

from ..conftest import FIXTURES
from .conftest import TASK_SET

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, *args], env=env, capture_output=True, text=True, timeout=400, check=False
    )


@pytest.mark.slow  # a Ray head, two CLI runs with Prefect, a training job: ~60 s alone
def test_train_on_ray_then_evaluate_from_the_cli(
    ray_head: str, toy_lake: Lake, tmp_path: Path
) -> None:
    toy = str(FIXTURES / "toy")
    with ScriptedServer(ServerConfig(mode="oracle", domain_paths=[toy])) as oracle:
        env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect")}
        env.pop("PREFECT_API_URL", None)
        # Prefect's 20 s default for its temporary server is short on a busy 2-core machine.
        env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
        for role in ("USER", "JUDGE"):
            env[f"MAESTRO_{role}__BASE_URL"] = oracle.base_url
        common = ["--task-set", TASK_SET, "--domain", toy, "--lake-root", toy_lake.root]
        trained = _run(
            env, "train", "--method", "sft", *common, "--split", "all", "--lora",
            "--max-steps", "1", "--batch-size", "1", "--deadline-s", "300",
            "--launcher", "ray", "--ray-address", ray_head,
        )  # fmt: skip
        assert trained.returncode == 0, trained.stderr[-3000:]
        summary = json.loads(trained.stdout.strip().splitlines()[-1])
        assert summary["status"] == "succeeded" and summary["dataset_rows"] == 4
        run_id = summary["training_run_id"]
        assert (Path(summary["output_dir"]) / "job.log").is_file()
        # The Ray submission id is the flow run's id; the job ran to its end there.
        from ray.job_submission import JobStatus, JobSubmissionClient

        assert JobSubmissionClient(ray_head).get_job_status(run_id) == JobStatus.SUCCEEDED
        out = Path(summary["output_dir"])
        assert (out / "adapter" / "adapter_config.json").is_file()  # LoRA adapters
        assert (out / "model" / "config.json").is_file()  # and the merged model, to serve

        evaluated = _run(
            env, "evaluate", "--model", run_id, *common,
            "--max-turns", "3", "--max-new-tokens", "8",
        )  # fmt: skip
        assert evaluated.returncode == 0, evaluated.stderr[-3000:]
        user_calls = oracle.model.stats.calls["user"]
    row = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert row["model_id"] == run_id and row["episodes"] == 2  # toy tasks are all "test"
    assert row["pass_hat_1"] == 0.0  # one random-weight SFT step solves nothing
    assert user_calls >= 2  # the user simulator talked to the served model
    lake = toy_lake
    run = lake.read("training_runs").filter(pl.col("training_run_id") == run_id).collect()
    assert run["status"].to_list() == ["succeeded"]
    assert lake.read("datasets").collect()["n_rows"].to_list() == [4]
    scores = lake.read("scores").filter(pl.col("assistant_model") == run_id).collect()
    assert scores.height == 2 and scores["complete"].all()
    assert lake.read("evaluations").collect()["evaluation_id"].to_list() == [row["evaluation_id"]]


def test_nightly_training_stage_is_off_by_default(monkeypatch: object) -> None:
    assert training_stage(TASK_SET, ["toy"]) is None
    on = TrainingStageSettings.model_validate({"enabled": True, "method": "dpo"})
    assert on.enabled and on.method == "dpo"


def test_cli_names_bad_input_and_where_it_is() -> None:
    from typer.testing import CliRunner

    from maestro.cli.app import app

    runner = CliRunner()
    toy = str(FIXTURES / "toy")
    bad_method = runner.invoke(
        app, ["train", "--method", "ppo", "--task-set", "s", "--domain", toy]
    )
    assert bad_method.exit_code == 2 and "'ppo' is not sft, dpo or grpo" in bad_method.output
    bad_base = runner.invoke(
        app, ["train", "--method", "sft", "--task-set", "s", "--domain", toy, "--base", "/nope"]
    )
    assert bad_base.exit_code == 2 and "'/nope' is neither" in bad_base.output
