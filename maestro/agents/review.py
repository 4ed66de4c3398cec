"""The LLM review of a task no episode solved: from its failed transcripts, is the task at fault
(``task_defect``), the simulated customer (``user_simulator_error``) or the assistant
(``assistant_failure``)? The filter rejects task defects; the other causes keep the task.

A verdict must carry evidence the code can check, since a small reviewer guesses: a quote from
the policy, the task or a transcript that exists there (whitespace, case and quote marks
normalised), and the label of the expected tool call or assertion it is about. A verdict whose
quote is not there is ``unsure``: the task is kept and flagged.

The answer is one JSON object; its JSON Schema (:func:`review_schema`, the task's labels as the
choices for ``about``) is sent as ``response_format`` and is the one source of the shape the
prompt states and the parser accepts. Malformed answers go back to the model with the reason, a
bounded number of times; then the review raises :class:`ReviewError`, which the filter records as
such (never a silent verdict).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from maestro.agents.client import ChatClient, ProviderError
from maestro.agents.structured import StructuredAnswerError, ask_structured, json_object
from maestro.domains.models import Action, Task

#: What a reviewer may answer.
ReviewerCause = Literal["task_defect", "user_simulator_error", "assistant_failure"]
CAUSES: tuple[ReviewerCause, ...] = get_args(ReviewerCause)
#: What a review concludes: the reviewer's cause when its evidence checks out, else ``unsure``.
ReviewCause = Literal["task_defect", "user_simulator_error", "assistant_failure", "unsure"]

#: Each transcript is cut to this many characters, so several fit a small model's context.
TRANSCRIPT_CHARS = 6000
#: The policy is cut to this many characters, for the same reason.
POLICY_CHARS = 6000
#: A quote shorter than this many words proves nothing ("the", "cancel it").
MIN_QUOTE_WORDS = 4


def review_schema(labels: Sequence[str]) -> dict[str, Any]:
    """The answer's JSON Schema for a task whose actions and assertions carry ``labels``."""
    return {
        "type": "object",
        "properties": {
            "cause": {"type": "string", "enum": list(CAUSES)},
            "reason": {"type": "string", "minLength": 1},
            "evidence": {"type": "string", "minLength": 1},
            "about": {"type": "string", "enum": list(labels)},
        },
        "required": ["cause", "reason", "evidence", "about"],
        "additionalProperties": False,
    }


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` asking for JSON valid against ``schema`` (OpenAI's structured
    outputs; vLLM, SGLang, llama.cpp's server and the embedded model accept it too)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "task_review", "schema": schema, "strict": True},
    }


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
Expected tool calls:
{actions}
Forbidden tool calls:
{forbidden}
Assertions:
{assertions}

# Failed attempts
{transcripts}

Answer with JSON only, no other text, in exactly this shape:
{shape}
- "evidence": one sentence copied word for word from the policy, the task or a transcript above,
  that shows the cause (for task_defect, from the policy or the customer's scenario: what the
  expected action or assertion contradicts).
- "about": the label of the expected or forbidden tool call ({action_labels}) or of the
  assertion ({assertion_labels}) that could not be met."""

_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "`": "'"})
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026)\s*")
_SPACE = re.compile(r"\s+")


class ReviewError(Exception):
    """The review could not be obtained: the endpoint failed or every answer was malformed."""


@dataclass(frozen=True)
class ReviewAnswer:
    """A reviewer's answer, well formed but not yet checked against what it quotes."""

    cause: ReviewerCause
    reason: str
    evidence: str
    about: str


@dataclass(frozen=True)
class Review:
    """What the review concluded; ``claimed`` is the reviewer's own cause, which ``cause``
    differs from only when the evidence did not check out (then ``unsure``)."""

    cause: ReviewCause
    reason: str
    claimed: ReviewerCause
    evidence: str
    about: str

    def summary(self) -> str:
        """The reason with the evidence behind it, as a verdict stores it."""
        return f'{self.reason} (about {self.about}; evidence: "{self.evidence}")'


def schema_shape(schema: dict[str, Any]) -> str:
    """The answer's shape as the prompt states it, written from the schema: each choice of an
    enum, a placeholder for each free string."""
    placeholders = {"reason": "one or two sentences", "evidence": "a quote"}
    parts = []
    for key, spec in schema["properties"].items():
        if "enum" in spec:
            value = " | ".join(json.dumps(c) for c in spec["enum"])
        else:
            value = json.dumps(placeholders.get(key, "text"))
        parts.append(f"{json.dumps(key)}: {value}")
    return "{" + ", ".join(parts) + "}"


def parse_review(text: str | None, schema: dict[str, Any]) -> ReviewAnswer:
    """The answer in a model's reply, checked against ``schema`` (see :func:`review_schema`);
    ValueError saying what is wrong with it."""
    data = json_object(text)
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    props = schema["properties"]
    extra = sorted(set(data) - set(props))
    if extra:
        raise ValueError(f"unexpected key(s) {extra}; the keys are {list(props)}")
    missing = [k for k in schema["required"] if k not in data]
    if missing:
        raise ValueError(f"missing key(s) {missing}")
    for key, spec in props.items():
        value = data[key]
        if "enum" in spec:
            if value not in spec["enum"]:
                raise ValueError(f"{key} must be one of {spec['enum']}, not {value!r}")
        # Exactly the schema's rule (a blank quote is then found nowhere: ``unsure``).
        elif not isinstance(value, str) or not value:
            raise ValueError(f"{key} must be a non-empty string")
    return ReviewAnswer(
        cause=cast(ReviewerCause, data["cause"]),
        reason=data["reason"].strip(),
        evidence=data["evidence"].strip(),
        about=data["about"].strip(),
    )


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text.translate(_QUOTES)).strip().casefold()


