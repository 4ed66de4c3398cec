"""``Lake.query`` sees the lake's tables and nothing else: each attack is also run on a bare
polars SQL context, to show it is real (it reads the secret there) and that the gate stops it."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from maestro.storage import TABLES, Lake, LakeSettings, QueryRefused
from maestro.storage.sql import MAX_QUERY_CHARS, allowed_sql

SECRET = "s3cr3t-marker"

#: (name, SQL with {csv}, {parquet}, {json}, {glob}, {ipc} standing for files outside the lake)
#: Each one, run by polars without the gate, reads the secret (checked below).
LEAKS = [
    ("read_csv", "select * from read_csv('{csv}')"),
    ("upper case", "SELECT * FROM READ_CSV('{csv}')"),
    ("mixed case", "select * from ReAd_PaRqUeT('{parquet}')"),
    ("glob", "select * from read_parquet('{glob}')"),
    ("read_json", "select * from read_json('{json}')"),
    ("read_ipc", "select * from read_ipc('{ipc}')"),
    ("quoted function name", "select * from \"read_csv\"('{csv}')"),
    ("block comment", "select * from read_csv /* a lake table */ ('{csv}')"),
    ("line comment", "select * from read_csv -- x\n ('{csv}')"),
    ("CTE", "with c as (select * from read_csv('{csv}')) select * from c"),
    ("CTE named like it", "with read_csv as (select 1 as a) select * from read_csv('{csv}')"),
    # An oracle: the guess comes back only when the file holds it.
    (
        "IN subquery",
        "select '{secret}' as guess from scores where '{secret}' in (select a from read_csv('{csv}'))",
    ),
    ("scalar subquery", "select (select min(a) from read_csv('{csv}')) as a from scores"),
    ("nested derived", "select * from (select * from (select * from read_parquet('{parquet}')))"),
    ("join", "select * from scores join read_csv('{csv}') on true"),
    ("parenthesised join", "select * from (scores join read_csv('{csv}') on true)"),
    ("union", "select episode_id from scores union all select a from read_csv('{csv}')"),
    ("comma join", "select * from scores, read_csv('{csv}')"),
]

#: Refused as well, though polars 2.1 would not run them or would not read a file with them.
OTHERS = [
    ("lateral", "select * from scores, lateral read_csv('{csv}')"),
    ("TABLE()", "select * from table(read_csv('{csv}'))"),
    ("two statements", "select 1; select * from read_csv('{csv}')"),
    ("create table as", "create table t as select * from read_csv('{csv}')"),
    ("copy", "copy scores to '{csv}.out'"),
    ("attach", "attach '{csv}' as other"),
    ("install httpfs", "install httpfs"),
    ("load httpfs", "load httpfs"),
    ("set", "set threads = 1"),
    ("explain", "explain select * from scores"),
    ("show tables", "show tables"),
    ("drop", "drop table scores"),
    ("select into", "select * into t from scores"),
    ("unnest", "select * from unnest([1, 2]) as t(x)"),
    ("generate_series", "select * from generate_series(1, 3)"),
    ("string path", "select * from '{csv}'"),
    ("quoted path", 'select * from "{csv}"'),
    ("schema prefix", "select * from main.scores"),
    ("url", "select * from read_csv('https://example.invalid/a.csv')"),
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    secret = pl.DataFrame({"a": [SECRET]})
    out = {
        "csv": tmp_path / "secret.csv",
        "parquet": tmp_path / "secret.parquet",
        "json": tmp_path / "secret.json",
        "ipc": tmp_path / "secret.arrow",
    }
    secret.write_csv(out["csv"])
    secret.write_parquet(out["parquet"])
    secret.write_ndjson(out["json"])
    secret.write_ipc(out["ipc"])
    paths = {k: str(v) for k, v in out.items()}
    return {**paths, "glob": str(tmp_path / "*.parquet"), "secret": SECRET}


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    lake.write("scores", [{"episode_id": "e1", "domain_id": "hotel", "reward": 1.0}], "run")
    return lake


@pytest.mark.parametrize("sql", [s for _, s in LEAKS], ids=[n for n, _ in LEAKS])
def test_a_query_that_reads_a_file_is_refused_and_polars_alone_would_have_read_it(
    lake: Lake, files: dict[str, str], sql: str
) -> None:
    query = sql.format(**files)
    bare = pl.SQLContext({name: lake.read(name) for name in TABLES})
    leaked = bare.execute(query, eager=False).collect()
    assert SECRET in str(leaked.to_dicts())  # the attack is real
    with pytest.raises(QueryRefused) as refused:
        lake.query(query)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("sql", [s for _, s in OTHERS], ids=[n for n, _ in OTHERS])
def test_statements_relations_and_names_outside_the_lake_are_refused(
    lake: Lake, files: dict[str, str], sql: str
) -> None:
    with pytest.raises(QueryRefused):
        lake.query(sql.format(**files))
    assert not Path(files["csv"] + ".out").exists()


def test_the_refusal_says_what_and_where(lake: Lake, files: dict[str, str]) -> None:
    with pytest.raises(QueryRefused, match=r"line 2, column 21: read_csv\(\.\.\.\) is a table"):
        lake.query("select 1 as x\nunion select * from read_csv('{csv}')".format(**files))
    with pytest.raises(QueryRefused, match="COPY is not allowed"):
        lake.query("COPY scores TO '/tmp/x.csv'")
    with pytest.raises(QueryRefused, match="no table 'nowhere'; the lake's tables are"):
        lake.query("select * from nowhere")


def test_polars_is_given_the_regenerated_text_not_the_original() -> None:
    assert allowed_sql("select /* hi */ a -- x\nfrom scores", TABLES) == "SELECT a FROM scores"


def test_oversized_and_unparsable_queries_are_refused_before_parsing_ends() -> None:
    with pytest.raises(QueryRefused, match="characters"):
        allowed_sql("select " + "1+" * MAX_QUERY_CHARS + "1", TABLES)
    with pytest.raises(QueryRefused, match="does not parse"):
        allowed_sql("select * from (" * 200 + "scores" + ")" * 200, TABLES)
    with pytest.raises(QueryRefused, match="does not parse"):
        allowed_sql("select 'unterminated", TABLES)


def test_ordinary_queries_still_run(lake: Lake) -> None:
    lake.write("episodes", [{"episode_id": "e1", "domain_id": "hotel", "task_id": "t"}], "run")
    assert lake.query(
        "with s as (select * from scores) select e.domain_id, avg(s.reward) as r "
        "from episodes e join s on e.episode_id = s.episode_id group by e.domain_id"
    ).to_dicts() == [{"domain_id": "hotel", "r": 1.0}]
    assert lake.query("select count(*) as n from SCORES").item() == 1
    assert lake.query("select * from (values (1, 2)) as t(a, b)").to_dicts() == [{"a": 1, "b": 2}]
    assert lake.query(
        "select episode_id from scores where episode_id in (select episode_id from episodes) "
        "union select 'x' order by 1"
    ).to_series().to_list() == ["e1", "x"]


def test_function_shaped_aliases_and_comments_only_ever_read_the_table(
    lake: Lake, files: dict[str, str]
) -> None:
    """Attacks that pass the gate because they are harmless: what polars runs reads scores."""
    for sql in (
        "select * from scores as read_csv('{csv}')",  # an alias with a column list
        "select * from scores -- ; select * from read_csv('{csv}')",  # a comment, dropped
        "select * from scores /* read_csv('{csv}') */",
    ):
        rows = lake.query(sql.format(**files)).to_dicts()
        assert [r["episode_id"] for r in rows] == ["e1"]
        assert SECRET not in str(rows)
