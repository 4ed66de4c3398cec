"""storage/: the only place that imports deltalake. Table schemas derived from one typed row
model per table, idempotent writes, typed reads, time travel, lineage, query helpers; no
business logic. The conversions between rows and maestro's objects are in
:mod:`maestro.storage.records`."""

from maestro.storage.errors import StorageError
from maestro.storage.lake import Lake, LakeSettings, TableInfo, WriteMode, WriteResult
from maestro.storage.query_process import QueryLimits
from maestro.storage.rows import ROW_MODELS, Row
from maestro.storage.schemas import TABLES, TableDef
from maestro.storage.sql import QueryRefused
from maestro.storage.where import NoneOf, OneOf

__all__ = [
    "ROW_MODELS",
    "TABLES",
    "Lake",
    "LakeSettings",
    "NoneOf",
    "OneOf",
    "QueryLimits",
    "QueryRefused",
    "Row",
    "StorageError",
    "TableDef",
    "TableInfo",
    "WriteMode",
    "WriteResult",
]
