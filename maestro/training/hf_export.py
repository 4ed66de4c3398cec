"""A task set as a Hugging Face dataset on disk: what teams on other trainers load.

``export_hf`` builds the rows with the builders maestro trains on (:data:`BUILDERS`: SFT and
DPO rows are exactly the training rows; RL rows are GRPO's prompts with a task reference an
environment server resolves), one split per split the task set's tasks have, and writes

- ``dataset_dict.json`` and a folder per split: ``datasets.load_from_disk(OUT)``;
- ``data/<split>-NNNNN-of-NNNNN.parquet``: ``load_dataset("parquet", data_files=...)``, or
  ``load_dataset(OUT/"data")``;
- ``README.md``: the dataset card, its YAML header naming the splits' files (the Hub's layout),
  then the task set and lake versions it was built from, the domains with their provenance and
  licences, the row counts, and what the builders left out and why.

Every split's rows go into one Arrow table before it is cut into splits, so the splits share
one schema (a column that is empty in one split is not typed apart from the others).
"""

from __future__ import annotations

import importlib.metadata
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from maestro.domains import Domain
from maestro.domains.files import write_file
from maestro.storage import Lake
from maestro.storage.records import domain_row, task_refs
from maestro.storage.rows import TaskSetRow
from maestro.training.datasets import BUILDERS, DatasetError, TrainingDataset

Kind = Literal["sft", "dpo", "rl"]
KINDS: tuple[Kind, ...] = ("sft", "dpo", "rl")
#: The builder each kind's rows come from.
_METHOD = {"sft": "sft", "dpo": "dpo", "rl": "grpo"}
SPLITS = ("train", "dev", "test")
#: Rows per parquet shard.
SHARD_ROWS = 10_000


class ExportError(Exception):
    """The task set cannot be exported as asked."""


@dataclass
class HFExport:
    """What ``export_hf`` wrote."""

    out: Path
    kind: Kind
    task_set_id: str
    rows: dict[str, int]
    files: list[Path]
    #: Splits the task set has whose rows were all left out, with the builder's reason.
    empty: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "kind": self.kind,
            "task_set_id": self.task_set_id,
            "rows": self.rows,
            "empty_splits": self.empty,
            "dropped": self.dropped,
            "files": [str(p) for p in self.files],
        }


def task_set_domains(lake: Lake, task_set_id: str) -> list[str]:
    """The domain ids a task set names, in order; ExportError when it is not in the lake."""
    if lake.version(TaskSetRow.TABLE) is None:
        raise ExportError("the lake has no task_sets table yet: curate a task set first")
    sets = lake.rows(TaskSetRow, task_set_id=task_set_id)
    if not sets:
        raise ExportError(f"task set {task_set_id!r} is not in the task_sets table ({lake.root})")
    return list(dict.fromkeys(d for d, _ in task_refs(sets[0])))


