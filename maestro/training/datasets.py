"""SFT, DPO and GRPO datasets built from the lake, in TRL's conversational format.

Every row names the episodes it came from and the table versions it was read at; a dataset is
registered in the ``datasets`` table and exported as parquet (loadable with ``datasets``).

- SFT: the successful episodes of the task set's tasks, plus a gold-path conversation per
  task (the opening, the gold calls with their replayed results, the facts to communicate;
  for a task with scripted user turns, such as an imported BFCL entry, each turn's message,
  then the ground-truth calls placed in that turn with their results, then a short answer).
- DPO: for a task with both outcomes, chosen = a successful episode, rejected = a failed one;
  the prompt is the two conversations' shared prefix.
- GRPO: the system prompt and the user's opening; ``domain_id``/``task_id`` name the task.

Tool-call arguments stay JSON text (see :mod:`maestro.training.models`); ``tools`` is a JSON
string per row because different domains have different tools. A domain's system prompt and
tools are built once per build, and its rows share the two strings.

Rows that cannot be trained on as they are are left out, never silently: each reason is a
:class:`Dropped` on ``TrainingDataset.dropped``, logged as a warning (a flow run's log carries
``maestro`` loggers), written next to the parquet export, and named by the error when no row
is left. A row is left out when

- its prompt (system prompt, tools, the user's opening) is over the :class:`PromptBudget`;
- its text holds a chat-template control string (``<|im_end|>``, ``<tool_call>``...): the
  tokenizer makes it the template's own token, and a forged turn becomes training text;
- (DPO) its two conversations do not part on an assistant turn.

A domain whose system prompt or tools alone fail a check has all its rows left out, for one
reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from maestro.agents.roles import assistant_system_prompt
from maestro.conversation import Message, ToolCall, to_openai
from maestro.domains import Domain
from maestro.domains.files import write_file
from maestro.domains.models import Action, Task
from maestro.domains.package import replay_gold
from maestro.storage import Lake, OneOf
from maestro.storage.records import message_from_row, task_refs
from maestro.storage.rows import DatasetRow, EpisodeRow, ScoreRow, TableVersion, TaskSetRow

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

    from maestro.training.models import BaseModelSpec
    from maestro.training.recipes import RecipeSettings

log = logging.getLogger(__name__)

Method = Literal["sft", "dpo", "grpo"]
SOURCE_TABLES = ("task_sets", "tasks", "episodes", "scores")


class DatasetError(Exception):
    """A dataset cannot be built: unknown task set, domain missing, nothing to train on."""


# ----- what a row may hold ---------------------------------------------------------------------

#: A prompt's token budget when the build is not given the recipe's: ``RecipeSettings``'s
#: default ``max_length`` (a test holds the two equal).
DEFAULT_MAX_PROMPT_TOKENS = 16384
#: Tokens the chat template adds to a prompt's texts (turn markers, the tools preamble): 105 to
#: 170 measured with Qwen2.5's and SmolLM2's tokenizers on the library domains; with a margin.
TEMPLATE_TOKENS = 256
#: No token of our tokenizers covers more bytes (Qwen2.5's longest is 128, SmolLM2's 81): a
#: prompt of more bytes than this per token allowed is over its budget without counting.
MAX_TOKEN_BYTES = 256
#: The markers maestro's chat template (TRL's Qwen2.5 training template) writes around the tools,
#: tool calls and tool results: text holding one forges that structure.
TEMPLATE_MARKERS = (
    "<tools>",
    "</tools>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)
#: Any ``<|...|>``: ChatML's turn markers, Qwen's other special tokens (``<|endoftext|>``,
#: ``<|fim_prefix|>``...), Llama 3's (``<|eot_id|>``); DeepSeek writes its with full-width bars.
CONTROL_SHAPES = (r"<\|[^<>|\s]{1,64}\|>", r"<\uff5c[^<>\uff5c\s]{1,64}\uff5c>")


def control_strings(tokenizer: PreTrainedTokenizerBase | None = None) -> re.Pattern[str]:
    """What a row's text may not hold: the template's markers, anything shaped ``<|...|>``,
    and, given a tokenizer, its special and added tokens (it splits text on all of them; the
    Qwen2.5 tokenizer read from its GGUF lists ``<|im_start|>`` as added, not special)."""
    literals = set(TEMPLATE_MARKERS)
    if tokenizer is not None:
        added = [*tokenizer.all_special_tokens, *tokenizer.get_added_vocab()]
        # Whitespace or a plain word as an added token would bar ordinary text.
        literals |= {t for t in added if len(t) > 1 and t.strip() == t and not t.isalnum()}
    escaped = [re.escape(t) for t in sorted(literals, key=len, reverse=True)]
    return re.compile("|".join([*CONTROL_SHAPES, *escaped]))


@dataclass
class PromptBudget:
    """How many tokens a row's prompt (system prompt, tools, the user's opening, the template's
    markers) may take: the recipe's ``max_length``, else ``DEFAULT_MAX_PROMPT_TOKENS``.

    The check must never keep an over-budget row (the trainer truncates it silently), so a
    prompt's size is bounded from above, in UTF-8 bytes: every token of a byte-level BPE
    vocabulary (Qwen2.5's, SmolLM2's) covers at least one byte, so a prompt of no more bytes
    than tokens allowed fits. Characters are no such bound (a CJK character is three SmolLM2
    tokens), nor is 4 characters per token: an English average, while digits and non-Latin
    text take a token a byte, so it would keep prompts of up to 4 times the budget. A prompt
    with more runs of letters than tokens allowed is over (no token holds two). Between the
    two bounds it is counted with ``tokenizer``, else with the tokenizer of ``base`` (the
    default base model's when unset), read once: ~300 MB and a few seconds, for a library
    domain's 18-21 KB prompt.
    """

    max_tokens: int = DEFAULT_MAX_PROMPT_TOKENS
    tokenizer: PreTrainedTokenizerBase | None = None
    base: BaseModelSpec | None = None

    @classmethod
    def of_recipe(
        cls, settings: RecipeSettings, tokenizer: PreTrainedTokenizerBase | None = None
    ) -> PromptBudget:
        """The budget a recipe trains with, counted with its base model's tokenizer."""
        return cls(settings.max_length, tokenizer, settings.base)

    def tokens(self, text: str) -> int:
        tokenizer = self.tokenizer or _tokenizer_of(self.base)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])


