"""An outside benchmark's own checker beside maestro's card, on the same trajectory.

A task imported from a benchmark (BFCL) is scored twice: maestro's card (DB x ACTION against
the ground truth) and the benchmark's own verdict. Both are stored; neither changes the other.
The checker is injected like the judge (it runs the benchmark's code in the sandbox):
:func:`external_checker` builds the one a domain's provenance calls for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel

from maestro.conversation import Trajectory
from maestro.domains.models import Task
from maestro.domains.package import Domain

if TYPE_CHECKING:  # card.py imports this module for ExternalVerdict
    from maestro.scoring.card import ScoreCard


class ExternalVerdict(BaseModel):
    """A benchmark checker's verdict; ``error`` when the checker could not give one."""

    checker: str
    status: Literal["pass", "fail", "error"]
    error_type: str | None = None
    details: str = ""

    @property
    def passed(self) -> bool | None:
        return None if self.status == "error" else self.status == "pass"


class ExternalChecker(Protocol):
    name: str

    def check(self, task: Task, trajectory: Trajectory) -> ExternalVerdict: ...

    def close(self) -> None: ...


class _Bfcl:
    """BFCL's multi_turn_checker (run in the sandbox by maestro.domains.importers)."""

    def __init__(self, domain: Domain) -> None:
        from maestro.domains.importers.bfcl_checker import BfclChecker

        self._checker = BfclChecker(domain)
        self.name = self._checker.name

    def check(self, task: Task, trajectory: Trajectory) -> ExternalVerdict:
        got = self._checker.check(task, trajectory)
        details = "; ".join(x for x in (got.message, got.details) if x)
        return ExternalVerdict(
            checker=self.name, status=got.status, error_type=got.error_type, details=details
        )

    def close(self) -> None:
        self._checker.close()


def external_checker(domain: Domain) -> ExternalChecker | None:
    """The benchmark checker a domain's provenance names; None for maestro's own domains."""
    origin = domain.manifest.provenance.imported_from
    if origin is not None and origin.benchmark == "bfcl":
        return _Bfcl(domain)
    return None


def check_externally(
    domain: Domain, trajectories: Sequence[Trajectory], cards: Sequence[ScoreCard]
) -> None:
    """For a domain imported from a benchmark, its own checker's verdict beside each card (the
    cards of ``trajectories``, in order); nothing for maestro's own domains."""
    checker = external_checker(domain)
    if checker is None:
        return
    try:
        for trajectory, card in zip(trajectories, cards, strict=True):
            card.external = checker.check(domain.task(trajectory.task_id), trajectory)
    finally:
        checker.close()


class Agreement(BaseModel):
    """How maestro's card and a benchmark's checker agree over trajectories."""

    trajectories: int = 0
    both_pass: int = 0
    both_fail: int = 0
    card_only: int = 0  # maestro passed, the checker failed
    checker_only: int = 0  # the checker passed, maestro failed
    no_verdict: int = 0  # the card is incomplete or the checker failed

    @property
    def disagree(self) -> int:
        return self.card_only + self.checker_only

    @property
    def rate(self) -> float | None:
        judged = self.trajectories - self.no_verdict
        return None if judged == 0 else (self.both_pass + self.both_fail) / judged


def agreement(pairs: Iterable[tuple[bool | None, bool | None]]) -> Agreement:
    """Counts over (card passed, checker passed) pairs; None where either has no verdict."""
    out = Agreement()
    for card, checker in pairs:
        out.trajectories += 1
        if card is None or checker is None:
            out.no_verdict += 1
        elif card and checker:
            out.both_pass += 1
        elif not card and not checker:
            out.both_fail += 1
        elif card:
            out.card_only += 1
        else:
            out.checker_only += 1
    return out


class YardstickRow(BaseModel):
    """One yardstick trajectory of a task, scored both ways."""

    task_id: str
    kind: Literal["gold", "null", "perturbed"]
    card_passed: bool
    card_details: str
    checker: ExternalVerdict
    #: For a perturbed conversation: the call that differs from the gold one, before -> after.
    changed: str | None = None

    @property
    def agree(self) -> bool | None:
        return None if self.checker.passed is None else self.checker.passed == self.card_passed


def yardstick_agreement(
    domain: Domain, checker: ExternalChecker, tasks: Iterable[Task] | None = None
) -> list[YardstickRow]:
    """The gold, do-nothing and perturbed conversations of each task, scored by maestro's card
    (deterministic criteria) and by the benchmark's checker. Expected: gold passes both,
    the other two fail both."""
    from maestro.domains.package import replay_gold
    from maestro.scoring.scorer import Scorer
    from maestro.simulation.scripted import (
        gold_trajectory,
        null_trajectory,
        perturbed_trajectory,
    )

    scorer = Scorer(domain)
    writes = {n for n, s in domain.toolkit.specs.items() if s.kind == "write"}
    rows = []
    for task in domain.tasks if tasks is None else tasks:
        gold = replay_gold(domain, task)
        built = {
            "gold": gold_trajectory(domain, task),
            "null": null_trajectory(domain, task),
            "perturbed": perturbed_trajectory(domain, task, writes),
        }
        for kind, trajectory in built.items():
            if trajectory is None:
                continue
            card = scorer.score(task, trajectory, gold)
            why = "; ".join(f"{c.criterion.value}: {c.details[:200]}" for c in card.failures())
            rows.append(
                YardstickRow(
                    task_id=task.id,
                    kind=kind,
                    card_passed=card.passed,
                    card_details=why or "passed",
                    checker=checker.check(task, trajectory),
                    changed=_changed(built["gold"], trajectory) if kind == "perturbed" else None,
                )
            )
    return rows


def _changed(gold: Trajectory | None, other: Trajectory) -> str | None:
    """The first call of ``other`` that differs from the gold conversation's."""
    if gold is None:
        return None
    mine, theirs = gold.assistant_calls(), other.assistant_calls()
    for a, b in zip(mine, theirs, strict=False):
        if (a.name, a.arguments) != (b.name, b.arguments):
            return f"{a.name}({a.arguments}) -> {b.name}({b.arguments})"
    extra = theirs[len(mine) :]
    return f"+ {extra[0].name}({extra[0].arguments})" if extra else None
