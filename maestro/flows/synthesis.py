"""Domain synthesis as a Prefect flow, and the function the nightly's synthesis stage calls.

Each brief becomes one synthesis (``agents/codegen``); its id is derived from the run id and the
brief, so running the same run again resumes an unfinished synthesis from its checkpoint and
rewrites a finished one's rows unchanged (merged on their keys). Every synthesis writes its
blueprint row (with how it ended and why) and its stage events; an accepted one also writes its
package under ``<run folder>/domains/<domain id>`` and into the domains and tasks tables.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE
from pydantic import BaseModel, Field

from maestro.agents.client import CallLog, Endpoints
from maestro.agents.codegen import Brief, SynthesisConfig, SynthesisResult, run_synthesis
from maestro.agents.settings import LLMSettings, load_llm_settings
from maestro.domains.sandbox import SandboxLimits, load_sandboxed_domain
from maestro.flows.endpoints import CODEGEN, model_endpoints
from maestro.settings import RunSettings
from maestro.storage import Lake
from maestro.storage.records import call_rows, domain_row, task_row

DEFAULT_BRIEFS = [
    Brief(
        industry="leisure",
        text="A bike rental shop: customers reserve bikes by the day, extend or cancel "
        "reservations before pickup, return bikes, and report damage; the desk finds them by "
        "email.",
    ),
    Brief(
        industry="libraries",
        text="A public library: members borrow books, renew loans unless someone holds them, "
        "place holds, return books and pay overdue fines; the desk finds members by card number "
        "or by name and date of birth.",
    ),
    Brief(
        industry="fitness",
        text="A gym: members book classes while places are left, cancel bookings up to hours "
        "before, pause or resume their memberships, and update their details; the desk finds "
        "members by email.",
    ),
]


class SynthesisParams(BaseModel):
    """What a synthesis run covers: which briefs, how many per night, and each one's bounds."""

    briefs: list[Brief] = Field(default_factory=lambda: list(DEFAULT_BRIEFS), min_length=1)
    #: Briefs synthesized per night, taken in turn from ``briefs`` (a different slice each day).
    per_night: int = Field(1, ge=1, le=100)
    #: Which slice of ``briefs``; None picks by the date, so consecutive nights cover them all.
    night: int | None = Field(None, ge=0)
    config: SynthesisConfig = Field(default_factory=SynthesisConfig)
    #: Wall time for tonight's syntheses together; a synthesis still running when it is spent
    #: stops as a resumable crash, and briefs not started are skipped. None: each synthesis has
    #: only its own deadline (``config.deadline_s``).
    budget_s: float | None = Field(None, gt=0)
    #: Where run folders go: ``<runs_dir>/<run id>/domains`` and ``.../synthesis``.
    runs_dir: Path = Field(default_factory=lambda: RunSettings().dir)
    limits: SandboxLimits | None = None


class SynthesisSummary(BaseModel):
    """What a synthesis run produced: one result per brief started, and the accepted packages."""

    run_id: str
    results: list[SynthesisResult]
    #: Briefs not started because the budget was spent.
    skipped: int = 0

    @property
    def packages(self) -> list[str]:
        """Accepted packages' folders (what the nightly's ingest takes)."""
        return [r.package for r in self.results if r.package]

    def funnel(self) -> dict[str, int]:
        """Briefs, and how many were accepted, rejected, crashed (a spent budget included) or
        skipped."""
        out = {
            "briefs": len(self.results) + self.skipped,
            "accepted": 0,
            "rejected": 0,
            "error": 0,
            "skipped": self.skipped,
        }
        for r in self.results:
            out[r.status] += 1
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One line per synthesis, for a report: how it ended, why, and what it cost."""
        return [
            {
                "brief": r.brief[:80],
                "status": r.status,
                "reason": (r.reason or "")[:200],
                "domain": r.domain_id if r.status == "accepted" else "",
                "llm_calls": r.llm_calls,
                "tokens": r.tokens,
                "wall_s": round(r.wall_s, 1),
            }
            for r in self.results
        ]


def select_briefs(params: SynthesisParams, today: date | None = None) -> list[Brief]:
    """``per_night`` briefs, a consecutive slice (wrapping) chosen by the night's number."""
    night = params.night if params.night is not None else (today or date.today()).toordinal()
    n = len(params.briefs)
    start = (night * params.per_night) % n
    return [params.briefs[(start + i) % n] for i in range(min(params.per_night, n))]


def synthesis_id(run_id: str, brief: Brief) -> str:
    """Stable per run and brief: a re-run of the run resumes the same synthesis."""
    digest = hashlib.sha256(f"{brief.industry}\n{brief.text}".encode()).hexdigest()[:10]
    return f"{run_id}-{digest}"


def run_folder(params: SynthesisParams, run_id: str) -> Path:
    return params.runs_dir / run_id


# ----- library-level steps (each wrapped in one Prefect task below) ------------------------------


