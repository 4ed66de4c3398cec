"""One run folder (``MAESTRO_RUN_DIR``) roots every path a run writes, unless one is set apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from maestro.agents.settings import LLMSettings
from maestro.flows.training import EvaluateParams
from maestro.settings import RunSettings
from maestro.storage import LakeSettings
from maestro.training.models import BaseModelSpec


def test_every_path_derives_from_the_run_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MAESTRO_LAKE_ROOT", raising=False)
    monkeypatch.setenv("MAESTRO_RUN_DIR", str(tmp_path))
    run = RunSettings()
    assert run.dir == tmp_path
    assert LakeSettings().root == str(tmp_path / "lake")
    assert LLMSettings().embedded.cache_dir == tmp_path / "models"
    assert BaseModelSpec().cache_dir == tmp_path / "models"
    assert EvaluateParams(model_id="m", task_set_id="s").runs_dir == tmp_path / "training"
    assert (run.prefect_home, run.reports) == (tmp_path / "prefect", tmp_path / "reports")
    # A path configured apart wins.
    monkeypatch.setenv("MAESTRO_LAKE_ROOT", "s3://bucket/lake")
    assert LakeSettings().root == "s3://bucket/lake"


def test_the_default_run_folder_is_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAESTRO_RUN_DIR", raising=False)
    monkeypatch.delenv("MAESTRO_LAKE_ROOT", raising=False)
    assert LakeSettings().root == "runs/lake"