_TOKENIZERS: dict[str, PreTrainedTokenizerBase] = {}


def _tokenizer_of(base: BaseModelSpec | None) -> PreTrainedTokenizerBase:
    from maestro.training.models import BaseModelSpec, load_tokenizer

    spec = base or BaseModelSpec()
    key = spec.model_dump_json()
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = load_tokenizer(spec)
    return _TOKENIZERS[key]


DropReason = Literal["control_string", "prompt_over_budget", "no_diverging_turn"]


@dataclass
class Dropped:
    """Rows a build left out, and why; ``task_id`` is None when all of a domain's rows were."""

    reason: DropReason
    domain_id: str
    task_id: str | None
    where: str
    detail: str
    rows: int = 1

    def __str__(self) -> str:
        task = f"/{self.task_id}" if self.task_id else " (all its rows)"
        return (
            f"{self.rows} row(s) dropped, {self.reason}: "
            f"{self.domain_id}{task}, {self.where}: {self.detail}"
        )


@dataclass
class TrainingDataset:
    """A built dataset: rows in TRL's format, where they came from, and what was left out."""

    dataset_id: str
    method: Method
    task_set_id: str
    rows: list[dict[str, Any]]
    built_from: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    def to_hf(self) -> Dataset:
        """The rows as a Hugging Face dataset, in one Arrow copy. ``Dataset.from_list`` made
        more: a column-wise list, a table, and a pass over it to hash a fingerprint (2.6 GB
        peak for 400 MB of rows); the fingerprint here is hashed row by row."""
        import pyarrow as pa
        from datasets import Dataset

        if not self.rows:
            raise DatasetError(f"dataset {self.dataset_id} has no rows")
        return Dataset(pa.Table.from_pylist(self.rows), fingerprint=self.fingerprint())

    def fingerprint(self) -> str:
        """A hash of the id and the rows: what ``datasets`` keys its caches on."""
        digest = hashlib.blake2b(self.dataset_id.encode(), digest_size=16)
        for row in self.rows:
            digest.update(json.dumps(row, sort_keys=True, default=str).encode())
        return digest.hexdigest()

    def drop_counts(self) -> dict[str, int]:
        """How many rows were left out, by reason."""
        counts: dict[str, int] = {}
        for d in self.dropped:
            counts[d.reason] = counts.get(d.reason, 0) + d.rows
        return counts

    def export(self, folder: Path) -> Path:
        """Write the rows as one parquet file under ``folder``, and what was left out, if
        anything, next to it as ``<name>.dropped.json``; returns the parquet file's path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.dataset_id.replace('/', '__')}.parquet"
        self.to_hf().to_parquet(str(path))
        if self.dropped:
            report = [asdict(d) for d in self.dropped]
            write_file(path.with_suffix(".dropped.json"), json.dumps(report, indent=2))
        return path

    def register(self, lake: Lake, run_id: str, uri: str) -> None:
        """Write this dataset's row in the ``datasets`` table."""
        row = DatasetRow(
            dataset_id=self.dataset_id,
            method=self.method,
            task_set_id=self.task_set_id,
            n_rows=len(self.rows),
            uri=uri,
            built_from=[TableVersion.model_validate(v) for v in self.built_from],
            n_dropped=sum(d.rows for d in self.dropped),
            dropped_json=json.dumps([asdict(d) for d in self.dropped]) if self.dropped else None,
        )
        lake.write(row.TABLE, [row], run_id)


