"""The transcript viewer of a real nightly run (on the scripted server) in headless Chromium:
filters clicked, an episode expanded, model-written markup shown as text.

The run: hotel tasks and a copy of the toy shop with one task duplicated; the assistant is the
scripted server's ``minimal`` player (one call, then it reports what it read), the user and the
judge its oracle. So some episodes pass, some fail, and the duplicate is rejected.

``MAESTRO_VIEWER_SCREENSHOTS=docs/img`` keeps the screenshots (docs/viewer.md shows them).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import Domain, library_ids, library_path
from maestro.storage import Lake, LakeSettings
from maestro.view import load_run, write_page

from ..conftest import FIXTURES
from ..training.conftest import RUN
from .cdp import Page, chromium
from .test_viewer import HOSTILE, fill

MAESTRO = str(Path(sys.executable).with_name("maestro"))
TASKS = ["hotel_001", "hotel_007", "toy_status", "toy_cancel", "toy_cancel_again", "toy_refuse"]


def shop_with_a_duplicate(folder: Path) -> Path:
    """The toy shop, with toy_cancel copied under another id (a near duplicate)."""
    shop = folder / "shop"
    shutil.copytree(FIXTURES / "toy", shop, ignore=shutil.ignore_patterns("__pycache__"))
    lines = (shop / "tasks.jsonl").read_text().splitlines()
    copy = json.loads(lines[0])
    assert copy["id"] == "toy_cancel"
    copy["id"] = "toy_cancel_again"
    (shop / "tasks.jsonl").write_text("\n".join([*lines, json.dumps(copy)]) + "\n")
    return shop


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("demo")
    shop = shop_with_a_duplicate(tmp)
    paths = [str(library_path(i)) for i in library_ids()] + [str(shop)]
    env = {
        **os.environ,
        "MAESTRO_RUN_DIR": str(tmp),  # the lake, Prefect's home and the reports under it
        "MAESTRO_RAY_WORKERS": "0",
    }
    for derived in ("MAESTRO_LAKE_ROOT", "PREFECT_HOME", "PREFECT_API_URL"):
        env.pop(derived, None)
    with (
        ScriptedServer(ServerConfig(mode="oracle", domain_paths=paths)) as oracle,
        ScriptedServer(ServerConfig(mode="minimal", domain_paths=paths)) as minimal,
    ):
        for role, server, model in (
            ("ASSISTANT", minimal, "scripted-minimal"),
            ("USER", oracle, "scripted-oracle"),
            ("JUDGE", oracle, "scripted-oracle"),
            ("CODEGEN", oracle, "scripted-oracle"),
        ):
            env[f"MAESTRO_{role}__BASE_URL"] = server.base_url
            env[f"MAESTRO_{role}__MODEL"] = model
        args = ["--run-id", "demo", "--domain", "hotel", "--domain", str(shop), "--trials", "2"]
        args += ["--synthesize", "0"]
        proc = subprocess.run(
            [MAESTRO, "nightly", *args, *(a for t in TASKS for a in ("--task", t)), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {"tmp": tmp, "summary": json.loads(proc.stdout.strip().splitlines()[-1])}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    with chromium(tmp_path_factory.mktemp("chrome")) as tab:
        yield tab


def counts(page: Page) -> tuple[str, str]:
    return (
        page.eval("document.getElementById('tasks-count').textContent"),
        page.eval("document.getElementById('episodes-count').textContent"),
    )


def visible(page: Page, selector: str, attribute: str) -> list[str]:
    return list(
        page.eval(
            f"Array.from(document.querySelectorAll('{selector}')).filter(e => !e.hidden)"
            f".map(e => e.dataset.{attribute})"
        )
    )


def keep(page: Page, name: str, selector: str | None, height: int = 0) -> None:
    """A screenshot for the docs, when asked for."""
    folder = os.environ.get("MAESTRO_VIEWER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(Path(folder) / name, selector, height)


def test_the_nightly_writes_its_transcripts_beside_its_report(demo: dict[str, Any]) -> None:
    summary, tmp = demo["summary"], demo["tmp"]
    page, report = Path(summary["transcripts"]), Path(summary["html"])
    assert page.is_file() and page.parent == report.parent == tmp / "reports"
    assert f"href='{page.name}'" in report.read_text()
    db = sqlite3.connect(tmp / "prefect" / "prefect.db")
    (markdown,) = db.execute(
        "select data from artifact where key = 'maestro-nightly-demo'"
    ).fetchone()
    assert str(page) in markdown
    run = load_run(Lake(LakeSettings(root=str(tmp / "lake"))), "demo")
    outcomes = {(e.task_id, e.outcome) for e in run.episodes}
    assert ("toy_status", "passed") in outcomes and ("hotel_001", "failed") in outcomes
    rejected = {t.task_id: t.gate for t in run.tasks if t.accepted is False}
    assert rejected.get("toy_cancel_again") == "not a near duplicate", rejected


def test_filters_and_an_expanded_episode_in_headless_chromium(
    demo: dict[str, Any], page: Page
) -> None:
    page.open(Path(demo["summary"]["transcripts"]).as_uri(), height=1000)
    episodes = len(TASKS) * 2
    assert counts(page) == (f"{len(TASKS)} of {len(TASKS)}", f"{episodes} of {episodes}")

    page.choose("#f-outcome", "failed")
    assert set(visible(page, "details.episode", "outcome")) == {"failed"}
    assert "outcome=failed" in page.eval("location.hash")

    page.click("#reset")
    assert counts(page) == (f"{len(TASKS)} of {len(TASKS)}", f"{episodes} of {episodes}")

    page.choose("#f-verdict", "rejected")
    assert visible(page, "tr.task", "task") == ["toy/toy_cancel_again"]
    assert visible(page, "details.episode", "task") == ["toy/toy_cancel_again"] * 2
    page.eval("scrollTo(0, 0)")
    keep(page, "viewer-rejected-task.png", None, height=480)
    page.click("#reset")

    page.choose("#f-domain", "hotel")
    assert set(visible(page, "tr.task", "domain")) == {"hotel"}
    assert set(visible(page, "details.episode", "domain")) == {"hotel"}
    # The task filter offers only the chosen domain's tasks.
    offered = page.eval(
        "Array.from(document.querySelectorAll('#f-task option')).filter(o => o.value &&"
        " !o.hidden).map(o => o.value)"
    )
    assert offered == ["hotel/hotel_001", "hotel/hotel_007"]
    page.choose("#f-model", "scripted-minimal")
    assert len(visible(page, "details.episode", "task")) == 4

    # A failing episode, opened with the mouse: the transcript and the card's reasons.
    page.click("#reset")
    page.click("tr.task[data-task='hotel/hotel_001'] button.show-task")
    assert set(visible(page, "details.episode", "task")) == {"hotel/hotel_001"}
    page.click("details.episode:not([hidden]) > summary")
    opened = "details.episode[open]"
    text = page.eval(f"document.querySelector('{opened}').innerText")
    assert "get_reservation" in text and "TOOL RESULT" in text
    assert "no successful call with these arguments" in text  # the missing action
    assert "never said" in text  # information the assistant did not give
    assert "episode=demo" in page.eval("location.hash")
    keep(page, "viewer-failing-episode.png", opened)

    # A passing one.
    page.click(f"{opened} > summary")  # closes it
    assert page.eval(f"document.querySelectorAll('{opened}').length") == 0
    page.click("#reset")
    page.click("tr.task[data-task='toy/toy_status'] button.show-task")
    page.click("details.episode:not([hidden]) > summary")
    text = page.eval(f"document.querySelector('{opened}').innerText")
    assert "passed" in text and "get_order" in text and "all actions matched" in text
    keep(page, "viewer-passing-episode.png", opened)


def test_model_written_markup_shows_as_text_in_chromium(
    tmp_path: Path, toy: Domain, page: Page
) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    fill(lake, toy)
    path = write_page(load_run(lake, RUN), tmp_path)
    page.open(path.as_uri() + "#task=toy%2Ftoy_status")
    assert visible(page, "details.episode", "task") == ["toy/toy_status"]
    page.click("details.episode:not([hidden]) > summary")
    assert page.eval("document.body.dataset.pwned === undefined")
    assert page.eval("document.getElementById('injected') === null")
    assert page.eval("document.querySelectorAll('img, script').length") == 1  # the page's own
    shown = page.eval("document.querySelector('details.episode[open]').innerText")
    assert "<script>document.body.dataset.pwned" in shown and "onerror=" in shown
    assert HOSTILE.split("</pre>")[0] in page.eval("document.body.innerText")
