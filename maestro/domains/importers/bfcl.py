"""Import a BFCL multi-turn category as maestro domain packages.

One package per combination of API classes the category uses (``bfcl_gorilla_twitter``):
its tables are the classes, its tools their functions, its database each class's default
state. Each test entry becomes a task of its package: the initial config as the task's
initial state, the questions as scripted user turns (a turn of a "missed function" entry
adds the held-out functions, with the message BFCL sends then), the ground truth as gold
actions placed in their turns, and BFCL's item id and version as provenance.

BFCL's own code (the classes' initial states, method signatures) runs in a sandboxed
"service" package (:class:`BfclService`); the host reads only BFCL's JSON files. Nothing here
names a category: whatever BFCL's data files hold for the category is what is imported.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.domains.errors import DomainLoadError
from maestro.domains.files import write_inside
from maestro.domains.importers.bfcl_package import (
    BENCHMARK,
    DISTRIBUTION,
    ApiClass,
    BfclDataError,
    bfcl_home,
    bfcl_version,
    func_docs,
    models_source,
    service_vetted,
    tools_source,
    write_service_package,
)
from maestro.domains.models import (
    Action,
    DomainManifest,
    EvaluationCriteria,
    ImportOrigin,
    InitialState,
    Provenance,
    RewardType,
    Task,
    TaskDescription,
    UserInstructions,
    UserScenario,
    UserTurn,
)
from maestro.domains.package import Domain
from maestro.domains.sandbox import SandboxLimits, load_sandboxed_domain
from maestro.domains.store import canonical_json

#: The service runs BFCL's executor and checker on whole entries (long-context ones too).
SERVICE_LIMITS = SandboxLimits(call_timeout_s=60.0, cpu_s=60.0, memory_mb=2048)
ID_LIMIT = 40


def long_context(category: str) -> bool:
    """BFCL's own rule (multi_turn_checker.py): these categories load long-context states."""
    return "long_context" in category or "composite" in category


# ----- BFCL's data files -----------------------------------------------------------------------


def _category_of(path: Path) -> str:
    """The category a data file holds: ``BFCL_v4_multi_turn_base.json`` -> ``multi_turn_base``."""
    return path.name.split("_", 2)[-1].removesuffix(".json")


def _one_file(folder: Path, category: str) -> Path:
    # The category is compared as a name, never put in a pattern: "**" or "multi_turn_bas?"
    # matched other categories' files.
    found = sorted(p for p in folder.glob("BFCL_*_*.json") if _category_of(p) == category)
    if len(found) != 1:
        known = sorted(_category_of(p) for p in folder.glob("BFCL_*_multi_turn*.json"))
        raise BfclDataError(
            f"{DISTRIBUTION} {bfcl_version()} has no category {category!r}"
            f" (multi-turn categories: {', '.join(known)})"
            if not found
            else f"{len(found)} data files match {category!r}: {[p.name for p in found]}"
        )
    return found[0]


def read_category(category: str) -> tuple[list[dict[str, Any]], dict[str, list[list[str]]]]:
    """A category's test entries and each entry's ground truth (call strings per turn)."""
    data = bfcl_home() / "data"
    entries = _lines(_one_file(data, category))
    answers = {
        a["id"]: a["ground_truth"] for a in _lines(_one_file(data / "possible_answer", category))
    }
    for e in entries:
        if "involved_classes" not in e or "initial_config" not in e:
            raise BfclDataError(
                f"{category}: entry {e.get('id')} has no involved_classes/initial_config:"
                " not a multi-turn category"
            )
        if e["id"] not in answers:
            raise BfclDataError(f"{category}: entry {e['id']} has no ground truth")
        if len(answers[e["id"]]) != len(e["question"]):
            raise BfclDataError(
                f"{category}: entry {e['id']}: ground truth and questions differ in turns"
            )
    return entries, answers


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground-truth call string (``mv(source='a', destination='b')``) as data; parsed, never
    evaluated."""
    node = ast.parse(text.strip(), mode="eval").body
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise BfclDataError(f"ground truth {text!r} is not a plain function call")
    if any(k.arg is None for k in node.keywords):
        raise BfclDataError(f"ground truth {text!r} unpacks arguments")
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}
    return node.func.id, args, kwargs


# ----- the service -----------------------------------------------------------------------------


class SkippedEntry(Exception):
    """An entry maestro cannot import as it is (the reason says why); the import goes on."""


class BfclService:
    """BFCL's code in a sandbox child, on request: one call per method, JSON back."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.session = domain.start_session()

    def ask(self, tool: str, **arguments: Any) -> Any:
        out = self.domain.toolkit.call(self.session, tool, arguments)
        if not out.ok:
            raise BfclDataError(f"BFCL's code failed ({tool}): {out.content}")
        return json.loads(out.content)