def export_hf(
    lake: Lake,
    domains: Mapping[str, Domain],
    task_set_id: str,
    out: Path,
    kind: Kind,
    *,
    license_id: str = "other",
    shard_rows: int = SHARD_ROWS,
) -> HFExport:
    """Write the task set's ``kind`` rows under ``out`` (see the module's docstring).

    ``license_id`` is the card's licence for what maestro wrote (hand-built and synthesized
    domains); an imported domain's licence is its distribution's own, read from its metadata.
    """
    from datasets import Dataset, DatasetDict

    if kind not in KINDS:
        raise ExportError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    task_set_domains(lake, task_set_id)  # the task set is there, or one clear line
    method = _METHOD[kind]
    built: dict[str, TrainingDataset] = {}
    empty: dict[str, str] = {}
    for split in _splits_of(domains, lake, task_set_id):
        try:
            built[split] = BUILDERS[method](lake, domains, task_set_id, split=split)
        except DatasetError as exc:
            if "no rows" not in str(exc):
                raise ExportError(str(exc)) from None
            empty[split] = str(exc)
    if not built:
        reasons = "; ".join(f"{s}: {r}" for s, r in empty.items())
        raise ExportError(f"task set {task_set_id!r} has no {kind} rows in any split ({reasons})")
    if kind == "rl":
        hashes = {d: domain_row(domains[d]).content_hash for d in domains}
        for ds in built.values():
            for row in ds.rows:
                row["task_ref"] = _task_ref(task_set_id, domains[row["domain_id"]], row, hashes)
    import pyarrow as pa

    # One table for every split, so that they share one schema; then cut at the split bounds.
    names = list(built)
    table = pa.Table.from_pylist([r for s in names for r in built[s].rows])
    parts: dict[str, Any] = {}
    start = 0
    for s in names:
        n = len(built[s].rows)
        parts[s] = Dataset(table.slice(start, n), fingerprint=built[s].fingerprint())
        start += n
    out.mkdir(parents=True, exist_ok=True)
    _clear_previous(out)
    DatasetDict(parts).save_to_disk(str(out))
    files = [out / "dataset_dict.json"]
    for s in names:
        files += _shards(parts[s], out / "data", s, shard_rows)
    dropped: dict[str, int] = {}
    for ds in built.values():
        for reason, n in ds.drop_counts().items():
            dropped[reason] = dropped.get(reason, 0) + n
    result = HFExport(
        out=out,
        kind=kind,
        task_set_id=task_set_id,
        rows={s: len(built[s].rows) for s in names},
        files=files,
        empty=empty,
        dropped=dropped,
    )
    card = out / "README.md"
    write_file(card, dataset_card(result, built, domains, license_id))
    result.files.append(card)
    return result


def _clear_previous(out: Path) -> None:
    """Remove what an earlier export wrote here (its split folders and shards), so that a
    split it had and this one has not, or a shard of a larger earlier export, is not read back
    as this export's rows. Other files are left alone."""
    import shutil

    index = out / "dataset_dict.json"
    if index.is_file():
        try:
            old = json.loads(index.read_text(encoding="utf-8")).get("splits", [])
        except (ValueError, AttributeError):
            old = []
        for split in old:
            folder = out / str(split)
            if isinstance(split, str) and "/" not in split and folder.is_dir():
                shutil.rmtree(folder)
        index.unlink()
    data = out / "data"
    if data.is_dir():
        for split in SPLITS:
            for shard in data.glob(f"{split}-*-of-*.parquet"):
                shard.unlink()


def _splits_of(domains: Mapping[str, Domain], lake: Lake, task_set_id: str) -> list[str]:
    """The splits the task set's tasks are in, in the order train, dev, test."""
    (row,) = lake.rows(TaskSetRow, task_set_id=task_set_id)
    have = set()
    for d, t in task_refs(row):
        if d not in domains:
            raise ExportError(f"task set {task_set_id!r} names domain {d!r}, which is not loaded")
        try:
            have.add(domains[d].task(t).split)
        except KeyError:
            raise ExportError(
                f"task set {task_set_id!r} names task {t!r}, which domain {d!r} "
                f"(version {domains[d].manifest.version}) does not have"
            ) from None
    return [s for s in SPLITS if s in have]


def _task_ref(
    task_set_id: str, domain: Domain, row: Mapping[str, Any], hashes: Mapping[str, str | None]
) -> dict[str, Any]:
    """What an environment server needs to find the task again, and to tell a stale one: the
    domain's version and content hash as the rows were built."""
    return {
        "task_set_id": task_set_id,
        "domain_id": domain.id,
        "domain_version": domain.manifest.version,
        "domain_hash": hashes[domain.id],
        "task_id": row["task_id"],
    }


