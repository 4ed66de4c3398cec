"""The LLM judge of NL assertions: sees the whole transcript, tool calls and results included,
and returns a verdict and a reason per assertion. Implements scoring's ``Judge`` protocol.

Malformed output is retried; when every attempt fails the judge raises ``JudgeError``, which
scoring records as an error: never a silent pass or fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from maestro.agents.client import ChatClient, ProviderError
from maestro.conversation import Trajectory
from maestro.domains.models import Task
from maestro.scoring.card import AssertionVerdict
from maestro.scoring.judge import JudgeError

JUDGE_PROMPT = """You judge a customer-service conversation between an AI agent and a customer.
The transcript shows every message, every tool call the agent made and every tool result.

For each numbered assertion, decide whether the conversation satisfies it. Judge only from the
transcript; an assertion about something that did not happen is not met.

Answer with JSON only, no other text, in exactly this shape:
{{"verdicts": [{{"index": 1, "met": true, "reason": "one sentence"}}, ...]}}
with one entry per assertion, in order.

# Transcript
{transcript}

# Assertions
{assertions}"""

_JSON_BLOCK = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdicts(text: str | None, assertions: Sequence[str]) -> list[AssertionVerdict]:
    """The verdicts in a judge's answer; ValueError saying what is wrong with it."""
    if not text:
        raise ValueError("empty answer")
    match = _JSON_BLOCK.search(text)
    if not match:
        raise ValueError("no JSON object in the answer")
    try:
        data: Any = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    items = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError("no 'verdicts' list")
    by_index: dict[int, AssertionVerdict] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("a verdict is not an object")
        idx, met = item.get("index"), item.get("met")
        if not isinstance(idx, int) or not 1 <= idx <= len(assertions):
            raise ValueError(f"verdict index {idx!r} is not 1..{len(assertions)}")
        if not isinstance(met, bool):
            raise ValueError(f"verdict {idx}: 'met' must be true or false, not {met!r}")
        by_index[idx] = AssertionVerdict(
            assertion=assertions[idx - 1], met=met, reason=str(item.get("reason") or "")
        )
    missing = [i for i in range(1, len(assertions) + 1) if i not in by_index]
    if missing:
        raise ValueError(f"no verdict for assertion(s) {missing}")
    return [by_index[i] for i in range(1, len(assertions) + 1)]


class LLMJudge:
    """Judges assertions with an LLM through the judge role's client."""

    def __init__(self, client: ChatClient, attempts: int = 3) -> None:
        self.client = client
        self.attempts = attempts

    async def judge(
        self, task: Task, trajectory: Trajectory, assertions: Sequence[str]
    ) -> list[AssertionVerdict]:
        prompt = JUDGE_PROMPT.format(
            transcript=trajectory.transcript(),
            assertions="\n".join(f"{i}. {a}" for i, a in enumerate(assertions, start=1)),
        )
        episode = f"{trajectory.domain_id}/{trajectory.task_id}/judge"
        problems = []
        for attempt in range(self.attempts):
            try:
                out = await self.client.complete(
                    [{"role": "user", "content": prompt}], episode=episode, seed=attempt
                )
            except ProviderError as exc:
                raise JudgeError(f"judge endpoint failed: {exc}") from None
            try:
                return parse_verdicts(out.message.content, assertions)
            except ValueError as exc:
                problems.append(f"attempt {attempt + 1}: {exc}")
        raise JudgeError("malformed judge output; " + "; ".join(problems))
