"""The nightly report: the funnel, pass^k per domain and model, tokens, cost and latency, read
back from the lake; as Markdown (the Prefect artifact), tables, and a self-contained HTML page
with SVG charts (no script, no network)."""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from maestro.agents.settings import ROLES, LLMSettings
from maestro.domains.files import write_file
from maestro.scoring import gates
from maestro.scoring.metrics import pass_hat_k
from maestro.settings import RunSettings
from maestro.storage import Lake
from maestro.storage.rows import EpisodeRow, LLMCallRow, ScoreRow, TaskVerdictRow
from maestro.view import ViewError, load_run, write_page


class RunReport(BaseModel):
    run_id: str
    funnel: list[dict[str, Any]]
    pass_hat_k: list[dict[str, Any]]
    roles: list[dict[str, Any]]
    terminations: dict[str, int]
    task_set: dict[str, Any] | None = None
    #: Every rejected task: its domain, the first gate it failed, and the reasons stored.
    rejections: list[dict[str, Any]] = Field(default_factory=list)
    #: The synthesis stage: its funnel and one line per synthesis (None: it did not run).
    synthesis: dict[str, Any] | None = None


def build_report(
    lake: Lake,
    run_id: str,
    settings: LLMSettings,
    task_set: dict[str, Any] | None = None,
    synthesis: dict[str, Any] | None = None,
) -> RunReport:
    verdicts = lake.rows(TaskVerdictRow, run_id=run_id)
    scores = lake.rows(
        ScoreRow, run_id=run_id, fields=["domain_id", "assistant_model", "task_id", "passed"]
    )
    terminations = Counter(lake.values(EpisodeRow, "termination", run_id=run_id))
    calls = lake.rows(LLMCallRow, run_id=run_id)
    funnel, rejections = funnel_rows(verdicts)
    return RunReport(
        run_id=run_id,
        funnel=funnel,
        pass_hat_k=pass_hat_k_rows(scores),
        roles=role_rows(calls, settings),
        terminations={str(k): v for k, v in terminations.items()},
        task_set=task_set,
        rejections=rejections,
        synthesis=synthesis,
    )


def pass_hat_k_rows(scores: list[ScoreRow]) -> list[dict[str, Any]]:
    """pass^k per domain and model, k up to the fewest trials of a task; success is the
    ``passed`` column (``ScoreCard.succeeded``)."""
    groups: dict[tuple[str, str], dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for r in scores:
        groups[(str(r.domain_id), str(r.assistant_model))][str(r.task_id)].append(bool(r.passed))
    hat = []
    for (domain, model), tasks in sorted(groups.items()):
        k_max = min(len(v) for v in tasks.values())
        row: dict[str, Any] = {
            "domain": domain,
            "model": model,
            "tasks": len(tasks),
            "episodes": sum(len(v) for v in tasks.values()),
        }
        for k in range(1, k_max + 1):
            row[f"pass^{k}"] = round(
                sum(pass_hat_k(len(v), sum(v), k) for v in tasks.values()) / len(tasks), 4
            )
        hat.append(row)
    return hat


def _p95(values: list[float]) -> float:
    """The 95th percentile, nearest rank (polars' default)."""
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1) + 0.5)]


def role_rows(calls: list[LLMCallRow], settings: LLMSettings) -> list[dict[str, Any]]:
    """Calls, failures, tokens, cost and latency per role."""
    roles = []
    for role in ROLES:
        rc = [c for c in calls if c.role == role]
        if not rc:
            continue
        rs = settings.role(role)
        tin = sum(c.prompt_tokens or 0 for c in rc)
        tout = sum(c.completion_tokens or 0 for c in rc)
        latency = [c.latency_s for c in rc if c.latency_s is not None] or [0.0]
        roles.append(
            {
                "role": role,
                "calls": len(rc),
                "failed": sum(1 for c in rc if c.status != "ok"),
                "prompt_tokens": tin,
                "completion_tokens": tout,
                "cost_usd": round(
                    tin / 1e6 * rs.input_cost_per_mtok + tout / 1e6 * rs.output_cost_per_mtok, 4
                ),
                "latency_mean_s": round(sum(latency) / len(latency), 3),
                "latency_p95_s": round(_p95(latency), 3),
            }
        )
    return roles