# ----- conversation pieces ---------------------------------------------------------------------


def tools_json(domain: Domain) -> str:
    return json.dumps(domain.toolkit.schemas())


def trl_message(m: Message) -> dict[str, Any]:
    """A message in TRL's conversational format: the chat wire format with the same keys
    whatever the role (Arrow wants one struct type); tool-call arguments stay JSON text."""
    wire = to_openai(m)
    return {
        "role": m.role,
        "content": m.content or "",
        "tool_calls": [
            {"type": c["type"], "function": c["function"]} for c in wire.get("tool_calls", [])
        ],
        "name": m.name or "",
    }


def conversation(
    domain: Domain, messages: Sequence[Message], system: str | None = None
) -> list[dict[str, Any]]:
    """A conversation in TRL's format after the assistant's system prompt, the one it is
    served with (``system``: that prompt, built once for the domain's rows)."""
    prompt = assistant_system_prompt(domain) if system is None else system
    return [trl_message(m) for m in (Message(role="system", content=prompt), *messages)]


def opening(task: Task) -> Message:
    """The user's first message in a task: the reason for calling."""
    return Message(role="user", content=task.user_scenario.instructions.reason_for_call)


def gold_conversation(
    domain: Domain, task: Task, system: str | None = None
) -> list[dict[str, Any]]:
    """The gold path as a conversation: opening, gold calls with replayed results, the facts
    the task wants communicated."""
    replay = replay_gold(domain, task)
    if not replay.ok:
        raise DatasetError(f"{domain.id}/{task.id}: the gold path does not replay cleanly")
    info = task.evaluation_criteria.communicate_info
    closing = ("To confirm: " + "; ".join(info) + ".") if info else "Done."
    results = {a.action_id: o for a, o in zip(task.gold_actions, replay.outcomes, strict=True)}
    index = {a.action_id: i for i, a in enumerate(task.gold_actions)}
    messages = []
    for said, actions in gold_turns(task):
        messages.append(Message(role="user", content=said))
        for action in actions:
            call = ToolCall(
                id=f"gold_{index[action.action_id]}", name=action.name, arguments=action.arguments
            )
            messages.append(Message(role="assistant", tool_calls=[call]))
            content = results[action.action_id].content
            messages.append(
                Message(role="tool", content=content, name=action.name, tool_call_id=call.id)
            )
        messages.append(Message(role="assistant", content=closing))
    return conversation(domain, messages, system)


def gold_turns(task: Task) -> list[tuple[str, list[Action]]]:
    """The user's messages, each with the gold actions that answer it (gold replay order)."""
    gold = task.gold_actions
    if not task.user_turns:
        return [(task.user_scenario.instructions.reason_for_call, gold)]
    turn_of = {a: i for i, t in enumerate(task.user_turns) for a in t.action_ids}
    last = len(task.user_turns) - 1
    return [
        (t.content, [a for a in gold if turn_of.get(a.action_id, last) == i])
        for i, t in enumerate(task.user_turns)
    ]


# ----- reading the lake ------------------------------------------------------------------------


@dataclass
class _Episode:
    """A stored episode of the task set's tasks, and whether it succeeded."""

    row: EpisodeRow
    passed: bool

    @property
    def key(self) -> tuple[str, str]:
        return (str(self.row.domain_id), str(self.row.task_id))

    @property
    def label(self) -> str:
        return f"episode {self.row.episode_id}"

    def conversation(self, domain: Domain, system: str) -> list[dict[str, Any]]:
        return conversation(domain, [message_from_row(m) for m in self.row.messages or []], system)


