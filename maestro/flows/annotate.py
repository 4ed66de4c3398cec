"""Expert annotation of judged NL assertions, and judge-expert agreement.

* :func:`judged_items` reads every NL assertion the judge gave a verdict on from the lake
  (``scores`` for the verdicts, ``tasks`` for the assertions, ``episodes`` for transcripts).
* :func:`write_sheet` writes a sample as a CSV and as one self-contained HTML page (no external
  assets, works offline) on which an annotator labels each assertion and downloads a CSV. The
  judge's verdict is in neither: annotators label blind.
* :mod:`maestro.flows.annotations` reads the labels back into the ``annotations`` table and
  reports judge-expert agreement.

The scores table keeps an NL criterion's status and its ``details`` ("all assertions met", or
"not met: " and the failed assertions joined by "; "), so one assertion's verdict is recovered
by matching that list against the task's assertions. Criteria in ``error`` or ``pending`` have
no verdict and are never sampled.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import random
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from maestro.domains.files import write_file
from maestro.storage import Lake, OneOf
from maestro.storage.records import task_from_row, trajectory_from_row
from maestro.storage.rows import EpisodeRow, ScoreRow, StoredCriterion, TaskRow

_EPOCH = datetime.fromtimestamp(0, UTC)

SHEET_COLUMNS = (
    "item_id",
    "batch_id",
    "episode_id",
    "domain_id",
    "task_id",
    "assertion_index",
    "assertion",
    "transcript",
    "label",
    "note",
)


class AnnotationError(Exception):
    """A labels file or lake content cannot be used; the message names the file and line.

    The message quotes text from the sheet and the lake (an item id, a label, a path), and a
    flow's exception reaches Prefect's log, which prints it raw on the operator's terminal: its
    control characters are written as escapes (``\\x1b``) here, whoever prints it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(_escaped(message))


def _escaped(text: str) -> str:
    """``text`` with each character that is not printable (ESC, CSI, a newline, a
    bidirectional override) written as its Python escape; idempotent."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass(frozen=True)
class AssertionItem:
    """One NL assertion of one judged episode."""

    item_id: str
    episode_id: str
    domain_id: str
    task_id: str
    assertion_index: int
    assertion: str
    judge_verdict: bool
    transcript: str


def item_id(episode_id: str, index: int, assertion: str) -> str:
    """A stable id of an assertion of an episode."""
    raw = f"{episode_id}\0{index}\0{assertion}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def failed_assertions(details: str, assertions: list[str]) -> set[int] | None:
    """Indexes of the assertions a failed NL criterion's details list; None if they don't parse."""
    prefix = "not met: "
    if not details.startswith(prefix):
        return None
    rest = details[len(prefix) :]

    def match(pos: int, start: int) -> list[int] | None:
        if pos == len(rest):
            return []
        for i in range(start, len(assertions)):
            a = assertions[i]
            end = pos + len(a)
            if rest.startswith(a, pos) and (end == len(rest) or rest.startswith("; ", end)):
                tail = match(end + 2 if end < len(rest) else end, i + 1)
                if tail is not None:
                    return [i, *tail]
        return None

    found = match(0, 0)
    return set(found) if found else None


def _verdicts(status: str, details: str, assertions: list[str]) -> list[bool] | None:
    if status == "pass":
        return [True] * len(assertions)
    if status == "fail":
        failed = failed_assertions(details, assertions)
        return None if failed is None else [i not in failed for i in range(len(assertions))]
    return None


def _nl_criteria(
    lake: Lake, run_id: str | None, episode_ids: set[str] | None
) -> list[tuple[ScoreRow, StoredCriterion]]:
    """Each scored episode's NL criterion that has a verdict (pass or fail)."""
    where: dict[str, Any] = {}
    if run_id is not None:
        where["run_id"] = run_id
    if episode_ids is not None:
        where["episode_id"] = OneOf(sorted(episode_ids))
    fields = ["domain_id", "task_id", "criteria"]
    return [
        (row, c)
        for row in lake.rows(ScoreRow, fields=fields, **where)
        for c in row.criteria or []
        if c.criterion == "NL_ASSERTION" and c.status in ("pass", "fail")
    ]


def _assertions_by_task(lake: Lake) -> dict[tuple[str, str, str | None], list[str]]:
    """Each task's NL assertions by (domain, task, version), and by (domain, task, None) for
    the latest version written."""
    out: dict[tuple[str, str, str | None], list[str]] = {}
    for row in sorted(lake.rows(TaskRow), key=lambda r: r.written_at or _EPOCH):
        texts = list(task_from_row(row).evaluation_criteria.nl_assertions)
        out[(row.domain_id, row.task_id, row.domain_version)] = texts
        out[(row.domain_id, row.task_id, None)] = texts
    return out