@contextmanager
def bfcl_service(modules: Sequence[str] = ()) -> Iterator[BfclService]:
    """A running service whose child has loaded the runtime and these API-class modules."""
    folder = Path(tempfile.mkdtemp(prefix="maestro-bfcl-service-"))
    try:
        write_service_package(folder, bfcl_version())
        with load_sandboxed_domain(
            folder, SERVICE_LIMITS, check_gold=False, vetted=service_vetted(modules)
        ) as domain:
            yield BfclService(domain)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ----- packages ----------------------------------------------------------------------------------


def domain_id(classes: Sequence[str]) -> str:
    """``bfcl_`` and each class's first word (``bfcl_gorilla_twitter``), cut to the id limit."""
    words = [re.findall(r"[A-Z]+[a-z]*|[a-z]+|\d+", c)[0].lower() for c in classes]
    if len(set(words)) < len(words):
        words = [re.sub(r"[^a-z0-9]", "", c.lower()) for c in classes]
    out = "bfcl_" + "_".join(words)
    if len(out) > ID_LIMIT:
        digest = hashlib.sha256(out.encode()).hexdigest()[:8]
        out = f"{out[: ID_LIMIT - 9]}_{digest}"
    return out


@dataclass
class _Catalog:
    """What the service said about BFCL's classes."""

    modules: dict[str, str]
    doc_files: dict[str, str]
    signatures: dict[str, dict[str, list[str]]]
    added_prompt: str
    instructions: dict[str, str]

    def api_class(self, name: str) -> ApiClass:
        if name not in self.modules or name not in self.doc_files:
            raise BfclDataError(f"BFCL has no multi-turn API class {name!r}")
        return ApiClass(name, self.modules[name], self.doc_files[name])


def _catalog() -> _Catalog:
    with bfcl_service() as service:
        info = service.ask("describe")
    return _Catalog(
        info["modules"],
        info["func_doc_files"],
        {},
        info["added_functions_prompt"],
        info["instructions"],
    )


@dataclass
class _Package:
    domain_id: str
    classes: list[ApiClass]
    root: Path
    base: dict[str, dict[str, Any]]  # table -> attribute -> encoded value (the default state)
    tasks: list[Task]


def _manifest(package: _Package, version: str) -> DomainManifest:
    names = " + ".join(c.name for c in package.classes)
    return DomainManifest(
        id=package.domain_id,
        name=f"BFCL multi-turn: {names}",
        version="1.0.0",
        description=(
            f"The Berkeley Function Calling Leaderboard's {names} API classes ({DISTRIBUTION}"
            f" {version}): their instances' attributes are the database, their methods the tools."
        ),
        provenance=Provenance(
            source="imported",
            authors=["BFCL (gorilla.cs.berkeley.edu)", "maestro BFCL importer"],
            imported_from=ImportOrigin(benchmark=BENCHMARK, package=DISTRIBUTION, version=version),
        ),
        system_prompt="policy",
    )


def _policy(prompts: dict[str, str]) -> str:
    return (
        "# BFCL multi-turn\n\n"
        "The user's messages are fixed, one per turn: they do not answer questions.\n\n"
        f"{prompts['task']}\n\n{prompts['behavior']}\n"
    )


def _records(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: {"name": name, "value": value} for name, value in values.items()}


def write_package(package: _Package, version: str, prompts: dict[str, str]) -> Path:
    """The package's files, each written through a handle on the folder above it, never by
    path (:func:`maestro.domains.files.write_inside`): a link planted as ``policy.md`` in
    the milliseconds of the writing got BFCL's text written outside the package, and is now
    refused (:class:`~maestro.domains.files.TargetError`) or replaced, never followed. The
    package folder itself is entered the same way, from the folder of the import."""
    root = package.root
    files = {
        "domain.json": _manifest(package, version).model_dump_json(indent=2, exclude_none=True),
        "models.py": models_source(package.classes),
        "tools.py": tools_source(package.classes, version),
        "db.json": json.dumps({t: _records(v) for t, v in package.base.items()}, indent=1),
        "policy.md": _policy(prompts),
        "tasks.jsonl": "".join(t.model_dump_json(exclude_none=True) + "\n" for t in package.tasks),
    }
    for name, text in files.items():
        write_inside(root.parent, root / name, text)
    return root


