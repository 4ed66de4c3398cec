"""The nightly Prefect flow: ingest, simulate, score, filter, curate, report.

The flow only composes tasks; each task wraps one stage function (``flows/stages.py``). Tasks
carry no cache (their inputs are live objects, and every stage is resumable on its own).
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import maestro.flows.report as reports
import maestro.flows.stages as stages
from maestro.agents.judging import Judging
from maestro.agents.settings import LLMSettings, Role, load_llm_settings
from maestro.domains import Domain, load_domain
from maestro.flows.endpoints import model_endpoints, roles_called
from maestro.flows.progress import EpisodeProgress, progress_key
from maestro.flows.stages import NightlyParams
from maestro.settings import RunSettings
from maestro.simulation.episode import EpisodeResult
from maestro.storage import Lake


@task(name="validate inputs", cache_policy=NONE)
def validate(params: NightlyParams) -> list[Domain]:
    return stages.resolve_domains(params)


@task(name="ingest domains", cache_policy=NONE, retries=2, retry_delay_seconds=5)
def ingest(lake: Lake, run_id: str, domains: list[Domain]) -> dict[str, int]:
    return stages.ingest(lake, run_id, domains)


@task(
    name="simulate",
    task_run_name="simulate {domain.id}",
    cache_policy=NONE,
    retries=1,
    retry_delay_seconds=5,
)
def simulate(
    lake: Lake,
    run_id: str,
    domain: Domain,
    task_ids: list[str],
    params: NightlyParams,
    settings: LLMSettings,
) -> dict[str, Any]:
    logger = get_run_logger()
    total = len(task_ids) * params.trials
    columns = (
        TextColumn(f"simulate {domain.id}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # The terminal's bar, and the same progress in the Prefect UI.
    shown = EpisodeProgress(domain, total, progress_key(run_id, "simulate", domain.id))
    with Progress(*columns, transient=False) as bar:
        progress = bar.add_task(domain.id, total=total)

        def on_episode(e: EpisodeResult) -> None:
            bar.advance(progress)
            shown(e)
            logger.info(
                "%s trial %d: %s in %.1f s%s",
                e.task_id,
                e.trial,
                e.termination.value,
                e.duration_s,
                f" ({e.error})" if e.error else "",
            )

        stats = stages.simulate(lake, run_id, domain, task_ids, params, settings, on_episode)
        bar.update(progress, completed=total)
        shown.finish()
    return stats


@task(
    name="score",
    task_run_name="score {domain.id}",
    cache_policy=NONE,
    retries=1,
    retry_delay_seconds=5,
)
def score(lake: Lake, run_id: str, domain: Domain, judging: Judging) -> dict[str, int]:
    return stages.score(lake, run_id, domain, judging)


@task(
    name="filter",
    task_run_name="filter {domain.id}",
    cache_policy=NONE,
    retries=1,
    retry_delay_seconds=5,
)
def filter_tasks(
    lake: Lake, run_id: str, domain: Domain, task_ids: list[str], judging: Judging
) -> dict[str, int]:
    """The quality gates; the LLM review of unsolved tasks is the judge role's, when judging."""
    return stages.filter_tasks(lake, run_id, domain, task_ids, judging=judging)


@task(name="curate task set", cache_policy=NONE, retries=1, retry_delay_seconds=5)
def curate(lake: Lake, run_id: str) -> dict[str, Any]:
    return stages.curate_task_set(lake, run_id)


@task(name="report", cache_policy=NONE)
def report(
    lake: Lake,
    run_id: str,
    settings: LLMSettings,
    task_set: dict[str, Any],
    synthesis: dict[str, Any] | None = None,
) -> dict[str, Any]:
    built = reports.build_report(lake, run_id, settings, task_set, synthesis)
    out_dir = reports.reports_dir()
    transcripts = reports.write_transcripts(lake, run_id, out_dir)
    html_path = reports.write_html(built, out_dir, transcripts)
    key = "maestro-nightly-" + "".join(c if c.isalnum() else "-" for c in run_id.lower()).strip("-")
    create_markdown_artifact(
        reports.to_markdown(built, html_path, transcripts),
        key=key[:100],
        description=f"maestro nightly {run_id}",
    )
    create_table_artifact(
        built.pass_hat_k or [{"domain": "-", "model": "-"}],
        key=(key + "-pass-k")[:100],
        description="pass^k per domain and model",
    )
    create_table_artifact(built.funnel, key=(key + "-funnel")[:100], description="task funnel")
    return {"html": str(html_path), "transcripts": str(transcripts or ""), **built.model_dump()}


