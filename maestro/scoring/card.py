"""Typed results of scoring: one score per criterion, and the card that combines them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from maestro.domains.models import RewardType
from maestro.scoring.external import ExternalVerdict

CriterionStatus = Literal["pass", "fail", "pending", "error"]


class CheckItem(BaseModel):
    """One thing a criterion checked: an action, a piece of information, an assertion."""

    subject: str
    passed: bool | None
    reason: str = ""


class CriterionScore(BaseModel):
    """The verdict on one criterion.

    ``pending``: not judged yet (no judge was given); ``error``: the judge failed, so there is no
    verdict. Neither is ever counted as a pass or a fail.
    """

    criterion: RewardType
    status: CriterionStatus
    reward: float | None
    details: str = ""
    items: list[CheckItem] = Field(default_factory=list)


class AssertionVerdict(BaseModel):
    """A judge's verdict on one NL assertion, with its reason."""

    assertion: str
    met: bool
    reason: str


class ScoreCard(BaseModel):
    """Every criterion of a task's ``reward_basis`` for one trajectory, and their product."""

    task_id: str
    reward_basis: list[RewardType]
    criteria: dict[str, CriterionScore]
    #: Product of the rewards of the criteria that have a verdict.
    reward: float
    #: Criteria of the basis with no verdict yet ("pending") or none to be had ("error").
    pending: list[RewardType] = Field(default_factory=list)
    errors: list[RewardType] = Field(default_factory=list)
    #: An imported task's benchmark checker on the same trajectory (kept beside, not in, the
    #: reward: maestro's criteria decide the reward).
    external: ExternalVerdict | None = None

    @property
    def complete(self) -> bool:
        """True when every criterion of the basis has a verdict, so ``reward`` is final."""
        return not self.pending and not self.errors

    @property
    def passed(self) -> bool:
        """Reward 1 on the criteria judged so far."""
        return self.reward == 1.0

    @property
    def succeeded(self) -> bool:
        """The one definition of an episode's success, shared by the nightly (the ``passed``
        column of ``scores``), ``maestro simulate``, the report, the filter and training: every
        criterion of the basis has a verdict and the reward is 1. A pending or failed judgement
        is never a success (nor a failure: ``complete`` says which cards are final)."""
        return self.complete and self.passed

    def failures(self) -> list[CriterionScore]:
        return [c for c in self.criteria.values() if c.status == "fail"]
