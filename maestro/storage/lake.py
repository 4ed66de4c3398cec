"""The lake: versioned Delta tables under one root, a local folder or ``s3://``.

The only module that imports ``deltalake``. Writes take typed rows (``rows.py``) and are
idempotent (merge on each table's keys, or insert only what is new); commit conflicts become a
bounded retry and then one :class:`StorageError`. Reads return typed rows (``rows``) or polars
LazyFrames (``read``), at the latest version or any earlier one.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import polars as pl
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Schema, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from maestro.settings import RunSettings
from maestro.storage.errors import StorageError
from maestro.storage.query_process import QueryFailed, QueryLimits, TableSource, run_query
from maestro.storage.rows import STAMP, Row
from maestro.storage.schemas import TABLES, TableDef
from maestro.storage.sql import checked_query
from maestro.storage.where import check_columns, expression, sql_predicate

WriteMode = Literal["merge", "insert"]
R = TypeVar("R", bound=Row)


class LakeSettings(BaseSettings):
    """``MAESTRO_LAKE_ROOT`` (a folder, or ``s3://bucket/prefix``; default ``lake`` in the run
    folder, ``MAESTRO_RUN_DIR``) and the object store's access."""

    model_config = SettingsConfigDict(env_prefix="MAESTRO_LAKE_", extra="ignore")

    root: str = Field(default_factory=lambda: str(RunSettings().lake))
    s3_endpoint_url: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: SecretStr | None = None
    s3_region: str = "us-east-1"
    s3_allow_http: bool = False
    #: Attempts of a write whose commit conflicts with another writer's.
    commit_attempts: int = 20
    #: Fault injection for the resumption tests: SIGKILL this process right after this Lake's
    #: Nth commit (``MAESTRO_LAKE_KILL_AFTER_COMMIT``). Never set in production.
    kill_after_commit: int | None = Field(None, ge=1)
    #: What one ``query`` may cost: wall seconds, and MiB of data memory of its process.
    query_timeout_s: float = Field(default=20.0, gt=0, le=7 * 24 * 3600, allow_inf_nan=False)
    query_memory_mb: int = Field(default=1024, ge=64, le=1024 * 1024)
    #: MiB of result one ``query`` may send back (its Arrow IPC stream): what this process holds.
    query_result_mb: int = Field(default=64, ge=1, le=64 * 1024)


@dataclass(frozen=True)
class WriteResult:
    table: str
    version: int
    rows: int
    inserted: int
    updated: int
    attempts: int


@dataclass(frozen=True)
class TableInfo:
    name: str
    version: int | None
    rows: int
    files: int
    description: str


