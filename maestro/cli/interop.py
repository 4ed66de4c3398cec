"""maestro CLI: interop commands: ``serve-mcp``, ``serve-openenv``, ``export tau2``, ``export hf``
and ``annotate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from maestro.cli.domains import load_or_exit
from maestro.cli.inputs import lake_or_exit, seconds, writable_folder
from maestro.cli.output import echo, log_handler

if TYPE_CHECKING:
    from maestro.domains import Domain

export_app = typer.Typer(
    help="Write a domain, or a task set, in another harness's format.", no_args_is_help=True
)
annotate_app = typer.Typer(
    help="Expert labels of judged NL assertions, and judge-expert agreement.", no_args_is_help=True
)


def serve_mcp(
    domain_id: str = typer.Argument(..., metavar="DOMAIN", help="Library id or package folder."),
    transport: str = typer.Option("http", help="http (streamable HTTP at /mcp) or stdio."),
    host: str = typer.Option(
        "127.0.0.1", help="HTTP: interface to listen on (other than loopback needs --token)."
    ),
    port: int = typer.Option(8765, min=1, max=65535, help="HTTP: port to listen on."),
    token: str | None = typer.Option(
        None,
        envvar="MAESTRO_MCP_TOKEN",
        help="HTTP: require 'Authorization: Bearer TOKEN' on every request.",
    ),
    task: str | None = typer.Option(None, help="Start every session at this task's state."),
    reset_tool: bool = typer.Option(
        True, help="List the control tools (maestro_open/reset/close_session)."
    ),
    max_sessions: int = typer.Option(
        256, min=1, max=100_000, help="Environment sessions held at once."
    ),
    idle_timeout_s: float = typer.Option(
        600.0,
        parser=seconds,
        metavar="SECONDS",
        help="A session without a request for this long ends.",
    ),
) -> None:
    """Serve a domain's tools over MCP, one copy-on-write session per client."""
    import anyio

    from maestro.domains.mcp_server import (
        MCPOptions,
        MCPServerError,
        check_listen,
        serve_http,
        serve_stdio,
    )
    from maestro.listen import is_loopback

    if transport not in ("http", "stdio"):
        raise typer.BadParameter("must be 'http' or 'stdio'", param_hint="--transport")
    if token is not None and len(token) < 16:
        raise typer.BadParameter("use at least 16 characters", param_hint="--token")
    if transport == "http" and token is None and not is_loopback(host):
        raise typer.BadParameter(
            f"{host} is not a loopback address: anyone who reaches it could call the tools; "
            "give --token (or MAESTRO_MCP_TOKEN)",
            param_hint="--host",
        )
    try:
        if transport == "http":
            check_listen(host, port)  # before the domain loads: a taken port is said at once
    except MCPServerError as exc:
        raise typer.BadParameter(str(exc), param_hint="--port") from None
    domain = load_or_exit(domain_id)
    if task is not None and task not in {t.id for t in domain.tasks}:
        domain.close()
        raise typer.BadParameter(f"domain {domain.id} has no task {task!r}", param_hint="--task")
    options = MCPOptions(
        task_id=task,
        reset_tool=reset_tool,
        max_sessions=max_sessions,
        max_transport_sessions=max_sessions,
        idle_timeout_s=idle_timeout_s,
        token=token,
    )
    logs = log_handler()  # the SDK and uvicorn log clients' text (a Host header): escaped
    try:
        if transport == "stdio":
            anyio.run(serve_stdio, domain, options, logs)
        else:
            echo(f"serving {domain.id} at http://{host}:{port}/mcp", err=True)
            serve_http(domain, options, host=host, port=port, log_handler=logs)
    except MCPServerError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def task_set_domains_or_exit(task_set: str, named: list[str], refs: list[str]) -> dict[str, Domain]:
    """The domains a task set names: those given with ``--domain`` (``refs``), the others
    from the library; one named neither way ends the command (exit 2) with what to give."""
    from maestro.domains.library import library_ids

    domains = {d.id: d for d in (load_or_exit(r) for r in refs)}
    library = set(library_ids())
    for d in named:
        if d in domains:
            continue
        if d not in library:
            echo(
                f"error: task set {task_set!r} names domain {d!r}, which is not in the "
                "library: give its package folder with --domain",
                err=True,
            )
            raise typer.Exit(2)
        domains[d] = load_or_exit(d)
    return domains


