"""``maestro synthesize``: turn a brief into a domain package with the codegen team.

``maestro synthesize --brief "..."`` runs one synthesis (on the embedded model unless the
codegen role has an endpoint), stores it in the lake and prints what each stage did;
``--resume ID`` continues a synthesis a crash stopped, from its last finished stage.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import typer
from pydantic import ValidationError

from maestro.agents.codegen import Brief, SynthesisConfig, SynthesisResult
from maestro.agents.codegen.graph import SynthesisNotFoundError, synthesis_folder
from maestro.cli.inputs import seconds
from maestro.cli.output import echo
from maestro.cli.prefect_api import flows_api
from maestro.settings import RunSettings


def synthesize(
    brief: str | None = typer.Option(None, help="The domain to build, in a few sentences."),
    industry: str | None = typer.Option(None, help="The industry, such as 'leisure'."),
    out: Path | None = typer.Option(
        None,
        help="Run folder: domains/<id> and synthesis/<id> go under it (default: synthesis in "
        "the run folder, MAESTRO_RUN_DIR).",
    ),
    lake: str | None = typer.Option(
        None, help="Lake root (default MAESTRO_LAKE_ROOT, else lake in the run folder)."
    ),
    no_lake: bool = typer.Option(False, "--no-lake", help="Write nothing to the lake."),
    max_iterations: int = typer.Option(3, min=1, max=20, help="Attempts per stage (per tool)."),
    tasks: int = typer.Option(
        10,
        min=1,
        max=200,
        help="Walk tasks to synthesize (at least: see --cover-operations).",
    ),
    cover_operations: bool = typer.Option(
        True,
        "--cover-operations/--no-cover-operations",
        help="Grow the walk tasks to one per write operation (and the information requests), "
        "so every operation the data allows is in some task's gold.",
    ),
    refusals: int = typer.Option(
        3, min=0, max=50, help="Refusal tasks to synthesize from the agent rules."
    ),
    tool_refusals: int = typer.Option(
        2, min=0, max=50, help="Refusal tasks to synthesize that a tool's own check enforces."
    ),
    min_tasks: int = typer.Option(
        8, min=1, max=250, help="Fewest tasks (refusals included) to accept."
    ),
    min_refusals: int = typer.Option(1, min=0, max=50, help="Fewest refusal tasks to accept."),
    records: int = typer.Option(
        100, min=1, max=10_000, help="Records the data program makes per main table."
    ),
    catalog_records: int = typer.Option(10, min=1, max=1000, help="Records of each catalog table."),
    clock: datetime | None = typer.Option(
        None,
        formats=["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"],
        help="The world's now (default 2026-01-05T09:00).",
    ),
    review: bool = typer.Option(True, help="Let an LLM critic review the finished domain."),
    deadline_s: float = typer.Option(
        7200.0,
        parser=seconds,
        metavar="SECONDS",
        help="Wall time of this run; past it the synthesis stops, resumable.",
    ),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Seed for data filling and task walks."),
    resume: str | None = typer.Option(None, help="A synthesis id to resume (under --out)."),
    new_id: str | None = typer.Option(
        None, "--id", help="Id of a new synthesis (default: syn-<UTC time>)."
    ),
    run_id: str | None = typer.Option(None, help="Run id stamped on lake rows."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON, last."),
) -> None:
    """Synthesize a domain from a brief (or resume one) and print each stage's outcome."""
    if (brief is None) == (resume is None):
        raise typer.BadParameter("give exactly one of --brief and --resume", param_hint="--brief")
    out = out or RunSettings().synthesis
    try:
        the_brief = Brief(text=brief, industry=industry) if brief is not None else None
        config = SynthesisConfig(
            max_iterations=max_iterations,
            n_tasks=tasks,
            cover_operations=cover_operations,
            refusals=refusals,
            tool_refusals=tool_refusals,
            min_tasks=min_tasks,
            min_refusals=min_refusals,
            records_per_table=records,
            catalog_records=catalog_records,
            review=review,
            seed=seed,
            deadline_s=deadline_s,
            **({"clock": clock} if clock else {}),
        )
    except ValidationError as exc:
        raise typer.BadParameter(_first_error(exc), param_hint="--brief") from None
    if resume is not None and not (synthesis_folder(out, resume) / "checkpoints.sqlite").is_file():
        # Said before the model starts (the embedded one takes a minute).
        raise typer.BadParameter(
            f"no synthesis {resume!r} to resume under {out / 'synthesis'}", param_hint="--resume"
        )
    sid = resume or new_id or "syn-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}", sid):
        raise typer.BadParameter(f"{sid!r} is not a usable synthesis id", param_hint="--id")
    run = run_id or sid
    result = _run(the_brief, sid, config, out, run, None if no_lake else lake or "")
    if as_json:
        echo(json.dumps(_summary(result)))
    else:
        _print(result)
    raise typer.Exit(0 if result.status == "accepted" else 1)


def _run(
    brief: Brief | None, sid: str, config: SynthesisConfig, out: Path, run_id: str, lake: str | None
) -> SynthesisResult:
    echo(f"synthesis {sid} (resume with --resume {sid} --out {out})", err=True)
    with flows_api() as prefect_ready:
        from maestro.flows.commands import synthesize_flow

        prefect_ready()
        try:
            return synthesize_flow(brief, sid, config, out, run_id, lake)
        except SynthesisNotFoundError as exc:
            raise typer.BadParameter(str(exc), param_hint="--resume") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"


def _summary(result: SynthesisResult) -> dict[str, object]:
    return {
        "synthesis_id": result.synthesis_id,
        "status": result.status,
        "reason": result.reason,
        "domain_id": result.domain_id,
        "package": result.package,
        "resumed": result.resumed,
        "llm_calls": result.llm_calls,
        "tokens": result.tokens,
        "wall_s": result.wall_s,
        "stages": [
            {"stage": e.stage, "attempt": e.attempt, "outcome": e.outcome, "tokens": e.tokens}
            for e in result.events
        ],
        "rejected_tasks": sum(
            not line.startswith("not_covered: ") for line in result.rejected_tasks
        ),
        # The write operations in no task's gold, each with why.
        "not_covered": [
            line.removeprefix("not_covered: ")
            for line in result.rejected_tasks
            if line.startswith("not_covered: ")
        ],
    }


def _print(result: SynthesisResult) -> None:
    for e in result.events:
        line = f"  {e.stage:<28} #{e.attempt} {e.outcome:<8} {e.llm_calls} call(s) {e.tokens:>6} tokens {e.duration_s:6.1f} s"
        echo(line + (f"  {e.detail[:160]}" if e.outcome != "ok" else ""))
    echo(
        f"{result.status}: {result.reason or result.package}  "
        f"({result.llm_calls} LLM calls, {result.tokens} tokens, {result.wall_s:.1f} s)"
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("synthesize")(synthesize)