class Lake:
    """Every maestro table under one root."""

    def __init__(self, settings: LakeSettings | None = None) -> None:
        self.settings = settings or LakeSettings()
        root = self.settings.root.rstrip("/")
        self.remote = "://" in root
        self.root = root if self.remote else str(Path(root).resolve())
        if not self.remote and os.path.exists(self.root) and not os.path.isdir(self.root):
            # Every table would read as missing: an empty lake, silently.
            raise StorageError(f"the lake root {self.root} is not a folder (MAESTRO_LAKE_ROOT)")
        self.storage_options = self._storage_options()
        #: Commits this Lake made (creates, appends, merges, deletes, added columns).
        self.commits = 0

    def _committed(self, table: str, operation: str) -> None:
        """Count a commit; the fault-injection hook kills the process at the Nth."""
        self.commits += 1
        if self.settings.kill_after_commit == self.commits:
            print(
                f"fault injection: SIGKILL after commit {self.commits} ({table} {operation})",
                file=sys.stderr,
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGKILL)

    def _storage_options(self) -> dict[str, str] | None:
        if not self.remote:
            return None
        s = self.settings
        opts = {
            "AWS_REGION": s.s3_region,
            "AWS_S3_ALLOW_UNSAFE_RENAME": "false",
            "conditional_put": "etag",
        }
        if s.s3_endpoint_url:
            opts["AWS_ENDPOINT_URL"] = s.s3_endpoint_url
        if s.s3_access_key_id:
            opts["AWS_ACCESS_KEY_ID"] = s.s3_access_key_id
        if s.s3_secret_access_key is not None:
            opts["AWS_SECRET_ACCESS_KEY"] = s.s3_secret_access_key.get_secret_value()
        if s.s3_allow_http:
            opts["AWS_ALLOW_HTTP"] = "true"
        return opts

    # ----- tables ------------------------------------------------------------------------------

    @staticmethod
    def definition(table: str) -> TableDef:
        try:
            return TABLES[table]
        except KeyError:
            raise StorageError(f"unknown table {table!r}; tables are {', '.join(TABLES)}") from None

    def uri(self, table: str) -> str:
        self.definition(table)
        return f"{self.root}/{table}"

    def _open(self, table: str, version: int | None = None) -> DeltaTable | None:
        try:
            return DeltaTable(
                self.uri(table), version=version, storage_options=self.storage_options
            )
        except TableNotFoundError:
            return None

    def version(self, table: str) -> int | None:
        """The table's latest version; None when it has never been written."""
        dt = self._open(table)
        return None if dt is None else dt.version()

    def versions(self, tables: Iterable[str]) -> list[dict[str, Any]]:
        """``[{"table", "version"}]``: what a task set or dataset records as built from."""
        return [{"table": t, "version": self.version(t)} for t in tables]

    # ----- writes ------------------------------------------------------------------------------

    def to_arrow(
        self, table: str, rows: Sequence[Row | Mapping[str, Any]], run_id: str
    ) -> pa.Table:
        """Rows (typed, or mappings of column to value) as an Arrow table of the declared schema,
        stamped with the run id and the time; duplicates of a key keep the last row. Names the
        table, the row and the columns when the rows do not fit."""
        tdef = self.definition(table)
        if not run_id:
            raise StorageError("every write needs a run id")
        plain = [self._plain(tdef, i, r) for i, r in enumerate(rows)]
        columns: set[str] = set()
        for row in plain:
            columns.update(row)
        extra = columns - set(tdef.schema.names)
        if extra:
            raise StorageError(
                f"{table}: unknown column(s) {sorted(extra)}; the table's columns are {tdef.schema.names}"
            )
        stamped = {"run_id", "written_at"}
        body = pa.schema([f for f in tdef.schema if f.name not in stamped])
        try:
            data = pa.Table.from_pylist(plain, schema=body)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise StorageError(f"{table}: rows do not fit the schema: {exc}") from None
        n = data.num_rows
        data = data.append_column(tdef.schema.field("run_id"), pa.array([run_id] * n, pa.string()))
        now = datetime.now(UTC)
        data = data.append_column(
            tdef.schema.field("written_at"),
            pa.array([now] * n, tdef.schema.field("written_at").type),
        )
        keys = pl.from_arrow(data.select(list(tdef.keys)))
        assert isinstance(keys, pl.DataFrame)
        nulls = keys.select(pl.any_horizontal(pl.all().is_null()).arg_true()).to_series()
        if nulls.len():
            raise StorageError(
                f"{table}: row {nulls[0]} has no value for key column(s) {list(tdef.keys)}"
            )
        data = data.select(tdef.schema.names).cast(tdef.schema)
        if keys.is_duplicated().any():
            last = keys.with_row_index("_i").unique(
                list(tdef.keys), keep="last", maintain_order=True
            )["_i"]
            data = data.take(pa.array(last.to_list()))
        return data

    @staticmethod
    def _plain(tdef: TableDef, i: int, row: Row | Mapping[str, Any]) -> Mapping[str, Any]:
        if not isinstance(row, Row):
            return row
        if not isinstance(row, tdef.row):
            raise StorageError(
                f"{tdef.name}: row {i} is a {type(row).__name__}, not a {tdef.row.__name__}"
            )
        return row.model_dump(exclude=set(STAMP))

    def write(
        self,
        table: str,
        rows: Sequence[Row | Mapping[str, Any]] | pa.Table,
        run_id: str,
        *,
        mode: WriteMode = "merge",
    ) -> WriteResult:
        """Write rows idempotently: ``merge`` updates rows whose keys exist and inserts the rest;
        ``insert`` only adds rows whose keys are new (what was stored is kept as it was).

        A commit that conflicts with another writer is retried, a bounded number of times.
        """
        tdef = self.definition(table)
        data = rows if isinstance(rows, pa.Table) else self.to_arrow(table, rows, run_id)
        if data.num_rows == 0:
            return WriteResult(table, self.version(table) or -1, 0, 0, 0, 0)
        props = CommitProperties(custom_metadata={"maestro.run_id": run_id, "maestro.table": table})
        predicate = " AND ".join(f"t.{k} = s.{k}" for k in tdef.keys)
        attempts = self.settings.commit_attempts
        last: Exception | None = None
        for attempt in range(1, attempts + 1):
            try:
                dt = self._open(table)
                if dt is None:
                    # Create the table empty, then write through the conflict-checked path. A
                    # create that carries the rows races: two writers creating at once both
                    # committed, one as version 0 and one as an append (duplicates, seen in a test).
                    DeltaTable.create(
                        self.uri(table),
                        schema=tdef.schema,
                        mode="ignore",
                        name=table,
                        description=tdef.description,
                        storage_options=self.storage_options,
                        commit_properties=props,
                    )
                    dt = self._open(table)
                    if dt is None:
                        continue
                    self._committed(table, "create")
                dt = self._add_new_columns(table, tdef, dt, props)
                if mode == "insert":
                    return self._append_new(table, tdef, dt, data, props, attempt)
                merger = dt.merge(
                    data, predicate, source_alias="s", target_alias="t", commit_properties=props
                )
                if mode == "merge":
                    merger = merger.when_matched_update_all()
                metrics = merger.when_not_matched_insert_all().execute()
                self._committed(table, "merge")
                return WriteResult(
                    table,
                    dt.version(),
                    data.num_rows,
                    int(metrics.get("num_target_rows_inserted", 0)),
                    int(metrics.get("num_target_rows_updated", 0)),
                    attempt,
                )
            except CommitFailedError as exc:
                last = exc
                time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))
            except DeltaError as exc:
                if "conflict" not in str(exc).lower() and "version" not in str(exc).lower():
                    raise StorageError(f"{table}: write failed: {exc}") from exc
                last = exc
                time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))
        raise StorageError(
            f"{table}: commit kept conflicting with other writers after {attempts} attempts: {last}"
        )

    def _add_new_columns(
        self, table: str, tdef: TableDef, dt: DeltaTable, props: CommitProperties
    ) -> DeltaTable:
        """Bring a table written by an older maestro up to its declared schema: columns added
        since are added (null in the rows already stored, which stay as they were)."""
        have = {f.name for f in dt.schema().fields}
        new = [f for f in Schema.from_arrow(tdef.schema).fields if f.name not in have]
        if not new:
            return dt
        dt.alter.add_columns(new, commit_properties=props)
        self._committed(table, "add columns")
        return self._open(table) or dt

    def _append_new(
        self,
        table: str,
        tdef: TableDef,
        dt: DeltaTable,
        data: pa.Table,
        props: CommitProperties,
        attempt: int,
    ) -> WriteResult:
        """Append the rows whose keys the table does not hold yet.

        Cheaper than a merge (only the key columns are read, no file is rewritten), and as
        idempotent for one writer per key: a resumed run skips what it already wrote. Writers
        racing on the same new key should use ``merge``.
        """
        keys = list(tdef.keys)
        incoming = pl.from_arrow(data.select(keys))
        assert isinstance(incoming, pl.DataFrame)
        scan = pl.scan_delta(dt, storage_options=self.storage_options).select(keys)
        if len(keys) == 1:
            # A filter on the key lets the scan skip files whose key range misses the batch.
            scan = scan.filter(pl.col(keys[0]).is_in(incoming[keys[0]].implode()))
        else:
            scan = scan.join(incoming.lazy(), on=keys, how="semi")
        seen = scan.select(pl.struct(keys).alias("key")).collect()
        if seen.height:
            fresh = incoming.select(~pl.struct(keys).is_in(seen["key"].implode()))
            data = data.filter(pa.array(fresh.to_series().to_list()))
        if data.num_rows:
            write_deltalake(
                dt,
                data,
                mode="append",
                storage_options=self.storage_options,
                commit_properties=props,
            )
            self._committed(table, "append")
        return WriteResult(table, dt.version(), incoming.height, data.num_rows, 0, attempt)

    # ----- reads -------------------------------------------------------------------------------

    def read(self, table: str, version: int | None = None) -> pl.LazyFrame:
        """The table as a polars LazyFrame, at its latest version or at ``version``."""
        tdef = self.definition(table)
        if self._open(table) is None:
            if version is not None:
                raise StorageError(
                    f"{table} has never been written, so it has no version {version}"
                )
            return pl.from_arrow(tdef.schema.empty_table()).lazy()  # type: ignore[union-attr]
        try:
            return pl.scan_delta(
                self.uri(table), version=version, storage_options=self.storage_options
            )
        except Exception as exc:
            raise StorageError(f"{table}: cannot read version {version}: {exc}") from None

    def _filtered(self, row: type[Row], at: int | None, where: Mapping[str, Any]) -> pl.LazyFrame:
        condition = expression(row, where)
        frame = self.read(row.TABLE, at)
        return frame if condition is None else frame.filter(condition)

    def rows(
        self,
        row: type[R],
        /,
        *,
        at: int | None = None,
        fields: Sequence[str] | None = None,
        **where: Any,
    ) -> list[R]:
        """The table's rows that meet ``where`` (column = value, ``OneOf``, ``NoneOf``), typed,
        at its latest version or version ``at``. ``fields`` reads only those columns (and the
        keys); the others are None."""
        frame = self._filtered(row, at, where)
        if fields is not None:
            names = list(dict.fromkeys([*row.KEYS, *fields]))
            check_columns(row, names)
            frame = frame.select(names)
        return [row.model_validate(r) for r in frame.collect().to_dicts()]

    def values(
        self, row: type[Row], column: str, /, *, at: int | None = None, **where: Any
    ) -> list[Any]:
        """One column of the rows that meet ``where``."""
        check_columns(row, [column])
        return self._filtered(row, at, where).select(column).collect().to_series().to_list()

    def delete(self, row: type[Row], run_id: str, /, **where: Any) -> int:
        """Delete the rows that meet ``where`` (at least one condition) in a commit stamped with
        ``run_id``; how many went. A table without such rows is left without a commit."""
        if not self.values(row, row.KEYS[0], **where):
            return 0
        predicate = sql_predicate(row, where)
        props = CommitProperties(
            custom_metadata={"maestro.run_id": run_id, "maestro.table": row.TABLE}
        )
        last: Exception | None = None
        for attempt in range(1, self.settings.commit_attempts + 1):
            dt = self._open(row.TABLE)
            assert dt is not None  # it holds the rows found above
            try:
                metrics = dt.delete(predicate, commit_properties=props)
            except DeltaError as exc:
                conflict = isinstance(exc, CommitFailedError) or "conflict" in str(exc).lower()
                if not conflict:
                    raise StorageError(f"{row.TABLE}: delete failed: {exc}") from exc
                last = exc
                time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))
                continue
            self._committed(row.TABLE, "delete")
            return int(metrics.get("num_deleted_rows", 0))
        raise StorageError(f"{row.TABLE}: delete kept conflicting with other writers: {last}")

    def history(self, table: str) -> list[dict[str, Any]]:
        """The table's commits, newest first: version, time, operation, run id."""
        dt = self._open(table)
        if dt is None:
            return []
        out = []
        for h in dt.history():
            meta = {k: v for k, v in h.items() if k.startswith("maestro.")}
            out.append(
                {
                    "version": h.get("version"),
                    "timestamp": h.get("timestamp"),
                    "operation": h.get("operation"),
                    "run_id": meta.get("maestro.run_id"),
                }
            )
        return out

    def tables(self) -> list[TableInfo]:
        """Every table with its latest version, rows and files."""
        out = []
        for name, tdef in TABLES.items():
            dt = self._open(name)
            if dt is None:
                out.append(TableInfo(name, None, 0, 0, tdef.description))
                continue
            files = dt.file_uris()
            rows = dt.count()
            out.append(TableInfo(name, dt.version(), rows, len(files), tdef.description))
        return out

    def compact(self, table: str, *, vacuum_retention_hours: float | None = None) -> dict[str, Any]:
        """Rewrite small files into large ones (a new version; older versions stay readable).

        With ``vacuum_retention_hours``, files that no version younger than that needs are
        deleted: time travel to older versions ends there.
        """
        dt = self._open(table)
        if dt is None:
            return {"table": table, "compacted": False, "files_removed": 0}
        metrics = dt.optimize.compact()
        removed: list[str] = []
        if vacuum_retention_hours is not None:
            dt = self._open(table)
            assert dt is not None
            removed = dt.vacuum(
                retention_hours=int(vacuum_retention_hours),
                enforce_retention_duration=False,
                dry_run=False,
            )
        return {
            "table": table,
            "compacted": True,
            "files_added": metrics.get("numFilesAdded", 0),
            "files_merged": metrics.get("numFilesRemoved", 0),
            "files_removed": len(removed),
        }

    def query(self, sql: str, limits: QueryLimits | None = None) -> pl.DataFrame:
        """Run one SQL query over the lake's tables (polars SQL) in a child process bounded by
        ``limits`` (default: the settings' ``query_timeout_s``, ``query_memory_mb`` and
        ``query_result_mb``).

        :class:`QueryRefused` when it reaches for anything else (a file, a URL, a table function:
        see ``storage/sql.py``); :class:`StorageError` when it fails, runs past its deadline or
        its memory (``storage/query_process.py``)."""
        checked = checked_query(sql, TABLES)
        sources = {name: self._query_source(name) for name in sorted(checked.tables)}
        limits = limits or QueryLimits(
            self.settings.query_timeout_s,
            self.settings.query_memory_mb,
            self.settings.query_result_mb,
        )
        try:
            return run_query(checked.text, sources, self.storage_options, limits)
        except QueryFailed as exc:
            raise StorageError(f"query failed: {exc}") from None

    def _query_source(self, table: str) -> TableSource:
        if self._open(table) is None:
            return TableSource(empty=pl.from_arrow(self.definition(table).schema.empty_table()))  # type: ignore[arg-type]
        return TableSource(uri=self.uri(table))
