"""A run's transcripts as one static HTML page: inline CSS and one inline script, nothing
fetched from anywhere.

Episode text is written by models, so it is data, never markup: every value goes through
:func:`html.escape` here, the script only shows and hides what was rendered (it never builds
HTML from text), and the page's Content-Security-Policy lets no script run but that one (by its
hash) and no request leave the page.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from maestro.conversation import Message
from maestro.domains.files import write_file
from maestro.scoring.card import CriterionScore
from maestro.view.transcripts import EpisodeView, RunView, TaskView


def _e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def _key(domain_id: str, task_id: str) -> str:
    return f"{domain_id}/{task_id}"


def render(run: RunView) -> str:
    """The page of one run."""
    verdict_of = {_key(t.domain_id, t.task_id): _verdict(t) for t in run.tasks}
    reason_of = {_key(t.domain_id, t.task_id): t.reason_for_call for t in run.tasks}
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src '{_script_hash()}'; base-uri 'none'; form-action 'none'"
    )
    body = "".join(
        [
            f"<h1>maestro transcripts <code>{_e(run.run_id)}</code></h1>",
            _summary(run),
            _filters(run),
            "<h2 id='tasks-heading'>Tasks <small id='tasks-count'></small></h2>",
            _tasks_table(run.tasks),
            "<h2 id='episodes'>Episodes <small id='episodes-count'></small></h2>",
            "".join(
                _episode(i, e, verdict_of.get(_key(e.domain_id, e.task_id), "none"), reason_of)
                for i, e in enumerate(run.episodes)
            )
            or "<p>no episodes</p>",
        ]
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>maestro transcripts {_e(run.run_id)}</title><style>{STYLE}</style></head>"
        f"<body>{body}<script>{SCRIPT}</script></body></html>"
    )


def write_page(run: RunView, out_dir: Path) -> Path:
    """Write the run's page into ``out_dir``; returns its path."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run.run_id)
    # Never through a link planted in the reports folder (files.TargetError says so).
    return write_file(out_dir / f"{safe}.transcripts.html", render(run))


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


def _tasks_table(tasks: list[TaskView]) -> str:
    if not tasks:
        return "<p>no tasks</p>"
    head = (
        "<tr><th>domain</th><th>task</th><th>verdict</th><th>gate failed</th>"
        "<th>passed / trials</th><th>band</th><th>reasons</th></tr>"
    )
    rows = []
    for t in tasks:
        verdict = _verdict(t)
        reasons = "".join(f"<li>{_e(r)}</li>" for r in t.reasons)
        rows.append(
            f"<tr class='task' data-domain='{_e(t.domain_id)}' "
            f"data-task='{_e(_key(t.domain_id, t.task_id))}' data-verdict='{verdict}'>"
            f"<td>{_e(t.domain_id)}</td><td><button type='button' class='show-task' "
            f"title='show its episodes'>{_e(t.task_id)}</button>"
            f"<div class='muted'>{_e(t.reason_for_call)}</div></td>"
            f"<td><span class='badge {verdict}'>{verdict}</span></td>"
            f"<td>{_e(t.gate or '')}</td><td>{t.successes} / {t.trials}</td>"
            f"<td>{_e(t.difficulty_band or '')}</td><td><ul>{reasons}</ul></td></tr>"
        )
    return f"<table class='tasks'>{head}{''.join(rows)}</table>"


def _episode(i: int, e: EpisodeView, verdict: str, reason_of: dict[str, str]) -> str:
    key = _key(e.domain_id, e.task_id)
    reward = "-" if e.reward is None else f"{e.reward:g}"
    summary = (
        f"<summary><span class='badge {e.outcome}'>{e.outcome}</span> "
        f"<b>{_e(e.domain_id)} / {_e(e.task_id)}</b> trial {e.trial} · {_e(e.assistant_model)} "
        f"· reward {reward} · {_e(e.termination)} · {len(e.messages)} messages "
        f"· {e.duration_s:.1f} s</summary>"
    )
    error = f"<p class='error'>error: {_e(e.error)}</p>" if e.error else ""
    scenario = f"<p class='muted'>Reason for call: {_e(reason_of.get(key, ''))}</p>"
    return (
        f"<details class='episode' id='ep-{i}' data-episode='{_e(e.episode_id)}' "
        f"data-domain='{_e(e.domain_id)}' data-task='{_e(key)}' data-outcome='{e.outcome}' "
        f"data-verdict='{verdict}' data-model='{_e(e.assistant_model)}'>"
        f"{summary}<div class='body'>{scenario}{error}"
        f"<h4>Score card</h4>{_card(e.criteria)}"
        f"<h4>Transcript</h4><ol class='transcript'>{''.join(map(_message, e.messages))}</ol>"
        "</div></details>"
    )


def _card(criteria: list[CriterionScore]) -> str:
    if not criteria:
        return "<p class='muted'>not scored</p>"
    rows = []
    for c in criteria:
        checks = "".join(
            f"<li class='check {'ok' if k.passed else 'bad' if k.passed is False else 'open'}'>"
            f"<span class='mark'>{'✓' if k.passed else '✗' if k.passed is False else '?'}</span> "
            f"{_e(k.subject)}<span class='reason'>{_e(k.reason)}</span></li>"
            for k in c.items
        )
        reward = "" if c.reward is None else f"{c.reward:g}"
        rows.append(
            f"<tr class='criterion'><td>{_e(c.criterion.value)}</td>"
            f"<td><span class='badge {_e(c.status)}'>{_e(c.status)}</span></td><td>{reward}</td>"
            f"<td><div class='details'>{_e(c.details)}</div><ul class='checks'>{checks}</ul></td></tr>"
        )
    head = "<tr><th>criterion</th><th>verdict</th><th>reward</th><th>why</th></tr>"
    return f"<table class='card'>{head}{''.join(rows)}</table>"


def _message(m: Message) -> str:
    calls = "".join(
        f"<div class='call'><span class='tag'>tool call</span> <code>{_e(c.name)}</code>"
        f"<span class='muted'> {_e(c.id)}</span><pre>{_e(_pretty(_text(c.arguments)))}</pre></div>"
        for c in m.tool_calls
    )
    if m.role == "tool":
        status = m.status or "ok"
        who = (
            f"<span class='role'>tool result</span> <code>{_e(m.name)}</code> "
            f"<span class='badge {'ok' if status == 'ok' else 'bad'}'>{_e(status)}</span>"
        )
        text = f"<pre class='result'>{_e(_pretty(m.content))}</pre>"
    else:
        who = f"<span class='role'>{_e(m.role)}</span>"
        text = f"<div class='text'>{_e(m.content)}</div>" if m.content else ""
    latency = f"<span class='muted'> {m.latency_s:.2f} s</span>" if m.latency_s else ""
    return f"<li class='msg {_e(m.role)}'><div class='who'>{who}{latency}</div>{text}{calls}</li>"


def _text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _pretty(text: str | None) -> str:
    """JSON text (a tool call's arguments, a tool's result) indented; other text as it is,
    malformed arguments included."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except json.JSONDecodeError:
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
