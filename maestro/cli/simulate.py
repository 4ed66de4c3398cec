"""``maestro simulate``: run a domain's tasks k times and print pass^k."""

from __future__ import annotations

import json

import typer

from maestro.cli.domains import load_or_exit
from maestro.cli.inputs import lake_or_exit, seconds
from maestro.cli.output import echo
from maestro.cli.prefect_api import flows_api
from maestro.simulation.episode import EpisodeLimits, EpisodeResult
from maestro.simulation.runner import BatchConfig


def simulate(
    domain_id: str = typer.Option(..., "--domain", help="Library id or package folder."),
    tasks: str | None = typer.Option(None, help="Comma-separated task ids (default: all)."),
    trials: int = typer.Option(1, min=1, max=64, help="Trials per task (k)."),
    concurrency: int = typer.Option(8, min=1, max=4096, help="Episodes in flight."),
    ray_workers: int = typer.Option(
        0, min=0, max=1024, help="Fan out over this many Ray workers (0: one process)."
    ),
    max_turns: int = typer.Option(30, min=1, max=1000, help="Turn limit per episode."),
    episode_deadline_s: float = typer.Option(
        1800.0, parser=seconds, metavar="SECONDS", help="Deadline per episode."
    ),
    judge: bool = typer.Option(True, help="Judge NL assertions with the judge role."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON, last."),
    no_lake: bool = typer.Option(False, "--no-lake", help="Store nothing in the lake."),
    lake_root: str | None = typer.Option(None, help="Lake root (default MAESTRO_LAKE_ROOT)."),
) -> None:
    """Simulate episodes of a domain's tasks and print pass^k."""
    task_ids = [t.strip() for t in tasks.split(",") if t.strip()] if tasks is not None else None
    if task_ids == []:  # "," or "": read as "no --tasks", it ran every task of the domain
        raise typer.BadParameter(f"{tasks!r} names no task id", param_hint="--tasks")
    lake = None if no_lake else str(lake_or_exit(lake_root).root)
    domain = load_or_exit(domain_id)
    if task_ids:
        unknown = [t for t in task_ids if t not in {x.id for x in domain.tasks}]
        if unknown:
            raise typer.BadParameter(
                f"domain {domain.id} has no task(s) {unknown}", param_hint="--tasks"
            )
    done = 0
    total = len(task_ids or domain.tasks) * trials

    def progress(e: EpisodeResult) -> None:
        nonlocal done
        done += 1
        echo(
            f"[{done}/{total}] {e.task_id} trial {e.trial}: {e.termination.value} after "
            f"{len(e.trajectory.messages)} messages in {e.duration_s:.1f} s"
            + (f" ({e.error})" if e.error else ""),
            err=True,
        )

    config = BatchConfig(
        concurrency=concurrency,
        limits=EpisodeLimits(max_turns=max_turns, deadline_s=episode_deadline_s),
    )
    with flows_api() as prefect_ready:
        from maestro.flows.commands import simulate_flow

        prefect_ready()
        report = simulate_flow(
            str(domain.path),
            task_ids=task_ids,
            trials=trials,
            config=config,
            judge=judge,
            ray_workers=ray_workers,
            on_episode=progress,
            lake_root=lake,
        )
    if as_json:
        echo(report.model_dump_json())
        return
    echo(
        f"{report.domain_id}: {report.tasks} task(s) x {report.trials} trial(s) = {report.episodes} episodes in {report.wall_s:.1f} s"
    )
    echo(f"  terminations: {json.dumps(report.terminations)}   judge errors: {report.judge_errors}")
    echo(
        f"  LLM calls: {report.llm_calls}   tokens in/out: {report.prompt_tokens}/{report.completion_tokens}"
    )
    echo(
        f"  mean reward: {report.mean_reward:.3f}   (NL assertions {'judged' if report.nl_judged else 'not judged'})"
    )
    if report.unjudged:
        echo(
            f"  {report.unjudged} episode(s) have a criterion without a verdict: they count as "
            "not succeeded (success needs every criterion judged and a reward of 1)"
        )
    for k, v in report.pass_hat_k.items():
        echo(f"  pass^{k}: {v:.3f}   pass@{k}: {report.pass_at_k[k]:.3f}")
    if report.failures:
        echo(f"  {len(report.failures)} episode(s) did not succeed:")
    for f in report.failures:
        ended = f.termination + (f" ({f.error})" if f.error else "")
        echo(f"  - {f.task_id} trial {f.trial}: reward {f.reward:g}, ended {ended}")
        for line in f.criteria:
            echo(f"      {line}")
    if report.run_id:
        echo(f"  stored as run {report.run_id}: maestro view {report.run_id}")
