"""The data stage's program: the model writes a small generator that builds every record from
the records it references, and the host runs it in the sandbox, table by table.

The model writes, for each table in the order :func:`generation_order` gives (a table after the
tables it references), ``make_<table>(db, rng, n)`` returning up to ``n`` records (dicts without
the key: the host numbers the keys ``<prefix>1001``, ``<prefix>1002``... in the list's order),
and optionally ``finish_<table>(db, rng, record)`` returning the changes to one record once every
table exists (a seat count from the bookings made). ``db`` is the database so far (``get``,
``find``, ``scan``, ``count``, ``today``, ``now``), ``rng`` a seeded ``random.Random``; people and
places come from ``maestro.domains.worldgen`` (Faker, seeded from ``rng``, and real cities with
their own states, ZIP codes and area codes).

The program runs only in the sandbox child, with ``random.Random`` and ``worldgen`` as its only
imports beyond the SDK's: each table is one call with a deadline and bounds on what it may write.
A program that loops, writes outside its records, or answers millions of records ends in a
typed outcome that goes back to the model as the stage's error.
"""

from __future__ import annotations

import ast
import builtins
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.agents.codegen.answers import ParseError
from maestro.agents.codegen.blueprint import Blueprint, Entity
from maestro.agents.codegen.data import Database
from maestro.agents.codegen.render import manifest_json, models_source
from maestro.domains.errors import DomainLoadError
from maestro.domains.sandbox import SandboxLimits, load_sandboxed_domain

GENERATOR_IMPORTS = {
    "random": ("Random",),
    "maestro.domains.worldgen": (
        "birth_date",
        "email_for",
        "fake",
        "person",
        "phone",
        "place",
        "postcode",
        "road_miles",
        "street_address",
    ),
}
GENERATOR_HEADER = (
    "from datetime import date, datetime, timedelta\n"
    "from random import Random\n\n"
    "from maestro.domains.sdk import Database, ToolError, tool\n"
    "from maestro.domains.worldgen import (\n"
    "    birth_date, email_for, fake, person, phone, place, postcode, road_miles,\n"
    "    street_address,\n"
    ")\n"
)
#: Wall time and CPU one table's generation may take in the sandbox, and the whole program.
TABLE_TIMEOUT_S = 120.0
TOTAL_TIMEOUT_S = 600.0
#: Most records one table may hold (``records_per_table`` is at most this).
MAX_RECORDS = 10_000


class GeneratorError(ValueError):
    """A program that cannot run or whose records cannot be used; the message says which
    function and why, for the data stage's next attempt."""


def generation_order(bp: Blueprint) -> list[Entity]:
    """Tables after the tables their references need (a nullable reference may point
    forward: its records can be linked by a later ``finish_``)."""
    pending = list(bp.entities)
    done: list[Entity] = []
    while pending:
        ready = [
            e
            for e in pending
            if all(
                t.ref in {d.table for d in done} or t.ref == e.table or t.nullable
                for t in e.field_types().values()
                if t.ref
            )
        ]
        if not ready:  # a cycle of required references: keep the blueprint's order
            ready = [pending[0]]
        nxt = ready[0]
        done.append(nxt)
        pending.remove(nxt)
    return done


