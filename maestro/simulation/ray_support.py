"""Starting Ray once per process, with its files inside the project's run folder."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger(__name__)

#: Attempts at joining a cluster: Ray Client's head starts one server process per connection,
#: and that start fails now and then (it forks from a threaded gRPC process); a new connection
#: gets a new server on another port.
CONNECT_ATTEMPTS = 3
CONNECT_PAUSE_S = 2.0


class RayConnectError(RuntimeError):
    """The configured cluster could not be joined."""


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
        _connect(settings.address)
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


def _connect(address: str, init: Callable[..., object] | None = None) -> None:
    """Join the cluster at ``address`` with ``init`` (``ray.init``), trying again (bounded) when
    the cluster turns the connection away; a failed attempt leaves this process disconnected."""
    if init is None:
        import ray

        init = ray.init
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            init(address=address, log_to_driver=False)
            return
        except ConnectionError as exc:
            # Unreachable (Ray Client has waited 30 s by then): another attempt would wait as
            # long. Turned away once reached: the cluster is there, another connection may do.
            if not isinstance(exc, ConnectionAbortedError) or attempt == CONNECT_ATTEMPTS:
                raise RayConnectError(
                    f"could not join the Ray cluster at MAESTRO_RAY_ADDRESS={address!r} "
                    f"(attempt {attempt} of {CONNECT_ATTEMPTS}): {exc}"
                ) from exc
            log.warning(
                "joining the Ray cluster at %s failed (attempt %d of %d), trying again: %s",
                address,
                attempt,
                CONNECT_ATTEMPTS,
                str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__,
            )
            time.sleep(CONNECT_PAUSE_S * attempt)


def ray_cpus() -> int:
    """CPUs of the Ray this process is connected to: the default number of workers."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))
