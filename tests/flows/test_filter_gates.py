"""The filter stage's gates on a real lake: episodes simulated against the scripted server, the
LLM review of unsolved tasks over real HTTP (its evidence checked), near duplicates, verdict
reasons, a gold action that fails, and the funnel."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from maestro.agents.judging import Judging
from maestro.agents.scripted_server import Reply, ScriptedServer, ServerConfig
from maestro.domains import Domain, load_domain
from maestro.flows import stages
from maestro.flows.report import build_report, to_markdown
from maestro.storage import Lake, LakeSettings
from tests.simulation.test_runner import fast_settings


def _toy_with_a_clone(toy_copy: Path) -> Domain:
    """The toy shop plus a copy of toy_cancel that only differs in its id."""
    first = json.loads((toy_copy / "tasks.jsonl").read_text().splitlines()[0])
    assert first["id"] == "toy_cancel"
    first["id"] = "toy_cancel_again"
    with (toy_copy / "tasks.jsonl").open("a") as f:
        f.write(json.dumps(first) + "\n")
    return load_domain(toy_copy, trusted=True)


def _simulate_and_score(lake: Lake, domain: Domain, toy_copy: Path) -> list[str]:
    """Two trials per task where the assistant does nothing: every task ends unsolved."""
    ids = [t.id for t in domain.tasks]
    params = stages.NightlyParams(run_id="r1", trials=2, ray_workers=0)
    with ScriptedServer(ServerConfig(mode="nothing", domain_paths=[str(toy_copy)])) as server:
        stages.simulate(lake, "r1", domain, ids, params, fast_settings(base_url=server.base_url))
    stages.score(lake, "r1", domain, Judging.off())
    return ids


def review(cause: str, reason: str, evidence: str, about: str = "a1") -> Reply:
    answer = {"cause": cause, "reason": reason, "evidence": evidence, "about": about}
    return Reply(content=json.dumps(answer))


#: What the toy tasks' failed episodes show: the scripted assistant only greets.
GREETED = "[assistant] Hello! How can I help you today?"


def test_review_rejects_task_defects_and_duplicates_are_removed(
    scripted: ScriptedServer, toy_copy: Path, tmp_path: Path
) -> None:
    domain = _toy_with_a_clone(toy_copy)
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    ids = _simulate_and_score(lake, domain, toy_copy)
    # A task defect that quotes nothing real: unsure, so the task is kept and flagged.
    scripted.script(
        "toy/toy_cancel/review",
        "judge",
        [review("task_defect", "the policy forbids it", "Orders may never be cancelled by phone.")],
    )
    # A task defect whose quote is in the task (case and spacing aside): rejected.
    scripted.script(
        "toy/toy_status/review",
        "judge",
        [review("task_defect", "the order id is never given", "you want to know the  STATUS of")],
    )
    scripted.script(
        "toy/toy_refuse/review",
        "judge",
        [Reply(content="I am not sure.")] * 2 + [Reply(content="{}")],
    )
    scripted.script(
        "toy/toy_cancel_again/review",
        "judge",
        [review("assistant_failure", "no tool call", GREETED)],
    )

    judging = Judging.by(fast_settings(base_url=scripted.base_url))
    stats = stages.filter_tasks(lake, "r1", domain, ids, judging=judging)

    assert stats == {
        "verdicts": 4,
        "accepted": 2,
        "reviewed": 4,
        "task_defects": 1,
        "flagged": 1,
        "near_duplicates": 1,
    }
    rows = {
        r["task_id"]: r
        for r in lake.read("task_verdicts").filter(pl.col("run_id") == "r1").collect().to_dicts()
    }
    status = rows["toy_status"]
    assert not status["accepted"] and status["rejected_at"] == "review"
    assert status["review_cause"] == "task_defect"
    assert status["review_reason"].startswith("the order id is never given (about a1; evidence")
    assert any(r.startswith("review: task_defect: the order id") for r in status["reasons"])
    cancel = rows["toy_cancel"]
    assert cancel["accepted"] and cancel["difficulty_band"] == "unsolved"
    assert cancel["review_cause"] == "unsure" and cancel["gold_deterministic"]
    assert "not quoted word for word" in cancel["review_reason"]
    assert (cancel["trials"], cancel["successes"]) == (2, 0)
    refuse = rows["toy_refuse"]
    assert refuse["accepted"] and refuse["review_cause"] == "review_failed"
    assert any("malformed review output" in r for r in refuse["reasons"])
    clone = rows["toy_cancel_again"]
    assert not clone["accepted"] and clone["rejected_at"] == "near_duplicate"
    assert clone["duplicate_of"] == "toy_cancel"
    assert any("similarity 1" in r for r in clone["reasons"])
    # Every review call is in the lake, the malformed ones included.
    calls = lake.read("llm_calls").filter(pl.col("episode").str.ends_with("/review")).collect()
    assert calls.height == 6

    report = build_report(lake, "r1", fast_settings())
    funnel = {r["stage"]: r["tasks"] for r in report.funnel}
    assert funnel["tasks in scope"] == 4
    assert funnel["gold replay succeeds"] == 4
    assert funnel["simulated and scored"] == 4
    assert funnel["not a task defect (review)"] == 3
    assert funnel["not a near duplicate"] == funnel["accepted"] == 2
    assert {(r["task"], r["gate"]) for r in report.rejections} == {
        ("toy_status", "review"),
        ("toy_cancel_again", "near_duplicate"),
    }
    markdown = to_markdown(report, None)
    assert "## Rejected tasks" in markdown and "the order id is never given" in markdown

    # Re-running the stage keeps the stored reviews (read back from their own columns); only
    # the failed one is asked again.
    scripted.script(
        "toy/toy_refuse/review",
        "judge",
        [review("user_simulator_error", "left", "[user] You are Bo (C2) and want order O1", "A1")],
    )
    again = stages.filter_tasks(lake, "r1", domain, ids, judging=judging)
    assert again["accepted"] == 2 and again["task_defects"] == 1
    rows = {r["task_id"]: r for r in lake.read("task_verdicts").collect().to_dicts()}
    assert len(rows) == 4 and rows["toy_refuse"]["review_cause"] == "user_simulator_error"
    assert rows["toy_status"]["review_reason"] == status["review_reason"]
    assert rows["toy_cancel"]["review_cause"] == "unsure"
    calls = lake.read("llm_calls").filter(pl.col("episode").str.ends_with("/review")).collect()
    assert calls.height == 7


def test_without_a_review_endpoint_unsolved_tasks_are_kept_and_say_so(
    toy_copy: Path, tmp_path: Path
) -> None:
    domain = load_domain(toy_copy, trusted=True)
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    ids = _simulate_and_score(lake, domain, toy_copy)
    stats = stages.filter_tasks(lake, "r1", domain, ids, judging=Judging.off())
    assert stats["accepted"] == 3 and stats["task_defects"] == 0
    rows = lake.read("task_verdicts").collect().to_dicts()
    assert all(r["review_cause"] == "not_reviewed" for r in rows)
    assert all(any("no judge endpoint" in x for x in r["reasons"]) for r in rows)
    assert lake.read("llm_calls").filter(pl.col("role") == "judge").collect().height == 0


def _cancel_task(task_id: str, order_id: str, compare: list[str] | None = None) -> str:
    action: dict[str, object] = {
        "action_id": "a1",
        "name": "cancel_order",
        "arguments": {"order_id": order_id, "reason": "plans changed"},
    }
    if compare is not None:
        action["compare_args"] = compare
    task = {
        "id": task_id,
        "user_scenario": {
            "instructions": {
                "domain": "toy",
                "reason_for_call": f"You want order {order_id} cancelled.",
                "task_instructions": "Ask for it.",
            }
        },
        "evaluation_criteria": {"actions": [action], "reward_basis": ["DB", "ACTION"]},
    }
    return json.dumps(task) + "\n"


def test_gold_replay_and_the_paraphrased_yardstick_gate_on_typed_results(
    toy_copy: Path, tmp_path: Path
) -> None:
    """A task whose gold action fails is counted at the funnel's first row (the gate reads
    ``ReplayResult.ok``, not error text); one that leaves the order id uncompared fails the
    paraphrased yardstick's gate."""
    with (toy_copy / "tasks.jsonl").open("a") as f:
        f.write(_cancel_task("toy_cancel_shipped", "O2"))  # O2 has shipped: cannot be cancelled
        f.write(_cancel_task("toy_cancel_any", "O1", compare=["reason"]))
    domain = load_domain(toy_copy, check_gold=False)  # the loader would refuse the first
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    ids = [t.id for t in domain.tasks]

    stages.filter_tasks(lake, "r1", domain, ids, judging=Judging.off())

    rows = {r["task_id"]: r for r in lake.read("task_verdicts").collect().to_dicts()}
    shipped = rows.pop("toy_cancel_shipped")
    assert shipped["rejected_at"] == "gold_replay" and not shipped["gold_replay_ok"]
    assert any(
        r.startswith("gold action a1 (cancel_order) failed: Error: order O2 is shipped")
        for r in shipped["reasons"]
    ), shipped["reasons"]
    loose = rows.pop("toy_cancel_any")
    assert loose["gold_replay_ok"] and loose["gold_scores_one"]
    assert loose["rejected_at"] == "paraphrased_scores_one"
    assert any("uncompared text reworded scores 0" in r for r in loose["reasons"])
    # The others pass every yardstick; with no episode they stop at the simulated gate.
    assert {r["rejected_at"] for r in rows.values()} == {"simulated"}
    funnel = build_report(lake, "r1", fast_settings()).funnel
    assert funnel[:2] == [
        {"stage": "tasks in scope", "tasks": 5},
        {"stage": "gold replay succeeds", "tasks": 4},
    ]
    counts = {r["stage"]: r["tasks"] for r in funnel}
    assert counts["gold scores 1"] == 4 and counts["gold with free text reworded scores 1"] == 3