# ----- tasks -----------------------------------------------------------------------------------


@dataclass
class _Context:
    category: str
    version: str
    catalog: _Catalog
    docs: dict[str, dict[str, Any]]  # function -> BFCL's doc
    defaults: dict[str, dict[str, Any]]  # function -> parameter -> default (BFCL's docs)


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "float": (int, float),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "dict": (dict,),
    "object": (dict,),
}


def type_problem(name: str, arguments: dict[str, Any], doc: dict[str, Any]) -> str | None:
    """Why these arguments do not fit BFCL's own doc of the function (maestro's tools validate
    arguments against it; BFCL's executor does not), or None."""
    props = (doc.get("parameters") or {}).get("properties") or {}
    for arg, value in arguments.items():
        kinds = _JSON_TYPES.get(str(props.get(arg, {}).get("type")))
        if arg not in props:
            return f"{name} has no parameter {arg!r}"
        if value is None and str(props[arg].get("default")) == "None":
            continue
        if kinds and (
            not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool))
        ):
            return f"{arg}={value!r} is not {props[arg]['type']}, as BFCL's doc of {name} says"
    return None


def _gold(ctx: _Context, text: str, action_id: str, owner: dict[str, str]) -> Action:
    name, args, kwargs = parse_call(text)
    cls = owner.get(name)
    if cls is None:
        raise BfclDataError(f"ground truth {text!r} calls a function no involved class has")
    params = ctx.catalog.signatures[cls][name]
    if len(args) > len(params):
        raise BfclDataError(f"ground truth {text!r} has more arguments than {name} takes")
    named = {**dict(zip(params, args, strict=False)), **kwargs}
    problem = type_problem(name, named, ctx.docs[name])
    if problem:
        raise SkippedEntry(f"ground truth {text}: {problem}")
    defaults = ctx.defaults.get(name, {})
    compared = [k for k, v in named.items() if k not in defaults or defaults[k] != v]
    return Action(action_id=action_id, name=name, arguments=named, compare_args=compared)


def _turns(
    ctx: _Context, entry: dict[str, Any], ground_truth: list[list[str]], owner: dict[str, str]
) -> tuple[list[UserTurn], list[Action], list[str]]:
    missed: dict[str, list[str]] = entry.get("missed_function") or {}
    turns, actions = [], []
    for i, (messages, calls) in enumerate(zip(entry["question"], ground_truth, strict=True)):
        roles = {m.get("role") for m in messages}
        if roles - {"user"}:
            raise BfclDataError(f"entry {entry['id']} turn {i}: messages of roles {roles}")
        content = "\n".join(str(m["content"]) for m in messages)
        if not messages and str(i) in missed:
            content = ctx.catalog.added_prompt  # what BFCL's runner sends when functions arrive
        gold = [_gold(ctx, c, f"t{i}_c{j}", owner) for j, c in enumerate(calls)]
        actions += gold
        turns.append(
            UserTurn(
                content=content or "(no message)",
                add_tools=list(missed.get(str(i), [])),
                action_ids=[a.action_id for a in gold],
            )
        )
    hidden = [name for names in missed.values() for name in names]
    return turns, actions, hidden


