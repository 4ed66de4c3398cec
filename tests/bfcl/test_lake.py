"""The import command, ``maestro simulate`` on an imported package, SFT rows, evaluations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import load_domain
from maestro.storage import Lake, LakeSettings
from maestro.storage.rows import DomainRow, EvaluationRow, ScoreRow, TaskRow, TaskSetRow
from maestro.training.datasets import build_sft

MAESTRO = str(Path(sys.executable).with_name("maestro"))


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, *args],
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Lake, dict[str, object]]:
    """``maestro import bfcl multi_turn_base --limit 6`` into a tmp lake."""
    root = tmp_path_factory.mktemp("cli")
    out, lake_root = root / "packages", root / "lake"
    proc = run(
        "import", "bfcl", "multi_turn_base", "--limit", "6", "--out", str(out),
        "--lake-root", str(lake_root), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return out, Lake(LakeSettings(root=str(lake_root))), summary


def test_the_import_writes_domains_tasks_and_a_task_set(
    imported: tuple[Path, Lake, dict[str, object]],
) -> None:
    out, lake, summary = imported
    assert summary["tasks"] == 6 and summary["skipped"] == {}
    tasks = lake.rows(TaskRow)
    assert len(tasks) == 6 and {t.source for t in tasks} == {"imported"}
    (task_set,) = lake.rows(TaskSetRow, task_set_id="bfcl/multi_turn_base")
    assert len(task_set.tasks or []) == 6
    domains = lake.rows(DomainRow)
    assert sorted(d.domain_id for d in domains) == sorted(p.name for p in out.iterdir())
    assert {d.source for d in domains} == {"imported"}


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run("import", "bfcl", "multi_turn_nope", "--out", str(tmp_path), "--no-lake")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: bfcl-eval") and "multi_turn_base" in proc.stderr


def test_simulate_accepts_an_imported_package(
    imported: tuple[Path, Lake, dict[str, object]],
) -> None:
    out, _, _ = imported
    package = str(out / "bfcl_gorilla")
    with ScriptedServer(ServerConfig(mode="oracle", domain_paths=[package])) as server:
        roles = ("ASSISTANT", "USER", "JUDGE", "CODEGEN")
        env = {f"MAESTRO_{r}__BASE_URL": server.base_url for r in roles}
        proc = run("simulate", "--domain", package, "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    n = len((out / "bfcl_gorilla" / "tasks.jsonl").read_text().splitlines())
    assert report["pass_hat_k"] == {"1": 1.0} and report["terminations"] == {"user_stop": n}
    assert report["external_checker"].startswith("bfcl-eval==")
    assert report["external_pass_rate"] == 1.0
    assert report["external_agreement"]["both_pass"] == n


def test_ground_truth_becomes_sft_rows_turn_by_turn(
    imported: tuple[Path, Lake, dict[str, object]],
) -> None:
    out, lake, _ = imported
    domains = {p.name: load_domain(p, check_gold=False) for p in out.iterdir()}
    try:
        ds = build_sft(lake, domains, "bfcl/multi_turn_base", split="test")
        row = next(r for r in ds.rows if r["task_id"] == "multi_turn_base_0")
        task = domains[row["domain_id"]].task("multi_turn_base_0")
    finally:
        for d in domains.values():
            d.close()
    assert {r["source"] for r in ds.rows} == {"gold"} and len(ds.rows) == 6
    messages = row["messages"]
    assert messages[0]["role"] == "system" and "At each turn" in messages[0]["content"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == [t.content for t in task.user_turns]
    # The first turn: three ground-truth calls, each with BFCL's own result, then an answer.
    first = messages[2 : 2 + 7]
    assert [m["role"] for m in first] == ["assistant", "tool"] * 3 + ["assistant"]
    assert [m["tool_calls"][0]["function"]["name"] for m in first[0:6:2]] == ["cd", "mkdir", "mv"]
    assert first[1]["content"] == '{"current_working_directory": "document"}'


@pytest.mark.slow  # a tiny random model generates every assistant turn on the CPU
def test_a_trained_models_bfcl_score_lands_in_evaluations(
    imported: tuple[Path, Lake, dict[str, object]], tmp_path: Path
) -> None:
    from maestro.agents.settings import LLMSettings
    from maestro.simulation.episode import EpisodeLimits
    from maestro.training.evaluation import EvaluationSettings, evaluate_model
    from maestro.training.generation import SamplingSettings
    from maestro.training.models import BaseModelSpec, load_model, load_tokenizer

    spec = BaseModelSpec(kind="tiny", hidden_size=64, layers=2)
    tokenizer = load_tokenizer(spec)
    model_dir = tmp_path / "model"
    load_model(spec, tokenizer).save_pretrained(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    out, lake, _ = imported
    domains = {p.name: load_domain(p, check_gold=False) for p in out.iterdir()}
    settings = EvaluationSettings(
        judge=False,
        limits=EpisodeLimits(max_turns=16, max_steps_per_turn=2, deadline_s=300),
        sampling=SamplingSettings(max_new_tokens=8, temperature=0.0),
    )
    try:
        row = evaluate_model(
            lake,
            "eval-1",
            "tiny",
            model_dir,
            "bfcl/multi_turn_base",
            domains,
            LLMSettings(),
            settings,
        )
    finally:
        for d in domains.values():
            d.close()
    external = json.loads(str(row["report_json"]))["external"]
    ((checker, counts),) = external.items()
    assert checker.startswith("bfcl-eval==") and counts["episodes"] == 6
    assert counts["passed"] == 0 and counts["pass_rate"] == 0.0  # random weights solve nothing
    scores = lake.rows(ScoreRow, assistant_model="tiny")
    assert len(scores) == 6 and {s.external_status for s in scores} == {"fail"}
    assert lake.values(EvaluationRow, "evaluation_id") == [row["evaluation_id"]]
