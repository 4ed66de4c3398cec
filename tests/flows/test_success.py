"""One definition of success (``ScoreCard.succeeded``): ``maestro simulate``'s report, the
nightly's scores and task verdicts, and the nightly report agree, judged or not."""

from __future__ import annotations

from pathlib import Path

import pytest

from maestro.agents.judging import Judging
from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import Domain
from maestro.flows import stages
from maestro.flows.report import build_report
from maestro.flows.simulate import simulate_domain
from maestro.settings import RunSettings
from maestro.storage import Lake, LakeSettings
from maestro.storage.rows import TaskVerdictRow
from tests.simulation.test_runner import fast_settings


@pytest.mark.parametrize("judge", [False, True])
def test_simulate_and_the_nightly_count_the_same_successes(
    toy: Domain, tmp_path: Path, judge: bool
) -> None:
    ids = [t.id for t in toy.tasks]
    with ScriptedServer(ServerConfig(mode="oracle", domain_paths=[str(toy.path)])) as server:
        settings = fast_settings(base_url=server.base_url)
        _, _, report = simulate_domain(
            toy, trials=2, settings=settings, judge=judge, run=RunSettings(dir=tmp_path)
        )
        lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
        params = stages.NightlyParams(run_id="r1", trials=2, ray_workers=0, judge=judge)
        judging = Judging.by(settings) if judge else Judging.off()
        stages.simulate(lake, "r1", toy, ids, params, settings)
        stages.score(lake, "r1", toy, judging)
        stages.filter_tasks(lake, "r1", toy, ids, judging=judging)
    simulated = {o.task_id: o.successes for o in report.per_task}
    verdicts = {r.task_id: r.successes for r in lake.rows(TaskVerdictRow, run_id="r1")}
    assert simulated == verdicts
    # The oracle plays every task right; unjudged, toy_refuse's NL assertion has no verdict,
    # so it is not a success (in both), and the report says why.
    expected = {"toy_cancel": 2, "toy_status": 2, "toy_refuse": 2 if judge else 0}
    assert simulated == expected
    assert report.unjudged == (0 if judge else 2)
    [row] = build_report(lake, "r1", settings).pass_hat_k
    assert row["pass^1"] == round(report.pass_hat_k[1], 4)  # the report rounds
    assert row["pass^2"] == round(report.pass_hat_k[2], 4)
