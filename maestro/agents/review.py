"""The LLM review of a task no episode solved: from its failed transcripts, is the task at fault
(``task_defect``), the simulated customer (``user_simulator_error``) or the assistant
(``assistant_failure``)? The filter rejects task defects; the other causes keep the task.

The answer is one JSON object, parsed strictly; malformed answers are retried a bounded number
of times, then the review raises :class:`ReviewError`, which the filter records as such (never a
silent verdict).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from maestro.agents.client import ChatClient, ProviderError
from maestro.domains.models import Action, Task

ReviewCause = Literal["task_defect", "user_simulator_error", "assistant_failure"]
CAUSES: tuple[ReviewCause, ...] = ("task_defect", "user_simulator_error", "assistant_failure")

#: Each transcript is cut to this many characters, so several fit a small model's context.
TRANSCRIPT_CHARS = 6000

REVIEW_PROMPT = """A customer-service task was given to an AI agent several times and it never
succeeded. Decide why, from the transcripts.

Causes:
- "task_defect": the task itself is wrong: its expected actions break the policy, need
  information the customer is never given, contradict the database, or its assertions cannot be
  met by a correct agent.
- "user_simulator_error": the simulated customer did not follow the scenario (gave wrong or
  missing information, asked for something else, ended the call too early).
- "assistant_failure": the task is fine and the customer behaved; the agent made mistakes.

# Agent policy
{policy}

# The task
Customer scenario: {scenario}
Expected tool calls: {actions}
Forbidden tool calls: {forbidden}
Assertions: {assertions}

# Failed attempts
{transcripts}

Answer with JSON only, no other text, in exactly this shape:
{{"cause": "task_defect" | "user_simulator_error" | "assistant_failure", "reason": "one or two sentences"}}"""

_JSON_BLOCK = re.compile(r"\{.*\}", re.DOTALL)


class ReviewError(Exception):
    """The review could not be obtained: the endpoint failed or every answer was malformed."""


@dataclass(frozen=True)
class Review:
    cause: ReviewCause
    reason: str


def parse_review(text: str | None) -> Review:
    """The review in a model's answer; ValueError saying what is wrong with it."""
    if not text or not text.strip():
        raise ValueError("empty answer")
    match = _JSON_BLOCK.search(text)
    if not match:
        raise ValueError("no JSON object in the answer")
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    extra = sorted(set(data) - {"cause", "reason"})
    if extra:
        raise ValueError(f"unexpected key(s) {extra}")
    cause, reason = data.get("cause"), data.get("reason")
    if cause not in CAUSES:
        raise ValueError(f"cause must be one of {list(CAUSES)}, not {cause!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("reason must be a non-empty string")
    return Review(cast(ReviewCause, cause), reason.strip())


def review_prompt(policy: str, task: Task, transcripts: Sequence[str]) -> str:
    crit = task.evaluation_criteria
    ins = task.user_scenario.instructions

    def calls(actions: Sequence[Action]) -> str:
        if not actions:
            return "none"
        return json.dumps([{"name": a.name, "arguments": a.arguments} for a in actions])

    shown = "\n\n".join(
        f"## Attempt {i}\n{t[:TRANSCRIPT_CHARS]}" for i, t in enumerate(transcripts, start=1)
    )
    return REVIEW_PROMPT.format(
        policy=policy[:6000],
        scenario=ins.model_dump_json(exclude_none=True),
        actions=calls(crit.actions),
        forbidden=calls(crit.forbidden_actions),
        assertions=json.dumps(crit.nl_assertions + crit.communicate_info),
        transcripts=shown or "(none)",
    )


async def review_failures(
    client: ChatClient,
    policy: str,
    task: Task,
    transcripts: Sequence[str],
    *,
    episode: str | None = None,
    attempts: int = 3,
) -> Review:
    """Classify why no episode solved ``task``, from (some of) its failed transcripts."""
    prompt = review_prompt(policy, task, transcripts)
    problems = []
    for attempt in range(attempts):
        try:
            out = await client.complete(
                [{"role": "user", "content": prompt}], episode=episode, seed=attempt
            )
        except ProviderError as exc:
            raise ReviewError(f"review endpoint failed: {exc}") from None
        try:
            return parse_review(out.message.content)
        except ValueError as exc:
            problems.append(f"attempt {attempt + 1}: {exc}")
    raise ReviewError("malformed review output; " + "; ".join(problems))
