"""Scoring a task whose criteria are large: gold actions and facts by the thousand cost time
linear in them, never a ``RecursionError`` (issue 23)."""

from __future__ import annotations

import random
import re
import time

from maestro.conversation import Message, ToolCall, Trajectory
from maestro.domains import Action, Domain, Task
from maestro.domains.facts import states_fact
from maestro.scoring import ScoringContext, communicate_check, match_actions
from maestro.scoring.scenario import volunteered_known_facts


def _call(name: str, **args: object) -> ToolCall:
    return ToolCall(id="x", name=name, arguments=dict(args))


def _kuhn(actions: list[Action], calls: list[ToolCall], ordered: bool) -> list[int | None]:
    """The matcher as it was (recursive, one level per action): the reference for small cases."""
    from maestro.scoring.matching import matches

    if ordered:
        out: list[int | None] = []
        pos = 0
        for a in actions:
            hit = next((j for j in range(pos, len(calls)) if matches(a, calls[j])), None)
            out.append(hit)
            if hit is not None:
                pos = hit + 1
        return out
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j, call in enumerate(calls):
            if j in seen or not matches(actions[i], call):
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(actions)):
        assign(i, set())
    by_action = {i: j for j, i in owner.items()}
    return [by_action.get(i) for i in range(len(actions))]


def test_three_thousand_identical_gold_actions_match_without_recursion_error() -> None:
    same = [Action(action_id=f"a{i}", name="f", arguments={"x": 1}) for i in range(3000)]
    calls = [_call("f", x=1.0, note=i) for i in range(3000)]
    started = time.perf_counter()
    assert sorted(j for j in match_actions(same, calls, ordered=False) if j is not None) == list(
        range(3000)
    )
    # One call short: exactly one action is left unmatched; a wrong value matches nothing.
    assert match_actions(same, calls[:-1], ordered=False).count(None) == 1
    assert match_actions(same, [_call("f", x=True)] * 3000, ordered=False) == [None] * 3000
    assert match_actions(same, calls, ordered=True) == list(range(3000))
    assert time.perf_counter() - started < 30


def test_loose_actions_give_way_to_strict_ones_at_scale() -> None:
    """1,500 actions that compare nothing take the first calls; 1,500 that each fit one of
    those calls only must displace them, along paths through the loose ones."""
    n = 1500
    loose = [
        Action(action_id=f"l{i}", name="f", arguments={"k": 0}, compare_args=[]) for i in range(n)
    ]
    strict = [Action(action_id=f"s{i}", name="f", arguments={"k": i}) for i in range(n)]
    calls = [_call("f", k=j if j < n else -1) for j in range(2 * n)]
    got = match_actions(loose + strict, calls, ordered=False)
    assert got[n:] == list(range(n))
    assert sorted(j for j in got[:n] if j is not None) == list(range(n, 2 * n))


def test_the_matcher_assigns_exactly_as_the_recursive_one_did() -> None:
    rnd = random.Random(23)
    for _ in range(300):
        actions = [
            Action(
                action_id=f"a{i}",
                name=rnd.choice("fg"),
                arguments={"x": rnd.choice([1, 2, 2.0, True, "1", None]), "y": rnd.randint(0, 2)},
                compare_args=rnd.choice([None, ["x"], ["y"], []]),
            )
            for i in range(rnd.randint(0, 7))
        ]
        calls = [
            _call(
                rnd.choice("fg"),
                **{k: rnd.choice([1, 1.0, 2, False, True, "1", None, [1], {"a": 1}]) for k in "xy"},
            )
            for _ in range(rnd.randint(0, 8))
        ]
        for ordered in (False, True):
            assert match_actions(actions, calls, ordered) == _kuhn(actions, calls, ordered)


def _facts_task(toy: Domain, facts: list[str]) -> Task:
    task = toy.task("toy_status").model_copy(deep=True)
    task.evaluation_criteria.communicate_info = facts
    return task


def _said(*texts: str) -> Trajectory:
    messages = [Message(role="user", content="Hello.")]
    messages += [Message(role="assistant", content=t) for t in texts]
    return Trajectory(domain_id="toy", task_id="toy_status", messages=messages)


