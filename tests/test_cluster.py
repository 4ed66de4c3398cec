"""The cluster path as production runs it, on one machine: a Ray head and a second Ray node
started with ``ray start`` (separate processes with their own ports and temp folders, token
authentication on, as on two machines) that the nightly fans its episodes out over through
``MAESTRO_RAY_ADDRESS``; and the nightly deployed from ``deploy/prefect.yaml`` to a process work
pool on a real Prefect server and run by a ``prefect worker`` process.

Episodes play against the scripted OpenAI-compatible server, so the tests check the plumbing,
not a model. Every process they start ends with them (``ray start --block`` ends the processes
it started when it is terminated).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.flows.prefect_server import LocalPrefectServer
from maestro.storage import Lake, LakeSettings
from tests.flows.test_nightly import env_for, nightly
from tests.prefect_api import prefect_api

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
#: Ray's start-up here takes 5-15 s per node; the margin covers a loaded machine.
START_S = 120.0


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class RayNode:
    """One ``ray start --block`` process and the temp folder its node writes to."""

    proc: subprocess.Popen[bytes]
    temp_dir: Path
    log: Path

    def wait_started(self) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if "block forever" in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"ray start did not come up:\n{self.log.read_text()[-3000:]}")

    @property
    def node_id(self) -> str:
        """The node's id, from the port files its raylet writes to its session folder."""
        [port_file] = (self.temp_dir / "session_latest").glob("metrics_export_port_*")
        return port_file.name.rsplit("_", 1)[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # --block ends the node's processes, then itself
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def _ray_start(args: list[str], temp_dir: Path, env: dict[str, str]) -> RayNode:
    temp_dir.mkdir(parents=True)
    log = temp_dir.with_suffix(".log")
    ports = free_ports(6)
    cmd = [
        str(BIN / "ray"),
        "start",
        "--block",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
        f"--node-manager-port={ports[0]}",
        f"--object-manager-port={ports[1]}",
        f"--dashboard-agent-listen-port={ports[2]}",
        f"--dashboard-agent-grpc-port={ports[3]}",
        f"--runtime-env-agent-port={ports[4]}",
        f"--metrics-export-port={ports[5]}",
        *args,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    return RayNode(proc, temp_dir, log)


def ray_status(address: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ray"), "status", f"--address={address}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass
class RayCluster:
    address: str  # the head's GCS address: a driver on a node of the cluster
    client_address: str  # Ray Client's ray:// address: a driver elsewhere, as in deploy/
    nodes: list[RayNode]


@contextmanager
def ray_cluster(base: Path, env: dict[str, str]) -> Iterator[RayCluster]:
    """A head and a second node, once both are in the cluster."""
    gcs, client, dashboard = free_ports(3)
    address = f"127.0.0.1:{gcs}"
    nodes: list[RayNode] = []
    try:
        head_args = [
            "--head",
            f"--port={gcs}",
            f"--ray-client-server-port={client}",
            "--include-dashboard=false",
            f"--dashboard-port={dashboard}",
        ]
        nodes.append(_ray_start(head_args, base / "head", env))
        nodes[0].wait_started()
        nodes.append(_ray_start([f"--address={address}"], base / "node2", env))
        nodes[1].wait_started()
        deadline = time.monotonic() + START_S
        status = ""
        while time.monotonic() < deadline:
            status = ray_status(address, env).stdout
            if len(re.findall(r"^\s*1 node_[0-9a-f]+", status, re.MULTILINE)) == 2:
                break
            time.sleep(1)
        else:
            raise AssertionError(f"the second node never joined:\n{status}")
        yield RayCluster(address, f"ray://127.0.0.1:{client}", nodes)
    finally:
        for node in reversed(nodes):
            node.stop()


def _client_server_logs(head: RayNode) -> str:
    """The tails of the head's Ray Client server logs: why a connection was turned away."""
    logs = sorted((head.temp_dir / "session_latest" / "logs").glob("ray_client_server*.err"))
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in logs)


def _nightly_on(
    cluster_address: str, run_id: str, env: dict[str, str], head: RayNode
) -> dict[str, Any]:
    env = {**env, "MAESTRO_RAY_ADDRESS": cluster_address}
    env.pop("MAESTRO_RAY_WORKERS", None)  # one worker per CPU of the cluster: two
    proc = nightly(
        env,
        *("--run-id", run_id, "--domain", "hotel", "--tasks-per-domain", "4"),
        *("--trials", "2", "--no-judge", "--json"),
    )
    assert proc.returncode == 0, proc.stderr[-4000:] + "\n" + _client_server_logs(head)
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return summary


def test_the_nightly_runs_its_episodes_on_both_nodes_of_a_ray_cluster(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Ray's socket paths must stay under 107 characters: a short folder of the test's own.
    base = tmp_path_factory.mktemp("ray")
    ray_env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        # Ray Client's per-connection server must answer within this; its default (30 s) was
        # missed once here with the machine's 2 cores at a load of 8.
        "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S": "180",
    }
    with (
        ScriptedServer(ServerConfig(mode="oracle", latency_s=0.02)) as oracle,
        ray_cluster(base, ray_env) as cluster,
    ):
        # Token authentication is on: a client without the token is turned away.
        wrong = {**ray_env, "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        refused = ray_status(cluster.address, wrong)
        assert refused.returncode != 0 and "AuthenticationError" in refused.stderr
        env = {**env_for(oracle, tmp_path), **ray_env}
        # A driver on a node (the GCS address), and one through Ray Client, as deploy/ has it
        # (Ray Client cannot stream results: the runner takes each worker's batch whole).
        summaries = {
            "gcs": _nightly_on(cluster.address, "gcs", env, cluster.nodes[0]),
            "client": _nightly_on(cluster.client_address, "client", env, cluster.nodes[0]),
        }
        node_ids = {n.node_id for n in cluster.nodes}
    assert len(node_ids) == 2
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    for run_id, summary in summaries.items():
        assert summary["ray_workers"] == 2
        assert summary["terminations"] == {"user_stop": 8}
        episodes = lake.read("episodes").filter(pl.col("run_id") == run_id).collect()
        per_node = Counter(episodes["node_id"].to_list())
        print(f"{run_id}: episodes per node {dict(per_node)}")  # the evidence
        assert episodes.height == 8 and set(per_node) == node_ids


def test_a_cluster_that_cannot_be_joined_ends_the_nightly_naming_it(tmp_path: Path) -> None:
    [closed] = free_ports(1)
    address = f"ray://127.0.0.1:{closed}"
    with ScriptedServer(ServerConfig(mode="oracle")) as oracle:
        env = {**env_for(oracle, tmp_path), "MAESTRO_RAY_ADDRESS": address}
        env.pop("MAESTRO_RAY_WORKERS")
        proc = nightly(env, "--run-id", "nowhere", "--domain", "hotel", "--no-judge")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"could not join the Ray cluster at MAESTRO_RAY_ADDRESS='{address}'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "lake" / "episodes").exists()  # nothing ran, nothing was written


# ----- the deployment, run by a worker ------------------------------------------------------------


def _test_deployment(tmp_path: Path, oracle: ScriptedServer) -> Path:
    """deploy/prefect.yaml as it is, pointed at this machine: the repository as the working
    folder, a test work pool, a small run of the scripted oracle, and no schedule."""
    spec = yaml.safe_load((REPO / "deploy" / "prefect.yaml").read_text())
    [step] = spec["pull"]
    step["prefect.deployments.steps.set_working_directory"]["directory"] = str(REPO)
    [dep] = spec["deployments"]
    dep["schedules"] = []
    dep["parameters"] = {
        "params": {
            "run_id": "worker",
            "domains": ["hotel"],
            "tasks_per_domain": 3,
            "trials": 1,
            "synthesize": 0,
            "ray_workers": 0,
            "judge": False,
        }
    }
    dep["work_pool"]["name"] = "maestro-test-pool"
    env = {"MAESTRO_LAKE_ROOT": str(tmp_path / "lake"), "MAESTRO_RAY_WORKERS": "0"}
    for role in ("ASSISTANT", "USER", "JUDGE", "CODEGEN"):
        env[f"MAESTRO_{role}__BASE_URL"] = oracle.base_url
        env[f"MAESTRO_{role}__MODEL"] = "scripted-oracle"
    dep["work_pool"]["job_variables"]["env"] = env
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _prefect(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(BIN / "prefect"), "--no-prompt", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_the_deployed_nightly_is_run_by_a_prefect_worker(tmp_path: Path) -> None:
    with (
        ScriptedServer(ServerConfig(mode="oracle", latency_s=0.02)) as oracle,
        LocalPrefectServer(tmp_path / "prefect-server") as server,
    ):
        env = {**os.environ, "PREFECT_API_URL": server.api_url, "PREFECT_HOME": str(tmp_path)}
        env.pop("MAESTRO_RAY_ADDRESS", None)
        _prefect(["work-pool", "create", "maestro-test-pool", "--type", "process"], env)
        _prefect(
            ["deploy", "--all", "--prefect-file", str(_test_deployment(tmp_path, oracle))], env
        )
        [deployment] = prefect_api(server.api_url, "/deployments/filter", {})
        assert deployment["name"] == "maestro-nightly"
        assert deployment["entrypoint"] == "maestro/flows/nightly.py:nightly"
        run = prefect_api(server.api_url, f"/deployments/{deployment['id']}/create_flow_run", {})
        log = (tmp_path / "worker.log").open("wb")
        worker = subprocess.Popen(
            [str(BIN / "prefect"), "worker", "start", "--pool", "maestro-test-pool"],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 480
            state: dict[str, Any] = {}
            while time.monotonic() < deadline:
                state = prefect_api(server.api_url, f"/flow_runs/{run['id']}")["state"] or {}
                if state.get("type") in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                    break
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
                time.sleep(2)
        finally:
            worker.terminate()
            with suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=30)
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=30)
            log.close()
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
    print(f"worker-run flow run state: {state.get('name')}")  # the evidence
    assert state.get("type") == "COMPLETED", (state, worker_log[-4000:])
    verdicts = Lake(LakeSettings(root=str(tmp_path / "lake"))).read("task_verdicts").collect()
    assert verdicts.filter(pl.col("run_id") == "worker").height == 3