@dataclass
class _Source:
    versions: list[dict[str, Any]]
    tasks: list[tuple[Domain, Task]]
    episodes: list[_Episode]


def _read_source(
    lake: Lake, domains: Mapping[str, Domain], task_set_id: str, split: str | None
) -> _Source:
    versions = lake.versions(SOURCE_TABLES)
    at = {v["table"]: v["version"] for v in versions}
    if at["task_sets"] is None:
        raise DatasetError("the lake has no task_sets table yet: curate a task set first")
    sets = lake.rows(TaskSetRow, at=at["task_sets"], task_set_id=task_set_id)
    if not sets:
        raise DatasetError(f"task set {task_set_id!r} is not in the task_sets table")
    refs = task_refs(sets[0])
    missing = sorted({d for d, _ in refs if d not in domains})
    if missing:
        raise DatasetError(f"task set {task_set_id!r} names domain(s) not loaded: {missing}")
    tasks = [(domains[d], domains[d].task(t)) for d, t in refs]
    if split is not None:
        tasks = [(d, t) for d, t in tasks if t.split == split]
    episodes: list[_Episode] = []
    if at["episodes"] is not None and at["scores"] is not None and tasks:
        episodes = _scored_episodes(lake, at["episodes"], at["scores"], tasks)
    return _Source(versions, tasks, episodes)


def _scored_episodes(
    lake: Lake, episodes_at: int, scores_at: int, tasks: Sequence[tuple[Domain, Task]]
) -> list[_Episode]:
    """The scored episodes of the tasks, at the table versions given, by episode id."""
    wanted = {(d.id, t.id) for d, t in tasks}
    rows = lake.rows(
        EpisodeRow,
        at=episodes_at,
        domain_id=OneOf(sorted({d for d, _ in wanted})),
        task_id=OneOf(sorted({t for _, t in wanted})),
    )
    rows = [r for r in rows if (r.domain_id, r.task_id) in wanted]
    passed = {
        s.episode_id: bool(s.passed)
        for s in lake.rows(
            ScoreRow,
            at=scores_at,
            episode_id=OneOf([r.episode_id for r in rows]),
            fields=["passed"],
        )
    }
    scored = [_Episode(r, passed[r.episode_id]) for r in rows if r.episode_id in passed]
    return sorted(scored, key=lambda e: e.row.episode_id)