def test_fifty_thousand_facts_are_checked_in_linear_time(toy: Domain) -> None:
    """A task from the lake is not loaded through the loader's cap of facts: 50k items took
    23 s, every item tokenized and slid over every message."""
    texts = [
        f"Your booking R{i} costs ${i}.50, leaving at 9:30 on 2026-02-16, the {i}th seat. " * 3
        for i in range(20)
    ]
    facts = [f"item {i} thing" for i in range(50_000)] + ["R7", "$12.5", "the 3th seat"]
    ctx = ScoringContext(toy, _facts_task(toy, facts), _said(*texts))
    started = time.perf_counter()
    score = communicate_check()(ctx)
    assert time.perf_counter() - started < 5
    assert [i.passed for i in score.items[-3:]] == [True, True, True]
    assert not any(i.passed for i in score.items[:-3])


def test_the_check_states_a_fact_exactly_when_states_fact_does(toy: Domain) -> None:
    rnd = random.Random(23)
    words = ["the", "your", "a", "refill", "pending", "2", "checked", "bags", "$1,510.90", "R1"]
    for _ in range(200):
        texts = [
            " ".join(rnd.choice(words) for _ in range(rnd.randint(0, 12)))
            for _ in range(rnd.randint(1, 3))
        ]
        facts = [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 5))) for _ in range(6)]
        score = communicate_check()(ScoringContext(toy, _facts_task(toy, facts), _said(*texts)))
        want = [any(states_fact(t, f) for t in texts) for f in facts]
        assert [i.passed for i in score.items] == want, (texts, facts)


# ----- the scenario lint (known facts volunteered) ---------------------------------------------

_OLD_TOKEN = re.compile(r"[\w.+-]*[\d@][\w.+@-]*")


def _old_volunteered(task: Task) -> list[str]:
    """The lint as it was (a backtracking token pattern, one regex per fact and sentence)."""
    from maestro.scoring.scenario import _NAME, _NOT_NAME, _WAITS

    ins = task.user_scenario.instructions
    text = ins.known_info or ""
    facts = {t.strip(".,;:") for t in _OLD_TOKEN.findall(text)}
    for name in _NAME.findall(text):
        words = name.split()
        while words and words[0] in _NOT_NAME:
            words.pop(0)
        if len(words) >= 2:
            facts.add(" ".join(words))
    facts = {f for f in facts if len(f) >= 3}

    def states(sentence: str, fact: str) -> bool:
        return re.search(rf"(?<![\w-]){re.escape(fact)}(?![\w-])", sentence) is not None

    facts -= {f for f in facts if states(ins.reason_for_call, f)}
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+", ins.task_instructions):
        if _WAITS.search(sentence):
            continue
        said = sorted(f for f in facts if states(sentence, f))
        if said:
            out.append(", ".join(said))
    return out


def _scenario_task(known: str, instructions: str, reason: str = "I call about my order.") -> Task:
    return Task.model_validate(
        {
            "id": "t",
            "user_scenario": {
                "instructions": {
                    "domain": "toy",
                    "reason_for_call": reason,
                    "known_info": known,
                    "task_instructions": instructions,
                }
            },
            "evaluation_criteria": {"nl_assertions": ["x"], "reward_basis": ["NL_ASSERTION"]},
        }
    )


def test_forty_kilobytes_of_known_info_are_linted_in_linear_time() -> None:
    """A 40 KB known_info cost 22-26 s: the token pattern backtracked over every word."""
    numbered = " ".join(f"Order R{i} of Kevin Marsh{i % 7}." for i in range(2500))
    cases = [
        ("a" * 40_000, "Say hello."),
        ("a-b." * 10_000, "Give a-b. now."),
        (numbered, " ".join(f"Say R{i} now." for i in range(0, 4000, 3))),
    ]
    for known, instructions in cases:
        task = _scenario_task(known, instructions)
        started = time.perf_counter()
        found = volunteered_known_facts(task)
        assert time.perf_counter() - started < 3, known[:20]
        assert len(found) == (830 if known is numbered else 0)


def test_the_lint_finds_what_it_found_before() -> None:
    rnd = random.Random(23)
    parts = ["R30177", "Kevin Marsh", "a@b.co", "+1-206-555-0187", "4417", "x", "-", ".", "@"]
    joins = [" ", ". ", "-", "", ", ", "@", "+"]
    for _ in range(300):

        def text(k: int) -> str:
            return "".join(rnd.choice(parts) + rnd.choice(joins) for _ in range(rnd.randint(0, k)))

        task = _scenario_task(
            text(8), text(10) + " when asked. " + text(6), reason="I call. " + text(3)
        )
        lines = volunteered_known_facts(task)
        said = [
            line.split(" unasked")[0].removeprefix("task_instructions say to give ")
            for line in lines
        ]
        assert said == _old_volunteered(task), task.user_scenario.instructions