def funnel_rows(
    verdicts: list[TaskVerdictRow],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The funnel (tasks in scope, each gate, accepted) and the rejections, from a run's
    task_verdicts rows."""
    rows = sorted(verdicts, key=lambda r: (r.domain_id, r.task_id))
    # A row is rejected at its first failed gate; one from before the gates were recorded
    # (no rejected_at) counts as failing the last gate, so the funnel still adds up.
    gate_of = [None if r.accepted else (r.rejected_at or gates.GATES[-1]) for r in rows]
    rejections = [
        {
            "domain": r.domain_id,
            "task": r.task_id,
            "gate": gate,
            "reasons": "; ".join(r.reasons or []),
        }
        for r, gate in zip(rows, gate_of, strict=True)
        if gate is not None
    ]
    return gates.funnel(gate_of), rejections


def _md_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_none_\n"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_markdown(report: RunReport, html_path: Path | None, transcripts: Path | None = None) -> str:
    parts = [f"# maestro nightly `{report.run_id}`\n"]
    if html_path is not None:
        parts.append(f"Full report with charts: `{html_path}`\n")
    if transcripts is not None:
        parts.append(f"Transcripts, scores and verdicts: `{transcripts}`\n")
    if report.synthesis is not None:
        parts += ["## Synthesis\n", _md_table([report.synthesis["funnel"]])]
        parts.append(_md_table(report.synthesis.get("results", [])))
    parts += ["## Funnel\n", _md_table(report.funnel)]
    if report.rejections:
        parts += ["## Rejected tasks\n", _md_table(report.rejections)]
    parts += ["## pass^k per domain and model\n", _md_table(report.pass_hat_k)]
    parts += ["## Tokens, cost and latency per role\n", _md_table(report.roles)]
    parts += [
        "## Episode endings\n",
        _md_table(
            [{"termination": k, "episodes": v} for k, v in sorted(report.terminations.items())]
        ),
    ]
    if report.task_set:
        parts.append(
            f"## Task set\n\n`{report.task_set['task_set_id']}`: {report.task_set['tasks']} accepted tasks, built from {report.task_set['built_from']}\n"
        )
    return "\n".join(parts)


def _bars(title: str, items: list[tuple[str, float]], unit: str = "", width: int = 640) -> str:
    """A horizontal bar chart as inline SVG."""
    if not items:
        return f"<h2>{html.escape(title)}</h2><p>no data</p>"
    top = max(v for _, v in items) or 1.0
    row_h = 26
    label_w = min(
        420, max(120, 8 * max(len(label) for label, _ in items))
    )  # about 8 px a character
    width = max(width, label_w + 300)
    h = row_h * len(items) + 10
    bars = []
    for i, (label, value) in enumerate(items):
        y = 5 + i * row_h
        w = (width - label_w - 90) * value / top
        bars.append(
            f'<text x="{label_w - 8}" y="{y + 17}" text-anchor="end">{html.escape(label)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="#3b6ea8"/>'
            f'<text x="{label_w + w + 6:.1f}" y="{y + 17}">{value:g}{html.escape(unit)}</text>'
        )
    return f'<h2>{html.escape(title)}</h2><svg width="{width}" height="{h}" font-family="sans-serif" font-size="13">{"".join(bars)}</svg>'


def to_html(report: RunReport, transcripts: Path | None = None) -> str:
    charts = [
        _bars("Funnel (tasks)", [(f["stage"], f["tasks"]) for f in report.funnel]),
        _bars(
            "pass^1 by domain and model",
            [(f"{r['domain']} / {r['model']}", r.get("pass^1", 0.0)) for r in report.pass_hat_k],
        ),
        _bars(
            "Tokens by role (prompt + completion)",
            [(r["role"], r["prompt_tokens"] + r["completion_tokens"]) for r in report.roles],
        ),
        _bars(
            "Mean latency per call by role",
            [(r["role"], r["latency_mean_s"]) for r in report.roles],
            " s",
        ),
        _bars("Episode endings", sorted(report.terminations.items())),
    ]

    def table(rows: list[dict[str, Any]]) -> str:
        if not rows:
            return "<p>none</p>"
        cols = list(dict.fromkeys(k for r in rows for k in r))
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>"
            for r in rows
        )
        return f"<table><tr>{head}</tr>{body}</table>"

    style = "body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>maestro nightly {html.escape(report.run_id)}</title>"
        f"<style>{style}</style></head><body><h1>maestro nightly <code>{html.escape(report.run_id)}</code></h1>"
        + (
            f"<p><a href='{html.escape(transcripts.name, quote=True)}'>Transcripts, scores and"
            " task verdicts</a></p>"
            if transcripts is not None
            else ""
        )
        + "".join(charts)
        + (
            "<h2>Synthesis</h2>"
            + table([report.synthesis["funnel"]])
            + table(report.synthesis.get("results", []))
            if report.synthesis is not None
            else ""
        )
        + "<h2>pass^k</h2>"
        + table(report.pass_hat_k)
        + "<h2>Roles</h2>"
        + table(report.roles)
        + "</body></html>"
    )


def write_html(report: RunReport, out_dir: Path, transcripts: Path | None = None) -> Path:
    """The report page in ``out_dir``, linking to the ``transcripts`` page beside it."""
    return write_file(
        out_dir / f"{report.run_id.replace('/', '_')}.html", to_html(report, transcripts)
    )


def reports_dir() -> Path:
    """Where a run's pages go: ``reports`` in the run folder (``MAESTRO_RUN_DIR``)."""
    return RunSettings().reports


def write_transcripts(lake: Lake, run_id: str, out_dir: Path) -> Path | None:
    """The run's transcript viewer page, beside its report; None when the run has nothing to
    show (no episodes and no verdicts)."""
    try:
        return write_page(load_run(lake, run_id), out_dir)
    except ViewError:
        return None
