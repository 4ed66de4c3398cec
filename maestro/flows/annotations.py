"""The annotations table: annotators' labels in, judge-expert agreement out.

* :func:`import_labels` reads a labelled CSV (from ``maestro annotate export``'s sheet or page)
  into ``annotations``, idempotently: one row per item and annotator, with the judge's verdict
  at import time beside the label, so a later re-scoring does not change a past report.
* :func:`agreement_report` compares the judge with the experts per domain and overall
  (statistics in :mod:`maestro.scoring.agreement`).
"""

from __future__ import annotations

import csv
import io
import os
import re
import stat
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.flows.annotate import AnnotationError, judged_items
from maestro.scoring.agreement import cohen_estimate, fleiss_estimate, percent_estimate
from maestro.storage.lake import Lake

#: An item id as :func:`maestro.flows.annotate.item_id` makes them.
_ITEM_ID = re.compile(r"[0-9a-f]{16}")
REQUIRED_COLUMNS = ("item_id", "episode_id", "assertion_index", "label")
TRUE_LABELS = {"met", "yes", "true", "1", "pass", "y"}
FALSE_LABELS = {"not_met", "not met", "no", "false", "0", "fail", "n"}
SKIP_LABELS = {"", "unsure", "skip", "?"}
#: A labelled sheet is read whole: at most this many bytes.
MAX_SHEET_BYTES = 64 * 1024 * 1024
#: Any one field (a transcript can be long).
MAX_FIELD_CHARS = 4 * 1024 * 1024
#: Columns a sheet may have: the exported sheet has 12, a spreadsheet may add a few. Each row
#: becomes a dict keyed by the header, so a header of 3 M empty columns (21 MB of commas) grew
#: the importer by 551 MB before the sheet was refused.
MAX_COLUMNS = 256
#: The fields the import reads, each capped well below MAX_FIELD_CHARS.
READ_FIELD_CHARS = {
    "item_id": 200,
    "episode_id": 200,
    "assertion_index": 20,
    "label": 40,
    "annotator": 200,
    "batch_id": 200,
    "note": 10_000,
}


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
    starts on: transcripts span lines, so the two differ. A file that is not UTF-8, a quoted
    field never closed, a row whose fields do not match the header, and fields over their cap
    are errors too: a malformed row is never skipped as if it were blank.
    """
    text = _read_sheet(path)
    # An upper bound before the header is parsed: its first line's commas.
    first_line = text[: text.find("\n") if "\n" in text else len(text)]
    if first_line.count(",") >= 4 * MAX_COLUMNS:
        raise AnnotationError(
            f"{path}: row 1 (header): over {MAX_COLUMNS} columns; a sheet has at most {MAX_COLUMNS}"
        )
    rows, skipped, seen = [], 0, set()
    with _field_limit(MAX_FIELD_CHARS):
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        try:
            header = reader.fieldnames or []
        except csv.Error as exc:
            raise AnnotationError(f"{path}: row 1 (header): {_csv_reason(exc)}") from None
        if len(header) > MAX_COLUMNS:
            raise AnnotationError(
                f"{path}: row 1 (header): {len(header):,} columns; a sheet has at most {MAX_COLUMNS}"
            )
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise AnnotationError(f"{path}: row 1 (header): missing column(s) {missing}")
        end, number = reader.line_num, 1
        while True:
            number += 1
            start = end + 1
            where = f"{path}: row {number} (line {start})"
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                raise AnnotationError(f"{where}: {_csv_reason(exc)}") from None
            end = reader.line_num
            _check_shape(row, len(header), where)
            if (row.get("annotator") or "").strip() not in ("", annotator):
                raise AnnotationError(
                    f"{where}: annotator {row['annotator']!r} is not {annotator!r}"
                )
            label = parse_label(row.get("label") or "", where)
            if label is None:
                skipped += 1
                continue
            if row["item_id"] in seen:
                raise AnnotationError(f"{where}: item {_quoted(row['item_id'])} is labelled twice")
            seen.add(row["item_id"])
            try:
                index = int(row["assertion_index"])
            except (TypeError, ValueError):
                raise AnnotationError(
                    f"{where}: assertion_index {row['assertion_index'][:40]!r} is not a number"
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


def _read_sheet(path: Path) -> str:
    """The CSV's text: a regular file of at most MAX_SHEET_BYTES, UTF-8 (a BOM is allowed)."""
    try:
        # Non-blocking open: a FIFO given as the sheet must not hang the command.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise AnnotationError(f"{path}: not a regular file")
            data = f.read(MAX_SHEET_BYTES + 1)
    except OSError as exc:
        raise AnnotationError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_SHEET_BYTES:
        raise AnnotationError(f"{path}: larger than {MAX_SHEET_BYTES:,} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise AnnotationError(
            f"{path}: line {line}: not UTF-8 text (byte {exc.start}); save the sheet as UTF-8 CSV"
        ) from None


def _check_shape(row: dict[str | Any, Any], width: int, where: str) -> None:
    """A row with fewer or more fields than the header, or a field over its cap, is refused."""
    extra = row.get(None)  # DictReader's key for fields past the header
    if extra is not None or any(v is None for v in row.values()):
        count = sum(v is not None for k, v in row.items() if k is not None) + len(extra or [])
        raise AnnotationError(f"{where}: has {count} field(s); the header has {width}")
    for column, cap in READ_FIELD_CHARS.items():
        value = row.get(column) or ""
        if len(value) > cap:
            raise AnnotationError(
                f"{where}: {column} is {len(value):,} characters long; at most {cap:,}"
            )


def _csv_reason(exc: csv.Error) -> str:
    reason = str(exc)
    if "unexpected end of data" in reason:
        return "a quoted field is never closed (the file ends inside it)"
    if "field larger than field limit" in reason:
        return f"a field is longer than {MAX_FIELD_CHARS:,} characters"
    return f"not valid CSV: {reason}"


@contextmanager
def _field_limit(limit: int) -> Iterator[None]:
    """The csv module's per-field cap (a process-wide setting) raised for one read: exported
    transcripts can pass its default of 131,072 characters."""
    before = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(before)


@dataclass(frozen=True)
class ImportResult:
    annotator: str
    labelled: int
    skipped: int
    inserted: int
    updated: int


def import_labels(lake: Lake, path: Path, annotator: str, run_id: str) -> ImportResult:
    """Write an annotator's labels into ``annotations``; re-importing updates, never duplicates."""
    out, skipped = annotation_rows(lake, path, annotator)
    written = lake.write("annotations", out, run_id=run_id, mode="merge")
    return ImportResult(annotator, len(out), skipped, written.inserted, written.updated)


def annotation_rows(lake: Lake, path: Path, annotator: str) -> tuple[list[dict[str, Any]], int]:
    """The ``annotations`` rows a labelled sheet becomes, and how many it left blank.

    AnnotationError names the row of an item the lake does not hold. ``maestro annotate
    import`` asks this before it starts a flow, so a sheet that does not match the lake is an
    input error said in one line, before any server starts.
    """
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
                f"{r.where}: item {_quoted(r.item_id)} (episode {r.episode_id!r}, assertion "
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
    return out, skipped


def _quoted(item_id: str) -> str:
    """An item id as an error shows it: as it is when it looks like one (16 hex digits, as the
    export writes them), quoted otherwise, so a forged id cannot pass for the message's text."""
    return item_id if _ITEM_ID.fullmatch(item_id) else repr(item_id)


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