def synthesize_one(
    brief: Brief | None,
    sid: str,
    params: SynthesisParams,
    settings: LLMSettings,
    codegen_url: str,
    run_dir: Path,
    run_id: str,
) -> tuple[SynthesisResult, CallLog]:
    """One synthesis (or its resumption) with the codegen role's endpoint."""

    async def go() -> SynthesisResult:
        async with Endpoints(log) as endpoints:
            client = endpoints.client("codegen", settings.codegen, codegen_url)
            return await run_synthesis(
                brief,
                client,
                log,
                run_dir=run_dir,
                synthesis_id=sid,
                config=params.config,
                run_id=run_id,
                limits=params.limits,
            )

    log = CallLog()
    return asyncio.run(go()), log


def synthesis_rows(result: SynthesisResult) -> dict[str, list[dict[str, Any]]]:
    """The blueprint row and the event rows of one synthesis (pure)."""
    blueprint = {
        "blueprint_id": result.synthesis_id,
        "brief": result.brief,
        "industry": result.industry,
        "blueprint_json": json.dumps(result.blueprint) if result.blueprint else None,
        "status": result.status,
        "reason": result.reason,
        "domain_id": result.domain_id if result.status == "accepted" else None,
        "llm_calls": result.llm_calls,
        "tokens": result.tokens,
        "wall_s": result.wall_s,
    }
    events = [
        {
            "event_id": e.event_id,
            "synthesis_id": e.synthesis_id,
            "stage": e.stage,
            "outcome": e.outcome,
            "detail": e.detail,
            "llm_calls": e.llm_calls,
            "tokens": e.tokens,
            "duration_s": e.duration_s,
        }
        for e in result.events
    ]
    return {"blueprints": [blueprint], "synthesis_events": events}


def store_result(
    lake: Lake, run_id: str, result: SynthesisResult, log: CallLog, limits: SandboxLimits | None
) -> dict[str, int]:
    """Write one synthesis to the lake; an accepted package goes in with every file and task."""
    written: dict[str, int] = {}
    for table, rows in synthesis_rows(result).items():
        lake.write(table, rows, run_id)
        written[table] = len(rows)
    calls = call_rows(run_id, log.calls)
    if calls:
        lake.write("llm_calls", calls, run_id)
    written["llm_calls"] = len(calls)
    if result.package:
        # The package is LLM-written: it is loaded only through the sandbox, here too.
        with load_sandboxed_domain(result.package, limits) as domain:
            lake.write("domains", [domain_row(domain)], run_id)
            lake.write("tasks", [task_row(domain, t) for t in domain.tasks], run_id)
            written["domains"], written["tasks"] = 1, len(domain.tasks)
    return written


@task(name="synthesize", task_run_name="synthesize {sid}", cache_policy=NONE)
def synthesize_task(
    brief: Brief | None,
    sid: str,
    params: SynthesisParams,
    settings: LLMSettings,
    codegen_url: str,
    run_dir: Path,
    run_id: str,
) -> tuple[SynthesisResult, CallLog]:
    return synthesize_one(brief, sid, params, settings, codegen_url, run_dir, run_id)


@task(name="store synthesis", cache_policy=NONE, retries=2, retry_delay_seconds=5)
def store_task(
    lake: Lake, run_id: str, result: SynthesisResult, log: CallLog, limits: SandboxLimits | None
) -> dict[str, int]:
    return store_result(lake, run_id, result, log, limits)


def synthesize_domains(
    params: SynthesisParams,
    lake: Lake,
    run_id: str,
    *,
    settings: LLMSettings | None = None,
    today: date | None = None,
) -> SynthesisSummary:
    """The nightly's synthesis stage: tonight's briefs, each synthesized (or resumed) and stored.

    The codegen role's endpoint comes from ``settings`` (the environment's by default); with
    none configured the embedded model serves it for the length of this call.
    """
    run_dir = run_folder(params, run_id)
    results: list[SynthesisResult] = []
    started = time.monotonic()
    briefs = select_briefs(params, today)
    with model_endpoints(settings or load_llm_settings(), CODEGEN, params.runs_dir) as live:
        for brief in briefs:
            left = (
                None if params.budget_s is None else params.budget_s - (time.monotonic() - started)
            )
            if left is not None and left < 1:
                break
            bounded = params
            if left is not None and left < params.config.deadline_s:
                config = params.config.model_copy(update={"deadline_s": left})
                bounded = params.model_copy(update={"config": config})
            sid = synthesis_id(run_id, brief)
            url = str(live.codegen.base_url)
            result, log = synthesize_task(brief, sid, bounded, live, url, run_dir, run_id)
            store_task(lake, run_id, result, log, params.limits)
            results.append(result)
    return SynthesisSummary(run_id=run_id, results=results, skipped=len(briefs) - len(results))


def default_run_id() -> str:
    return "synthesis-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


@flow(name="maestro-synthesis")
def synthesis_flow(
    params: SynthesisParams | None = None, run_id: str | None = None
) -> dict[str, Any]:
    """Synthesize tonight's briefs and store what they produced; resumable by run id."""
    params = params or SynthesisParams()
    run_id = run_id or default_run_id()
    logger = get_run_logger()
    logger.info("run id %s (run again with the same run id to resume)", run_id)
    summary = synthesize_domains(params, Lake(), run_id)
    for r in summary.results:
        logger.info("%s: %s (%s)", r.synthesis_id, r.status, r.reason or r.package)
    return {"run_id": run_id, "funnel": summary.funnel(), "packages": summary.packages}
