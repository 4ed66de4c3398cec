"""Annotation round trip on a real Delta lake: sample judged assertions, label, import, agree.

The lake holds scripted conversations (gold and do-nothing) of hotel tasks, scored with a
RuleJudge whose rule is lexical (the assertion's numbers and ids said by the assistant), so
its verdicts are real verdicts of a crude judge, right on some assertions and wrong on others.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from maestro.conversation import Trajectory
from maestro.domains import Domain, library_path, load_domain
from maestro.flows.annotate import (
    AnnotationError,
    export_sample,
    failed_assertions,
    judged_items,
    sample_items,
)
from maestro.flows.annotations import agreement_report, import_labels, render_report
from maestro.scoring import RuleJudge, Scorer
from maestro.simulation.episode import EpisodeResult, Termination
from maestro.simulation.scripted import gold_trajectory, null_trajectory
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import episode_row, score_row, task_row

MAESTRO = str(Path(sys.executable).with_name("maestro"))
TASKS = [f"hotel_{i:03d}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 10)]  # 004 has no NL assertion
TOKEN = re.compile(r"\b[A-Z]+\d+\b|\d+(?:[.:]\d+)*")


def lexical_judge(domain: Domain) -> RuleJudge:
    """Met when every number/id of the assertion appears in what the assistant said or sent."""
    rules = {}
    for task in domain.tasks:
        for assertion in task.evaluation_criteria.nl_assertions:
            tokens = TOKEN.findall(assertion)

            def rule(t: Trajectory, tokens: list[str] = tokens) -> tuple[bool, str]:
                said = " ".join(t.assistant_texts()) + json.dumps(
                    [c.arguments for c in t.assistant_calls()]
                )
                if not tokens:
                    return bool(t.assistant_calls()), "no tokens: met when a tool was used"
                missing = [x for x in tokens if x not in said]
                return not missing, f"missing {missing}" if missing else "all tokens said"

            rules[assertion] = rule
    return RuleJudge(rules)


def seed_lake(lake: Lake, domain: Domain, task_ids: list[str], run_id: str = "r1") -> int:
    """Gold and do-nothing episodes of the tasks, scored with the lexical judge; returns episodes."""
    scorer = Scorer(domain, lexical_judge(domain))
    episodes, scores = [], []
    for task_id in task_ids:
        task = domain.task(task_id)
        for trial, traj in enumerate(
            (gold_trajectory(domain, task), null_trajectory(domain, task))
        ):
            card = asyncio.run(scorer.ascore(task, traj))
            result = EpisodeResult(
                domain_id=domain.id,
                task_id=task.id,
                trial=trial,
                seed=trial,
                trajectory=traj,
                termination=Termination.USER_STOP,
                duration_s=0.0,
            )
            episodes.append(
                episode_row(run_id, result, domain.manifest.version, "scripted", "scripted")
            )
            scores.append(score_row(run_id, result, card, "scripted"))
    lake.write("tasks", [task_row(domain, domain.task(t)) for t in task_ids], run_id)
    lake.write("episodes", episodes, run_id)
    lake.write("scores", scores, run_id)
    return len(episodes)


@pytest.fixture(scope="module")
def hotel() -> Domain:
    return load_domain(library_path("hotel"), check_gold=False)


@pytest.fixture(scope="module")
def lake(hotel: Domain, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    root = tmp_path_factory.mktemp("lake")
    lake = Lake(LakeSettings(root=str(root)))
    seed_lake(lake, hotel, TASKS)
    return lake


def label_sheet(src: Path, dest: Path, labels: dict[str, str]) -> None:
    with src.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["label"] = labels.get(r["item_id"], "")
    with dest.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_failed_assertions_parse_even_with_separators_inside() -> None:
    texts = ["A; tricky one", "B", "A"]
    assert failed_assertions("not met: A; tricky one; A", texts) == {0, 2}
    assert failed_assertions("not met: B", texts) == {1}
    assert failed_assertions("judge error: boom", texts) is None


def test_judged_items_recover_each_verdict(lake: Lake, hotel: Domain) -> None:
    items = judged_items(lake)
    n_assertions = sum(len(hotel.task(t).evaluation_criteria.nl_assertions) for t in TASKS)
    assert len(items) == 2 * n_assertions
    null = [it for it in items if it.episode_id.endswith("/1/scripted")]
    assert null and not any(it.judge_verdict for it in null)  # nothing said, nothing met
    gold = [it for it in items if it.episode_id.endswith("/0/scripted")]
    assert any(it.judge_verdict for it in gold) and not all(it.judge_verdict for it in gold)
    assert sample_items(items, 5, seed=1) == sample_items(items, 5, seed=1)


def test_sheet_is_blind_and_self_contained(lake: Lake, tmp_path: Path) -> None:
    sheet = export_sample(lake, tmp_path, n=6, seed=0)
    page = sheet.html_path.read_text()
    assert not re.search(r"(src|href)=\"?https?:|<link|@import|https?://", page)
    rows = list(csv.DictReader(sheet.csv_path.open()))
    assert len(rows) == sheet.items == 6
    assert all(r["item_id"] in page and r["transcript"].startswith("[user]") for r in rows)
    assert "judge_verdict" not in page and "judge_verdict" not in sheet.csv_path.read_text()
    assert "</script>" not in page.split('id="data">')[1].split("</script>")[0]


def test_import_is_idempotent_and_agreement_reported(lake: Lake, tmp_path: Path) -> None:
    sheet = export_sample(lake, tmp_path, n=12, seed=0)
    truth = {it.item_id: it.judge_verdict for it in judged_items(lake)}
    ids = [r["item_id"] for r in csv.DictReader(sheet.csv_path.open())]
    # Annotator "ann" agrees with the judge everywhere; "bo" disagrees on the first three.
    ann = {i: "met" if truth[i] else "not_met" for i in ids}
    bo = {i: ("not_met" if truth[i] else "met") if k < 3 else ann[i] for k, i in enumerate(ids)}
    label_sheet(sheet.csv_path, tmp_path / "ann.csv", ann)
    label_sheet(sheet.csv_path, tmp_path / "bo.csv", bo)
    first = import_labels(lake, tmp_path / "ann.csv", "ann", "a1")
    again = import_labels(lake, tmp_path / "ann.csv", "ann", "a1")
    import_labels(lake, tmp_path / "bo.csv", "bo", "a1")
    assert (first.labelled, first.inserted) == (12, 12)
    assert (again.inserted, again.updated) == (0, 12)
    assert lake.read("annotations").collect().height == 24
    report = agreement_report(lake, resamples=200)
    assert report["annotators"]["ann"]["percent"]["value"] == 1.0
    assert report["annotators"]["bo"]["percent"]["value"] == pytest.approx(9 / 12)
    assert report["overall"]["items"] == 12 and "fleiss_kappa" in report["overall"]
    assert report["overall"]["ties_left_out"] == 3  # ann and bo split on three items
    assert set(report["domains"]) == {"hotel"}
    assert "Cohen kappa" in render_report(report)


def test_bad_rows_are_named_by_line(lake: Lake, tmp_path: Path) -> None:
    sheet = export_sample(lake, tmp_path, n=3, seed=0)
    ids = [r["item_id"] for r in csv.DictReader(sheet.csv_path.open())]
    label_sheet(sheet.csv_path, tmp_path / "bad.csv", {ids[0]: "met", ids[1]: "maybe"})
    with pytest.raises(AnnotationError, match=r"bad\.csv: row 3 \(line \d+\): label 'maybe'"):
        import_labels(lake, tmp_path / "bad.csv", "ann", "a1")
    text = sheet.csv_path.read_text().replace(ids[0], "0000000000000000", 1)
    (tmp_path / "unknown.csv").write_text(text)
    label_sheet(tmp_path / "unknown.csv", tmp_path / "unknown2.csv", {"0000000000000000": "met"})
    with pytest.raises(
        AnnotationError, match=r"row 2 \(line 2\): item 0000000000000000 .* not a judged"
    ):
        import_labels(lake, tmp_path / "unknown2.csv", "ann", "a1")


def test_cli_export_import_agreement(hotel: Domain, tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = Lake(LakeSettings(root=str(root)))
    seed_lake(lake, hotel, ["hotel_005", "hotel_006"])
    env = {**os.environ, "MAESTRO_LAKE_ROOT": str(root), "COLUMNS": "200"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [MAESTRO, *args], capture_output=True, text=True, timeout=120, env=env
        )

    out = run("annotate", "export", "--out", str(tmp_path / "sheet"), "-n", "4")
    assert out.returncode == 0, out.stderr
    assert "Prefect UI for this run" in out.stderr  # a flow on the project's Prefect API
    csv_path = next((tmp_path / "sheet").glob("*.csv"))
    ids = [r["item_id"] for r in csv.DictReader(csv_path.open())]
    label_sheet(csv_path, tmp_path / "me.csv", dict.fromkeys(ids, "met"))
    imported = run("annotate", "import", str(tmp_path / "me.csv"), "--annotator", "me")
    assert imported.returncode == 0 and "4 labels by me" in imported.stdout, imported.stderr
    assert "Prefect UI for this run" in imported.stderr
    report = run("annotate", "agreement", "--json", "--resamples", "200")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["overall"]["items"] == 4
    bad = run("annotate", "import", str(tmp_path / "nope.csv"), "--annotator", "me")
    assert bad.returncode == 2 and "nope.csv: cannot read" in bad.stderr
    assert "Prefect" not in bad.stderr  # refused before any server starts


def test_assertions_come_from_the_version_the_episode_ran_on(hotel: Domain, tmp_path: Path) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path)))
    seed_lake(lake, hotel, ["hotel_001"])
    before = judged_items(lake)
    row = task_row(hotel, hotel.task("hotel_001"))
    task = json.loads(row.task_json or "")
    task["evaluation_criteria"]["nl_assertions"] = ["Reworded in a later version."]
    later = row.model_copy(update={"domain_version": "9.9.9", "task_json": json.dumps(task)})
    lake.write("tasks", [later], "r2")
    after = judged_items(lake)
    assert after == before and "Reworded" not in after[0].assertion


# ----- a labelled sheet as hostile input --------------------------------------------------------


def _sheet(lake: Lake, tmp_path: Path) -> tuple[Path, list[str]]:
    """A labelled copy of an exported sheet: the first item met, the rest blank."""
    sheet = export_sample(lake, tmp_path / "sheet", n=3, seed=0)
    ids = [r["item_id"] for r in csv.DictReader(sheet.csv_path.open(encoding="utf-8"))]
    labelled = tmp_path / "labelled.csv"
    label_sheet(sheet.csv_path, labelled, {ids[0]: "met"})
    return labelled, ids


def test_a_sheet_that_is_not_utf8_is_refused_with_its_line(lake: Lake, tmp_path: Path) -> None:
    labelled, _ = _sheet(lake, tmp_path)
    data = labelled.read_bytes()
    second = data.index(b"\n") + 1
    labelled.write_bytes(data[:second] + b"\xff\xfe" + data[second:])
    with pytest.raises(AnnotationError, match=r"labelled\.csv: line 2: not UTF-8 text"):
        import_labels(lake, labelled, "ann", "a1")


def test_an_unterminated_quote_is_an_error_naming_its_row_not_a_skipped_row(
    lake: Lake, tmp_path: Path
) -> None:
    labelled, ids = _sheet(lake, tmp_path)
    header = labelled.read_text(encoding="utf-8").splitlines()[0]
    labelled.write_text(
        f'{header}\n{ids[0]},"e1,0,met\n', encoding="utf-8"
    )  # the quote opened in row 2 never closes
    with pytest.raises(AnnotationError, match=r"row 2 \(line 2\): a quoted field is never closed"):
        import_labels(lake, labelled, "ann", "a1")


def test_a_row_with_too_few_fields_is_an_error(lake: Lake, tmp_path: Path) -> None:
    labelled, ids = _sheet(lake, tmp_path)
    header = labelled.read_text(encoding="utf-8").splitlines()[0]
    width = len(header.split(","))
    labelled.write_text(f"{header}\n{ids[0]},e1\n", encoding="utf-8")
    with pytest.raises(
        AnnotationError, match=rf"row 2 \(line 2\): has 2 field\(s\); the header has {width}"
    ):
        import_labels(lake, labelled, "ann", "a1")


def test_an_oversized_field_the_import_reads_is_refused(lake: Lake, tmp_path: Path) -> None:
    labelled, _ = _sheet(lake, tmp_path)
    with labelled.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rows[0]["note"] = "x" * 200_000
    with labelled.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(
        AnnotationError, match=r"row 2 \(line 2\): note is 200,000 characters long; at most 10,000"
    ):
        import_labels(lake, labelled, "ann", "a1")


@pytest.mark.parametrize("extra", [300, 3_000_000])
def test_a_sheet_of_millions_of_columns_is_refused_before_it_costs_memory(
    lake: Lake, tmp_path: Path, extra: int
) -> None:
    """A header of 3 M empty columns (21 MB of commas) grew the importer by 551 MB: each row
    became a dict keyed by the header."""
    labelled, _ = _sheet(lake, tmp_path)
    header, *rest = labelled.read_text(encoding="utf-8").splitlines()
    labelled.write_text("\n".join([header + "," * extra, *rest]) + "\n", encoding="utf-8")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(
        AnnotationError, match=r"row 1 \(header\): .*columns; a sheet has at most 256"
    ):
        import_labels(lake, labelled, "ann", "a1")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_a_long_transcript_in_a_sheet_still_imports(hotel: Domain, tmp_path: Path) -> None:
    """Exported transcripts are not capped; Python's csv refused fields past 131,072
    characters with a traceback."""
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    seed_lake(lake, hotel, ["hotel_001"])
    labelled, _ = _sheet(lake, tmp_path)
    with labelled.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rows[0]["transcript"] = "[user] hello\n" * 20_000  # 260,000 characters
    with labelled.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert import_labels(lake, labelled, "ann", "a1").labelled == 1


def test_a_fifo_as_the_sheet_is_refused_without_blocking(lake: Lake, tmp_path: Path) -> None:
    fifo = tmp_path / "labels.csv"
    os.mkfifo(fifo)
    with pytest.raises(AnnotationError, match="not a regular file"):
        import_labels(lake, fifo, "ann", "a1")


def test_cli_import_of_a_broken_sheet_exits_2_and_writes_nothing(
    hotel: Domain, tmp_path: Path
) -> None:
    root = tmp_path / "lake"
    lake = Lake(LakeSettings(root=str(root)))
    seed_lake(lake, hotel, ["hotel_001"])
    labelled, _ = _sheet(lake, tmp_path)
    labelled.write_bytes(labelled.read_bytes() + b'x,"never closed\n')
    env = {**os.environ, "MAESTRO_LAKE_ROOT": str(root), "COLUMNS": "200"}
    proc = subprocess.run(
        [MAESTRO, "annotate", "import", str(labelled), "--annotator", "me"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 2
    assert "a quoted field is never closed" in proc.stderr and "Traceback" not in proc.stderr
    assert lake.version("annotations") is None
