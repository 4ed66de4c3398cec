"""Fixtures for training tests: the tiny model's tokenizer (slow to read once), and a lake with
the toy domain's tasks, scored episodes and a task set."""

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
from typing import Any

import pytest

from maestro.conversation import Trajectory
from maestro.domains import Domain
from maestro.scoring import Scorer
from maestro.simulation.episode import EpisodeResult, Termination
from maestro.simulation.scripted import gold_trajectory, null_trajectory
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import domain_row, episode_row, score_row, task_row
from maestro.training.models import BaseModelSpec, load_tokenizer

TASK_SET = "toy-set"
RUN = "r1"


@pytest.fixture(scope="session")
def tiny_spec() -> BaseModelSpec:
    spec = BaseModelSpec(kind="tiny", hidden_size=64, layers=2)
    load_tokenizer(spec)  # the first read of the GGUF tokenizer is cached for later loads
    return spec


def _episode(traj: Trajectory, trial: int) -> EpisodeResult:
    return EpisodeResult(
        domain_id=traj.domain_id,
        task_id=traj.task_id,
        trial=trial,
        seed=trial,
        trajectory=traj,
        termination=Termination.USER_STOP,
        duration_s=0.1,
        tool_calls=len(traj.assistant_calls()),
    )


def fill_lake(lake: Lake, domain: Domain, task_ids: list[str]) -> dict[str, Any]:
    """The toy domain's tasks; per task a gold (passing) and a null (failing) episode, scored
    by the real scorer; a task set of them."""
    lake.write("domains", [domain_row(domain)], RUN)
    lake.write("tasks", [task_row(domain, t) for t in domain.tasks], RUN)
    scorer = Scorer(domain)
    episodes, scores = [], []
    for task_id in task_ids:
        task = domain.task(task_id)
        for trial, traj in enumerate(
            [gold_trajectory(domain, task), null_trajectory(domain, task)]
        ):
            e = _episode(traj, trial)
            card = scorer.score(task, traj)
            episodes.append(episode_row(RUN, e, domain.manifest.version, "scripted", "scripted"))
            scores.append(score_row(RUN, e, card, "scripted"))
    lake.write("episodes", episodes, RUN)
    lake.write("scores", scores, RUN)
    refs = [{"domain_id": domain.id, "task_id": t} for t in task_ids]
    row = {"task_set_id": TASK_SET, "name": "toy", "tasks": refs, "built_from": []}
    lake.write("task_sets", [row], RUN)
    return row


@pytest.fixture
def toy_lake(tmp_path: Path, toy: Domain) -> Lake:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    fill_lake(lake, toy, ["toy_cancel", "toy_status"])
    return lake


RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
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
    dashboard = free_port()
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    cmd = [
        RAY, "start", "--head", "--block", f"--temp-dir={temp}",
        f"--port={free_port()}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
        f"--dashboard-agent-listen-port={free_port()}", f"--ray-client-server-port={free_port()}",
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
