"""The LLM judge of NL assertions: sees the whole transcript, tool calls and results included,
and returns a verdict and a reason per assertion. Implements scoring's ``Judge`` protocol.

The prompt's answer shape, :func:`verdict_schema` (sent as ``response_format``) and
:func:`parse_verdicts` are one contract. A refused answer goes back to the judge with the reason
and is asked again; when every attempt fails the judge raises ``JudgeError``, which scoring
records as an error: never a silent pass or fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from maestro.agents.client import ChatClient, ProviderError, json_schema_format
from maestro.agents.structured import StructuredAnswerError, ask_structured, json_object
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

#: How a refused answer is sent back; the judge sees its answer above this.
RETRY_PROMPT = """That answer was refused: {problem}.
Answer again with JSON only, in the shape stated above, one entry per assertion."""


def verdict_schema(n_assertions: int) -> dict[str, Any]:
    """The JSON Schema of the answer the prompt asks for, with ``n_assertions`` verdicts."""
    verdict = {
        "type": "object",
        "properties": {
            "index": {"type": "integer", "enum": list(range(1, n_assertions + 1))},
            "met": {"type": "boolean"},
            "reason": {"type": "string"},
        },
        "required": ["index", "met", "reason"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "items": verdict,
                "minItems": n_assertions,
                "maxItems": n_assertions,
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    }


def parse_verdicts(text: str | None, assertions: Sequence[str]) -> list[AssertionVerdict]:
    """The verdicts in a judge's answer; ValueError saying what is wrong with it."""
    data: Any = json_object(text)
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
        if not assertions:
            return []  # nothing to ask (and a schema of zero verdicts allows no answer)
        prompt = JUDGE_PROMPT.format(
            transcript=trajectory.transcript(),
            assertions="\n".join(f"{i}. {a}" for i, a in enumerate(assertions, start=1)),
        )
        episode = f"{trajectory.domain_id}/{trajectory.task_id}/judge"
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        answer_format = json_schema_format("judge_verdicts", verdict_schema(len(assertions)))
        try:
            asked = await ask_structured(
                self.client,
                messages,
                lambda text: parse_verdicts(text, assertions),
                response_format=answer_format,
                episode=episode,
                attempts=self.attempts,
                # Only the latest refusal is shown: the prompt stays short for a small model.
                history="latest",
                retry=lambda problem, _: RETRY_PROMPT.format(problem=problem),
            )
        except ProviderError as exc:
            raise JudgeError(f"judge endpoint failed: {exc}") from None
        except StructuredAnswerError as exc:
            raise JudgeError("malformed judge output; " + "; ".join(exc.problems)) from None
        return asked.value
