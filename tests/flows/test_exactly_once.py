"""Exactly once across tables: the nightly's stages killed (SIGKILL) right after each commit
of the lake, in turn, then re-run, leave every table with the rows of an uninterrupted run.

The stages run in the order the nightly runs them (ingest, simulate in chunks, score, filter
with the LLM review, curate) in a child process whose lake kills it at its Nth commit
(``MAESTRO_LAKE_KILL_AFTER_COMMIT``); the re-run is in this process. The scripted server's
``nothing`` mode makes every table non-empty: episodes fail, so every task is reviewed (the
review finds an assistant failure, which a re-run keeps rather than asking again), and
toy_refuse's NL assertion is judged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.judging import Judging
from maestro.agents.scripted_server import Reply, ScriptedModel, ScriptedServer, ServerConfig
from maestro.domains import load_domain
from maestro.flows import stages
from maestro.storage import ROW_MODELS, Lake, LakeSettings
from maestro.storage.rows import LLMCallRow
from tests.simulation.test_runner import fast_settings

TOY = Path(__file__).parents[1] / "fixtures" / "toy"
RUN = "once"
REPO = Path(__file__).parents[2]


class Reviewing(ScriptedModel):
    """``nothing`` mode, and a review that blames the assistant (it only greeted)."""

    def answer(self, episode: str, role: str, body: dict[str, Any]) -> Reply:
        if episode.endswith("/review"):
            self.stats.calls[role] += 1
            # About the first label the verdict's schema offers, quoting the greeting.
            schema = body["response_format"]["json_schema"]["schema"]
            verdict = {
                "cause": "assistant_failure",
                "reason": "the agent only greeted",
                "evidence": "Hello! How can I help you today?",
                "about": schema["properties"]["about"]["enum"][0],
            }
            return Reply(content=json.dumps(verdict))
        return super().answer(episode, role, body)


def pipeline(root: str, url: str) -> Lake:
    """The nightly's stages on the toy domain: 3 tasks x 2 trials, 2 episodes per commit."""
    lake = Lake(LakeSettings(root=root))
    domain = load_domain(TOY)
    ids = [t.id for t in domain.tasks]
    params = stages.NightlyParams(run_id=RUN, trials=2, chunk_size=2, ray_workers=0)
    settings = fast_settings(base_url=url)  # every role resolved to the scripted server
    judging = Judging.by(settings)
    stages.ingest(lake, RUN, [domain])
    stages.simulate(lake, RUN, domain, ids, params, settings)
    stages.score(lake, RUN, domain, judging)
    stages.filter_tasks(lake, RUN, domain, ids, judging=judging)
    stages.curate_task_set(lake, RUN)
    return lake


def counts(lake: Lake) -> dict[str, int]:
    """Rows per table, after checking that no table holds a key twice."""
    out = {}
    for model in ROW_MODELS:
        keys = [tuple(r.model_dump(include=set(model.KEYS)).values()) for r in lake.rows(model)]
        twice = [k for k, n in Counter(keys).items() if n > 1]
        assert not twice, (model.TABLE, twice[:3])
        if keys:
            out[model.TABLE] = len(keys)
    return out


def calls_per_unit(lake: Lake) -> Counter[str]:
    return Counter(str(c.episode) for c in lake.rows(LLMCallRow, fields=["episode"]))


def killed_at(commit: int, root: Path, url: str) -> str:
    """Run the stages in a child killed right after its ``commit``-th commit; what it said."""
    env = {**os.environ, "MAESTRO_LAKE_KILL_AFTER_COMMIT": str(commit)}
    code = f"from tests.flows.test_exactly_once import pipeline; pipeline({str(root)!r}, {url!r})"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, (commit, proc.returncode, proc.stderr[-3000:])
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("fault injection:")]
    return line.split("(", 1)[1].rstrip(")")


@pytest.mark.slow  # one child process per commit of the run: about 3 s each here
def test_a_kill_after_any_commit_and_a_rerun_leave_each_row_once(tmp_path: Path) -> None:
    config = ServerConfig(mode="nothing", domain_paths=[str(TOY)])
    server = ScriptedServer(config)
    server.model = Reviewing(config)
    with server:
        clean = pipeline(str(tmp_path / "clean"), server.base_url)
        expected, expected_calls = counts(clean), calls_per_unit(clean)
        assert set(expected) == {
            "domains", "tasks", "episodes", "scores", "task_verdicts", "task_sets", "llm_calls"
        }  # fmt: skip
        assert {u.rsplit("/", 1)[-1] for u in expected_calls} >= {"judge", "review"}
        table = []
        for commit in range(1, clean.commits + 1):
            root = tmp_path / f"kill-{commit}"
            boundary = killed_at(commit, root, server.base_url)
            rerun = pipeline(str(root), server.base_url)
            got = counts(rerun)
            table.append((commit, boundary, got))
            assert got == expected, (commit, boundary, got)
            assert calls_per_unit(rerun) == expected_calls, (commit, boundary)
    print("\ncommit | killed after | rows per table after the re-run")
    for commit, boundary, got in table:
        print(f"{commit} | {boundary} | {', '.join(f'{k} {v}' for k, v in got.items())}")