def synthesize(
    lake: Lake, run_id: str, params: NightlyParams, settings: LLMSettings
) -> dict[str, Any]:
    """Tonight's briefs through the synthesis team (its own tasks show in the flow), on the
    codegen endpoint ``settings`` resolved; the accepted packages' folders, and the funnel."""
    from maestro.agents.codegen import Brief
    from maestro.flows.synthesis import SynthesisParams, synthesize_domains

    synth = SynthesisParams(
        per_night=params.synthesize,
        runs_dir=RunSettings().dir,
        budget_s=params.synthesis_budget_s,
    )
    if params.briefs:
        synth.briefs = [Brief(text=b) for b in params.briefs]
    summary = synthesize_domains(synth, lake, run_id, settings=settings)
    for r in summary.results:
        get_run_logger().info(
            "synthesis %s: %s (%s)", r.synthesis_id, r.status, r.reason or r.package
        )
    return {"funnel": summary.funnel(), "packages": summary.packages, "results": summary.rows()}


def train(
    task_set: dict[str, Any], domains: list[Domain], params: NightlyParams
) -> dict[str, Any] | None:
    """The training stage on the curated task set: off unless configured, or asked by
    ``params.train``; a subflow when on."""
    from maestro.flows.training import TrainingStageSettings, training_stage

    settings = TrainingStageSettings()
    if params.train:
        settings = settings.model_copy(update={"enabled": True, "method": params.train})
    if not task_set.get("tasks"):
        return None  # nothing was accepted: nothing to train on
    paths = [str(d.path) for d in domains if d.path is not None]
    return training_stage(task_set["task_set_id"], paths, settings=settings)


def _judging(params: NightlyParams, settings: LLMSettings) -> Judging:
    """Judging for a run: by the judge role of the resolved settings, or off (``--no-judge``):
    NL assertions then stay pending and unsolved tasks are not reviewed."""
    return Judging.by(settings) if params.judge else Judging.off()


def default_run_id() -> str:
    return "nightly-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


@flow(name="maestro-nightly")
def nightly(params: NightlyParams | None = None) -> dict[str, Any]:
    """The whole nightly run, on the embedded defaults unless configured otherwise."""
    started = time.perf_counter()
    params = params or NightlyParams()
    run_id = params.run_id or default_run_id()
    get_run_logger().info("run id %s (run again with --run-id %s to resume)", run_id, run_id)
    lake = Lake()
    spent: dict[str, float] = {}

    def timed(stage: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args)
        spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - t0
        return out

    domains = timed("validate", validate, params)
    simulate_s = 0.0
    ray_workers = 0
    synthesis: dict[str, Any] | None = None
    with contextlib.ExitStack() as stack:
        roles = roles_called(judge=params.judge, synthesize=params.synthesize > 0)
        settings = stack.enter_context(model_endpoints(load_llm_settings(), roles))
        judging = _judging(params, settings)
        if params.synthesize:
            t0 = time.perf_counter()
            synthesis = synthesize(lake, run_id, params, settings)
            spent["synthesize"] = time.perf_counter() - t0
            for path in synthesis["packages"]:
                domain = load_domain(path)  # through the sandbox: an LLM wrote its tools
                stack.callback(domain.close)
                if domain.id in {d.id for d in domains}:
                    get_run_logger().warning("synthesized %s shadows a domain: skipped", domain.id)
                    continue
                domains.append(domain)
        timed("ingest", ingest, lake, run_id, domains)
        plan = [(d, stages.select_tasks(d, params)) for d in domains]
        plan = [(d, ids) for d, ids in plan if ids]
        pending = []
        for domain, ids in plan:
            stats = timed("simulate", simulate, lake, run_id, domain, ids, params, settings)
            simulate_s += stats["simulate_s"]
            ray_workers = max(ray_workers, stats["ray_workers"])
            # Score and filter a domain while the next one simulates.
            scored = score.submit(lake, run_id, domain, judging)
            pending.append(
                filter_tasks.submit(
                    lake, run_id, domain, ids, judging, return_state=False, wait_for=[scored]
                )
            )
            pending.append(scored)
        t0 = time.perf_counter()
        for future in pending:
            future.result()  # raises if the stage failed after its retries
        spent["wait for scoring"] = time.perf_counter() - t0
    task_set = timed("curate", curate, lake, run_id)
    training = timed("train", train, task_set, domains, params)
    result = timed("report", report, lake, run_id, settings, task_set, synthesis)
    wall_s = time.perf_counter() - started
    timings = {
        "flow_s": wall_s,
        "simulate_s": simulate_s,
        **{f"{k}_task_s": v for k, v in spent.items()},
    }
    return {
        "run_id": run_id,
        **result,
        "ray_workers": ray_workers,
        "synthesis": synthesis,
        "training": training,
        "timings": timings,
    }


