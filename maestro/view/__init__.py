"""view/: a run's transcripts for people: tasks with their gate verdicts, episodes with every
message, tool call and result, and score cards with each criterion's reasons, as one static
HTML page per run (``maestro view``, and beside the nightly's report)."""

from maestro.view.page import render, write_page
from maestro.view.serve import page_server
from maestro.view.transcripts import RunView, ViewError, latest_run, load_run

__all__ = ["RunView", "ViewError", "latest_run", "load_run", "page_server", "render", "write_page"]
