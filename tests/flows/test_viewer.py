"""The transcript viewer's page, built from rows the pipeline writes: tasks with their verdicts,
episodes with every message and tool call, score cards with each check's reason; escaped; and
``maestro view`` writing and serving it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from maestro.conversation import Message, ToolCall, Trajectory
from maestro.domains import Domain
from maestro.domains.files import TargetError
from maestro.domains.models import RewardType
from maestro.scoring import Scorer
from maestro.simulation.episode import EpisodeResult, Termination
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import episode_row, score_row
from maestro.view import ViewError, latest_run, load_run, render, write_page
from maestro.view.page import SCRIPT, _script_hash

from ..training.conftest import RUN, fill_lake

MAESTRO = str(Path(sys.executable).with_name("maestro"))
#: Model-written text that would run, or change the page, if it were markup.
HOSTILE = (
    "<script>document.body.dataset.pwned = 'script'</script>"
    "<img src=x onerror=\"document.body.dataset.pwned = 'img'\">"
    "</pre></details><b id='injected'>bold</b>"
)


def hostile_trajectory(domain: Domain) -> Trajectory:
    return Trajectory(
        domain_id=domain.id,
        task_id="toy_status",
        messages=[
            Message(role="user", content=HOSTILE),
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id="c1", name="get_order", arguments='{"order_id": "' + HOSTILE)
                ],
            ),
            Message(
                role="tool",
                tool_call_id="c1",
                name="get_order",
                status="invalid_call",
                content="malformed JSON arguments: " + HOSTILE,
            ),
            Message(role="assistant", content=HOSTILE),
        ],
        termination="user_stop",
    )


def fill(lake: Lake, domain: Domain) -> None:
    """The toy domain's toy_cancel played gold (passes) and doing nothing (fails), scored by the
    real scorer; a hostile episode of toy_status; the filter's verdicts: toy_cancel accepted,
    toy_status rejected."""
    fill_lake(lake, domain, ["toy_cancel"])
    hostile = hostile_trajectory(domain)
    e = EpisodeResult(
        domain_id=domain.id,
        task_id=hostile.task_id,
        trial=0,
        seed=0,
        trajectory=hostile,
        termination=Termination.USER_STOP,
        duration_s=0.5,
    )
    card = Scorer(domain).score(domain.task("toy_status"), hostile)
    lake.write("episodes", [episode_row(RUN, e, domain.manifest.version, "scripted", "u")], RUN)
    lake.write("scores", [score_row(RUN, e, card, "scripted")], RUN)
    verdict = {"trials": 1, "successes": 0, "pass_rate": 0.0, "difficulty_band": "unsolved"}
    lake.write(
        "task_verdicts",
        [
            {"domain_id": "toy", "task_id": "toy_cancel", "accepted": True, "reasons": []},
            {
                "domain_id": "toy",
                "task_id": "toy_status",
                "accepted": False,
                "rejected_at": "review",
                "reasons": ["review: task_defect: the order " + HOSTILE],
                "review_cause": "task_defect",
                **verdict,
            },
        ],
        RUN,
    )


@pytest.fixture
def lake(tmp_path: Path, toy: Domain) -> Lake:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    fill(lake, toy)
    return lake


def test_a_run_shows_its_verdicts_episodes_and_every_checks_reason(lake: Lake) -> None:
    run = load_run(lake, RUN)
    assert latest_run(lake) == RUN
    verdicts = {t.task_id: t for t in run.tasks}
    assert verdicts["toy_cancel"].accepted is True
    rejected = verdicts["toy_status"]
    assert rejected.accepted is False and rejected.gate == "not a task defect (review)"
    assert rejected.reasons[0].startswith("review: task_defect: the order")
    assert rejected.reason_for_call == "You want to know the status of order O2."
    gold, null = (e for e in run.episodes if e.task_id == "toy_cancel")
    [hostile] = (e for e in run.episodes if e.task_id == "toy_status")
    assert (gold.outcome, null.outcome, hostile.outcome) == ("passed", "failed", "failed")
    assert [m.role for m in gold.messages][:3] == ["user", "assistant", "tool"]
    assert gold.messages[1].tool_calls[0].name == "cancel_order"
    assert gold.messages[2].status == "ok"
    action = next(c for c in null.criteria if c.criterion == RewardType.ACTION)
    assert action.status == "fail"
    assert [(k.passed, k.reason) for k in action.items] == [
        (False, "no successful call with these arguments")
    ]
    db = next(c for c in null.criteria if c.criterion == RewardType.DB)
    assert "orders/O1.status" in db.details  # the diff says what differs
    assert hostile.messages[2].status == "invalid_call"


def test_model_written_markup_is_text_and_only_the_pages_script_may_run(lake: Lake) -> None:
    page = render(load_run(lake, RUN))

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)
            assert not any(name.startswith("on") for name, _ in attrs), (tag, attrs)

        def handle_data(self, data: str) -> None:
            self.text.append(data)

    tags = Tags()
    tags.feed(page)
    assert tags.tags.count("script") == 1 and "img" not in tags.tags
    assert "injected" not in re.findall(r"id='([^']*)'", page)
    assert HOSTILE in "".join(tags.text)  # shown, as text, where it was written
    csp = re.search(r"Content-Security-Policy' content=\"([^\"]*)\"", page)
    assert csp is not None and f"script-src '{_script_hash()}'" in csp.group(1)
    assert "default-src 'none'" in csp.group(1)
    assert f"<script>{SCRIPT}</script>" in page
    assert "http://" not in page and "https://" not in page  # nothing to fetch


def test_an_unknown_run_is_named_in_the_error(lake: Lake, tmp_path: Path) -> None:
    with pytest.raises(ViewError, match="no episodes or task verdicts of run 'nope'"):
        load_run(lake, "nope")
    with pytest.raises(ViewError, match="no episodes yet"):
        latest_run(Lake(LakeSettings(root=str(tmp_path / "empty"))))
    path = write_page(load_run(lake, RUN), tmp_path / "out")
    assert path.name == f"{RUN}.transcripts.html" and path.read_text().startswith("<!doctype html>")


def test_maestro_view_writes_the_page_and_serves_it(lake: Lake, tmp_path: Path) -> None:
    env = {**os.environ, "MAESTRO_LAKE_ROOT": lake.root}
    bad = subprocess.run(
        [MAESTRO, "view", "nope", "--no-serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "no episodes or task verdicts of run 'nope'" in bad.stderr
    proc = subprocess.Popen(
        [MAESTRO, "view", "--out", str(tmp_path / "pages")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the page, for the latest run
        assert f"3 episodes, 2 tasks of run {RUN}" in first
        url = re.search(r"serving at (\S+)", proc.stdout.readline())
        assert url is not None
        with urllib.request.urlopen(url.group(1), timeout=10) as resp:
            body = resp.read().decode()
        assert body == (tmp_path / "pages" / f"{RUN}.transcripts.html").read_text()
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.group(1) + "etc/passwd", timeout=10)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    time.sleep(0)  # the server is gone with its process


def test_the_page_is_never_written_through_a_planted_link_or_into_a_fifo(
    lake: Lake, tmp_path: Path
) -> None:
    """A link in the reports folder named as the page sent the page to the link's target."""
    run = load_run(lake, RUN)
    out = tmp_path / "reports"
    out.mkdir()
    target = tmp_path / "victim"
    target.write_text("precious")
    (out / f"{RUN}.transcripts.html").symlink_to(target)
    with pytest.raises(TargetError, match="is a symbolic link"):
        write_page(run, out)
    assert target.read_text() == "precious"
    fifo_out = tmp_path / "fifo"
    fifo_out.mkdir()
    os.mkfifo(fifo_out / f"{RUN}.transcripts.html")
    path = write_page(run, fifo_out)  # replaced by a fresh file, never opened (it would block)
    assert path.is_file() and path.read_text().startswith("<!doctype html>")
    env = {**os.environ, "MAESTRO_LAKE_ROOT": lake.root}
    for out_arg, says in ((out, "is a symbolic link"), (target, "cannot create")):
        proc = subprocess.run(
            [MAESTRO, "view", "--out", str(out_arg), "--no-serve"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
    assert target.read_text() == "precious"
