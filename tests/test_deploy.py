"""The deployment files parse, and point at what exists in the code."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

DEPLOY = Path(__file__).parents[1] / "deploy"


def load(name: str) -> dict:  # type: ignore[type-arg]
    data = yaml.safe_load((DEPLOY / name).read_text())
    assert isinstance(data, dict), name
    return data


def test_prefect_deployment_runs_the_nightly_flow_at_two_utc() -> None:
    [dep] = load("prefect.yaml")["deployments"]
    path, func = dep["entrypoint"].split(":")
    module = path.removesuffix(".py").replace("/", ".")
    flow = getattr(importlib.import_module(module), func)
    assert flow.name == "maestro-nightly"
    assert dep["schedules"][0] == {"cron": "0 2 * * *", "timezone": "UTC"}
    from maestro.flows.stages import NightlyParams

    NightlyParams.model_validate(dep["parameters"]["params"])


def test_kuberay_manifests() -> None:
    cluster = load("kuberay/raycluster.yaml")
    assert cluster["kind"] == "RayCluster" and cluster["apiVersion"] == "ray.io/v1"
    gpu = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
        "limits"
    ]
    assert gpu["nvidia.com/gpu"] == "1"
    job = load("kuberay/rayjob.yaml")
    assert job["kind"] == "RayJob" and job["spec"]["entrypoint"].startswith("maestro nightly")


def test_compose_and_ray_cluster() -> None:
    compose = load("compose.yaml")
    assert {"prefect-server", "worker", "ray-head"} <= set(compose["services"])
    assert (
        compose["services"]["worker"]["environment"]["PREFECT_API_URL"]
        == "http://prefect-server:4200/api"
    )
    assert load("ray/cluster.yaml")["provider"]["type"] == "local"
    assert "scripts/setup.sh" in (DEPLOY / "Dockerfile").read_text()
