"""The lake's SQL gate: a query sees the lake's tables and nothing else.

polars SQL turns ``read_csv('/etc/passwd')``, ``read_parquet('s3://...')``, ``read_json`` and
``read_ipc`` in a FROM clause into scans of any file, glob or URL, and no setting turns that
off. It also reads a file's schema while it *plans* the query, so checking the finished plan
comes too late: a CSV's first line comes back inside a column-not-found error, and a URL is
fetched (measured with polars 2.1). So the check happens before polars sees the text:

1. the query is parsed with sqlparser-rs (through ``sqloxide``), the crate and the generic
   dialect polars itself parses with;
2. the tree is checked against an allowlist: one query statement (SELECT, UNION and the other
   set operations, VALUES, WITH); every relation a lake table or a name the query's own WITH
   defines, written as a plain name with no arguments, or a subquery, or a parenthesised join.
   Anything else is refused: other statements (COPY, ATTACH, CREATE, INSERT, SET, EXPLAIN,
   SHOW, ...), table functions of any name (``read_*``, ``generate_series``, ``unnest``),
   LATERAL functions, ``SELECT ... INTO``, pipe syntax, qualified names (``a.b``);
3. polars is handed the text *regenerated* from the tree, which is parsed and checked again:
   comments, unusual quoting and tokenizer corners of the original never reach polars, and what
   polars parses is exactly what was checked.

The query's size is bounded before and after parsing: a chain of 5,000 ``1+1+...`` terms is
only 10 KB but a tree 5,000 levels deep, which overflowed sqlparser's stack (a segfault, measured
at ~4,700 levels on an 8 MiB stack) and takes polars minutes to plan (cubic: 300 terms 0.4 s,
1,000 terms 5 s, 2,000 terms 52 s). So the tokens are counted before parsing
(:data:`MAX_QUERY_TOKENS`), the parse runs on a thread with a stack far larger than that many
tokens can nest, and a tree deeper than :data:`MAX_TREE_DEPTH` is refused. ``WITH RECURSIVE``
is refused: polars runs it with no end. What a query that passes may still cost (a cross join,
a huge ``rpad``) is bounded where it runs (``query_process.py``: a child process with a memory
limit and a deadline).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import sqloxide

#: Longer queries are refused before parsing (sqlparser also stops at 50 levels of nesting).
MAX_QUERY_CHARS = 100_000
#: More tokens are refused before parsing: a chain of binary operators nests one level per two
#: tokens, and sqlparser's nesting limit does not count those levels.
MAX_QUERY_TOKENS = 20_000
#: Deepest parsed tree (dicts and lists) polars is given: a 20-deep nest of subqueries is about
#: 150, a chain of 195 ``+`` terms 400 (polars plans that in 0.2 s).
MAX_TREE_DEPTH = 400
#: The parser's thread stack: 20,000 tokens nest at most 10,000 levels, ~17 MiB of sqlparser's
#: stack at the ~1.7 KiB a level measured; the rest is margin. Untouched pages cost nothing.
PARSE_STACK_BYTES = 64 * 1024 * 1024

_TOKENS = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|\w+|[^\w\s]""", re.S)
_T = TypeVar("_T")

_RELATIONS = ("Table", "Derived", "NestedJoin")
#: Relation kinds sqlparser knows besides the allowed ones; listed only to name them in errors
#: and to refuse them wherever they appear. The allowlist above is what decides.
_OTHER_RELATIONS = frozenset(
    {
        "TableFunction",
        "Function",
        "UNNEST",
        "JsonTable",
        "OpenJsonTable",
        "XmlTable",
        "Pivot",
        "Unpivot",
        "MatchRecognize",
        "SemanticView",
    }
)
#: Query and SELECT clauses that are refused when present (empty is ``None`` or ``[]``).
_QUERY_REFUSED = ("locks", "for_clause", "settings", "format_clause", "pipe_operators")
_SELECT_REFUSED = ("into", "lateral_views")


