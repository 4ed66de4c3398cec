"""A run's transcripts as one static HTML page: inline CSS and one inline script, nothing
fetched from anywhere.

Episode text is written by models, so it is data, never markup: every value goes through
:func:`html.escape` here, the script only shows and hides what was rendered (it never builds
HTML from text), and the page's Content-Security-Policy lets no script run but that one (by its
hash) and no request leave the page.

Text is sized by models too: each text shows at most :data:`TEXT_LIMIT` characters and says
how many more there were; the page is written as it is rendered, never whole in memory, and
once it holds :data:`PAGE_BUDGET` bytes the episodes left are listed but not expanded (four
answers of 15 MB made a 300 MB page and a 1.5 GB process).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from html import escape
from pathlib import Path
from typing import TypeVar

from maestro.domains.files import TargetError, open_log
from maestro.scoring.card import CheckItem, CriterionScore
from maestro.view.transcripts import TEXT_LIMIT, EpisodeView, MessageView, RunView, TaskView

#: The bytes past which the page expands no more episodes (it still lists them).
PAGE_BUDGET = 64 * 1024 * 1024
#: The most characters of a name (an id, a model, a status) shown, in text or attribute.
LABEL_LIMIT = 256

T = TypeVar("T")


class _Budget:
    """How many bytes of the page are written, against its limit; counted by
    :func:`_encoded` as each piece leaves, so a check between pieces sees all before it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    @property
    def spent(self) -> bool:
        return self.used >= self.limit

    @property
    def why(self) -> str:
        size = f"{self.limit / 2**20:g} MiB" if self.limit >= 2**20 else f"{self.limit:,} bytes"
        return f"the page reached its budget of {size}"


def _e(value: object) -> str:
    """A name, escaped, cut to :data:`LABEL_LIMIT` characters (the same cut everywhere, so a
    filter's option still matches the rows it filters)."""
    text = "" if value is None else str(value)
    if len(text) > LABEL_LIMIT:
        text = text[:LABEL_LIMIT] + "…"
    return escape(text, quote=True)


def _shown(text: str | None, omitted: int = 0) -> str:
    """A text, escaped, cut to :data:`TEXT_LIMIT` characters; ``omitted``: how many were cut
    before (when read from the lake). The cut is said where the text stops."""
    text = text or ""
    over = max(0, len(text) - TEXT_LIMIT) + omitted
    shown = escape(text[:TEXT_LIMIT], quote=True)
    if over:
        shown += f"<span class='cut'>… {over:,} more characters not shown</span>"
    return shown


def _key(domain_id: str, task_id: str) -> str:
    return f"{domain_id}/{task_id}"


def render(run: RunView, budget: int = PAGE_BUDGET) -> str:
    """The page of one run, at most about ``budget`` bytes of it expanded."""
    return b"".join(_encoded(run, budget)).decode()


