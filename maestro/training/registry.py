"""The training_runs and models tables: what ran, on which dataset, and where its weights are."""

from __future__ import annotations

import json
from typing import Any

from maestro.storage import Lake
from maestro.storage.rows import ModelRow, TrainingRunRow


class RegistryError(Exception):
    """A model or run the caller named is not in the lake."""


def record_run(
    lake: Lake,
    run_id: str,
    training_run_id: str,
    *,
    method: str,
    dataset_id: str,
    base_model: str,
    status: str,
    config: dict[str, Any],
    metrics: dict[str, Any] | None = None,
) -> None:
    """Write (or update, merged on its id) one training run's row."""
    row = TrainingRunRow(
        training_run_id=training_run_id,
        method=method,
        dataset_id=dataset_id,
        base_model=base_model,
        status=status,
        config_json=json.dumps(config, sort_keys=True, default=str),
        metrics_json=json.dumps(metrics or {}, sort_keys=True, default=str),
    )
    lake.write(row.TABLE, [row], run_id)


def record_model(
    lake: Lake, run_id: str, model_id: str, training_run_id: str, base_model: str, uri: str
) -> None:
    row = ModelRow(
        model_id=model_id, training_run_id=training_run_id, base_model=base_model, uri=uri
    )
    lake.write(row.TABLE, [row], run_id)


def run_status(lake: Lake, training_run_id: str) -> str | None:
    status = lake.values(TrainingRunRow, "status", training_run_id=training_run_id)
    return str(status[0]) if status else None


def model_uri(lake: Lake, model_id: str) -> str:
    """Where a registered model's weights are."""
    uris = lake.values(ModelRow, "uri", model_id=model_id)
    if not uris:
        raise RegistryError(f"model {model_id!r} is not in the models table")
    return str(uris[0])