class _Build:
    """One build's view of its domains: each one's system prompt and tools, built once (its
    rows share the two strings); the checks a row passes to be kept; what was left out."""

    def __init__(self, source: _Source, budget: PromptBudget | None) -> None:
        self.source = source
        self.budget = budget or PromptBudget()
        self.control = control_strings(self.budget.tokenizer)
        self.dropped: list[Dropped] = []
        self._system: dict[str, str] = {}
        self._tools: dict[str, str] = {}
        self._barred: dict[str, Dropped | None] = {}
        self._fixed: dict[str, _Size] = {}

    def system(self, domain: Domain) -> str:
        if domain.id not in self._system:
            self._system[domain.id] = assistant_system_prompt(domain)
        return self._system[domain.id]

    def tools(self, domain: Domain) -> str:
        if domain.id not in self._tools:
            self._tools[domain.id] = tools_json(domain)
        return self._tools[domain.id]

    def meta(self, domain: Domain, task: Task, episodes: list[str]) -> dict[str, Any]:
        return {
            "domain_id": domain.id,
            "task_id": task.id,
            "episode_ids": episodes,
            "table_versions": self.source.versions,
            "tools": self.tools(domain),
        }

    def barred(self, domain: Domain, rows: int = 1) -> bool:
        """Whether all the domain's rows are left out; if so ``rows`` more count against it."""
        if domain.id not in self._barred:
            self._barred[domain.id] = self._bar(domain)
        bar = self._barred[domain.id]
        if bar is None:
            return False
        if bar.rows == 0:
            self.dropped.append(bar)
        bar.rows += rows
        return True

    def _bar(self, domain: Domain) -> Dropped | None:
        texts = [
            ("policy", domain.policy),
            ("system prompt", self.system(domain)),
            # As the template writes them: not \u-escaped.
            ("tools", json.dumps(domain.toolkit.schemas(), ensure_ascii=False)),
        ]
        for where, text in texts:
            if hit := self.control.search(text):
                return Dropped("control_string", domain.id, None, where, _found(hit), rows=0)
        if over := self._over_budget(domain, ""):
            return Dropped(
                "prompt_over_budget", domain.id, None, "system prompt and tools", over, 0
            )
        return None

    def keep(
        self, domain: Domain, task: Task, *conversations: tuple[str, list[dict[str, Any]]]
    ) -> bool:
        """Whether a row made of these (labelled) conversations is kept; if not, why is noted."""
        for label, conv in conversations:
            for where, text in _texts(conv):
                if hit := self.control.search(text):
                    self.drop("control_string", domain, task, f"{label}, {where}", _found(hit))
                    return False
        label, conv = conversations[0]
        opening = next((m["content"] for m in conv if m["role"] == "user"), "")
        if over := self._over_budget(domain, opening):
            self.drop("prompt_over_budget", domain, task, f"{label}, prompt", over)
            return False
        return True

    def drop(self, reason: DropReason, domain: Domain, task: Task, where: str, detail: str) -> None:
        self.dropped.append(Dropped(reason, domain.id, task.id, where, detail))

    def _over_budget(self, domain: Domain, opening: str) -> str | None:
        """Why the prompt of a row with this opening is over budget; None when it fits."""
        limit = self.budget.max_tokens
        if domain.id not in self._fixed:
            self._fixed[domain.id] = _Size.of(self.system(domain), self.tools(domain))
        fixed, more = self._fixed[domain.id], _Size.of(opening)
        size = fixed.bytes + more.bytes
        if size + TEMPLATE_TOKENS <= limit:
            return None
        words = fixed.words + more.words
        if words > limit:
            return f"{words} words, each at least a token, over the budget of {limit} tokens"
        if size > limit * MAX_TOKEN_BYTES:
            return f"{size} bytes, more than {MAX_TOKEN_BYTES} a token for {limit} tokens"
        if fixed.tokens is None:
            fixed.tokens = self.budget.tokens(self.system(domain))
            fixed.tokens += self.budget.tokens(self.tools(domain))
        n = fixed.tokens + self.budget.tokens(opening) + TEMPLATE_TOKENS
        if n <= limit:
            return None
        return f"{n} tokens with the template's {TEMPLATE_TOKENS}, over the budget of {limit}"


#: A run of letters: the pre-tokenizers of byte-level BPE tokenizers (GPT-2's, Qwen2's,
#: SmolLM2's) never put two in one token, so a text has at least as many tokens as runs.
_WORD = re.compile(r"[^\W\d_]+")


@dataclass
class _Size:
    """Bounds on a text's tokens: at most its UTF-8 bytes, at least its runs of letters."""

    bytes: int
    words: int
    tokens: int | None = None

    @classmethod
    def of(cls, *texts: str) -> _Size:
        n_bytes = sum(len(t.encode()) for t in texts)
        return cls(n_bytes, sum(1 for t in texts for _ in _WORD.finditer(t)))


def _texts(conv: list[dict[str, Any]]) -> Iterable[tuple[str, str]]:
    """The texts of a conversation's messages after its system prompt (checked once for the
    domain), each with where it is."""
    for i, m in enumerate(conv):
        if i == 0 and m["role"] == "system":
            continue
        yield f"message {i} ({m['role']}) content", m["content"]
        yield f"message {i} ({m['role']}) name", m["name"]
        for j, call in enumerate(m["tool_calls"]):
            yield f"message {i} tool call {j} name", call["function"]["name"]
            yield f"message {i} tool call {j} arguments", call["function"]["arguments"]


def _found(hit: re.Match[str]) -> str:
    return f"holds {hit.group()!r} at character {hit.start()}"


def build_sft(
    lake: Lake,
    domains: Mapping[str, Domain],
    task_set_id: str,
    *,
    split: str | None = "train",
    include_gold: bool = True,
    dataset_id: str | None = None,
    budget: PromptBudget | None = None,
) -> TrainingDataset:
    """Successful episodes plus gold-path conversations of the task set's tasks."""
    source = _read_source(lake, domains, task_set_id, split)
    build = _Build(source, budget)
    by_key = {(d.id, t.id): (d, t) for d, t in source.tasks}
    rows = []
    for e in source.episodes:
        if not e.passed:
            continue
        domain, task = by_key[e.key]
        if build.barred(domain):
            continue
        messages = e.conversation(domain, build.system(domain))
        if build.keep(domain, task, (e.label, messages)):
            meta = build.meta(domain, task, [e.row.episode_id])
            rows.append({"messages": messages, "source": "episode", **meta})
    if include_gold:
        for domain, task in source.tasks:
            if build.barred(domain):
                continue
            messages = gold_conversation(domain, task, build.system(domain))
            if build.keep(domain, task, ("gold path", messages)):
                rows.append(
                    {"messages": messages, "source": "gold", **build.meta(domain, task, [])}
                )
    return _finish("sft", task_set_id, rows, build, dataset_id)