def _versions(lake: Lake, episode_ids: list[str]) -> dict[str, str | None]:
    """The domain version each episode ran on (scores do not carry it; episodes do)."""
    rows = lake.rows(EpisodeRow, episode_id=OneOf(episode_ids), fields=["domain_version"])
    return {r.episode_id: r.domain_version for r in rows}


def judged_items(
    lake: Lake, *, run_id: str | None = None, episode_ids: set[str] | None = None
) -> list[AssertionItem]:
    """Every NL assertion with a judge's verdict in the lake (transcripts left empty).

    Assertions come from the task at the domain version the episode ran on, so a later version
    that rewords them does not relabel old verdicts.
    """
    nl = _nl_criteria(lake, run_id, episode_ids)
    assertions = _assertions_by_task(lake)
    versions = _versions(lake, sorted({row.episode_id for row, _ in nl}))
    items = []
    for row, criterion in nl:
        domain_id, task_id = str(row.domain_id), str(row.task_id)
        version = versions.get(row.episode_id)
        texts = assertions.get((domain_id, task_id, version))
        if texts is None and version is None:
            texts = assertions.get((domain_id, task_id, None))
        if not texts:
            continue
        verdicts = _verdicts(criterion.status or "", criterion.details or "", texts)
        if verdicts is None:
            continue
        for i, (text, verdict) in enumerate(zip(texts, verdicts, strict=True)):
            items.append(
                AssertionItem(
                    item_id(row.episode_id, i, text),
                    row.episode_id,
                    domain_id,
                    task_id,
                    i,
                    text,
                    verdict,
                    "",
                )
            )
    return sorted(items, key=lambda it: it.item_id)


def sample_items(items: list[AssertionItem], n: int, seed: int = 0) -> list[AssertionItem]:
    """Up to n items, spread evenly over domains (round robin over seeded shuffles)."""
    rng = random.Random(seed)
    by_domain: dict[str, list[AssertionItem]] = defaultdict(list)
    for it in items:
        by_domain[it.domain_id].append(it)
    queues = []
    for domain in sorted(by_domain):
        group = by_domain[domain]
        rng.shuffle(group)
        queues.append(group)
    out: list[AssertionItem] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop())
    return out


def transcripts(lake: Lake, episode_ids: set[str]) -> dict[str, str]:
    """Plain-text transcripts of the episodes, as the judge saw them."""
    rows = lake.rows(EpisodeRow, episode_id=OneOf(sorted(episode_ids)))
    return {r.episode_id: trajectory_from_row(r).transcript() for r in rows}


def with_transcripts(lake: Lake, items: list[AssertionItem]) -> list[AssertionItem]:
    """The items with their episodes' transcripts filled in."""
    texts = transcripts(lake, {it.episode_id for it in items})
    _check_stored({it.episode_id for it in items}, set(texts))
    return [AssertionItem(**{**asdict(it), "transcript": texts[it.episode_id]}) for it in items]


def _check_stored(wanted: set[str], stored: set[str]) -> None:
    missing = sorted(wanted - stored)
    if missing:
        raise AnnotationError(
            f"episodes table has no episode {missing[0]!r} (scored but not stored)"
        )


# ----- the annotation sheet ---------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotationSheet:
    batch_id: str
    csv_path: Path
    html_path: Path
    items: int


def batch_id_of(items: list[AssertionItem]) -> str:
    """A batch id derived from the items, so re-exporting the same sample gives the same id."""
    digest = hashlib.sha256("\n".join(it.item_id for it in items).encode()).hexdigest()
    return f"batch-{digest[:10]}"


