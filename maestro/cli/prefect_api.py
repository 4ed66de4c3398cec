"""The Prefect API every command's flows run against (``maestro.flows.prefect_home``), and
``maestro ui``, which starts the project's server and keeps it up until interrupted."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import typer

from maestro.cli.inputs import allow_public_option, host_option, listen_or_exit
from maestro.cli.output import echo
from maestro.flows.flow_logs import configure_flow_logging
from maestro.flows.prefect_home import (
    PrefectHomeError,
    project_home,
    running_server,
    use_prefect_api,
)


def prefect_env() -> None:
    """The project's Prefect home, no analytics, warnings in flow logs; an explicit
    ``PREFECT_HOME`` or ``PREFECT_API_URL`` is respected. Must run before Prefect is imported."""
    os.environ["PREFECT_HOME"] = str(project_home())
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    project_home().mkdir(parents=True, exist_ok=True)  # Prefect makes one level only
    configure_flow_logging()


@contextmanager
def flows_api(
    host: str = "127.0.0.1", port: int = 0, announce: bool = True
) -> Iterator[Callable[[], None]]:
    """The Prefect API for this command's flows: ``PREFECT_API_URL``, else the project's
    server, else one started now (it stops once no command uses it).

    Yields ``ready``: call it when the command's own start-up work is done (validating input,
    importing Prefect and the flows), which overlaps a server's start; it waits for the API and
    prints the UI's address (``announce``). Enter before Prefect is imported.
    """
    prefect_env()
    with ExitStack() as stack:
        try:
            api = stack.enter_context(use_prefect_api(host=host, port=port))
        except PrefectHomeError as exc:
            echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None

        def ready() -> None:
            try:
                api.wait_ready()
            except PrefectHomeError as exc:
                echo(f"error: {exc}", err=True)
                raise typer.Exit(1) from None
            if not announce:
                return
            if api.source == "started":
                echo(f"Prefect UI for this run, while it lasts: {api.ui_url}", err=True)
            elif api.source == "project":
                echo(f"Prefect UI for this run: {api.ui_url} (the project's server)", err=True)

        yield ready


def ui(
    host: str = host_option(),
    port: int = typer.Option(4200, min=0, max=65535, help="Port (0: any free port)."),
    # Prefect's API creates and runs flows: whoever reaches it can run the project's code.
    allow_public: bool = allow_public_option("Prefect's API"),
) -> None:
    """Start the project's Prefect server and UI (or find the one running), print its URL, and
    keep it up until interrupted; every maestro command of the project runs its flows there."""
    # The host alone (port 0): the port may be held by the project's server, found below.
    listen_or_exit(host, 0, allow_public=allow_public, what="the Prefect API")
    prefect_env()
    configured = os.environ.pop("PREFECT_API_URL", None)
    if configured:
        echo(
            f"note: PREFECT_API_URL is set ({configured}); commands run with it use that API, "
            "not this server",
            err=True,
        )
    running = running_server(project_home())
    with flows_api(host, port, announce=False) as ready:
        ready()
        url = os.environ["PREFECT_UI_URL"]
        if running is not None:
            echo(f"the project's Prefect server is already running (pid {running.pid})", err=True)
        echo(f"Prefect UI: {url}   (maestro commands of this project run their flows here)")
        echo("Ctrl-C to stop (the server stops once no maestro command uses it)", err=True)
        try:
            while running_server(project_home()) is not None:
                time.sleep(2.0)
        except KeyboardInterrupt:
            return
    echo("error: the Prefect server stopped", err=True)
    raise typer.Exit(1)
