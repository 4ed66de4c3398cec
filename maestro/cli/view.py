"""``maestro view``: a run's transcripts, scores and task verdicts as one page, served here."""

from __future__ import annotations

from pathlib import Path

import typer

from maestro.cli.inputs import allow_public_option, host_option, lake_or_exit, listen_or_exit
from maestro.cli.output import echo


def view(
    run_id: str | None = typer.Argument(
        None, help="The run to show (default: the last run that wrote episodes)."
    ),
    out: Path | None = typer.Option(
        None, help="Folder for the page (default: the reports folder beside the lake)."
    ),
    serve: bool = typer.Option(True, help="Serve the page on this machine until interrupted."),
    host: str = host_option(),
    port: int = typer.Option(0, min=0, max=65535, help="Port to serve on (0: any free port)."),
    allow_public: bool = allow_public_option("the page"),
    lake_root: str | None = typer.Option(None, help="Lake root (default MAESTRO_LAKE_ROOT)."),
) -> None:
    """Write a run's transcript viewer (tasks with their gate verdicts, episodes with every
    message and tool call, score cards with their reasons) and serve it."""
    from maestro.domains.files import TargetError
    from maestro.flows.report import reports_dir
    from maestro.view import ViewError, latest_run, load_run, page_server, write_page

    if serve:
        listen_or_exit(host, port, allow_public=allow_public, what="the transcript page")
    lake = lake_or_exit(lake_root)
    try:
        run = load_run(lake, run_id or latest_run(lake))
    except ViewError as exc:
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        page = write_page(run, out or reports_dir())
    except TargetError as exc:  # a link or special file planted where the page goes
        echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    echo(f"{len(run.episodes)} episodes, {len(run.tasks)} tasks of run {run.run_id}: {page}")
    if not serve:
        return
    server = page_server(page, host, port)
    echo(f"serving at http://{host}:{server.server_port}/  (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
