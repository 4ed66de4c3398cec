"""The Prefect flows behind the commands that do one piece of work outside the nightly:
``maestro simulate`` (with its progress in the UI), ``maestro synthesize`` (one brief, or its
resumption) and ``maestro annotate export/import`` (they read and write the lake). Each flow composes one or two tasks, each task one call into the library, so these
commands show in the project's Prefect UI next to the nightly runs.

Flows take paths and plain values, not loaded objects: Prefect stores a flow's parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NONE

from maestro.agents.codegen import Brief, SynthesisConfig, SynthesisResult
from maestro.agents.settings import load_llm_settings
from maestro.domains import load_domain
from maestro.flows.annotate import AnnotationSheet, export_sample
from maestro.flows.annotations import ImportResult, import_labels
from maestro.flows.endpoints import CODEGEN, model_endpoints
from maestro.flows.progress import EpisodeProgress, progress_key
from maestro.flows.simulate import SimulationReport, simulate_domain, store_simulation
from maestro.flows.synthesis import SynthesisParams, store_task, synthesize_task
from maestro.simulation.episode import EpisodeResult
from maestro.simulation.runner import BatchConfig
from maestro.storage import Lake, LakeSettings

EpisodeHook = Callable[[EpisodeResult], None]


@task(name="simulate and score", task_run_name="simulate {domain_path.name}", cache_policy=NONE)
def simulate_and_score(
    domain_path: Path,
    task_ids: list[str] | None,
    trials: int,
    config: BatchConfig,
    judge: bool,
    ray_workers: int,
    on_episode: EpisodeHook | None,
    lake_root: str | None = None,
) -> SimulationReport:
    """``lake_root`` ("" for the default lake; None: nothing stored) receives the episodes and
    their score cards under a new run id (the report's ``run_id``)."""
    domain = load_domain(domain_path, check_gold=False)
    try:
        total = len(task_ids or domain.tasks) * trials
        shown = EpisodeProgress(domain, total, progress_key("simulate", domain.id))

        def each(e: EpisodeResult) -> None:
            shown(e)
            if on_episode is not None:
                on_episode(e)

        settings = load_llm_settings()
        batch, cards, report = simulate_domain(
            domain,
            task_ids=task_ids,
            trials=trials,
            settings=settings,
            config=config,
            judge=judge,
            ray_workers=ray_workers,
            on_episode=each,
        )
        shown.finish()
        if lake_root is not None:
            run_id = "simulate-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
            store_simulation(_lake(lake_root), run_id, domain, batch, cards, settings)
            report.run_id = run_id
        return report
    finally:
        domain.close()


@flow(name="maestro-simulate-domain")
def simulate_flow(
    domain_path: str,
    task_ids: list[str] | None = None,
    trials: int = 1,
    config: BatchConfig | None = None,
    judge: bool = True,
    ray_workers: int = 0,
    on_episode: EpisodeHook | None = None,
    lake_root: str | None = None,
) -> SimulationReport:
    """Simulate a domain's tasks ``trials`` times each, score the episodes, report pass^k;
    store them in the lake at ``lake_root`` ("" the default; None: not stored)."""
    return simulate_and_score(
        Path(domain_path),
        task_ids,
        trials,
        config or BatchConfig(),
        judge,
        ray_workers,
        on_episode,
        lake_root,
    )


@flow(name="maestro-synthesize")
def synthesize_flow(
    brief: Brief | None,
    synthesis_id: str,
    config: SynthesisConfig,
    out: Path,
    run_id: str,
    lake_root: str | None,
) -> SynthesisResult:
    """One synthesis (``brief`` None: resume ``synthesis_id``), stored in the lake at
    ``lake_root`` ("" for the default lake; None: not stored)."""
    params = SynthesisParams(config=config, runs_dir=out)
    with model_endpoints(load_llm_settings(), CODEGEN, out) as settings:
        url = str(settings.codegen.base_url)
        result, log = synthesize_task(brief, synthesis_id, params, settings, url, out, run_id)
    if lake_root is not None:
        store_task(_lake(lake_root), run_id, result, log, params.limits)
    return result


def _lake(root: str) -> Lake:
    return Lake(LakeSettings(root=root) if root else None)


@flow(name="maestro-annotate-export")
def annotate_export_flow(
    out: str, n: int, seed: int, run_id: str | None, lake_root: str = ""
) -> AnnotationSheet:
    """Sample ``n`` judged NL assertions into an annotation sheet (CSV and page) in ``out``."""
    return export_sample(_lake(lake_root), Path(out), n=n, seed=seed, run_id=run_id)


@flow(name="maestro-annotate-import")
def annotate_import_flow(
    file: str, annotator: str, run_id: str, lake_root: str = ""
) -> ImportResult:
    """An annotator's labelled sheet into ``annotations`` (re-importing updates)."""
    return import_labels(_lake(lake_root), Path(file), annotator, run_id)