def shared_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items two sequences share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def build_dpo(
    lake: Lake,
    domains: Mapping[str, Domain],
    task_set_id: str,
    *,
    split: str | None = "train",
    pairs_per_task: int = 4,
    dataset_id: str | None = None,
    budget: PromptBudget | None = None,
) -> TrainingDataset:
    """Chosen = a successful episode, rejected = a failed one of the same task."""
    source = _read_source(lake, domains, task_set_id, split)
    build = _Build(source, budget)
    by_task: dict[tuple[str, str], list[_Episode]] = {}
    for e in source.episodes:
        by_task.setdefault(e.key, []).append(e)
    rows = []
    for domain, task in source.tasks:
        mine = by_task.get((domain.id, task.id), [])
        good = [e for e in mine if e.passed]
        bad = [e for e in mine if not e.passed]
        for g, b in list(zip(good, bad, strict=False))[:pairs_per_task]:
            if build.barred(domain):
                continue
            chosen = g.conversation(domain, build.system(domain))
            rejected = b.conversation(domain, build.system(domain))
            if not build.keep(domain, task, (g.label, chosen), (b.label, rejected)):
                continue
            n = shared_prefix(chosen, rejected)
            # The completion must start with an assistant turn the two disagree on.
            while n > 0 and chosen[n - 1]["role"] == "assistant":
                n -= 1
            if n < 2 or n >= len(chosen) or n >= len(rejected):
                where = f"{g.label} and {b.label}"
                detail = f"they share {n} message(s) before an assistant turn they differ on"
                build.drop("no_diverging_turn", domain, task, where, detail)
                continue
            rows.append(
                {
                    "prompt": chosen[:n],
                    "chosen": chosen[n:],
                    "rejected": rejected[n:],
                    **build.meta(domain, task, [g.row.episode_id, b.row.episode_id]),
                }
            )
    return _finish("dpo", task_set_id, rows, build, dataset_id)


def build_grpo(
    lake: Lake,
    domains: Mapping[str, Domain],
    task_set_id: str,
    *,
    split: str | None = "train",
    dataset_id: str | None = None,
    budget: PromptBudget | None = None,
) -> TrainingDataset:
    """One prompt per task: the system prompt and the user's opening."""
    source = _read_source(lake, domains, task_set_id, split)
    build = _Build(source, budget)
    rows = []
    for domain, task in source.tasks:
        if build.barred(domain):
            continue
        prompt = conversation(domain, [opening(task)], build.system(domain))
        if build.keep(domain, task, ("opening", prompt)):
            rows.append({"prompt": prompt, **build.meta(domain, task, [])})
    return _finish("grpo", task_set_id, rows, build, dataset_id)


def _finish(
    method: Method,
    task_set_id: str,
    rows: list[dict[str, Any]],
    build: _Build,
    dataset_id: str | None,
) -> TrainingDataset:
    source = build.source
    for d in build.dropped:
        log.warning("%s dataset of task set %r: %s", method, task_set_id, d)
    if not rows:
        dropped = "".join(f"; {d}" for d in build.dropped[:5])
        more = len(build.dropped) - 5
        raise DatasetError(
            f"{method} dataset of task set {task_set_id!r}: no rows "
            f"({len(source.tasks)} task(s), {len(source.episodes)} scored episode(s))"
            f"{dropped}{f'; and {more} more reason(s)' if more > 0 else ''}"
        )
    stamp = "-".join(str(v["version"]) for v in source.versions)
    return TrainingDataset(
        dataset_id=dataset_id or f"{method}/{task_set_id}/v{stamp}",
        method=method,
        task_set_id=task_set_id,
        rows=rows,
        built_from=source.versions,
        dropped=build.dropped,
    )


BUILDERS = {"sft": build_sft, "dpo": build_dpo, "grpo": build_grpo}