def _changes(base: dict[str, Any], state: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """The records a task's initial state changes relative to the domain's database."""
    out: dict[str, dict[str, Any] | None] = {
        name: {"name": name, "value": value}
        for name, value in state.items()
        if name not in base or canonical_json(base[name]) != canonical_json(value)
    }
    out.update({name: None for name in base.keys() - state.keys()})
    return out


def build_task(
    ctx: _Context,
    entry: dict[str, Any],
    ground_truth: list[list[str]],
    package: _Package,
    state: dict[str, dict[str, Any]],
) -> Task:
    """One test entry as a task of its package."""
    owner = {n: c.name for c in package.classes for n in ctx.catalog.signatures[c.name]}
    turns, actions, hidden = _turns(ctx, entry, ground_truth, owner)
    basis = [RewardType.DB, RewardType.ACTION] if actions else [RewardType.DB]
    origin = ImportOrigin(
        benchmark=BENCHMARK,
        package=DISTRIBUTION,
        version=ctx.version,
        category=ctx.category,
        item_id=entry["id"],
    )
    init = {t: _changes(package.base[t], state[t]) for t in state}
    return Task(
        id=entry["id"],
        description=TaskDescription(
            purpose=f"BFCL {ctx.category} entry {entry['id']}",
            notes=f"BFCL path: {', '.join(entry.get('path') or [])}",
        ),
        user_scenario=UserScenario(
            instructions=UserInstructions(
                domain=package.domain_id,
                reason_for_call=turns[0].content,
                task_instructions=(
                    f"Scripted: the {len(turns)} user messages of BFCL {ctx.category}"
                    f" entry {entry['id']}, in order."
                ),
            )
        ),
        initial_state=InitialState(initialization_data={t: v for t, v in init.items() if v}),
        evaluation_criteria=EvaluationCriteria(actions=actions, reward_basis=basis),
        split="test",
        provenance=Provenance(source="imported", imported_from=origin),
        user_turns=turns,
        hidden_tools=hidden,
    )


# ----- the import ------------------------------------------------------------------------------


@dataclass
class ImportResult:
    category: str
    version: str
    packages: list[Path]
    tasks: int
    #: entry id -> why it was not imported
    skipped: dict[str, str]


def _docs(classes: Sequence[ApiClass]) -> dict[str, dict[str, Any]]:
    return {doc["name"]: doc for c in classes for doc in func_docs(c.doc_file)}


def _defaults(docs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, doc in docs.items():
        props = (doc.get("parameters") or {}).get("properties") or {}
        out[name] = {
            p: (None if s["default"] == "None" else s["default"])
            for p, s in props.items()
            if "default" in s
        }
    return out


def import_category(category: str, out: Path, *, limit: int | None = None) -> ImportResult:
    """Write one package per class combination of the category under ``out`` (replacing what
    an earlier import wrote there); ``limit`` imports only the first entries."""
    version = bfcl_version()
    entries, answers = read_category(category)
    entries = entries[:limit] if limit else entries
    catalog = _catalog()
    names = sorted({c for e in entries for c in e["involved_classes"]})
    classes = {n: catalog.api_class(n) for n in names}
    flag = long_context(category)
    packages: dict[tuple[str, ...], _Package] = {}
    with bfcl_service([c.module for c in classes.values()]) as service:
        info = service.ask("describe")
        catalog.signatures = info["signatures"]
        docs = _docs(list(classes.values()))
        ctx = _Context(category, version, catalog, docs, _defaults(docs))
        skipped: dict[str, str] = {}
        for entry in entries:
            combo = tuple(sorted(entry["involved_classes"]))
            if combo not in packages:
                did = domain_id(combo)
                base = {
                    c: service.ask("initial_state", class_ref=c, config={}, long_context=False)
                    for c in combo
                }
                packages[combo] = _Package(did, [classes[c] for c in combo], out / did, base, [])
            package = packages[combo]
            state = {
                c: service.ask(
                    "initial_state",
                    class_ref=c,
                    config=entry["initial_config"].get(c, {}),
                    long_context=flag,
                )
                for c in combo
            }
            try:
                task = build_task(ctx, entry, answers[entry["id"]], package, state)
            except SkippedEntry as exc:
                skipped[entry["id"]] = str(exc)
                continue
            package.tasks.append(task)
    for package in [p for p in packages.values() if p.tasks]:
        if package.root.exists():
            shutil.rmtree(package.root)
        write_package(package, version, catalog.instructions)
    written = [p for p in packages.values() if p.tasks]
    return ImportResult(
        category, version, [p.root for p in written], sum(len(p.tasks) for p in written), skipped
    )


def check_packages(paths: Sequence[Path]) -> list[DomainLoadError]:
    """Load each package the way every command does (gold replay included); the failures."""
    from maestro.domains.loader import load_domain

    failures = []
    for path in paths:
        try:
            load_domain(path).close()
        except DomainLoadError as exc:
            failures.append(exc)
    return failures