def write_sheet(
    items: list[AssertionItem], out_dir: Path, batch_id: str | None = None
) -> AnnotationSheet:
    """Write ``<batch>.csv`` and ``<batch>.html`` (labels blank, judge's verdicts left out)."""
    if not items:
        raise AnnotationError(NOTHING_SAMPLED)
    batch = batch_id or batch_id_of(items)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "item_id": it.item_id,
            "batch_id": batch,
            "episode_id": it.episode_id,
            "domain_id": it.domain_id,
            "task_id": it.task_id,
            "assertion_index": it.assertion_index,
            "assertion": it.assertion,
            "transcript": it.transcript,
            "label": "",
            "note": "",
        }
        for it in items
    ]
    sheet = io.StringIO(newline="")
    writer = csv.DictWriter(sheet, fieldnames=SHEET_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    csv_path = write_file(out_dir / f"{batch}.csv", sheet.getvalue())
    html_path = out_dir / f"{batch}.html"
    payload = json.dumps(
        {"batch": batch, "columns": SHEET_COLUMNS, "items": rows}, ensure_ascii=False
    )
    # "</" inside a <script> block would end it early; JSON allows "<\/" for the same text.
    page = PAGE.replace("__DATA__", payload.replace("</", "<\\/")).replace(
        "__TITLE__", html.escape(f"maestro annotation {batch}")
    )
    html_path = write_file(html_path, page)
    return AnnotationSheet(batch, csv_path, html_path, len(items))


NOTHING_SAMPLED = "no judged NL assertions to annotate (nothing sampled)"


def export_items(
    lake: Lake, *, n: int = 30, seed: int = 0, run_id: str | None = None
) -> list[AssertionItem]:
    """The sample an export writes (transcripts left empty), or AnnotationError when there is
    nothing to write: ``maestro annotate export`` asks before it starts a flow, so an empty lake
    is one line, not Prefect's traceback of the flow's failure and then the line."""
    items = sample_items(judged_items(lake, run_id=run_id), n, seed)
    if not items:
        raise AnnotationError(NOTHING_SAMPLED + (f" for run {run_id!r}" if run_id else ""))
    wanted = {it.episode_id for it in items}
    stored = lake.rows(EpisodeRow, episode_id=OneOf(sorted(wanted)), fields=["episode_id"])
    _check_stored(wanted, {r.episode_id for r in stored})
    return items


def export_sample(
    lake: Lake, out_dir: Path, *, n: int = 30, seed: int = 0, run_id: str | None = None
) -> AnnotationSheet:
    """Sample judged assertions from the lake and write the annotation sheet."""
    items = export_items(lake, n=n, seed=seed, run_id=run_id)
    return write_sheet(with_transcripts(lake, items), out_dir)


# The annotator's page: one file, no external assets; labels autosave in the browser and are
# downloaded as a CSV that `maestro annotate import` reads.
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:980px;padding:1em;color:#222}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ccc;padding:.5em 0;z-index:1}
.item{border:1px solid #ccc;border-radius:6px;margin:1em 0;padding:.8em}
.item.done{border-color:#3a7}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em;max-height:24em;overflow:auto;font-size:13px}
.assertion{font-weight:600;background:#fff7d6;padding:.4em;border-radius:4px}
label{margin-right:1.2em}input[type=text]{width:60%}
</style></head><body>
<header><b>__TITLE__</b> &middot; annotator <input id="who" placeholder="your name">
&middot; <span id="progress"></span> &middot; <button id="download">Download labels CSV</button>
<p>For each item, read the whole conversation (tool calls and results included) and decide
whether the assertion holds. Labels are saved in this browser as you go.</p></header>
<main id="items"></main>
<script type="application/json" id="data">__DATA__</script>
<script>
const data = JSON.parse(document.getElementById('data').textContent);
const key = 'maestro-annotation-' + data.batch;
const saved = JSON.parse(localStorage.getItem(key) || '{}');
const state = saved.labels || {};
const who = document.getElementById('who');
who.value = saved.who || '';
function save() { localStorage.setItem(key, JSON.stringify({who: who.value, labels: state})); progress(); }
function progress() {
  const n = data.items.filter(it => (state[it.item_id] || {}).label).length;
  document.getElementById('progress').textContent = n + ' / ' + data.items.length + ' labelled';
}
const main = document.getElementById('items');
data.items.forEach((it, i) => {
  const s = state[it.item_id] = state[it.item_id] || {label: '', note: ''};
  const div = document.createElement('div');
  div.className = 'item' + (s.label ? ' done' : '');
  const h = document.createElement('div');
  h.textContent = '#' + (i + 1) + ' ' + it.domain_id + ' / ' + it.task_id + ' / assertion ' + it.assertion_index;
  const pre = document.createElement('pre'); pre.textContent = it.transcript;
  const a = document.createElement('p'); a.className = 'assertion'; a.textContent = it.assertion;
  div.append(h, pre, a);
  [['met', 'met'], ['not_met', 'not met'], ['', 'unsure']].forEach(([value, text]) => {
    const l = document.createElement('label'); const r = document.createElement('input');
    r.type = 'radio'; r.name = 'l' + i; r.value = value; r.checked = s.label === value && value !== '';
    r.onchange = () => { s.label = value; div.className = 'item' + (value ? ' done' : ''); save(); };
    l.append(r, ' ' + text); div.append(l);
  });
  const note = document.createElement('input'); note.type = 'text'; note.placeholder = 'note (optional)';
  note.value = s.note; note.oninput = () => { s.note = note.value; save(); };
  div.append(note); main.append(div);
});
who.oninput = save;
function cell(v) { return '"' + String(v === undefined || v === null ? '' : v).replace(/"/g, '""') + '"'; }
document.getElementById('download').onclick = () => {
  const cols = ['item_id','batch_id','episode_id','domain_id','task_id','assertion_index','assertion','label','note','annotator'];
  const lines = [cols.join(',')];
  data.items.forEach(it => {
    const s = state[it.item_id] || {};
    const row = Object.assign({}, it, {label: s.label || '', note: s.note || '', annotator: who.value});
    lines.push(cols.map(c => cell(row[c])).join(','));
  });
  const blob = new Blob([lines.join('\\r\\n') + '\\r\\n'], {type: 'text/csv'});
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob);
  link.download = data.batch + '-' + (who.value || 'annotator') + '.csv';
  link.click();
};
progress();
</script></body></html>
"""
