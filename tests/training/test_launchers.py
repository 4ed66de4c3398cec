"""The Ray-job launcher on a real local Ray cluster (head started with its job server)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from maestro.domains import Domain
from maestro.storage import Lake
from maestro.training.datasets import build_sft
from maestro.training.job import TrainJob
from maestro.training.launchers import LaunchError, RayJobLauncher, RaySettings, entrypoint
from maestro.training.models import BaseModelSpec
from maestro.training.recipes import LoraSettings, RecipeSettings

from .conftest import TASK_SET

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def ray_head(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A one-node Ray cluster of our own: its temp dir under the test's tmp folder, its own
    ports, token auth off (a local test cluster), stopped by its process group at the end."""
    temp = tmp_path_factory.mktemp("ray")
    dashboard = _free_port()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    cmd = [
        RAY, "start", "--head", "--block", f"--temp-dir={temp}",
        f"--port={_free_port()}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
        f"--dashboard-agent-listen-port={_free_port()}", f"--ray-client-server-port={_free_port()}",
        "--num-cpus=2", "--num-gpus=0", "--include-dashboard=true", "--disable-usage-stats",
    ]  # fmt: skip
    log = (temp / "head.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/version", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"Ray head did not start: {(temp / 'head.log').read_text()[-2000:]}"
                    )
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # its graceful stop can take 20 s: not worth waiting
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def test_entrypoint_is_accelerate_with_one_process_per_gpu() -> None:
    cmd = entrypoint(Path("/x/job.json"), RaySettings(num_gpus=4, python="python"))
    assert cmd[:3] == ["python", "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "4" and "--multi_gpu" in cmd
    assert cmd[-3:] == ["maestro.training.job", "/x/job.json"][:0] + [
        "-m",
        "maestro.training.job",
        "/x/job.json",
    ]
    assert "--cpu" in entrypoint(Path("j"), RaySettings(num_gpus=0))


def test_unreachable_job_server_is_a_launch_error(tmp_path: Path) -> None:
    launcher = RayJobLauncher(RaySettings(address=f"http://127.0.0.1:{_free_port()}"))
    with pytest.raises(LaunchError, match="Ray job server at http://127.0.0.1"):
        launcher._client()


def test_ray_job_trains_and_records_the_run(
    ray_head: str, toy: Domain, toy_lake: Lake, tiny_spec: BaseModelSpec, tmp_path: Path
) -> None:
    ds = build_sft(toy_lake, {"toy": toy}, TASK_SET, split=None)
    uri = ds.export(tmp_path / "data")
    base = tiny_spec.model_copy(update={"cache_dir": tiny_spec.cache_dir.resolve()})
    job = TrainJob(
        training_run_id="flowrun-123",
        run_id="flowrun-123",
        recipe=RecipeSettings(
            method="sft", base=base, max_steps=1, batch_size=1, lora=LoraSettings(r=4, alpha=8)
        ),
        dataset_id=ds.dataset_id,
        dataset_uri=str(uri),
        task_set_id=TASK_SET,
        lake_root=toy_lake.root,
        output_dir=str(tmp_path / "out"),
    )
    logs: list[str] = []
    settings = RaySettings(address=ray_head, poll_s=0.5, deadline_s=300, num_cpus=1)
    result = RayJobLauncher(settings).launch(job, logs.append)
    assert result.status == "succeeded", result.logs_tail
    assert result.submission_id == "flowrun-123"
    assert "trained sft for 1 step(s)" in "".join(logs)
    runs = toy_lake.read("training_runs").collect()
    assert runs.select("training_run_id", "status", "method").rows() == [
        ("flowrun-123", "succeeded", "sft")
    ]
    model = toy_lake.read("models").filter(pl.col("model_id") == "flowrun-123").collect()
    assert (Path(model["uri"][0]) / "adapter_config.json").is_file()  # LoRA adapters
