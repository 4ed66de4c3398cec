"""Trajectories built without a model: the gold conversation, doing nothing, and perturbations.

These are the yardsticks every task is checked against: the gold conversation must score 1, and
so must the gold conversation with every argument the task does not compare reworded; a
conversation that does nothing, or changes one gold argument, must score 0.

A task with scripted user turns gets each turn's message, then the gold actions placed in that
turn (``UserTurn.action_ids``), then a short answer, turn after turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from maestro.conversation import Message, ToolCall, Trajectory
from maestro.domains.models import Action, Task
from maestro.domains.package import Domain

GREETING = "Hello! How can I help you today?"


Call = tuple[str, dict[str, Any] | str]


def opening(task: Task) -> Message:
    """The user's first message, from the scenario."""
    return Message(role="user", content=task.user_scenario.instructions.reason_for_call)


def user_messages(task: Task) -> list[Message]:
    """The user's messages: the scripted turns, or the scenario's opening."""
    if task.user_turns:
        return [Message(role="user", content=t.content) for t in task.user_turns]
    return [opening(task)]


def turns_trajectory(
    domain: Domain,
    task: Task,
    calls_per_turn: Sequence[Iterable[Call]],
    final_text: str | None,
) -> Trajectory:
    """Play tool calls on a fresh session of the task, each group after its user message,
    recording each call and its result; each turn ends with ``final_text``."""
    session = domain.start_session(task)
    messages: list[Message] = []
    n = 0
    for said, calls in zip(user_messages(task), calls_per_turn, strict=True):
        messages.append(said)
        for name, args in calls:
            n += 1
            call = ToolCall(id=f"call_{n}", name=name, arguments=args)
            messages.append(Message(role="assistant", tool_calls=[call]))
            out = domain.toolkit.call(session, name, args)
            messages.append(
                Message(
                    role="tool",
                    content=out.content,
                    tool_call_id=call.id,
                    name=name,
                    status=out.status,
                )
            )
        if final_text:
            messages.append(Message(role="assistant", content=final_text))
    return Trajectory(
        domain_id=domain.id, task_id=task.id, messages=messages, termination="scripted"
    )


def calls_trajectory(
    domain: Domain, task: Task, calls: Iterable[Call], final_text: str | None
) -> Trajectory:
    """Play tool calls on a fresh session of the task, recording each call and its result (for
    a scripted task, all after its first turn)."""
    rest: list[list[Call]] = [[] for _ in task.user_turns[1:]]
    return turns_trajectory(domain, task, [list(calls), *rest], final_text)


def by_turn(task: Task, actions: Sequence[Action]) -> list[list[Call]]:
    """Actions as calls grouped by the scripted turn that places them (by ``action_id``);
    actions no turn places come in the last turn. One group for an unscripted task."""
    if not task.user_turns:
        return [_calls(actions)]
    groups: list[list[Call]] = [[] for _ in task.user_turns]
    turn_of = {a: i for i, t in enumerate(task.user_turns) for a in t.action_ids}
    for action in actions:
        groups[turn_of.get(action.action_id, len(groups) - 1)].append(
            (action.name, action.arguments)
        )
    return groups


def summary_text(task: Task) -> str:
    """A closing assistant message that states every fact the task requires communicating."""
    info = task.evaluation_criteria.communicate_info
    if not info:
        return "All done. Is there anything else I can help you with?"
    return "To confirm: " + "; ".join(info) + "."


def _calls(actions: Sequence[Action]) -> list[Call]:
    return [(a.name, a.arguments) for a in actions]


def gold_trajectory(domain: Domain, task: Task) -> Trajectory:
    """The gold actions in order, then a message communicating the required information."""
    return turns_trajectory(domain, task, by_turn(task, task.gold_actions), summary_text(task))


def null_trajectory(domain: Domain, task: Task) -> Trajectory:
    """The assistant greets and does nothing else."""
    return turns_trajectory(domain, task, by_turn(task, []), GREETING)


