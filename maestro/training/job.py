"""One training run as a self-contained job: ``python -m maestro.training.job SPEC.json``.

The launchers start this module (under ``accelerate launch``) locally or as a Ray job. The spec
names the exported dataset, the recipe, the lake and, for GRPO, the domains and the user
simulator's endpoint; the job trains, saves the model, records the run and the model in the
lake, and writes ``result.json`` next to the model.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from maestro.agents.settings import RoleSettings
from maestro.domains import Domain, domain_path, load_domain
from maestro.domains.files import write_file
from maestro.storage import Lake, LakeSettings
from maestro.training.datasets import Method, TrainingDataset
from maestro.training.recipes import RecipeSettings, TrainResult, train
from maestro.training.registry import record_model, record_run


class TrainJob(BaseModel):
    """Everything a run needs, as JSON; its id is the flow run's id."""

    training_run_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    run_id: str
    recipe: RecipeSettings
    dataset_id: str
    dataset_uri: str
    task_set_id: str
    lake_root: str
    output_dir: str
    #: Library ids or package folders; GRPO needs them to run episodes and score them.
    domains: list[str] = Field(default_factory=list)
    user: RoleSettings | None = None

    @property
    def method(self) -> Method:
        return self.recipe.method


def load_domains(refs: list[str]) -> dict[str, Domain]:
    """Library ids or package folders (written as paths), keyed by domain id."""
    loaded = [load_domain(domain_path(r)) for r in refs]
    return {d.id: d for d in loaded}


def load_dataset(job: TrainJob) -> TrainingDataset:
    from datasets import Dataset

    rows = Dataset.from_parquet(job.dataset_uri).to_list()
    return TrainingDataset(job.dataset_id, job.method, job.task_set_id, rows)


def _train(job: TrainJob) -> TrainResult:
    return train(
        job.recipe,
        load_dataset(job),
        Path(job.output_dir),
        domains=load_domains(job.domains) if job.domains else None,
        user=job.user,
    )


def run(job: TrainJob) -> TrainResult:
    """Train, save, and record the run and its model (from the main process only)."""
    if os.environ.get("RANK", "0") != "0":
        return _train(job)
    lake = Lake(LakeSettings(root=job.lake_root))
    config = job.recipe.model_dump(mode="json")
    base = job.recipe.base.name
    common: dict[str, Any] = {
        "method": job.method,
        "dataset_id": job.dataset_id,
        "base_model": base,
    }
    record_run(lake, job.run_id, job.training_run_id, status="running", config=config, **common)
    try:
        result = _train(job)
    except Exception as exc:
        record_run(
            lake,
            job.run_id,
            job.training_run_id,
            status="failed",
            config=config,
            metrics={"error": f"{type(exc).__name__}: {exc}"},
            **common,
        )
        raise
    metrics = {**result.metrics, "steps": result.steps, "log_history": result.log_history}
    record_run(
        lake,
        job.run_id,
        job.training_run_id,
        status="succeeded",
        config=config,
        metrics=metrics,
        **common,
    )
    if result.model_dir:
        record_model(
            lake, job.run_id, job.training_run_id, job.training_run_id, base, result.model_dir
        )
    write_file(Path(job.output_dir) / "result.json", result.model_dump_json(indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one maestro training job from its spec.")
    parser.add_argument("spec", type=Path, help="the job's JSON spec (TrainJob)")
    args = parser.parse_args(argv)
    if not args.spec.is_file():
        print(f"job spec {args.spec} does not exist", file=sys.stderr)
        return 2
    job = TrainJob.model_validate_json(args.spec.read_text())
    result = run(job)
    print(f"trained {job.method} for {result.steps} step(s); model at {result.model_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
