"""``maestro nightly``, ``maestro stage`` and ``maestro deploy``: the nightly run, a stage of it
alone, and its schedule."""

from __future__ import annotations

import json
import re
from typing import Any

import typer
from pydantic import ValidationError

from maestro.cli.inputs import cron as cron_line
from maestro.cli.inputs import lake_or_exit, seconds
from maestro.cli.output import echo
from maestro.cli.prefect_api import flows_api, prefect_env
from maestro.flows.stages import NightlyError, NightlyParams, resolve_domains
from maestro.settings import RunSettings

#: The stages ``maestro stage`` runs, in order (the flows are in maestro.flows.nightly).
STAGE_NAMES = ("ingest", "simulate", "score", "filter", "curate", "report")
_DEPLOYMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _start_ray_meanwhile(params: NightlyParams) -> None:
    """Start the run's Ray now, while the Prefect server starts, rather than after it: the two
    waits overlap (about 3 s each here). The flow finds Ray started."""
    from maestro.simulation.ray_support import RayConnectError, ensure_ray

    if params.ray_workers_wanted() != 0:
        try:
            ensure_ray(RunSettings().dir)
        except RayConnectError as exc:  # before any flow ran: nothing is written
            echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None


def _params(
    run_id: str | None,
    domain: list[str],
    tasks_per_domain: int,
    all_tasks: bool,
    task: list[str],
    trials: int,
    concurrency: int,
    max_turns: int,
    judge: bool,
    chunk_size: int,
    ray_workers: int | None,
    **stages_on: Any,
) -> NightlyParams:
    try:
        return NightlyParams(
            run_id=run_id,
            domains=domain,
            tasks_per_domain=None if all_tasks else tasks_per_domain,
            task_ids=task,
            trials=trials,
            concurrency=concurrency,
            max_turns=max_turns,
            judge=judge,
            chunk_size=chunk_size,
            ray_workers=ray_workers,
            **stages_on,
        )
    except ValidationError as exc:
        raise typer.BadParameter(
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        ) from None


def _validate_or_exit(params: NightlyParams) -> None:
    """Bad packages, task ids or options end the command (exit 2) before anything is started
    or written: called before the Prefect home is made and its server launched."""
    lake_or_exit()  # MAESTRO_LAKE_ROOT naming a file was found only inside a flow
    try:
        domains = resolve_domains(params)
    except NightlyError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for domain in domains:  # the flow loads them again; a sandboxed one's child ends now
        domain.close()


def nightly(
    run_id: str | None = typer.Option(
        None, help="Resume (or name) a run; default: nightly-<UTC time>."
    ),
    domain: list[str] = typer.Option(
        [], "--domain", help="Library id or package folder (repeatable; default: the library)."
    ),
    tasks_per_domain: int = typer.Option(
        2, min=1, max=100_000, help="Tasks per domain, spread over categories."
    ),
    all_tasks: bool = typer.Option(False, "--all-tasks", help="Every task of every domain."),
    task: list[str] = typer.Option(
        [], "--task", help="A task id (repeatable); overrides --tasks-per-domain."
    ),
    trials: int = typer.Option(1, min=1, max=64, help="Trials per task (k of pass^k)."),
    concurrency: int = typer.Option(8, min=1, max=4096, help="Episodes in flight."),
    max_turns: int = typer.Option(8, min=1, max=1000, help="Turn limit per episode."),
    judge: bool = typer.Option(True, help="Judge NL assertions with the judge role."),
    chunk_size: int = typer.Option(
        50, min=1, max=100_000, help="Episodes written per commit while simulating."
    ),
    ray_workers: int | None = typer.Option(
        None,
        min=0,
        max=1024,
        help="Ray workers to fan episodes out over (default: MAESTRO_RAY_WORKERS, else one per "
        "CPU of a local Ray or of MAESTRO_RAY_ADDRESS's cluster; 0: asyncio here, no Ray).",
    ),
    synthesize: int = typer.Option(
        1, min=0, max=100, help="Briefs to synthesize into new domains first (0: none)."
    ),
    synthesis_budget_s: float = typer.Option(
        900.0, parser=seconds, metavar="SECONDS", help="Wall time for the synthesis stage."
    ),
    brief: list[str] = typer.Option(
        [], "--brief", help="A brief to synthesize from (repeatable; default: the built-in list)."
    ),
    train: str | None = typer.Option(
        None,
        help="Train on the curated task set: sft, dpo or grpo (default: MAESTRO_TRAINING__*, off).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the run's summary as JSON, last."),
) -> None:
    """Run the nightly pipeline: synthesize (one brief by default), ingest, simulate, score, filter,
    curate a task set, train (when configured), report."""
    params = _params(
        run_id,
        domain,
        tasks_per_domain,
        all_tasks,
        task,
        trials,
        concurrency,
        max_turns,
        judge,
        chunk_size,
        ray_workers,
        synthesize=synthesize,
        synthesis_budget_s=synthesis_budget_s,
        briefs=brief,
        train=train,
    )
    _validate_or_exit(params)
    with flows_api() as prefect_ready:
        from maestro.flows.nightly import nightly as flow

        _start_ray_meanwhile(params)
        prefect_ready()
        result = flow(params)
    if as_json:
        echo(
            json.dumps(
                {
                    k: result[k]
                    for k in (
                        "run_id",
                        "html",
                        "transcripts",
                        "funnel",
                        "pass_hat_k",
                        "terminations",
                        "ray_workers",
                        "synthesis",
                        "training",
                        "timings",
                    )
                },
                default=str,
            )
        )
    else:
        echo(f"run {result['run_id']}: report {result['html']}")
        if result["transcripts"]:
            echo(f"  transcripts: {result['transcripts']} (or: maestro view {result['run_id']})")
        for row in result["pass_hat_k"]:
            echo(
                f"  {row['domain']} / {row['model']}: pass^1 {row.get('pass^1', 0):.3f} over {row['episodes']} episode(s)"
            )


