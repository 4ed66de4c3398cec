"""The NL-assertion judge interface, and a rule-based judge for tests.

The LLM judge (agents/) implements the same protocol; scoring never imports a model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from maestro.conversation import Trajectory
from maestro.domains.models import Task
from maestro.scoring.card import AssertionVerdict


class JudgeError(Exception):
    """The judge could not give a verdict (bad output after retries, provider failure)."""


class Judge(Protocol):
    """Judges NL assertions against a whole transcript, tool calls and results included."""

    async def judge(
        self, task: Task, trajectory: Trajectory, assertions: Sequence[str]
    ) -> list[AssertionVerdict]:
        """One verdict per assertion, in order; raises :class:`JudgeError` when it cannot."""
        ...


Rule = Callable[[Trajectory], tuple[bool, str]]


def says(*phrases: str) -> Rule:
    """A rule met when some assistant message contains one of the phrases (case-insensitive)."""
    wanted = [p.lower() for p in phrases]

    def rule(trajectory: Trajectory) -> tuple[bool, str]:
        for text in trajectory.assistant_texts():
            low = text.lower()
            for p in wanted:
                if p in low:
                    return True, f"the assistant said {p!r}"
        return False, f"no assistant message contains any of {wanted}"

    return rule


def calls(tool_name: str) -> Rule:
    """A rule met when the assistant called the tool."""

    def rule(trajectory: Trajectory) -> tuple[bool, str]:
        hit = any(c.name == tool_name for c in trajectory.assistant_calls())
        return hit, f"{tool_name} {'was' if hit else 'was not'} called"

    return rule


class RuleJudge:
    """A deterministic judge for tests: each assertion is decided by a rule.

    An assertion without a rule raises :class:`JudgeError` unless ``default`` decides it, so a
    test never passes by accident.
    """

    def __init__(
        self, rules: Mapping[str, Rule] | None = None, default: Rule | None = None
    ) -> None:
        self._rules = dict(rules or {})
        self._default = default
        self.calls = 0

    async def judge(
        self, task: Task, trajectory: Trajectory, assertions: Sequence[str]
    ) -> list[AssertionVerdict]:
        self.calls += 1
        out = []
        for assertion in assertions:
            rule = self._rules.get(assertion, self._default)
            if rule is None:
                raise JudgeError(f"no rule for assertion {assertion!r}")
            met, reason = rule(trajectory)
            out.append(AssertionVerdict(assertion=assertion, met=met, reason=reason))
        return out