def write_page(run: RunView, out_dir: Path, budget: int = PAGE_BUDGET) -> Path:
    """Write the run's page into ``out_dir``, piece by piece as it is rendered; returns its
    path."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run.run_id)
    return _write(out_dir / f"{safe}.transcripts.html", _encoded(run, budget))


def _write(path: Path, parts: Iterable[bytes]) -> Path:
    """:func:`maestro.domains.files.write_file`'s guarantees for a page written in pieces: never
    through a link planted under the page's name (files.TargetError says so), never into a FIFO
    or another file's second name: a fresh file, renamed over the old entry once complete (so a
    reload while it is written shows the old page)."""
    path = Path(os.path.abspath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # the user's path may pass through links
    except OSError as exc:
        raise TargetError(f"cannot create {path.parent}: {exc.strerror}") from None
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):  # renaming over it would be safe; saying so is clearer
            raise TargetError(f"cannot write {path}: it is a symbolic link")
        if stat.S_ISDIR(mode):
            raise TargetError(f"cannot write {path}: it is a folder")
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = open_log(temporary)  # a fresh file, whatever was planted under that name
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
        os.rename(temporary, path)  # the last name is never followed
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise TargetError(f"cannot write {path}: {exc.strerror}") from None
        raise
    return path


def _encoded(run: RunView, limit: int) -> Iterator[bytes]:
    budget = _Budget(limit)
    for part in _page(run, budget):
        data = part.encode()
        budget.used += len(data)
        yield data


def _page(run: RunView, budget: _Budget) -> Iterator[str]:
    verdict_of = {_key(t.domain_id, t.task_id): _verdict(t) for t in run.tasks}
    reason_of = {_key(t.domain_id, t.task_id): t.reason_for_call for t in run.tasks}
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src '{_script_hash()}'; base-uri 'none'; form-action 'none'"
    )
    yield (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>maestro transcripts {_e(run.run_id)}</title><style>{STYLE}</style></head><body>"
        f"<h1>maestro transcripts <code>{_e(run.run_id)}</code></h1>"
    )
    yield _summary(run)
    yield _filters(run)
    yield "<h2 id='tasks-heading'>Tasks <small id='tasks-count'></small></h2>"
    yield from _tasks_table(run.tasks, budget)
    yield "<h2 id='episodes'>Episodes <small id='episodes-count'></small></h2>"
    if not run.episodes:
        yield "<p>no episodes</p>"
    noted = False
    for i, e in enumerate(run.episodes):
        if budget.spent and not noted:
            left = len(run.episodes) - i
            yield (
                f"<p class='cut' id='left-out'>{budget.why}: the last {left:,} of "
                f"{len(run.episodes):,} episodes are listed but not expanded.</p>"
            )
            noted = True
        key = _key(e.domain_id, e.task_id)
        yield from _episode(i, e, verdict_of.get(key, "none"), reason_of.get(key, ""), budget)
    yield f"<script>{SCRIPT}</script></body></html>"


def _capped(
    items: Sequence[T], show: Callable[[T], Iterable[str]], budget: _Budget, what: str, tag: str
) -> Iterator[str]:
    """Each item shown while the budget lasts; then a ``tag`` element counting the rest."""
    for n, item in enumerate(items):
        if budget.spent:
            rest = len(items) - n
            yield f"<{tag} class='cut'>… {rest:,} more {what} not shown: {budget.why}</{tag}>"
            return
        yield from show(item)


def _verdict(t: TaskView) -> str:
    return "none" if t.accepted is None else "accepted" if t.accepted else "rejected"


def _summary(run: RunView) -> str:
    outcomes = Counter(e.outcome for e in run.episodes)
    verdicts = Counter(_verdict(t) for t in run.tasks)
    ep = ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))
    tk = ", ".join(f"{n} {k}" for k, n in sorted(verdicts.items()) if k != "none")
    return (
        f"<p class='summary'>{len(run.episodes)} episodes ({_e(ep) or 'none'}); "
        f"{len(run.tasks)} tasks ({_e(tk) or 'no verdicts yet'})</p>"
    )


def _select(name: str, label: str, options: Iterable[tuple[str, str, str]]) -> str:
    """A filter: options are (value, text, domain) triples; domain scopes a task option."""
    opts = "".join(
        f"<option value='{_e(v)}' data-domain='{_e(d)}'>{_e(t)}</option>" for v, t, d in options
    )
    return (
        f"<label>{_e(label)} <select id='f-{name}' data-filter='{name}'>"
        f"<option value=''>all</option>{opts}</select></label>"
    )


def _filters(run: RunView) -> str:
    domains = sorted({t.domain_id for t in run.tasks} | {e.domain_id for e in run.episodes})
    tasks = sorted({(t.domain_id, t.task_id) for t in run.tasks})
    models = sorted({e.assistant_model for e in run.episodes})
    outcomes = ("passed", "failed", "incomplete", "unscored")
    return (
        "<form class='filters' id='filters'>"
        + _select("domain", "Domain", ((d, d, "") for d in domains))
        + _select("task", "Task", ((_key(d, t), t, d) for d, t in tasks))
        + _select("outcome", "Outcome", ((o, o, "") for o in outcomes))
        + _select("verdict", "Task verdict", ((v, v, "") for v in ("accepted", "rejected")))
        + _select("model", "Model", ((m, m, "") for m in models))
        + "<button type='button' id='reset'>Clear filters</button></form>"
    )


def _tasks_table(tasks: list[TaskView], budget: _Budget) -> Iterator[str]:
    if not tasks:
        yield "<p>no tasks</p>"
        return
    yield (
        "<table class='tasks'><tr><th>domain</th><th>task</th><th>verdict</th>"
        "<th>gate failed</th><th>passed / trials</th><th>band</th><th>reasons</th></tr>"
    )
    for t in tasks:  # every task listed, so the filters find it; its texts while they fit
        verdict = _verdict(t)
        reason = "" if budget.spent else _shown(t.reason_for_call)
        yield (
            f"<tr class='task' data-domain='{_e(t.domain_id)}' "
            f"data-task='{_e(_key(t.domain_id, t.task_id))}' data-verdict='{verdict}'>"
            f"<td>{_e(t.domain_id)}</td><td><button type='button' class='show-task' "
            f"title='show its episodes'>{_e(t.task_id)}</button>"
            f"<div class='muted'>{reason}</div></td>"
            f"<td><span class='badge {verdict}'>{verdict}</span></td>"
            f"<td>{_e(t.gate or '')}</td><td>{t.successes} / {t.trials}</td>"
            f"<td>{_e(t.difficulty_band or '')}</td><td><ul>"
        )
        yield from _capped(t.reasons, lambda r: [f"<li>{_shown(r)}</li>"], budget, "reasons", "li")
        yield "</ul></td></tr>"
    yield "</table>"


def _episode(
    i: int, e: EpisodeView, verdict: str, reason_for_call: str, budget: _Budget
) -> Iterator[str]:
    key = _key(e.domain_id, e.task_id)
    reward = "-" if e.reward is None else f"{e.reward:g}"
    yield (
        f"<details class='episode' id='ep-{i}' data-episode='{_e(e.episode_id)}' "
        f"data-domain='{_e(e.domain_id)}' data-task='{_e(key)}' data-outcome='{e.outcome}' "
        f"data-verdict='{verdict}' data-model='{_e(e.assistant_model)}'>"
        f"<summary><span class='badge {e.outcome}'>{e.outcome}</span> "
        f"<b>{_e(e.domain_id)} / {_e(e.task_id)}</b> trial {e.trial} · {_e(e.assistant_model)} "
        f"· reward {reward} · {_e(e.termination)} · {len(e.messages)} messages "
        f"· {e.duration_s:.1f} s</summary><div class='body'>"
    )
    if budget.spent:
        yield f"<p class='cut'>Not expanded: {budget.why} before this episode.</p></div></details>"
        return
    error = f"<p class='error'>error: {_shown(e.error)}</p>" if e.error else ""
    yield f"<p class='muted'>Reason for call: {_shown(reason_for_call)}</p>{error}"
    yield "<h4>Score card</h4>"
    yield from _card(e.criteria, budget)
    yield "<h4>Transcript</h4><ol class='transcript'>"
    yield from _capped(e.messages, lambda m: _message(m, budget), budget, "messages", "li")
    yield "</ol></div></details>"


def _card(criteria: list[CriterionScore], budget: _Budget) -> Iterator[str]:
    if not criteria:
        yield "<p class='muted'>not scored</p>"
        return
    yield (
        "<table class='card'><tr><th>criterion</th><th>verdict</th><th>reward</th><th>why</th></tr>"
    )
    for c in criteria:
        reward = "" if c.reward is None else f"{c.reward:g}"
        yield (
            f"<tr class='criterion'><td>{_e(c.criterion.value)}</td>"
            f"<td><span class='badge {_e(c.status)}'>{_e(c.status)}</span></td><td>{reward}</td>"
            f"<td><div class='details'>{_shown(c.details)}</div><ul class='checks'>"
        )
        yield from _capped(c.items, _check, budget, "checks", "li")
        yield "</ul></td></tr>"
    yield "</table>"


def _check(k: CheckItem) -> Iterator[str]:
    look = "ok" if k.passed else "bad" if k.passed is False else "open"
    mark = "✓" if k.passed else "✗" if k.passed is False else "?"
    yield (
        f"<li class='check {look}'><span class='mark'>{mark}</span> "
        f"{_shown(k.subject)}<span class='reason'>{_shown(k.reason)}</span></li>"
    )


def _message(m: MessageView, budget: _Budget) -> Iterator[str]:
    if m.role == "tool":
        status = m.status or "ok"
        who = (
            f"<span class='role'>tool result</span> <code>{_e(m.name)}</code> "
            f"<span class='badge {'ok' if status == 'ok' else 'bad'}'>{_e(status)}</span>"
        )
        text = f"<pre class='result'>{_shown(_pretty(m.content), m.content_omitted)}</pre>"
    else:
        who = f"<span class='role'>{_e(m.role)}</span>"
        shown = _shown(m.content, m.content_omitted)
        text = f"<div class='text'>{shown}</div>" if m.content else ""
    latency = f"<span class='muted'> {m.latency_s:.2f} s</span>" if m.latency_s else ""
    yield f"<li class='msg {_e(m.role)}'><div class='who'>{who}{latency}</div>{text}"
    yield from _capped(
        m.tool_calls,
        lambda c: [
            f"<div class='call'><span class='tag'>tool call</span> <code>{_e(c.name)}</code>"
            f"<span class='muted'> {_e(c.id)}</span>"
            f"<pre>{_shown(_pretty(c.arguments), c.arguments_omitted)}</pre></div>"
        ],
        budget,
        "tool calls",
        "div",
    )
    yield "</li>"


def _pretty(text: str | None) -> str:
    """JSON text (a tool call's arguments, a tool's result) indented; other text as it is,
    malformed arguments included, and text too long to show whole (it is cut, so no JSON)."""
    if not text or len(text) > TEXT_LIMIT:
        return text or ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return text


def _script_hash() -> str:
    digest = hashlib.sha256(SCRIPT.encode()).digest()
    return "sha256-" + base64.b64encode(digest).decode()


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:78em;padding:0 1em;color:#1d2330}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #d9dde5}small{color:#667;font-weight:normal}
.summary{color:#445}.muted{color:#667;font-size:.92em}
.filters{position:sticky;top:0;background:#f4f6fa;padding:.6em .8em;border:1px solid #d9dde5;
 border-radius:6px;display:flex;flex-wrap:wrap;gap:.8em;align-items:center;z-index:1}
select,button{font:inherit}table{border-collapse:collapse;width:100%}
td,th{border:1px solid #d9dde5;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f4f6fa}ul{margin:0;padding-left:1.2em}
.badge{display:inline-block;padding:0 .45em;border-radius:4px;font-size:.85em;font-weight:600;
 background:#e3e6ec;color:#333}
.passed,.accepted,.pass,.ok{background:#d7f0dc;color:#17612a}
.failed,.rejected,.fail,.bad,.error{background:#f8dcdc;color:#8a1c1c}
.incomplete,.pending,.unscored{background:#fbefcf;color:#7a5a00}
p.error{padding:.3em .5em;border-radius:4px}
button.show-task{border:none;background:none;color:#1f57a8;cursor:pointer;padding:0;
 text-decoration:underline;font-weight:600}
details.episode{border:1px solid #d9dde5;border-radius:6px;margin:.5em 0;background:#fff}
details.episode>summary{cursor:pointer;padding:.45em .7em}
details.episode[open]>summary{background:#f4f6fa;border-bottom:1px solid #d9dde5}
.body{padding:.5em 1em 1em}.details{white-space:pre-wrap}
.checks{list-style:none;padding-left:0;margin-top:.3em}.check{margin:.15em 0}
.check{padding:.1em .4em;border-radius:4px}.check .mark{font-weight:700}.check.ok .mark{color:#17612a}.check.bad .mark{color:#8a1c1c}
.check .reason{display:block;margin-left:1.3em;color:#556;font-style:italic}
ol.transcript{list-style:none;padding:0}
.msg{margin:.45em 0;padding:.45em .7em;border-radius:6px;border:1px solid #e3e6ec;max-width:85%}
.msg .who{font-size:.85em;color:#556;margin-bottom:.2em}
.role{text-transform:uppercase;letter-spacing:.03em;font-size:.92em}
pre.result{max-height:22em;overflow:auto}
.msg.user{background:#eef3fb}.msg.assistant{background:#f3f8ef;margin-left:auto}
.msg.tool{background:#fafafa;font-size:.92em;margin-left:auto}.msg.system{background:#f7f3fb}
.text{white-space:pre-wrap}pre{white-space:pre-wrap;margin:.2em 0;font-size:.9em}
.call{margin-top:.3em;padding:.3em .5em;border-left:3px solid #7a9cc6;background:#fff}
.tag{font-size:.75em;text-transform:uppercase;color:#556}
.cut{color:#7a5a00;font-style:italic;font-size:.9em}li.cut,div.cut{list-style:none;margin:.45em 0}
[hidden]{display:none!important}
"""