def paraphrase(text: str) -> str:
    """The same words put another way, as an agent writing in its own words would."""
    return f"in the customer's own words: {text}"


def paraphrased_trajectory(domain: Domain, task: Task) -> Trajectory | None:
    """The gold conversation with every string argument its ``compare_args`` leaves out
    paraphrased (turn by turn for a scripted task); None when the gold actions have no such
    argument."""
    changed = False
    actions: list[Action] = []
    for action in task.gold_actions:
        compared = action.compared()
        args = dict(action.arguments)
        for name, value in action.arguments.items():
            if name not in compared and isinstance(value, str):
                args[name] = paraphrase(value)
                changed = True
        actions.append(action.model_copy(update={"arguments": args}))
    if task.evaluation_criteria.communicate_info:
        changed = True
    if not changed:
        return None
    return turns_trajectory(domain, task, by_turn(task, actions), restated_summary(task))


def restate(item: str, upper: bool = False) -> str:
    """A fact as another writer puts it: its case changed, hyphens between words as spaces,
    decimals to two places and long whole numbers with thousands separators ("1510.9" ->
    "1,510.90"), wrapped in punctuation of its own."""

    def number(m: re.Match[str]) -> str:
        text = m.group(0)
        if (text.startswith("0") and not text.startswith("0.")) or len(text) > 15:
            return text  # a leading zero is part of a code; a long number is an identifier
        whole, dot, frac = text.partition(".")
        grouped = f"{int(whole):,}" if len(whole) > 3 else whole
        return f"{grouped}.{frac.ljust(2, '0')}" if dot else grouped  # every decimal kept

    # ASCII digits only: another script's digits are left as they are written.
    text = re.sub(r"(?<![\w:/.-])[0-9]+(?:\.[0-9]+)?(?![\w:/-]|\.[0-9])", number, item)
    text = re.sub(r"(?<=[^\W\d_])-(?=[^\W\d_])", " ", text)
    cased = text.upper() if upper else text.lower()
    if cased.casefold() != text.casefold():  # a case change that does not come back (ı)
        cased = text
    return f"({cased})"


def restated_summary(task: Task) -> str:
    """A closing message that states every fact to communicate inside a sentence of other
    words, each restated (:func:`restate`): what a careful agent's own words look like."""
    info = task.evaluation_criteria.communicate_info
    if not info:
        return summary_text(task)
    facts = ", and then ".join(restate(x, upper=i % 2 == 0) for i, x in enumerate(info))
    return f"Right, so for your request the key points are {facts}; does that answer it?"


def perturb_value(value: Any) -> Any:
    """A different value of the same JSON type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, list):
        return [*value, value[-1]] if value else ["changed"]
    if isinstance(value, dict):
        return {**value, "changed": True}
    return "changed"


def _perturb_first(candidates: Sequence[Action]) -> tuple[Action, Action] | None:
    for action in candidates:
        compared = action.compared()
        if compared:
            name, value = next(iter(compared.items()))
            changed = action.model_copy(
                update={"arguments": {**action.arguments, name: perturb_value(value)}}
            )
            return action, changed
    return None


def perturbed_trajectory(domain: Domain, task: Task, write_tools: set[str]) -> Trajectory | None:
    """The gold conversation made wrong in one place.

    With a gold write: the first write's first compared argument changed. Read-only: the first
    gold action changed the same way. Refusal (no gold actions): the gold conversation plus the
    first forbidden action. None when none of these applies.
    """
    gold = task.gold_actions
    if not gold:
        forbidden = task.evaluation_criteria.forbidden_actions
        if not forbidden:
            return None
        return turns_trajectory(
            domain, task, by_turn(task, [*gold, forbidden[0]]), summary_text(task)
        )
    writes = [a for a in gold if a.name in write_tools]
    picked = _perturb_first(writes) if writes else None
    picked = picked or _perturb_first(gold)
    if picked is None:
        return None
    original, changed = picked
    actions = [changed if a is original else a for a in gold]
    return turns_trajectory(domain, task, by_turn(task, actions), summary_text(task))
