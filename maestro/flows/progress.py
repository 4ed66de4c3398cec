"""A simulation's progress in the Prefect UI: a progress artifact (episodes done out of the
total) whose description carries the pass rate so far, updated while the episodes run.

The pass rate so far counts the deterministic criteria only (final state, actions,
information): the NL assertions are judged when the episodes are scored, after simulation.
A Prefect API that fails to take an update costs the display, never the simulation.
"""

from __future__ import annotations

import re
import time
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from maestro.domains import Domain
from maestro.scoring import Scorer
from maestro.simulation.episode import EpisodeResult


def progress_key(*parts: str) -> str:
    """An artifact key from ``parts``: Prefect allows lowercase letters, digits and dashes."""
    key = re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
    return key[:100].rstrip("-")


class EpisodeProgress:
    """Call it with each finished episode; :meth:`finish` when the batch is over. Updates go
    out at most every ``every_s`` seconds, and always at the end."""

    def __init__(self, domain: Domain, total: int, key: str, every_s: float = 1.0) -> None:
        self.domain = domain
        self.total = total
        self.every_s = every_s
        self.done = 0
        self.passed = 0
        self._scorer = Scorer(domain)
        self._sent_at = time.monotonic()
        self._artifact: UUID | None = None
        try:
            artifact = create_progress_artifact(0.0, key=key, description=self.describe())
            assert isinstance(artifact, UUID)  # called from sync code: the sync variant ran
            self._artifact = artifact
        except Exception as exc:  # the API is down or refuses: no progress shown, work goes on
            get_run_logger().warning("no progress artifact for %s: %s", domain.id, exc)

    @property
    def percent(self) -> float:
        return 100.0 if self.total <= 0 else min(100.0, 100.0 * self.done / self.total)

    def describe(self) -> str:
        """The artifact's description: counts and the pass rate so far."""
        text = f"{self.domain.id}: **{self.done} / {self.total}** episodes"
        if self.done:
            text += (
                f"; pass rate so far **{self.passed / self.done:.3f}** ({self.passed} of "
                f"{self.done}, on final state, actions and information; NL assertions are "
                "judged when the episodes are scored)"
            )
        return text

    def __call__(self, episode: EpisodeResult) -> None:
        card = self._scorer.score(self.domain.task(episode.task_id), episode.trajectory)
        self.done += 1
        self.passed += card.passed
        if time.monotonic() - self._sent_at >= self.every_s:
            self._send()

    def finish(self) -> None:
        """Show the batch as done (100 %), whatever the count says: a resumed run skips the
        episodes it already has."""
        self._send(100.0)

    def _send(self, percent: float | None = None) -> None:
        self._sent_at = time.monotonic()
        if self._artifact is None:
            return
        try:
            update_progress_artifact(
                self._artifact, self.percent if percent is None else percent, self.describe()
            )
        except Exception as exc:
            get_run_logger().warning("progress of %s not shown: %s", self.domain.id, exc)
            self._artifact = None
