"""The page's bounds: each text shows at most TEXT_LIMIT characters and says how many more there
were (four answers of 15 MB of ``&`` made a 300 MB page and a 1.5 GB process); past its budget
the page lists the episodes left but does not expand them, and says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from maestro.conversation import Message, ToolCall, Trajectory
from maestro.domains import Domain
from maestro.domains.models import RewardType
from maestro.scoring.card import CheckItem, CriterionScore
from maestro.simulation.episode import EpisodeResult, Termination
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import episode_row
from maestro.view import load_run, render, write_page
from maestro.view.page import PAGE_BUDGET
from maestro.view.transcripts import (
    TEXT_LIMIT,
    EpisodeView,
    MessageView,
    RunView,
    TaskView,
)

from ..training.conftest import RUN, fill_lake

HUGE = 3_000_000


def note(omitted: int) -> str:
    return f"<span class='cut'>… {omitted:,} more characters not shown</span>"


@pytest.fixture
def huge_lake(tmp_path: Path, toy: Domain) -> Lake:
    """The toy run, and an episode whose answer, call arguments and tool result are each
    megabytes long (and compress to almost nothing in the lake)."""
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    fill_lake(lake, toy, ["toy_cancel"])
    arguments = '{"order_id": "' + "<" * HUGE + '"}'
    trajectory = Trajectory(
        domain_id=toy.id,
        task_id="toy_status",
        messages=[
            Message(role="user", content="status of O2?"),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="c1", name="get_order", arguments=arguments)],
            ),
            Message(role="tool", tool_call_id="c1", name="get_order", content='"' * HUGE),
            Message(role="assistant", content="&" * HUGE),
        ],
        termination="user_stop",
    )
    e = EpisodeResult(
        domain_id=toy.id,
        task_id="toy_status",
        trial=0,
        seed=0,
        trajectory=trajectory,
        termination=Termination.USER_STOP,
        duration_s=0.1,
    )
    lake.write("episodes", [episode_row(RUN, e, toy.manifest.version, "big", "u")], RUN)
    return lake


def test_a_huge_answer_is_read_cut_shown_cut_with_a_note_and_the_page_stays_small(
    huge_lake: Lake, tmp_path: Path
) -> None:
    run = load_run(huge_lake, RUN)
    [big] = (e for e in run.episodes if e.task_id == "toy_status")
    answer = big.messages[3]
    assert len(answer.content or "") == TEXT_LIMIT  # cut in the lake's query, not in Python
    assert answer.content_omitted == HUGE - TEXT_LIMIT
    assert (
        big.messages[1].tool_calls[0].arguments_omitted
        == len('{"order_id": "') + HUGE + 2 - TEXT_LIMIT
    )

    page = write_page(run, tmp_path / "out")
    html = page.read_text()
    assert "&amp;" * TEXT_LIMIT + note(HUGE - TEXT_LIMIT) in html
    assert "&amp;" * (TEXT_LIMIT + 1) not in html
    assert "&quot;" * TEXT_LIMIT + note(HUGE - TEXT_LIMIT) in html  # the tool's result
    assert note(len('{"order_id": "') + HUGE + 2 - TEXT_LIMIT) in html  # the call's arguments
    # Four texts of 64 Ki characters, at most 6 bytes each once escaped, and the rest.
    assert page.stat().st_size < 4 * 6 * TEXT_LIMIT + 200_000
    assert [p.name for p in page.parent.iterdir()] == [page.name]  # no temporary left


def test_every_text_from_the_lake_is_cut_and_names_are_cut_short() -> None:
    sizes = {"reason": 70_001, "details": 80_002, "error": 90_003, "check": 100_004}
    run = RunView(
        run_id="r",
        tasks=[
            TaskView(
                domain_id="d",
                task_id="t",
                reason_for_call="c" * 110_005,
                reasons=["r" * sizes["reason"]],
            )
        ],
        episodes=[
            EpisodeView(
                episode_id="e",
                domain_id="d",
                task_id="t",
                trial=0,
                assistant_model="m" * 5_000,
                user_model="u",
                termination="user_stop",
                error="x" * sizes["error"],
                outcome="failed",
                criteria=[
                    CriterionScore(
                        criterion=RewardType.ACTION,
                        status="fail",
                        reward=0.0,
                        details="y" * sizes["details"],
                        items=[CheckItem(subject="s", passed=False, reason="z" * sizes["check"])],
                    )
                ],
                messages=[MessageView(role="user", content="hi")],
            )
        ],
    )
    html = render(run)
    for size in [*sizes.values(), 110_005]:
        assert note(size - TEXT_LIMIT) in html, size
    assert "m" * 257 not in html and "m" * 256 + "…" in html  # a model's name, in every place
    assert len(html) < 20 * TEXT_LIMIT


def episodes(n: int, messages: int = 1) -> list[EpisodeView]:
    return [
        EpisodeView(
            episode_id=f"e{i}",
            domain_id="d",
            task_id="t",
            trial=i,
            assistant_model="m",
            user_model="u",
            termination="user_stop",
            outcome="passed",
            messages=[MessageView(role="assistant", content="a" * TEXT_LIMIT)] * messages,
        )
        for i in range(n)
    ]


def test_past_the_page_budget_episodes_are_listed_but_not_expanded_and_the_page_says_why() -> None:
    run = RunView(run_id="r", tasks=[], episodes=episodes(12))
    assert "Not expanded" not in render(run)  # 12 answers of 64 KiB fit the default budget
    assert PAGE_BUDGET >= 64 * 2**20

    html = render(run, budget=300_000)
    assert len(re.findall(r"<details class='episode'", html)) == 12  # every one listed
    left_out = html.count("Not expanded: the page reached its budget of 300,000 bytes")
    assert 0 < left_out < 12
    assert html.count("a" * TEXT_LIMIT) == 12 - left_out
    says = f"the page reached its budget of 300,000 bytes: the last {left_out:,} of 12 episodes"
    assert f"{says} are listed but not expanded." in html
    assert len(html) < 300_000 + TEXT_LIMIT + 12 * 1_000


def test_past_the_page_budget_an_episodes_transcript_stops_with_a_count() -> None:
    run = RunView(run_id="r", tasks=[], episodes=episodes(1, messages=30))
    html = render(run, budget=500_000)
    shown = html.count("a" * TEXT_LIMIT)
    assert 0 < shown < 30
    assert (
        f"… {30 - shown:,} more messages not shown: the page reached its budget of 500,000 bytes"
        in html
    )
    assert html.endswith("</body></html>")  # and the page is whole
