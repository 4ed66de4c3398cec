"""storage/: the only place that imports deltalake. Table schemas, idempotent writes, time
travel, lineage, query helpers; no business logic."""

from maestro.storage.lake import Lake, LakeSettings, StorageError, TableInfo, WriteMode, WriteResult
from maestro.storage.schemas import TABLES, TableDef
from maestro.storage.sql import QueryRefused

__all__ = [
    "TABLES",
    "Lake",
    "LakeSettings",
    "QueryRefused",
    "StorageError",
    "TableDef",
    "TableInfo",
    "WriteMode",
    "WriteResult",
]
