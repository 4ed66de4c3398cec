"""Scoring twice on the same trajectory: maestro's card and BFCL's own checker."""

from __future__ import annotations

from maestro.conversation import Message, ToolCall, Trajectory
from maestro.domains import Domain
from maestro.domains.importers.bfcl_checker import BfclChecker, bfcl_turns, call_string
from maestro.scoring import Scorer, external_checker

# Not maestro.scoring.agreement: that name is also a submodule, which replaces the function on
# the package once anything imports it (the annotation import does).
from maestro.scoring.external import agreement, yardstick_agreement
from maestro.simulation.scripted import gold_trajectory


def test_gold_passes_both_doing_nothing_fails_both_and_a_changed_argument_agrees_or_is_unseen(
    gorilla: Domain,
) -> None:
    checker = external_checker(gorilla)
    assert checker is not None and checker.name.startswith("bfcl-eval==")
    try:
        rows = yardstick_agreement(gorilla, checker)
    finally:
        checker.close()
    assert {(r.kind, r.card_passed, r.checker.status) for r in rows if r.kind != "perturbed"} == {
        ("gold", True, "pass"),
        ("null", False, "fail"),
    }
    perturbed = [r for r in rows if r.kind == "perturbed"]
    assert len(perturbed) == len(gorilla.tasks) and all(not r.card_passed for r in perturbed)
    for r in perturbed:
        if r.checker.status == "pass":
            # The one kind of disagreement: BFCL judges results and state, and this changed
            # argument changed neither (ls(a=False) in a folder with no hidden file): maestro's
            # DB criterion passed; only its ACTION criterion saw the argument.
            assert r.card_details.startswith("ACTION: unmatched:"), r
    counts = agreement((r.card_passed, r.checker.passed) for r in rows)
    assert counts.both_pass == len(gorilla.tasks) and counts.checker_only == sum(
        r.checker.status == "pass" for r in perturbed
    )


def test_bfcl_sees_turns_steps_and_drops_what_it_cannot_decode() -> None:
    call = ToolCall(id="1", name="cd", arguments={"folder": "a"})
    bad = ToolCall(id="2", name="ls", arguments="{not json")
    traj = Trajectory(
        domain_id="d",
        task_id="t",
        messages=[
            Message(role="user", content="one"),
            Message(role="assistant", tool_calls=[call, call]),
            Message(role="tool", content="{}"),
            Message(role="assistant", tool_calls=[bad]),
            Message(role="assistant", content="done"),
            Message(role="user", content="two"),
            Message(role="assistant", content="nothing to do"),
        ],
    )
    assert bfcl_turns(traj) == [[["cd(folder='a')", "cd(folder='a')"]], []]
    assert call_string("mv", {"source": "a", "n": 2}) == "mv(source='a',n=2)"


def test_a_cut_short_episode_fails_as_bfcls_runner_fails_it(gorilla: Domain) -> None:
    task = gorilla.tasks[0]
    gold = gold_trajectory(gorilla, task)
    first_user = [i for i, m in enumerate(gold.messages) if m.role == "user"][1]
    short = gold.model_copy(update={"messages": gold.messages[:first_user]})
    checker = BfclChecker(gorilla)
    try:
        got = checker.check(task, short)
    finally:
        checker.close()
    assert (got.status, got.error_type) == ("fail", "multi_turn:force_terminated")
    assert Scorer(gorilla).score(task, short).passed is False


def test_a_tool_name_cannot_smuggle_code_into_bfcls_eval(gorilla: Domain, tmp_path) -> None:
    """BFCL's executor evaluates call strings; the name comes from the model. In the sandbox,
    its eval takes only instance.method(literals)."""
    task = gorilla.tasks[0]
    marker = tmp_path / "pwned"
    evil = ToolCall(id="x", name=f"__import__('os').system('touch {marker}') or ls", arguments={})
    gold = gold_trajectory(gorilla, task)
    messages = list(gold.messages)
    messages.insert(1, Message(role="assistant", tool_calls=[evil]))
    checker = BfclChecker(gorilla)
    try:
        got = checker.check(task, gold.model_copy(update={"messages": messages}))
    finally:
        checker.close()
    assert got.status == "pass"  # the bad call is an error result, nothing more
    assert not marker.exists()
