"""Judging in a run: the judge role on (at its resolved endpoint) or explicitly off, and scoring
a batch of conversations through it.

Off, NL assertions stay ``pending`` (never a pass or a fail) and no judge endpoint is needed, so
no embedded model is started for it. On, each conversation's judge calls are recorded under the
label of the unit they judge (``<domain>/<task>/<trial>/judge``), so a run that redoes the
scoring of one episode replaces exactly that episode's judge calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from maestro.agents.client import CallRecorder, Endpoints, LLMCall
from maestro.agents.judge import LLMJudge
from maestro.agents.settings import LLMSettings, RoleSettings
from maestro.conversation import Trajectory
from maestro.domains.package import Domain
from maestro.scoring.card import ScoreCard
from maestro.scoring.external import check_externally
from maestro.scoring.scorer import Scorer


@dataclass(frozen=True)
class Judging:
    """The judge role's settings when judging is on; build with :meth:`off` or :meth:`by`."""

    judge: RoleSettings | None

    @classmethod
    def off(cls) -> Judging:
        """NL assertions are not judged (they stay pending)."""
        return cls(None)

    @classmethod
    def by(cls, settings: LLMSettings) -> Judging:
        """Judged by the judge role of resolved settings (its endpoint set, see
        ``flows.endpoints.model_endpoints``)."""
        if settings.judge.base_url is None:
            raise ValueError(
                "judging needs the judge role's endpoint: resolve the settings with the judge "
                "role among the roles the command calls"
            )
        return cls(settings.judge)

    @property
    def on(self) -> bool:
        return self.judge is not None


#: The unit whose judging the current asyncio task does (each conversation is its own task).
_UNIT: ContextVar[str | None] = ContextVar("maestro_judged_unit", default=None)


@dataclass
class _PerUnit:
    """Records each judge call under the label of the conversation it judged."""

    inner: CallRecorder

    def record(self, call: LLMCall) -> None:
        unit = _UNIT.get()
        if unit is not None:
            call = call.model_copy(update={"episode": f"{unit}/judge"})
        self.inner.record(call)


async def score_all(
    domain: Domain,
    trajectories: Sequence[Trajectory],
    judging: Judging,
    *,
    labels: Sequence[str] | None = None,
    recorder: CallRecorder | None = None,
) -> list[ScoreCard]:
    """Score every conversation of the domain, in order; NL assertions by the judge when
    judging is on (at most its ``max_concurrency`` at once), its calls recorded through
    ``recorder`` under ``labels[i]/judge`` (one label per conversation)."""
    if labels is not None and len(labels) != len(trajectories):
        raise ValueError(f"{len(labels)} labels for {len(trajectories)} conversations")
    if judging.judge is None:
        scorer = Scorer(domain)
        cards = [scorer.score(domain.task(t.task_id), t) for t in trajectories]
    else:
        cards = await _judged(domain, trajectories, judging.judge, labels, recorder)
    # An imported task's benchmark checker on the same conversations, beside maestro's card.
    check_externally(domain, trajectories, cards)
    return cards


async def _judged(
    domain: Domain,
    trajectories: Sequence[Trajectory],
    settings: RoleSettings,
    labels: Sequence[str] | None,
    recorder: CallRecorder | None,
) -> list[ScoreCard]:
    async with Endpoints(_PerUnit(recorder) if recorder is not None else None) as endpoints:
        scorer = Scorer(domain, LLMJudge(endpoints.client("judge", settings)))
        limit = asyncio.Semaphore(settings.max_concurrency)

        async def one(i: int) -> ScoreCard:
            if labels is not None:
                _UNIT.set(labels[i])  # this task's context only: gather runs each in its own
            t = trajectories[i]
            async with limit:
                return await scorer.ascore(domain.task(t.task_id), t)

        return list(await asyncio.gather(*(one(i) for i in range(len(trajectories)))))