# ----- one flow per stage, for running a stage alone (maestro stage ...) -------------------------


def _stage_context(params: NightlyParams) -> tuple[Lake, str, list[Domain]]:
    if not params.run_id:
        raise stages.NightlyError("a stage run alone needs the --run-id of the run it works on")
    return Lake(), params.run_id, stages.resolve_domains(params)


@flow(name="maestro-ingest")
def ingest_flow(params: NightlyParams) -> dict[str, int]:
    """Validate and store the domain packages and their tasks."""
    lake, run_id, domains = _stage_context(params)
    return ingest(lake, run_id, domains)


@flow(name="maestro-simulate")
def simulate_flow(params: NightlyParams) -> dict[str, Any]:
    """Simulate the run's episodes not stored yet, domain by domain."""
    lake, run_id, domains = _stage_context(params)
    totals: dict[str, Any] = {}
    with model_endpoints(load_llm_settings(), roles_called(judge=False)) as settings:
        for domain in domains:
            ids = stages.select_tasks(domain, params)
            if ids:
                totals[domain.id] = simulate(lake, run_id, domain, ids, params, settings)
    return totals


def _judge_roles(params: NightlyParams) -> tuple[Role, ...]:
    return ("judge",) if params.judge else ()


@flow(name="maestro-score")
def score_flow(params: NightlyParams) -> dict[str, Any]:
    """Score the run's episodes that have no score yet."""
    lake, run_id, domains = _stage_context(params)
    with model_endpoints(load_llm_settings(), _judge_roles(params)) as settings:
        judging = _judging(params, settings)
        return {d.id: score(lake, run_id, d, judging) for d in domains}


@flow(name="maestro-filter")
def filter_flow(params: NightlyParams) -> dict[str, Any]:
    """Write the task verdicts of the run's tasks: the nightly's filter, the LLM review of
    unsolved tasks included (unless ``--no-judge``)."""
    lake, run_id, domains = _stage_context(params)
    with model_endpoints(load_llm_settings(), _judge_roles(params)) as settings:
        judging = _judging(params, settings)
        return {
            d.id: filter_tasks(lake, run_id, d, stages.select_tasks(d, params), judging)
            for d in domains
        }


@flow(name="maestro-curate")
def curate_flow(params: NightlyParams) -> dict[str, Any]:
    """Write the run's curated task set."""
    lake, run_id, _ = _stage_context(params)
    return curate(lake, run_id)


@flow(name="maestro-report")
def report_flow(params: NightlyParams) -> dict[str, Any]:
    """Write the run's report: artifacts and the HTML page."""
    lake, run_id, _ = _stage_context(params)
    summary = stages.run_task_set(lake, run_id)
    return report(lake, run_id, load_llm_settings(), summary)


STAGE_FLOWS = {
    "ingest": ingest_flow,
    "simulate": simulate_flow,
    "score": score_flow,
    "filter": filter_flow,
    "curate": curate_flow,
    "report": report_flow,
}
