"""Prefect flows for training: build a dataset and train on it (locally or as a Ray job), and
evaluate a trained model on a task set's held-out split. ``training_stage`` is what the nightly
run calls after curating a task set; it does nothing unless configured on."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Literal

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE
from prefect.runtime import flow_run
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from maestro.agents.settings import LLMSettings, Role, RoleSettings, load_llm_settings
from maestro.flows.endpoints import model_endpoints
from maestro.flows.flow_logs import job_log_lines
from maestro.settings import RunSettings
from maestro.storage import Lake, LakeSettings
from maestro.training.datasets import BUILDERS, PromptBudget, TrainingDataset
from maestro.training.evaluation import EvaluationSettings, evaluate_model
from maestro.training.job import TrainJob, load_domains
from maestro.training.launchers import (
    LaunchResult,
    LaunchSettings,
    LocalLauncher,
    RayJobLauncher,
    RaySettings,
)
from maestro.training.recipes import RecipeSettings
from maestro.training.registry import model_uri, record_run, run_status


class TrainParams(BaseModel):
    """What to train on and how; ``recipe.method`` picks SFT, DPO or GRPO."""

    task_set_id: str
    domains: list[str] = Field(default_factory=list)
    recipe: RecipeSettings
    split: str | None = "train"
    launcher: Literal["local", "ray"] = "local"
    local: LaunchSettings = Field(default_factory=LaunchSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    lake_root: str | None = None
    runs_dir: Path = Field(default_factory=lambda: RunSettings().training)
    #: GRPO's user simulator; the user role's settings when not given.
    user: RoleSettings | None = None


class EvaluateParams(BaseModel):
    model_id: str
    task_set_id: str
    domains: list[str] = Field(default_factory=list)
    settings: EvaluationSettings = Field(default_factory=EvaluationSettings)
    lake_root: str | None = None
    runs_dir: Path = Field(default_factory=lambda: RunSettings().training)


def _lake(root: str | None) -> Lake:
    return Lake(LakeSettings(root=root) if root else LakeSettings())


def current_run_id() -> str:
    """The Prefect flow run's id (the Ray submission id too); a fresh id outside a flow."""
    return str(flow_run.id or uuid.uuid4())


@task(name="build dataset", cache_policy=NONE, retries=1, retry_delay_seconds=5)
def build_dataset(params: TrainParams, run_id: str, folder: Path) -> tuple[TrainingDataset, Path]:
    lake = _lake(params.lake_root)
    domains = load_domains(params.domains)
    method = params.recipe.method
    budget = PromptBudget.of_recipe(params.recipe)
    ds = BUILDERS[method](lake, domains, params.task_set_id, split=params.split, budget=budget)
    uri = ds.export(folder)
    ds.register(lake, run_id, str(uri))
    return ds, uri


@task(name="launch training job", cache_policy=NONE)
def launch(params: TrainParams, job: TrainJob) -> LaunchResult:
    logger = get_run_logger()

    def relay(text: str) -> None:
        # The job's own words and warnings; its progress bars stay in job.log.
        for line in job_log_lines(text):
            logger.info("job: %s", line)
        logger.info("the job's whole output: %s", Path(job.output_dir) / "job.log")

    if params.launcher == "ray":
        return RayJobLauncher(params.ray).launch(job, relay)
    return LocalLauncher(params.local).launch(job, relay)


@flow(name="maestro-train")
def train_flow(params: TrainParams) -> dict[str, Any]:
    """Dataset from the lake, then the recipe as a job; the run and model land in the lake."""
    run_id = current_run_id()
    out = (params.runs_dir / run_id).resolve()
    lake_root = str(_lake(params.lake_root).root)
    ds, uri = build_dataset(params, run_id, out / "dataset")
    user = params.user
    if params.recipe.method == "grpo" and user is None:
        user = load_llm_settings().user
    job = TrainJob(
        training_run_id=run_id,
        run_id=run_id,
        recipe=params.recipe,
        dataset_id=ds.dataset_id,
        dataset_uri=str(uri),
        task_set_id=params.task_set_id,
        lake_root=lake_root,
        output_dir=str(out),
        domains=params.domains,
        user=user,
    )
    result = launch(params, job)
    lake = _lake(lake_root)
    if result.status != "succeeded" and run_status(lake, run_id) != "failed":
        # The job could not record its own end (killed, timed out, never started).
        record_run(
            lake,
            run_id,
            run_id,
            method=params.recipe.method,
            dataset_id=ds.dataset_id,
            base_model=params.recipe.base.name,
            status=result.status,
            config=params.recipe.model_dump(mode="json"),
            metrics={"logs_tail": result.logs_tail},
        )
    return {
        "training_run_id": run_id,
        "dataset_id": ds.dataset_id,
        "dataset_rows": len(ds.rows),
        "dataset_dropped": ds.drop_counts(),
        "status": result.status,
        "wall_s": result.wall_s,
        "output_dir": str(out),
    }


@task(name="evaluate model", cache_policy=NONE)
def evaluate(params: EvaluateParams, run_id: str, llm: LLMSettings) -> dict[str, Any]:
    lake = _lake(params.lake_root)
    domains = load_domains(params.domains)
    uri = Path(model_uri(lake, params.model_id))
    return evaluate_model(
        lake, run_id, params.model_id, uri, params.task_set_id, domains, llm, params.settings
    )


@flow(name="maestro-evaluate")
def evaluate_flow(params: EvaluateParams) -> dict[str, Any]:
    """Serve a registered model and score it on the task set's held-out split."""
    run_id = current_run_id()
    # The assistant is the served model: only the user, and the judge when judging, are called.
    roles: tuple[Role, ...] = ("user", "judge") if params.settings.judge else ("user",)
    with model_endpoints(load_llm_settings(), roles, params.runs_dir) as settings:
        return evaluate(params, run_id, settings)


class TrainingStageSettings(BaseSettings):
    """The nightly's training stage: ``MAESTRO_TRAINING__ENABLED=1`` turns it on."""

    model_config = SettingsConfigDict(
        env_prefix="MAESTRO_TRAINING__", env_nested_delimiter="__", extra="ignore"
    )

    enabled: bool = False
    method: Literal["sft", "dpo", "grpo"] = "sft"
    launcher: Literal["local", "ray"] = "local"
    max_steps: int = Field(50, ge=1)
    ray: RaySettings = Field(default_factory=RaySettings)


def training_stage(
    task_set_id: str,
    domains: list[str],
    lake_root: str | None = None,
    settings: TrainingStageSettings | None = None,
) -> dict[str, Any] | None:
    """Train on the nightly's task set when the stage is on; ``None`` when it is off."""
    settings = settings or TrainingStageSettings()
    if not settings.enabled:
        return None
    params = TrainParams(
        task_set_id=task_set_id,
        domains=domains,
        recipe=RecipeSettings(method=settings.method, max_steps=settings.max_steps),
        launcher=settings.launcher,
        ray=settings.ray,
        lake_root=lake_root,
    )
    return train_flow(params)
