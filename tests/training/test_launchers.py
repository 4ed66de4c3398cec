"""Launchers: the accelerate entrypoint, the local launcher, and a Ray job server that is not
there. A real Ray job runs in test_flows.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maestro.storage import Lake
from maestro.training.job import TrainJob
from maestro.training.launchers import (
    LaunchError,
    LaunchSettings,
    LocalLauncher,
    RayJobLauncher,
    RaySettings,
    entrypoint,
)
from maestro.training.recipes import RecipeSettings

from .conftest import TASK_SET, free_port


def test_entrypoint_is_accelerate_with_one_process_per_gpu() -> None:
    cmd = entrypoint(Path("/x/job.json"), RaySettings(num_gpus=4, python="python"))
    assert cmd[:3] == ["python", "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "4" and "--multi_gpu" in cmd
    assert cmd[-3:] == ["-m", "maestro.training.job", "/x/job.json"]
    assert "--cpu" in entrypoint(Path("j"), RaySettings(num_gpus=0))


def test_unreachable_job_server_is_a_launch_error(tmp_path: Path) -> None:
    launcher = RayJobLauncher(RaySettings(address=f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(LaunchError, match=r"Ray job server at http://127\.0\.0\.1"):
        launcher._client()


def test_local_launcher_reports_a_failed_job_and_the_job_records_it(
    toy_lake: Lake, tmp_path: Path
) -> None:
    job = TrainJob(
        training_run_id="local-1",
        run_id="local-1",
        recipe=RecipeSettings(method="sft", max_steps=1),
        dataset_id="sft/missing",
        dataset_uri=str(tmp_path / "missing.parquet"),
        task_set_id=TASK_SET,
        lake_root=toy_lake.root,
        output_dir=str(tmp_path / "out"),
    )
    seen: list[str] = []
    result = LocalLauncher(LaunchSettings(deadline_s=300)).launch(job, seen.append)
    assert result.status == "failed"
    assert "missing.parquet" in result.logs_tail and seen
    runs = toy_lake.read("training_runs").collect()
    assert runs.select("training_run_id", "status").rows() == [("local-1", "failed")]
    assert "missing.parquet" in json.loads(runs["metrics_json"][0])["error"]