def stage(
    name: str = typer.Argument(..., help="ingest, simulate, score, filter, curate or report."),
    run_id: str = typer.Option(..., help="The run this stage works on."),
    domain: list[str] = typer.Option(
        [], "--domain", help="Library id or package folder (repeatable; default: the library)."
    ),
    tasks_per_domain: int = typer.Option(
        2, min=1, max=100_000, help="Tasks per domain, spread over categories."
    ),
    all_tasks: bool = typer.Option(False, "--all-tasks", help="Every task of every domain."),
    task: list[str] = typer.Option([], "--task", help="A task id (repeatable)."),
    trials: int = typer.Option(1, min=1, max=64, help="Trials per task."),
    concurrency: int = typer.Option(8, min=1, max=4096, help="Episodes in flight."),
    judge: bool = typer.Option(True, help="Judge NL assertions with the judge role."),
) -> None:
    """Run one stage of the nightly pipeline alone, as its own Prefect flow, on a run id."""
    if name not in STAGE_NAMES:
        raise typer.BadParameter(
            f"no stage {name!r}; stages are {', '.join(STAGE_NAMES)}", param_hint="NAME"
        )
    params = _params(
        run_id, domain, tasks_per_domain, all_tasks, task, trials, concurrency, 8, judge, 50, None
    )
    _validate_or_exit(params)
    with flows_api() as prefect_ready:
        from maestro.flows.nightly import STAGE_FLOWS

        prefect_ready()
        result = STAGE_FLOWS[name](params)
    echo(json.dumps(result, default=str))


def deploy(
    cron: str = typer.Option("0 2 * * *", parser=cron_line, help="Cron schedule (UTC)."),
    name: str = typer.Option("maestro-nightly", help="Deployment name."),
) -> None:
    """Serve the nightly flow on a schedule through Prefect (runs until interrupted)."""
    if not _DEPLOYMENT_NAME.fullmatch(name):
        raise typer.BadParameter(
            f"{name!r}: use 1 to 100 letters, digits, '.', '_' or '-'", param_hint="--name"
        )
    lake_or_exit()
    prefect_env()
    # Prefect's own cron check, before its server is launched (``cron_line`` caught typos).
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except ValidationError as exc:
        raise typer.BadParameter(exc.errors()[0]["msg"], param_hint="--cron") from None
    with flows_api() as prefect_ready:
        from maestro.flows.nightly import nightly as flow

        prefect_ready()
        echo(f"serving {name} on cron '{cron}' (UTC); Ctrl-C to stop")
        flow.serve(name=name, cron=cron)
