"""Starting Ray once per process, with its files inside the project's run folder."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class RaySettings(BaseSettings):
    """Where episodes fan out: ``MAESTRO_RAY_ADDRESS`` names a cluster (``ray://host:10001`` or
    ``auto``); unset starts a local Ray."""

    model_config = SettingsConfigDict(env_prefix="MAESTRO_RAY_", extra="ignore")

    address: str | None = None
    num_cpus: int | None = None
    #: Workers a nightly run fans episodes out over when its options don't say: unset means
    #: one per CPU that Ray has; 0 runs episodes in the flow's own process, without Ray.
    workers: int | None = None


def ensure_ray(
    run_dir: Path, settings: RaySettings | None = None, *, num_cpus: int | None = None
) -> None:
    """Connect to the configured cluster, or start a local Ray, unless this process already did.

    A local Ray keeps its temp files under ``run_dir/ray`` (or a short path under /tmp when that
    path is too long for Ray's sockets).
    """
    import ray

    if ray.is_initialized():
        return
    settings = settings or RaySettings()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if settings.address:
        ray.init(address=settings.address, log_to_driver=False)
        return
    temp = (run_dir / "ray").resolve()
    if len(str(temp)) > 60:
        temp = Path("/tmp") / f"maestro-ray-{os.getuid()}"
    temp.mkdir(parents=True, exist_ok=True)
    ray.init(
        num_cpus=num_cpus or settings.num_cpus or os.cpu_count() or 2,
        include_dashboard=False,
        _temp_dir=str(temp),
        log_to_driver=False,
        runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}},
    )


def ray_cpus() -> int:
    """CPUs of the Ray this process is connected to: the default number of workers."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))
