"""Where a run writes: one folder, ``MAESTRO_RUN_DIR`` (default ``runs``), from which every path
a run writes derives (the lake, Ray's temp files, Prefect's home, the model cache, reports,
training, synthesis and annotation folders), unless one is configured apart
(``MAESTRO_LAKE_ROOT``, ``PREFECT_HOME``, ``MAESTRO_EMBEDDED__CACHE_DIR``).

A leaf module: it imports nothing from maestro, so storage, agents, simulation, training, flows
and the CLI all read the same folder.
"""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class RunSettings(BaseSettings):
    """The run folder (``MAESTRO_RUN_DIR``) and the paths under it."""

    model_config = SettingsConfigDict(env_prefix="MAESTRO_RUN_", extra="ignore")

    dir: Path = Path("runs")

    @property
    def lake(self) -> Path:
        """The lake root when ``MAESTRO_LAKE_ROOT`` is not set."""
        return self.dir / "lake"

    @property
    def prefect_home(self) -> Path:
        return self.dir / "prefect"

    @property
    def models(self) -> Path:
        """The embedded model's and the training base models' cache."""
        return self.dir / "models"

    @property
    def reports(self) -> Path:
        return self.dir / "reports"

    @property
    def training(self) -> Path:
        return self.dir / "training"

    @property
    def synthesis(self) -> Path:
        return self.dir / "synthesis"

    @property
    def annotation(self) -> Path:
        return self.dir / "annotation"
