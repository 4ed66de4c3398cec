"""The annotations table: annotators' labels in, judge-expert agreement out.

* :func:`import_labels` reads a labelled CSV (from ``maestro annotate export``'s sheet or page)
  into ``annotations``, idempotently: one row per item and annotator, with the judge's verdict
  at import time beside the label, so a later re-scoring does not change a past report.
* :func:`agreement_report` compares the judge with the experts per domain and overall
  (statistics in :mod:`maestro.scoring.agreement`).
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.flows.annotate import AnnotationError, judged_items
from maestro.scoring.agreement import cohen_estimate, fleiss_estimate, percent_estimate
from maestro.storage.lake import Lake

REQUIRED_COLUMNS = ("item_id", "episode_id", "assertion_index", "label")
TRUE_LABELS = {"met", "yes", "true", "1", "pass", "y"}
FALSE_LABELS = {"not_met", "not met", "no", "false", "0", "fail", "n"}
SKIP_LABELS = {"", "unsure", "skip", "?"}


# ----- importing labels -------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelRow:
    where: str
    item_id: str
    episode_id: str
    assertion_index: int
    label: bool
    note: str
    batch_id: str | None


def parse_label(value: str, where: str) -> bool | None:
    """True (met), False (not met) or None (left blank or unsure)."""
    v = value.strip().lower()
    if v in TRUE_LABELS:
        return True
    if v in FALSE_LABELS:
        return False
    if v in SKIP_LABELS:
        return None
    raise AnnotationError(
        f"{where}: label {value!r} is not one of met/not_met (or yes/no, true/false, 1/0; blank skips)"
    )


def read_labels(path: Path, annotator: str) -> tuple[list[LabelRow], int]:
    """The labelled rows of a CSV and how many were left blank.

    Errors name the row (the header is row 1, as a spreadsheet shows it) and the line the row
    starts on: transcripts span lines, so the two differ.
    """
    try:
        f = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise AnnotationError(f"{path}: cannot read: {exc.strerror}") from None
    rows, skipped, seen = [], 0, set()
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise AnnotationError(f"{path}: row 1 (header): missing column(s) {missing}")
        end = reader.line_num
        for number, row in enumerate(reader, start=2):
            start, end = end + 1, reader.line_num
            where = f"{path}: row {number} (line {start})"
            if (row.get("annotator") or "").strip() not in ("", annotator):
                raise AnnotationError(
                    f"{where}: annotator {row['annotator']!r} is not {annotator!r}"
                )
            label = parse_label(row.get("label") or "", where)
            if label is None:
                skipped += 1
                continue
            if row["item_id"] in seen:
                raise AnnotationError(f"{where}: item {row['item_id']} is labelled twice")
            seen.add(row["item_id"])
            try:
                index = int(row["assertion_index"])
            except (TypeError, ValueError):
                raise AnnotationError(
                    f"{where}: assertion_index {row['assertion_index']!r} is not a number"
                ) from None
            rows.append(
                LabelRow(
                    where,
                    row["item_id"],
                    row["episode_id"],
                    index,
                    label,
                    (row.get("note") or "").strip(),
                    (row.get("batch_id") or "").strip() or None,
                )
            )
    return rows, skipped


@dataclass(frozen=True)
class ImportResult:
    annotator: str
    labelled: int
    skipped: int
    inserted: int
    updated: int


def import_labels(lake: Lake, path: Path, annotator: str, run_id: str) -> ImportResult:
    """Write an annotator's labels into ``annotations``; re-importing updates, never duplicates."""
    if not annotator.strip():
        raise AnnotationError("the annotator needs a name")
    rows, skipped = read_labels(path, annotator)
    known = {it.item_id: it for it in judged_items(lake, episode_ids={r.episode_id for r in rows})}
    out = []
    for r in rows:
        item = known.get(r.item_id)
        if item is None or (item.episode_id, item.assertion_index) != (
            r.episode_id,
            r.assertion_index,
        ):
            raise AnnotationError(
                f"{r.where}: item {r.item_id} (episode {r.episode_id!r}, assertion "
                f"{r.assertion_index}) is not a judged assertion in the lake"
            )
        out.append(
            {
                "annotation_id": f"{r.item_id}/{annotator}",
                "item_id": r.item_id,
                "batch_id": r.batch_id,
                "episode_id": item.episode_id,
                "domain_id": item.domain_id,
                "task_id": item.task_id,
                "assertion_index": item.assertion_index,
                "assertion": item.assertion,
                "annotator": annotator,
                "label": r.label,
                "judge_verdict": item.judge_verdict,
                "note": r.note,
            }
        )
    written = lake.write("annotations", out, run_id=run_id, mode="merge")
    return ImportResult(annotator, len(out), skipped, written.inserted, written.updated)