def _shards(ds: Any, folder: Path, split: str, shard_rows: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    n = max(1, math.ceil(len(ds) / shard_rows))
    paths = []
    for i in range(n):
        path = folder / f"{split}-{i:05d}-of-{n:05d}.parquet"
        ds.shard(num_shards=n, index=i, contiguous=True).to_parquet(str(path))
        paths.append(path)
    return paths


def domain_licence(domain: Domain, default: str) -> str:
    """An imported domain's distribution's licence (its metadata's License-Expression, License
    or licence classifier); ``default`` for what maestro wrote."""
    origin = domain.manifest.provenance.imported_from
    if origin is None:
        return default
    try:
        meta = importlib.metadata.metadata(origin.package)
    except importlib.metadata.PackageNotFoundError:
        return f"unknown ({origin.package} is not installed here)"
    for key in ("License-Expression", "License"):
        if text := next(iter(meta.get_all(key) or []), "").strip():
            return str(text).splitlines()[0]
    classifiers = [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return classifiers[0].rsplit(" :: ", 1)[-1] if classifiers else "unknown"


def dataset_card(
    result: HFExport,
    built: Mapping[str, TrainingDataset],
    domains: Mapping[str, Domain],
    license_id: str,
) -> str:
    """The README.md: the Hub's YAML header (licence, splits and their files), then where the
    rows came from."""
    any_ds = next(iter(built.values()))
    header = [
        "---",
        f"license: {json.dumps(license_id)}",
        "tags: [maestro, tool-calling, multi-turn, agents]",
        "configs:",
        "- config_name: default",
        "  data_files:",
    ]
    for s in built:
        header += [f"  - split: {s}", f"    path: data/{s}-*.parquet"]
    header.append("---")
    used = sorted({r["domain_id"] for ds in built.values() for r in ds.rows})
    lines = [
        *header,
        "",
        f"# {result.task_set_id} ({result.kind})",
        "",
        f"maestro's task set `{result.task_set_id}` as {_KIND_TEXT[result.kind]}.",
        "",
        "| split | rows |",
        "|---|---:|",
        *[f"| {s} | {n} |" for s, n in result.rows.items()],
        *[f"| {s} | 0 ({reason}) |" for s, reason in result.empty.items()],
        "",
        "## Built from",
        "",
        "The lake's tables at these versions (time travel reads them again):",
        "",
        "| table | version |",
        "|---|---:|",
        *[f"| {v['table']} | {v['version']} |" for v in any_ds.built_from],
        "",
        "## Domains",
        "",
        "| domain | name | version | source | provenance | licence | rows |",
        "|---|---|---|---|---|---|---:|",
    ]
    for d in used:
        m = domains[d].manifest
        origin = m.provenance.imported_from
        prov = (
            f"{origin.benchmark} from {origin.package} {origin.version}"
            if origin
            else m.provenance.run_id or "-"
        )
        n = sum(1 for ds in built.values() for r in ds.rows if r["domain_id"] == d)
        licence = domain_licence(domains[d], license_id)
        lines.append(
            f"| {d} | {m.name} | {m.version} | {m.provenance.source} | {prov} | {licence} | {n} |"
        )
    lines += ["", "## Left out", ""]
    if result.dropped:
        lines += [f"- {reason}: {n} row(s)" for reason, n in sorted(result.dropped.items())]
    else:
        lines.append("Nothing: every row the builders made is here.")
    lines += ["", "## Columns", "", _COLUMNS[result.kind], ""]
    return "\n".join(lines)


_KIND_TEXT = {
    "sft": "supervised fine-tuning conversations (TRL's conversational format)",
    "dpo": "preference pairs (TRL's conversational format)",
    "rl": "RL prompts, each with a reference to the task an environment server plays",
}
_COLUMNS = {
    "sft": (
        "`messages` (system prompt, user, assistant turns with `tool_calls`, tool results), "
        "`tools` (the domain's tool schemas, JSON text), `source` (a successful episode or "
        "the task's gold path), `domain_id`, `task_id`, `episode_ids`, `table_versions`."
    ),
    "dpo": (
        "`prompt` (the shared prefix), `chosen` (a successful episode's continuation), "
        "`rejected` (a failed one's), `tools`, `domain_id`, `task_id`, `episode_ids` (chosen, "
        "rejected), `table_versions`."
    ),
    "rl": (
        "`prompt` (system prompt and the user's opening), `tools`, `task_ref` (task set, "
        "domain id, version and content hash, task id: a server refuses a stale one), "
        "`domain_id`, `task_id`, `table_versions`."
    ),
}