# Only shows and hides what the page already holds; reads and writes the filters in the URL's
# fragment (#domain=hotel&outcome=failed&episode=<id>), so a view can be linked to.
SCRIPT = """
(() => {
  const all = (s) => Array.from(document.querySelectorAll(s));
  const sel = {};
  for (const s of all("select[data-filter]")) sel[s.dataset.filter] = s;
  const fits = (el, names) => names.every((n) => !sel[n].value || el.dataset[n] === sel[n].value);
  let opened = null;
  const apply = () => {
    for (const o of sel.task.options) {
      o.hidden = Boolean(o.value && sel.domain.value && o.dataset.domain !== sel.domain.value);
    }
    let tasks = 0, episodes = 0;
    const trs = all("tr.task"), eps = all("details.episode");
    for (const tr of trs) {
      tr.hidden = !fits(tr, ["domain", "task", "verdict"]);
      tasks += tr.hidden ? 0 : 1;
    }
    for (const d of eps) {
      d.hidden = !fits(d, ["domain", "task", "outcome", "verdict", "model"]);
      episodes += d.hidden ? 0 : 1;
    }
    document.getElementById("tasks-count").textContent = `${tasks} of ${trs.length}`;
    document.getElementById("episodes-count").textContent = `${episodes} of ${eps.length}`;
    const p = new URLSearchParams();
    for (const [n, s] of Object.entries(sel)) if (s.value) p.set(n, s.value);
    if (opened) p.set("episode", opened);
    history.replaceState(null, "", p.toString() ? `#${p}` : location.pathname);
  };
  for (const s of Object.values(sel)) s.addEventListener("change", apply);
  document.getElementById("reset").addEventListener("click", () => {
    for (const s of Object.values(sel)) s.value = "";
    apply();
  });
  for (const b of all("button.show-task")) {
    b.addEventListener("click", () => {
      const tr = b.closest("tr");
      sel.domain.value = tr.dataset.domain;
      sel.task.value = tr.dataset.task;
      apply();
      document.getElementById("episodes").scrollIntoView();
    });
  }
  for (const d of all("details.episode")) {
    d.addEventListener("toggle", () => {
      if (d.open) opened = d.dataset.episode;
      else if (opened === d.dataset.episode) opened = null;
      apply();
    });
  }
  const p = new URLSearchParams(location.hash.slice(1));
  for (const [n, s] of Object.entries(sel)) {
    const v = p.get(n);
    if (v && Array.from(s.options).some((o) => o.value === v)) s.value = v;
  }
  const want = p.get("episode");
  const d = all("details.episode").find((x) => x.dataset.episode === want);
  apply();
  if (d) {
    d.open = true;
    d.scrollIntoView();
  }
})();
"""
