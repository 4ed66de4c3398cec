"""``maestro train`` and ``maestro evaluate``: the training flows from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from maestro.cli.domains import load_or_exit
from maestro.cli.inputs import bounded_float, lake_or_exit, seconds
from maestro.cli.output import echo
from maestro.cli.prefect_api import flows_api


def _base(base: str) -> dict[str, str]:
    if base in ("tiny", "smollm2-135m"):
        return {"kind": base}
    if not Path(base).is_dir():
        raise typer.BadParameter(
            f"{base!r} is neither 'tiny', 'smollm2-135m' nor a model folder", param_hint="--base"
        )
    return {"kind": "path", "path": str(Path(base).resolve())}


def _domains(refs: list[str]) -> list[str]:
    # Fail here, with the problem and its place, rather than inside a flow task.
    return [str(load_or_exit(r).path or r) for r in refs]


def _known_or_exit(lake_root: str | None, task_set: str, model: str | None = None) -> None:
    """The task set (and model) must be in the lake: a typo was found only inside the flow,
    after a Prefect server (and, to evaluate, the embedded model) had started; three tracebacks
    and exit 1. Now one line and exit 2, nothing started."""
    from maestro.storage.rows import ModelRow, TaskSetRow

    lake = lake_or_exit(lake_root)
    problem = None
    if lake.version(TaskSetRow.TABLE) is None:
        problem = "the lake has no task_sets table yet: curate a task set first (maestro nightly)"
    elif not lake.values(TaskSetRow, "task_set_id", task_set_id=task_set):
        problem = f"task set {task_set!r} is not in the task_sets table ({lake.root})"
    elif model is not None and (
        lake.version(ModelRow.TABLE) is None
        or not lake.values(ModelRow, "model_id", model_id=model)
    ):
        problem = f"model {model!r} is not in the models table ({lake.root})"
    if problem:
        echo(f"error: {problem}", err=True)
        raise typer.Exit(2)


def train(
    method: str = typer.Option(..., help="sft, dpo or grpo."),
    task_set: str = typer.Option(..., "--task-set", help="Task set id (task_sets table)."),
    domain: list[str] = typer.Option(..., "--domain", help="Library id or package folder."),
    base: str = typer.Option("tiny", help="tiny, smollm2-135m, or a model folder."),
    max_steps: int = typer.Option(10, min=1, max=10_000_000),
    batch_size: int = typer.Option(2, min=1, max=65_536),
    learning_rate: float = typer.Option(
        5e-4, parser=bounded_float(0.0, 1.0, low_open=True), metavar="FLOAT"
    ),
    lora: bool = typer.Option(False, help="Train LoRA adapters instead of all weights."),
    split: str = typer.Option("train", help="Task split to train on ('all' for every task)."),
    launcher: str = typer.Option("local", help="local or ray."),
    ray_address: str = typer.Option("http://127.0.0.1:8265", help="Ray job server."),
    gpus: int = typer.Option(0, min=0, max=1024, help="GPUs for the job (0: CPU)."),
    deadline_s: float = typer.Option(
        6 * 3600.0, parser=seconds, metavar="SECONDS", help="Deadline for the whole job."
    ),
    lake_root: str | None = typer.Option(None, help="Lake root (default MAESTRO_LAKE_ROOT)."),
) -> None:
    """Build a dataset from a task set and train on it; prints the run summary as JSON."""
    if method not in ("sft", "dpo", "grpo"):
        raise typer.BadParameter(f"{method!r} is not sft, dpo or grpo", param_hint="--method")
    if launcher not in ("local", "ray"):
        raise typer.BadParameter(f"{launcher!r} is not local or ray", param_hint="--launcher")
    domains, base_spec = _domains(domain), _base(base)
    _known_or_exit(lake_root, task_set)
    with flows_api() as prefect_ready:
        # Prefect is imported once its API is set.
        from maestro.flows.training import TrainParams, train_flow

        prefect_ready()
        launch = {"num_gpus": gpus, "deadline_s": deadline_s}
        params = TrainParams.model_validate(
            {
                "task_set_id": task_set,
                "domains": domains,
                "split": None if split == "all" else split,
                "recipe": {
                    "method": method,
                    "base": base_spec,
                    "max_steps": max_steps,
                    "batch_size": batch_size,
                    "learning_rate": learning_rate,
                    "lora": {} if lora else None,
                },
                "launcher": launcher,
                "local": launch,
                "ray": {**launch, "address": ray_address},
                "lake_root": lake_root,
            }
        )
        summary = train_flow(params)
    echo(json.dumps(summary))
    if summary["status"] != "succeeded":
        raise typer.Exit(1)


def evaluate(
    model_id: str = typer.Option(..., "--model", help="Model id (models table)."),
    task_set: str = typer.Option(..., "--task-set", help="Task set id (task_sets table)."),
    domain: list[str] = typer.Option(..., "--domain", help="Library id or package folder."),
    split: str = typer.Option("test", help="The held-out split to score on."),
    trials: int = typer.Option(1, min=1, max=64),
    max_turns: int = typer.Option(8, min=1, max=1000),
    max_new_tokens: int = typer.Option(256, min=1, max=1_000_000),
    judge: bool = typer.Option(True, help="Judge NL assertions with the judge role."),
    lake_root: str | None = typer.Option(None, help="Lake root (default MAESTRO_LAKE_ROOT)."),
) -> None:
    """Serve a trained model and score it on a task set's held-out split."""
    domains = _domains(domain)
    _known_or_exit(lake_root, task_set, model_id)
    with flows_api() as prefect_ready:
        from maestro.flows.training import EvaluateParams, evaluate_flow

        prefect_ready()
        params = EvaluateParams.model_validate(
            {
                "model_id": model_id,
                "task_set_id": task_set,
                "domains": domains,
                "lake_root": lake_root,
                "settings": {
                    "split": split,
                    "trials": trials,
                    "judge": judge,
                    "limits": {"max_turns": max_turns},
                    "sampling": {"max_new_tokens": max_new_tokens, "temperature": 0.0},
                },
            }
        )
        result = evaluate_flow(params)
    echo(json.dumps(result, default=str))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("train")(train)
    app.command("evaluate")(evaluate)