def serve_openenv(
    target: str = typer.Argument(
        ...,
        metavar="DOMAIN|TASK_SET",
        help="Library id or package folder (its tasks), or a task set id in the lake.",
    ),
    domain: list[str] = typer.Option(
        [],
        "--domain",
        help="A task set's domain that is not in the library: its package folder.",
    ),
    host: str = typer.Option(
        "127.0.0.1", help="Interface to listen on (other than loopback needs --token)."
    ),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    token: str | None = typer.Option(
        None,
        envvar="MAESTRO_OPENENV_TOKEN",
        help="Require 'Authorization: Bearer TOKEN' on every request and WebSocket.",
    ),
    max_sessions: int = typer.Option(64, min=1, max=100_000, help="Sessions held at once."),
    idle_timeout_s: float = typer.Option(
        600.0, parser=seconds, metavar="SECONDS", help="A session idle this long ends."
    ),
    max_turns: int = typer.Option(30, min=1, max=1000, help="Turn limit per episode."),
    episode_deadline_s: float = typer.Option(
        1800.0, parser=seconds, metavar="SECONDS", help="Deadline per episode."
    ),
    judge: bool = typer.Option(True, help="Judge NL assertions with the judge role."),
    lake_root: str | None = typer.Option(None, help="Lake root (default MAESTRO_LAKE_ROOT)."),
) -> None:
    """Serve tasks as an OpenEnv environment (reset with a task, step with the agent's turn)."""
    import uvicorn

    from maestro.agents.settings import load_llm_settings
    from maestro.domains.library import domain_path
    from maestro.listen import ListenError, check_listen, is_loopback
    from maestro.simulation.episode import EpisodeLimits
    from maestro.training.hf_export import ExportError, task_set_domains
    from maestro.training.openenv_server import Catalog, OpenEnvError, build_app

    if token is not None and len(token) < 16:
        raise typer.BadParameter("use at least 16 characters", param_hint="--token")
    if token is None and not is_loopback(host):
        raise typer.BadParameter(
            f"{host} is not a loopback address: anyone who reaches it could play and change "
            "the environment; give --token (or MAESTRO_OPENENV_TOKEN)",
            param_hint="--host",
        )
    try:
        check_listen(host, port)
    except ListenError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"--{exc.option}") from None
    try:
        domain_path(target)
        is_domain = True
    except KeyError:
        is_domain = False
    if is_domain:
        served = load_or_exit(target)
        domains = {served.id: served}
        tasks = [(served.id, t.id) for t in served.tasks]
    else:
        from maestro.storage.records import task_refs
        from maestro.storage.rows import TaskSetRow

        lake = lake_or_exit(lake_root)
        try:
            named = task_set_domains(lake, target)
        except ExportError as exc:
            echo(f"error: {target!r} is no domain, and as a task set: {exc}", err=True)
            raise typer.Exit(2) from None
        domains = task_set_domains_or_exit(target, named, domain)
        (row,) = lake.rows(TaskSetRow, task_set_id=target)
        tasks = task_refs(row)
        stale = [f"{d}/{t}" for d, t in tasks if t not in {x.id for x in domains[d].tasks}]
        if stale:
            echo(f"error: task set {target!r} names tasks its domains lack: {stale[:5]}", err=True)
            raise typer.Exit(2)
    llm = load_llm_settings()
    try:
        catalog = Catalog(
            domains,
            tasks,
            user=llm.role("user"),
            judge=llm.role("judge") if judge else None,
            limits=EpisodeLimits(max_turns=max_turns, deadline_s=episode_deadline_s),
            name=target,
        )
    except OpenEnvError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    app = build_app(catalog, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s, token=token)
    echo(
        f"serving {len(tasks)} task(s) of {', '.join(sorted(domains))} as an OpenEnv "
        f"environment at ws://{host}:{port}/ws",
        err=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", ws="websockets-sansio")


@export_app.command("tau2")
def export_tau2_cmd(
    domain_id: str = typer.Argument(..., metavar="DOMAIN", help="Library id or package folder."),
    out: Path = typer.Argument(..., help="Folder to write data/tau2/... and src/tau2/... under."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Write into a non-empty folder (files of the same name are replaced).",
    ),
) -> None:
    """Write a domain in tau2-bench's layout (db.json, policy.md, tasks.json, toolkit module)."""
    from maestro.domains.files import TargetError, check_target
    from maestro.domains.tau2_export import Tau2ExportError, export_tau2

    try:
        check_target(out, force=force)  # before the domain loads: nothing is read or written
    except TargetError as exc:
        raise typer.BadParameter(str(exc), param_hint="OUT") from None
    domain = load_or_exit(domain_id)
    try:
        result = export_tau2(domain, out, force=force)
    except Tau2ExportError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for path in result.files:
        echo(str(path))
    for warning in result.warnings:
        echo(f"note: {warning}", err=True)


@export_app.command("hf")
def export_hf_cmd(
    task_set: str = typer.Argument(..., metavar="TASK_SET", help="Task set id (task_sets table)."),
    out: Path = typer.Argument(..., help="Folder to write the dataset, its shards and card to."),
    kind: str = typer.Option(..., help="sft, dpo or rl."),
    domain: list[str] = typer.Option(
        [],
        "--domain",
        help="Library id or package folder of a domain the task set names (library ids are "
        "found without it).",
    ),
    license_id: str = typer.Option(
        "other", "--license", help="The card's licence for maestro's own domains' rows."
    ),
    force: bool = typer.Option(
        False, "--force", help="Write into a non-empty folder (a previous export is replaced)."
    ),
    lake_root: str | None = typer.Option(None, help="Lake root (default MAESTRO_LAKE_ROOT)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Write a task set as a Hugging Face dataset (save_to_disk, parquet shards, a card)."""
    import json

    from maestro.domains.files import TargetError, check_target
    from maestro.training.hf_export import KINDS, ExportError, export_hf, task_set_domains

    if kind not in KINDS:
        raise typer.BadParameter(f"{kind!r} is not one of {', '.join(KINDS)}", param_hint="--kind")
    try:
        check_target(out, force=force)  # before anything loads: nothing is read or written
    except TargetError as exc:
        raise typer.BadParameter(str(exc), param_hint="OUT") from None
    lake = lake_or_exit(lake_root)
    try:
        named = task_set_domains(lake, task_set)
    except ExportError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    domains = task_set_domains_or_exit(task_set, named, domain)
    import datasets

    datasets.disable_progress_bars()  # one line per export, not a bar per split and shard
    try:
        result = export_hf(lake, domains, task_set, out, kind, license_id=license_id)
    except ExportError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        echo(json.dumps(result.summary(), indent=2))
        return
    rows = ", ".join(f"{s} {n}" for s, n in result.rows.items())
    echo(f"{result.kind} rows of {task_set}: {rows}; card {out / 'README.md'}")
    for split, reason in result.empty.items():
        echo(f"note: split {split} has no rows: {reason}", err=True)
    for reason, n in result.dropped.items():
        echo(f"note: {n} row(s) left out: {reason}", err=True)


@annotate_app.command("export")
def annotate_export(
    out: Path | None = typer.Option(
        None, help="Folder for the CSV and HTML page (default: annotation in the run folder)."
    ),
    n: int = typer.Option(30, "-n", "--items", min=1, max=100_000, help="Assertions to sample."),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Sampling seed."),
    run_id: str | None = typer.Option(None, help="Only episodes scored by this run."),
) -> None:
    """Sample judged NL assertions into a CSV and an offline HTML page (verdicts hidden)."""
    from maestro.cli.prefect_api import flows_api
    from maestro.flows.annotate import AnnotationError, export_items
    from maestro.settings import RunSettings

    target = writable_folder(out or RunSettings().annotation, "--out")
    # Nothing to sample (an empty lake, a run that scored nothing): said before the Prefect
    # server starts, in one line; raised in the flow, Prefect logs its traceback first.
    try:
        export_items(lake_or_exit(), n=n, seed=seed, run_id=run_id)
    except AnnotationError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    with flows_api() as prefect_ready:
        from maestro.flows.commands import annotate_export_flow

        prefect_ready()
        try:
            sheet = annotate_export_flow(str(target), n, seed, run_id)
        except AnnotationError as exc:  # the lake changed since the check above
            echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
    echo(f"{sheet.items} assertions in batch {sheet.batch_id}")
    echo(f"page: {sheet.html_path}")
    echo(f"csv:  {sheet.csv_path}")


@annotate_app.command("import")
def annotate_import(
    file: Path = typer.Argument(..., help="A labelled CSV (from the page or the sheet)."),
    annotator: str = typer.Option(..., help="Who labelled it."),
    run_id: str = typer.Option("annotation", help="Run id stamped on the rows."),
) -> None:
    """Read an annotator's labels into the annotations table (re-importing updates them)."""
    from maestro.cli.prefect_api import flows_api
    from maestro.flows.annotate import AnnotationError
    from maestro.flows.annotations import annotation_rows

    # The sheet is read, and matched against the lake, before any server starts: a bad sheet,
    # or items the lake does not hold, are input errors said at once, in one line (raised in
    # the flow, Prefect logs its traceback first).
    try:
        annotation_rows(lake_or_exit(), file, annotator)
    except AnnotationError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    with flows_api() as prefect_ready:
        from maestro.flows.commands import annotate_import_flow

        prefect_ready()
        try:
            result = annotate_import_flow(str(file), annotator, run_id)
        except AnnotationError as exc:  # the lake changed since the check above
            echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    echo(
        f"{result.labelled} labels by {annotator} ({result.inserted} new, {result.updated} "
        f"updated); {result.skipped} left blank or unsure"
    )


@annotate_app.command("agreement")
def annotate_agreement(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    resamples: int = typer.Option(
        2000, min=100, max=1_000_000, help="Bootstrap resamples for kappa intervals."
    ),
) -> None:
    """Judge-expert agreement (percent, Cohen's kappa), Fleiss' kappa, per domain and overall."""
    import json

    from maestro.flows.annotate import AnnotationError
    from maestro.flows.annotations import agreement_report, render_report

    try:
        report = agreement_report(lake_or_exit(), resamples=resamples)
    except AnnotationError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    echo(json.dumps(report, indent=2) if as_json else render_report(report))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("serve-mcp")(serve_mcp)
    app.command("serve-openenv")(serve_openenv)
    app.add_typer(export_app, name="export")
    app.add_typer(annotate_app, name="annotate")