def quoted_in(quote: str, sources: Sequence[str]) -> bool:
    """The quote exists in one of the sources, word for word up to whitespace, case and quote
    marks; an ellipsis may stand for left-out words, the parts still in order."""
    core = _normal(quote).strip(" \"'").rstrip(".,;:!?")
    parts = [p for p in _ELLIPSIS.split(core) if p]
    if sum(len(p.split()) for p in parts) < MIN_QUOTE_WORDS:
        return False
    for source in sources:
        text, at = _normal(source), 0
        for part in parts:
            at = text.find(part, at)
            if at < 0:
                break
            at += len(part)
        else:
            return True
    return False


@dataclass(frozen=True)
class ReviewCase:
    """What the reviewer is shown, labelled, so its answer can be checked against it."""

    policy: str
    task: Task
    transcripts: tuple[str, ...]

    @property
    def actions(self) -> dict[str, Action]:
        crit = self.task.evaluation_criteria
        return {a.action_id: a for a in [*crit.actions, *crit.forbidden_actions]}

    @property
    def assertions(self) -> dict[str, str]:
        crit = self.task.evaluation_criteria
        texts = [*crit.nl_assertions, *crit.communicate_info]
        return {f"A{i}": t for i, t in enumerate(texts, start=1)}

    @property
    def schema(self) -> dict[str, Any]:
        return review_schema([*self.actions, *self.assertions])

    def sources(self, *, against: bool = False) -> list[str]:
        """Every text a quote may come from, as shown; ``against``: only what an expectation
        can be shown wrong against (the policy and the scenario), not the expected actions and
        assertions themselves, nor the transcripts."""
        ins = self.task.user_scenario.instructions
        fields = [self.task.user_scenario.persona, *ins.model_dump(exclude_none=True).values()]
        given = [self.policy[:POLICY_CHARS], *(str(f) for f in fields if f)]
        if against:
            return given
        actions = [_action_line(i, a) for i, a in self.actions.items()]
        return [
            *given,
            *actions,
            *self.assertions.values(),
            *(t[:TRANSCRIPT_CHARS] for t in self.transcripts),
        ]

    def prompt(self) -> str:
        crit = self.task.evaluation_criteria
        forbidden = {a.action_id for a in crit.forbidden_actions}
        gold = [_action_line(i, a) for i, a in self.actions.items() if i not in forbidden]
        banned = [_action_line(i, a) for i, a in self.actions.items() if i in forbidden]
        shown = "\n\n".join(
            f"## Attempt {i}\n{t[:TRANSCRIPT_CHARS]}"
            for i, t in enumerate(self.transcripts, start=1)
        )
        return REVIEW_PROMPT.format(
            policy=self.policy[:POLICY_CHARS],
            scenario=self.task.user_scenario.instructions.model_dump_json(exclude_none=True),
            actions="\n".join(gold) or "none",
            forbidden="\n".join(banned) or "none",
            assertions="\n".join(f"{k}: {v}" for k, v in self.assertions.items()) or "none",
            transcripts=shown or "(none)",
            shape=schema_shape(self.schema),
            action_labels=", ".join(self.actions) or "none",
            assertion_labels=", ".join(self.assertions) or "none",
        )

    def check(self, answer: ReviewAnswer) -> Review:
        """A parsed answer (its label already one of the task's: see :func:`parse_review`) as
        a review: its cause when the quote exists, else ``unsure``, saying why."""
        # A task defect says an expectation (``about``) is wrong, so its evidence must be what
        # the expectation contradicts: the policy or the scenario. Quoting the expectation
        # itself proves nothing (the embedded reviewer quoted vetclinic_021's own assertion to
        # call it defective), nor does what a failed attempt said.
        defect = answer.cause == "task_defect"
        if quoted_in(answer.evidence, self.sources(against=defect)):
            return Review(answer.cause, answer.reason, answer.cause, answer.evidence, answer.about)
        where = (
            "the policy or the customer's scenario"
            if defect
            else "the policy, the task or the transcripts"
        )
        reason = (
            f"the reviewer said {answer.cause} ({answer.reason}), but its evidence is not quoted"
            f" word for word from {where} (or is under {MIN_QUOTE_WORDS} words)"
        )
        return Review("unsure", reason, answer.cause, answer.evidence, answer.about)


def _action_line(label: str, action: Action) -> str:
    return f"{label}: {action.name} {json.dumps(action.arguments, sort_keys=True)}"


def review_prompt(policy: str, task: Task, transcripts: Sequence[str]) -> str:
    return ReviewCase(policy, task, tuple(transcripts)).prompt()


async def review_failures(
    client: ChatClient,
    policy: str,
    task: Task,
    transcripts: Sequence[str],
    *,
    episode: str | None = None,
    attempts: int = 3,
) -> Review:
    """Classify why no episode solved ``task``, from (some of) its failed transcripts; the
    verdict is ``unsure`` when its evidence does not check out."""
    case = ReviewCase(policy, task, tuple(transcripts))
    schema = case.schema
    messages: list[dict[str, Any]] = [{"role": "user", "content": case.prompt()}]
    try:
        asked = await ask_structured(
            client,
            messages,
            lambda text: case.check(parse_review(text, schema)),
            response_format=response_format(schema),
            episode=episode,
            attempts=attempts,
        )
    except ProviderError as exc:
        raise ReviewError(f"review endpoint failed: {exc}") from None
    except StructuredAnswerError as exc:
        raise ReviewError("malformed review output; " + "; ".join(exc.problems)) from None
    return asked.value