class QueryRefused(ValueError):
    """The SQL is not a query over the lake's tables alone; the message says what and where."""


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed the gate: the text polars runs, and the lake tables it names
    (lower case; a name the query's own WITH also defines included)."""

    text: str
    tables: frozenset[str]


def allowed_sql(sql: str, tables: Collection[str]) -> str:
    """The query as polars should run it, or :class:`QueryRefused` naming what is not allowed."""
    return checked_query(sql, tables).text


def checked_query(sql: str, tables: Collection[str]) -> CheckedQuery:
    """The query as polars should run it and the tables it reads, or :class:`QueryRefused`
    naming what is not allowed."""
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryRefused(f"the query is {len(sql)} characters; at most {MAX_QUERY_CHARS}")
    tokens = sum(1 for _ in _TOKENS.finditer(sql))
    if tokens > MAX_QUERY_TOKENS:
        raise QueryRefused(f"the query has {tokens:,} tokens; at most {MAX_QUERY_TOKENS:,}")
    return _on_big_stack(lambda: _allowed(sql, tables))


def _allowed(sql: str, tables: Collection[str]) -> CheckedQuery:
    statement = _parse_one(sql)
    _check(statement, tables)
    canonical = _restore(statement)
    # The regenerated text is what polars gets, so it is what must pass.
    return CheckedQuery(canonical, _check(_parse_one(canonical), tables))


_stack_lock = threading.Lock()


def _on_big_stack(work: Callable[[], _T]) -> _T:
    """``work()`` on a fresh thread with a :data:`PARSE_STACK_BYTES` stack (whatever thread
    calls: a worker thread's stack may be far smaller than the main thread's 8 MiB)."""
    outcome: list[_T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)

    with _stack_lock:  # the stack size is a process-wide setting for new threads
        previous = threading.stack_size(PARSE_STACK_BYTES)
        try:
            thread = threading.Thread(target=run, name="maestro-sql-parse", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


def _parse_one(sql: str) -> dict[str, Any]:
    try:
        statements = sqloxide.parse_sql(sql=sql, dialect="generic")
    except Exception as exc:  # sqloxide raises a bare ValueError subclass per failure kind
        reason = str(exc).replace("Query parsing failed.", "").strip()
        raise QueryRefused(f"the query does not parse: {reason}") from None
    if len(statements) != 1:
        raise QueryRefused(f"give one query; this is {len(statements)} statements")
    (statement,) = statements
    kind = next(iter(statement)) if isinstance(statement, dict) and statement else "?"
    if kind != "Query":
        raise QueryRefused(
            f"only queries (SELECT ...) run here; {_statement_name(kind)} is not allowed"
        )
    depth = _depth(statement)
    if depth > MAX_TREE_DEPTH:
        raise QueryRefused(
            f"the query nests {depth} levels deep (a long chain of operators, or deep "
            f"subqueries); at most {MAX_TREE_DEPTH}"
        )
    return statement


def _depth(tree: Any) -> int:
    """How deep dicts and lists nest in the parsed tree (without recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _restore(statement: dict[str, Any]) -> str:
    try:
        (text,) = sqloxide.restore_ast(ast=[statement])
    except Exception as exc:
        raise QueryRefused(f"the query cannot be normalised: {exc}") from None
    return str(text)


def _statement_name(kind: str) -> str:
    return "".join(f" {c}" if c.isupper() else c for c in kind).strip().upper() or kind


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every dict in the tree, without recursion (a deep tree must not overflow the stack)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)


def _check(statement: dict[str, Any], tables: Collection[str]) -> frozenset[str]:
    """Refuse what the allowlist does not allow; the lake tables the query names."""
    names = {t.lower() for t in tables}
    used: set[str] = set()
    ctes = {
        str(cte["alias"]["name"]["value"]).lower()
        for node in _nodes(statement)
        for cte in node.get("cte_tables") or []
        if isinstance(cte, dict)
    }
    for node in _nodes(statement):
        if "relation" in node:
            _check_relation(node["relation"], names, ctes)
        for key in _OTHER_RELATIONS & node.keys():
            if key != "Function" or "lateral" in (node[key] or {}):
                _refuse_relation(key, node[key])
        table = node.get("Table")
        if isinstance(table, dict):
            if "args" not in table:  # ``TABLE name``, or a shape this gate does not know
                raise QueryRefused(f"{_at(table)}TABLE ... is not allowed; use SELECT")
            used.add(_check_table(table, names, ctes))
        if "pipe_operators" in node:
            _refuse_clauses(node, _QUERY_REFUSED)
        if "projection" in node:
            _refuse_clauses(node, _SELECT_REFUSED)
        if node.get("recursive") is True and "cte_tables" in node:
            # polars runs a recursive CTE with no end, its memory growing all the while.
            raise QueryRefused(f"{_at(node.get('with_token'))}WITH RECURSIVE is not allowed")
    return frozenset(used & names)


def _refuse_clauses(node: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        if node.get(key) not in (None, [], False):
            clause = {"into": "SELECT ... INTO", "lateral_views": "LATERAL VIEW"}.get(key, key)
            raise QueryRefused(f"{clause.replace('_', ' ').upper()} is not allowed")


def _check_relation(relation: Any, names: set[str], ctes: set[str]) -> None:
    kind = next(iter(relation)) if isinstance(relation, dict) and len(relation) == 1 else None
    if kind not in _RELATIONS:
        _refuse_relation(str(kind), relation.get(kind) if isinstance(relation, dict) else None)


def _check_table(table: dict[str, Any], names: set[str], ctes: set[str]) -> str:
    parts = table.get("name") or []
    idents = [p.get("Identifier") for p in parts if isinstance(p, dict)]
    if len(parts) != 1 or not all(isinstance(i, dict) for i in idents):
        shown = ".".join(str(i.get("value")) for i in idents if isinstance(i, dict))
        raise QueryRefused(
            f"{_at(table)}{shown or 'this relation'}: name a lake table without a schema prefix"
        )
    ident = idents[0]
    assert isinstance(ident, dict)
    name = str(ident.get("value"))
    if table.get("args") is not None:
        raise QueryRefused(
            f"{_at(ident)}{name}(...) is a table function; the SQL here reads the lake's tables "
            "and nothing else, no file, URL or function (maestro tables lists them)"
        )
    if name.lower() not in names | ctes:
        raise QueryRefused(
            f"{_at(ident)}no table {name!r}; the lake's tables are {', '.join(sorted(names))}"
        )
    extras = {
        "version": table.get("version"),
        "with_hints": table.get("with_hints"),
        "partitions": table.get("partitions"),
        "json_path": table.get("json_path"),
        "index_hints": table.get("index_hints"),
    }
    used = [k for k, v in extras.items() if v not in (None, [], False)]
    if used:
        raise QueryRefused(f"{_at(ident)}{name}: {', '.join(used)} on a table is not allowed")
    return name.lower()


def _refuse_relation(kind: str, body: Any) -> None:
    shown = {
        "UNNEST": "UNNEST(...)",
        "Function": "a LATERAL function",
        "TableFunction": "TABLE(...)",
    }.get(kind, kind)
    name = body.get("name") if isinstance(body, dict) else None
    if isinstance(name, list) and name and isinstance(name[0], dict):
        ident = name[0].get("Identifier") or {}
        shown = f"{ident.get('value')}(...)"
    raise QueryRefused(
        f"{_at(body)}{shown} is not a lake table; the SQL here sees only the lake's tables, "
        "subqueries and joins of them"
    )


def _at(node: Any) -> str:
    """``line L, column C: `` for a node that carries its span, else nothing."""
    span = node.get("span") if isinstance(node, dict) else None
    if not isinstance(span, dict):
        for child in _nodes(node):
            if isinstance(child.get("span"), dict):
                span = child["span"]
                break
    start = span.get("start") if isinstance(span, dict) else None
    if not isinstance(start, dict) or not start.get("line"):
        return ""
    return f"line {start['line']}, column {start['column']}: "
