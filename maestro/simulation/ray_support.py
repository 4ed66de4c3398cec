"""Starting Ray once per process, with its files inside the project's run folder."""

from __future__ import annotations

import os
from pathlib import Path


def ensure_ray(run_dir: Path, address: str | None = None, num_cpus: int | None = None) -> None:
    """Connect to ``address`` (or ``MAESTRO_RAY_ADDRESS``), or start a local Ray, unless this
    process already did. A local Ray keeps its temp files under ``run_dir/ray``."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    address = address or os.environ.get("MAESTRO_RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False)
        return
    temp = (run_dir / "ray").resolve()
    temp.mkdir(parents=True, exist_ok=True)
    # Ray limits the socket path length; keep the temp dir short when the project path is long.
    if len(str(temp)) > 60:
        temp = Path("/tmp") / f"maestro-ray-{os.getuid()}"
        temp.mkdir(parents=True, exist_ok=True)
    ray.init(
        num_cpus=num_cpus or os.cpu_count() or 2,
        include_dashboard=False,
        _temp_dir=str(temp),
        log_to_driver=False,
        runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}},
    )