def normalise_generator(bp: Blueprint, code: str) -> str:
    """The model's program, checked: it parses, defines ``make_<table>(db, rng, n)`` for every
    table and ``finish_<table>(db, rng, record)`` only for tables, and imports nothing."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ParseError(f"syntax error at line {exc.lineno}: {exc.msg}") from None
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    problems = []
    tables = {e.table for e in bp.entities}
    for e in bp.entities:
        fn = functions.get(f"make_{e.table}")
        if fn is None:
            problems.append(f"the program defines no make_{e.table}(db, rng, n)")
        elif [a.arg for a in fn.args.args] != ["db", "rng", "n"]:
            problems.append(f"make_{e.table} must take (db, rng, n)")
    for name, fn in functions.items():
        if name.startswith("finish_"):
            if name[len("finish_") :] not in tables:
                problems.append(f"{name}: there is no table {name[len('finish_') :]!r}")
            elif [a.arg for a in fn.args.args] != ["db", "rng", "record"]:
                problems.append(f"{name} must take (db, rng, record)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            problems.append(
                f"line {node.lineno}: no imports; date, datetime, timedelta, Random and the "
                "worldgen functions are already imported"
            )
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            problems.append(f"{node.name}: no decorators")
        problems += _top_level_problems(node)
    if problems:
        raise ParseError("; ".join(problems))
    body = [n for n in tree.body if not isinstance(n, ast.Import | ast.ImportFrom)]
    return ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n"


def finished_tables(bp: Blueprint, program: str) -> list[str]:
    """The tables the program has a ``finish_`` function for."""
    tree = ast.parse(program)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return [e.table for e in bp.entities if f"finish_{e.table}" in names]


#: Names the host's part of the program uses: the program may not define them again.
_RESERVED = frozenset(
    {"_MAKERS", "_KEYS", "_FINISHERS", "_finisher", "generate_table", "finish_table", "tool",
     "Database", "ToolError", "Random", "date", "datetime", "timedelta",
     *GENERATOR_IMPORTS["maestro.domains.worldgen"]}
) | frozenset(dir(builtins))  # fmt: skip
#: What a top-level constant may be made of: literals, names, arithmetic, comprehensions.
_CONSTANT_NODES = (
    ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.Name, ast.Load, ast.Store,
    ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.keyword,
)  # fmt: skip


def _top_level_problems(node: ast.stmt) -> list[str]:
    """What the top level may hold: functions and constants, under names of their own (a
    program that defined ``len`` changed what the host's own count of its records meant)."""
    names: list[str] = []
    if isinstance(node, ast.FunctionDef):
        names = [node.name]
    elif isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if not isinstance(t, ast.Name):
                return [f"line {node.lineno}: a top-level assignment names one constant"]
            names.append(t.id)
        value = node.value
        if value is not None and not all(isinstance(n, _CONSTANT_NODES) for n in ast.walk(value)):
            return [
                f"line {node.lineno}: a top-level constant is a literal (a list, a dict, "
                "numbers, texts); compute inside the functions"
            ]
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return []  # a docstring or a comment-like string
    else:
        return [f"line {node.lineno}: only functions and constants at the top level"]
    return [
        f"line {node.lineno}: {name!r} is a name the host's part of the program uses"
        for name in names
        if name in _RESERVED
    ]


def _wrappers(bp: Blueprint, finished: list[str]) -> str:
    """The host's tools around the model's functions: one call makes one table, or finishes
    it."""
    makers = ", ".join(f"{e.table!r}: make_{e.table}" for e in bp.entities)
    keys = ", ".join(f"{e.table!r}: ({e.key!r}, {e.prefix!r})" for e in bp.entities)
    finishers = ", ".join(f"{t!r}: finish_{t}" for t in finished)
    return f'''

_MAKERS = {{{makers}}}
_KEYS = {{{keys}}}
_FINISHERS = {{{finishers}}}


def _finisher(table):
    return _FINISHERS.get(table)


@tool("write")
def generate_table(db: Database, table: str, n: int, seed: int) -> dict:
    """Make one table's records.

    Args:
        table: The table.
        n: How many records at most.
        seed: The seed.
    """
    key_field, prefix = _KEYS[table]
    made = _MAKERS[table](db, Random(seed), n)
    if made is None:
        made = []
    if not isinstance(made, list):
        raise ToolError(f"make_{{table}} returned {{made!r:.80}}, not a list of records")
    if len(made) > n:
        raise ToolError(f"make_{{table}} returned {{len(made)}} records, at most {{n}} were asked for")
    for i, record in enumerate(made):
        if not isinstance(record, dict):
            raise ToolError(f"make_{{table}}: record {{i}} is {{record!r:.80}}, not a dict")
        key = prefix + str(1001 + i)
        db.insert(table, {{**{{k: v for k, v in record.items() if k != key_field}}, key_field: key}})
    return {{"made": len(made)}}


@tool("write")
def finish_table(db: Database, table: str, seed: int) -> dict:
    """Apply one table's finishing changes.

    Args:
        table: The table.
        seed: The seed.
    """
    finish = _finisher(table)
    if finish is None:
        return {{"changed": 0}}
    rng = Random(seed)
    changed = 0
    key_field, _ = _KEYS[table]
    for record in db.scan(table):
        change = finish(db, rng, dict(record))
        if change:
            if not isinstance(change, dict):
                raise ToolError(f"finish_{{table}} returned {{change!r:.80}}, not a dict of changes")
            change = {{k: v for k, v in change.items() if k != key_field}}
            db.update(table, record[key_field], **change)
            changed += 1
    return {{"changed": changed}}
'''


def generator_source(bp: Blueprint, program: str) -> str:
    """tools.py of the generator package: the header, the model's program, the host's tools."""
    return GENERATOR_HEADER + "\n\n" + program + _wrappers(bp, finished_tables(bp, program))


def generation_limits(
    base: SandboxLimits | None, size: int, seconds: float = TABLE_TIMEOUT_S
) -> SandboxLimits:
    """The sandbox's bounds for one table: its records in one call, with a long deadline."""
    base = base or SandboxLimits()
    writes = max(1000, size + 10)
    return base.model_copy(
        update={
            "call_timeout_s": seconds,
            "cpu_s": seconds,
            "max_writes": writes,
            "max_write_bytes": max(base.max_write_bytes, writes * 4096),
            "max_write_nodes": max(base.max_write_nodes, writes * 200),
            "max_session_write_bytes": max(base.max_session_write_bytes, writes * 4096),
            "max_session_write_nodes": max(base.max_session_write_nodes, writes * 200),
            "max_reply_bytes": base.max_reply_bytes,
        }
    )


@dataclass(frozen=True)
class Sizes:
    """How many records each table is asked for."""

    main: int
    catalog: int

    def of(self, e: Entity) -> int:
        return self.catalog if e.catalog else self.main


def _write_package(root: Path, bp: Blueprint, tools: str, db: Database) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    files = {
        "domain.json": manifest_json(bp, domain_id="generator", synthesis_id="data", run_id=None),
        "models.py": models_source(bp),
        "db.json": json.dumps(db),
        "tools.py": tools,
        "policy.md": "# Data generator\n1. Not an environment.\n",
        "tasks.jsonl": "",
    }
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")


def _only_its_own(entity: Entity, step: str, n: int, before: Database, session: Any) -> None:
    """What one step may change, checked by the host on what it did: a make_ adds its table's
    records under the host's keys, at most ``n``; a finish_ changes its table's records and
    adds or removes none."""
    touched = session.touched()
    others = sorted({t for t, _ in touched} - {entity.table})
    if others:
        shown = ", ".join(f"{t}/{k}" for t, k in sorted(touched) if t != entity.table)
        raise GeneratorError(
            f"{step}_{entity.table} wrote to {others} ({shown[:200]}): a make_ function returns "
            "its own table's records, a finish_ function the changes to one of them"
        )
    keys = set(session.keys(entity.table))
    if step == "make":
        made = len(keys)
        expected = {f"{entity.prefix}{1001 + i}" for i in range(made)}
        if made > n or keys != expected:
            raise GeneratorError(
                f"make_{entity.table} made {made} record(s) under keys {sorted(keys - expected)[:5]} "
                f"(at most {n}, keyed {entity.prefix}1001 on by the host)"
            )
    elif keys != set(before.get(entity.table, {})):
        raise GeneratorError(
            f"finish_{entity.table} added or removed records: it only changes them"
        )


def run_generator(
    bp: Blueprint,
    program: str,
    sizes: Sizes,
    work_dir: Path,
    *,
    seed: int = 0,
    limits: SandboxLimits | None = None,
) -> Database:
    """Run the program in the sandbox, one table at a time in generation order, then each
    ``finish_``; the database it made. :class:`GeneratorError` names the function that failed
    and how (its ToolError, a refused operation, its deadline, what a record lacks)."""
    tools = generator_source(bp, program)
    db: Database = {e.table: {} for e in bp.entities}
    order = generation_order(bp)
    root = work_dir / "generator"
    finished = finished_tables(bp, program)
    steps: list[tuple[Entity, str]] = [(e, "make") for e in order]
    steps += [(e, "finish") for e in order if e.table in finished]
    started = time.monotonic()
    for index, (entity, step) in enumerate(steps):
        n = min(sizes.of(entity), MAX_RECORDS)
        left = TOTAL_TIMEOUT_S - (time.monotonic() - started)
        if left <= 1:
            raise GeneratorError(
                f"the program ran past {TOTAL_TIMEOUT_S:g} s in all, before {step}_{entity.table}"
            )
        _write_package(root, bp, tools, db)
        size = n if step == "make" else len(db[entity.table])
        try:
            with load_sandboxed_domain(
                root,
                generation_limits(limits, size, min(TABLE_TIMEOUT_S, left)),
                check_gold=False,
                vetted=GENERATOR_IMPORTS,
            ) as domain:
                session = domain.start_session()
                if step == "make":
                    args: dict[str, Any] = {
                        "table": entity.table,
                        "n": n,
                        "seed": seed * 7919 + index,
                    }
                    out = domain.toolkit.call(session, "generate_table", args)
                else:
                    args = {"table": entity.table, "seed": seed * 7919 + index}
                    out = domain.toolkit.call(session, "finish_table", args)
                if not out.ok:
                    raise GeneratorError(
                        f"{step}_{entity.table} failed ({out.status}): {out.content[:800]}"
                    )
                _only_its_own(entity, step, n, db, session)
                db = session.materialise()
        except DomainLoadError as exc:
            shown = "; ".join(str(p) for p in exc.problems[:8])
            raise GeneratorError(
                f"the program does not load in the sandbox ({step}_{entity.table}): {shown}"
            ) from None
    return db
