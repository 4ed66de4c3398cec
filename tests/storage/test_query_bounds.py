"""What a query that passes the SQL gate may cost: bounded in size before parsing, in time and
memory where it runs (a child process), and every way it ends is a StorageError, never a
traceback, a crash or a hang of the caller (red-team findings 1-5)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from maestro.storage import TABLES, Lake, LakeSettings, QueryLimits, QueryRefused, StorageError
from maestro.storage.sql import MAX_QUERY_TOKENS, MAX_TREE_DEPTH, allowed_sql

CROSS_JOIN = "select count(*) as n from " + ", ".join(f"blueprints b{i}" for i in range(8))


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    rows = [
        {"blueprint_id": f"b{i}", "brief": "x" * 10, "industry": "hotel", "wall_s": 1.5}
        for i in range(20)
    ]
    lake.write("blueprints", rows, "run")
    return lake


def _chain(terms: int) -> str:
    return "select " + "+".join(["1"] * terms)


def test_a_long_operator_chain_is_refused_by_its_depth_without_overflowing_any_stack() -> None:
    # 5,000 terms overflowed sqlparser's 8 MiB stack (a segfault); here the parse runs on a
    # thread of its own, so even a caller on a 256 KiB thread gets the refusal, not a crash.
    refusals: list[str] = []

    def parse() -> None:
        for terms in (5_000, MAX_QUERY_TOKENS // 2):
            with pytest.raises(QueryRefused) as refused:
                allowed_sql(_chain(terms), TABLES)
            refusals.append(str(refused.value))

    previous = threading.stack_size(256 * 1024)
    try:
        small = threading.Thread(target=parse)
        small.start()
    finally:
        threading.stack_size(previous)
    small.join(timeout=120)
    assert len(refusals) == 2
    assert all(f"at most {MAX_TREE_DEPTH}" in r for r in refusals)
    with pytest.raises(QueryRefused, match=f"tokens; at most {MAX_QUERY_TOKENS:,}"):
        allowed_sql(_chain(MAX_QUERY_TOKENS), TABLES)
    assert allowed_sql(_chain(150), TABLES).startswith("SELECT 1 + 1")  # ordinary sizes pass


def test_with_recursive_is_refused_where_it_is_written() -> None:
    sql = (
        "select 1 as n union all "
        "(with recursive r(n) as (select 1 union all select n + 1 from r) select * from r)"
    )
    with pytest.raises(QueryRefused, match="line 1, column 26: WITH RECURSIVE is not allowed"):
        allowed_sql(sql, TABLES)


@pytest.mark.parametrize(
    "sql",
    [
        "select [1,2,3][-9223372036854775808] as x",
        "select cast(wall_s as decimal(38, 39)) as x from blueprints",
    ],
    ids=["list index", "decimal scale"],
)
def test_a_query_that_makes_polars_panic_is_a_storage_error(lake: Lake, sql: str) -> None:
    # polars raises PanicException, a BaseException that `except Exception` let through.
    with pytest.raises(StorageError, match="query failed: PanicException"):
        lake.query(sql)


def test_a_query_past_its_deadline_is_stopped_and_its_process_is_gone(lake: Lake) -> None:
    started = time.monotonic()
    with pytest.raises(StorageError, match="ran past its deadline of 1 s"):
        lake.query(CROSS_JOIN, QueryLimits(timeout_s=1.0))
    assert time.monotonic() - started < 15
    assert _query_children(os.getpid()) == []


def test_a_query_past_its_memory_is_stopped_and_the_caller_grows_nothing(lake: Lake) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(StorageError, match="it may use 600 MiB"):
        lake.query(
            "select length(rpad(brief, 50000000, 'x')) as n from blueprints",
            QueryLimits(timeout_s=60, memory_mb=600),
        )
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 64 * 1024


def test_a_result_over_its_cap_is_refused_with_its_size_and_the_caller_grows_nothing(
    lake: Lake,
) -> None:
    """The fourth red team's case 01: 150 MB of rows passed the memory limit of the query's
    process and the CLI peaked at 751 MB holding, decoding and printing them."""
    wide = "select rpad(blueprint_id, 1000000, 'y') as s from blueprints"  # 20 rows of 1 MB
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(StorageError, match=r"its result is 19\.\d MiB \(20 rows\), over the 4 MiB"):
        lake.query(wide, QueryLimits(timeout_s=60, result_mb=4))
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) < 16 * 1024
    assert lake.query(wide, QueryLimits(timeout_s=60, result_mb=32)).height == 20


def test_the_result_cap_is_a_setting_and_a_cli_option(tmp_path: Path) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake"), query_result_mb=1))
    lake.write("blueprints", [{"blueprint_id": "b", "brief": "x"}], "run")
    sql = "select rpad(brief, 2000000, 'y') as s from blueprints"
    with pytest.raises(StorageError, match="over the 1 MiB a query may return"):
        lake.query(sql)
    env = {**os.environ, "MAESTRO_LAKE_ROOT": str(tmp_path / "lake")}
    cli = [sys.executable, "-m", "maestro.cli.app", "query", sql, "--result-mb", "1"]
    done = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "over the 1 MiB a query may return" in done.stderr
    done = subprocess.run([*cli[:-1], "3"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_query_process_dies_with_its_caller(lake: Lake, tmp_path: Path) -> None:
    """The caller killed (SIGKILL, no cleanup of its own) takes its query process with it."""
    script = (
        "import sys\n"
        "from maestro.storage import Lake, LakeSettings, QueryLimits\n"
        "print('querying', flush=True)\n"
        f"Lake(LakeSettings(root=sys.argv[1])).query({CROSS_JOIN!r}, QueryLimits(timeout_s=600))\n"
    )
    caller = subprocess.Popen(
        [sys.executable, "-c", script, lake.root], stdout=subprocess.PIPE, text=True
    )
    try:
        assert caller.stdout is not None and caller.stdout.readline().strip() == "querying"
        deadline = time.monotonic() + 60
        while not _query_children(caller.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        children = _query_children(caller.pid)
        assert children, "the query process never started"
    finally:
        caller.kill()
        caller.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in children)


def test_a_lake_root_that_is_a_file_is_an_error_not_an_empty_lake(tmp_path: Path) -> None:
    file = tmp_path / "passwd"
    file.write_text("root:x:0:0\n")
    with pytest.raises(StorageError, match="is not a folder"):
        Lake(LakeSettings(root=str(file)))


def _query_children(parent: int) -> list[int]:
    """The live query processes ``parent`` started (other engineers' tests run queries too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"_query_child.py" in cmdline and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