# ----- agreement --------------------------------------------------------------------------------


def _group_report(rows: list[dict[str, Any]], resamples: int) -> dict[str, Any]:
    by_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_item[r["item_id"]].append(r)
    judge, expert, ties = [], [], 0
    for labels in by_item.values():
        votes = Counter(bool(r["label"]) for r in labels)
        if votes[True] == votes[False]:
            ties += 1
            continue
        expert.append(votes[True] > votes[False])
        judge.append(bool(labels[0]["judge_verdict"]))
    out: dict[str, Any] = {"items": len(by_item), "labels": len(rows), "ties_left_out": ties}
    if judge:
        out["percent"] = percent_estimate(judge, expert).to_json()
        out["cohen_kappa"] = cohen_estimate(judge, expert, resamples=resamples).to_json()
    multi = [[bool(r["label"]) for r in labels] for labels in by_item.values() if len(labels) >= 2]
    annotators = {r["annotator"] for r in rows}
    out["annotators"] = sorted(annotators)
    if len(annotators) >= 2 and multi:
        out["fleiss_kappa"] = fleiss_estimate(multi, resamples=resamples).to_json()
    return out


def agreement_report(lake: Lake, *, resamples: int = 2000) -> dict[str, Any]:
    """Judge vs expert consensus (majority label; ties left out) per domain and overall, each
    annotator vs the judge, and Fleiss' kappa among annotators."""
    rows = lake.read("annotations").collect().to_dicts()
    if not rows:
        raise AnnotationError("the annotations table is empty: import labels first")
    domains: dict[str, list[dict[str, Any]]] = defaultdict(list)
    annotators: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        domains[r["domain_id"]].append(r)
        annotators[r["annotator"]].append(r)
    per_annotator = {}
    for name, own in sorted(annotators.items()):
        judge = [bool(r["judge_verdict"]) for r in own]
        labels = [bool(r["label"]) for r in own]
        per_annotator[name] = {
            "items": len(own),
            "percent": percent_estimate(judge, labels).to_json(),
            "cohen_kappa": cohen_estimate(judge, labels, resamples=resamples).to_json(),
        }
    return {
        "overall": _group_report(rows, resamples),
        "domains": {d: _group_report(rs, resamples) for d, rs in sorted(domains.items())},
        "annotators": per_annotator,
    }


def _fmt(est: dict[str, Any] | None, pct: bool = False) -> str:
    if not est:
        return "n/a"
    if est["value"] is None:
        return "undefined"
    scale, unit = (100, "%") if pct else (1, "")
    value = f"{est['value'] * scale:.1f}{unit}" if pct else f"{est['value']:.3f}"
    if est["low"] is None:
        return value
    lo, hi = est["low"] * scale, est["high"] * scale
    return f"{value} [{lo:.1f}, {hi:.1f}]" if pct else f"{value} [{lo:.3f}, {hi:.3f}]"


def render_report(report: dict[str, Any]) -> str:
    """The report as a text table (95% intervals in brackets)."""
    lines = [
        "judge vs expert consensus (95% CI: Wilson for percent, percentile bootstrap for kappa)",
        f"{'scope':<14}{'items':>6}  {'agreement':<22}{'Cohen kappa':<26}Fleiss kappa (annotators)",
    ]
    scopes = [("overall", report["overall"]), *report["domains"].items()]
    for name, g in scopes:
        lines.append(
            f"{name:<14}{g['items']:>6}  {_fmt(g.get('percent'), True):<22}"
            f"{_fmt(g.get('cohen_kappa')):<26}{_fmt(g.get('fleiss_kappa'))}"
        )
    lines.append("")
    lines.append("each annotator vs the judge")
    for name, a in report["annotators"].items():
        lines.append(
            f"{name:<14}{a['items']:>6}  {_fmt(a['percent'], True):<22}{_fmt(a['cohen_kappa'])}"
        )
    return "\n".join(lines)
