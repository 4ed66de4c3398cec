"""``maestro export hf``: a task set as a Hugging Face dataset, read back with ``datasets``' own
loaders and trained on with TRL's own trainer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import load_dataset, load_from_disk

from maestro.domains import Domain, load_domain
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import domain_row
from maestro.training.datasets import build_dpo, build_grpo, build_sft
from maestro.training.hf_export import ExportError, export_hf
from maestro.training.models import BaseModelSpec, load_model, load_tokenizer

from .conftest import TASK_SET, fill_lake

MAESTRO = str(Path(sys.executable).with_name("maestro"))


@pytest.fixture
def two_splits(tmp_path: Path, toy_copy: Path) -> tuple[Lake, Domain]:
    """The toy domain with toy_cancel moved to the train split (toy_status stays in test)."""
    path = toy_copy / "tasks.jsonl"
    tasks = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for t in tasks:
        if t["id"] == "toy_cancel":
            t["split"] = "train"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    domain = load_domain(toy_copy, trusted=True)
    lake = Lake(LakeSettings(root=str(tmp_path / "lake2")))
    fill_lake(lake, domain, ["toy_cancel", "toy_status"])
    return lake, domain


def test_sft_rows_are_the_training_rows_read_back_by_both_loaders(
    toy_lake: Lake, toy: Domain, tmp_path: Path
) -> None:
    out = tmp_path / "sft"
    result = export_hf(toy_lake, {"toy": toy}, TASK_SET, out, "sft")
    trained_on = build_sft(toy_lake, {"toy": toy}, TASK_SET, split="test").rows
    assert result.rows == {"test": len(trained_on)} and len(trained_on) == 4
    on_disk = load_from_disk(str(out))
    assert list(on_disk) == ["test"]
    assert on_disk["test"].to_list() == trained_on
    parquet = load_dataset("parquet", data_files={"test": str(out / "data" / "test-*.parquet")})
    assert parquet["test"].to_list() == trained_on
    # The card's header names the splits' files: the folder loads as the Hub would load it.
    assert load_dataset(str(out))["test"].to_list() == trained_on
    card = (out / "README.md").read_text()
    assert "configs:" in card and "path: data/test-*.parquet" in card
    for table in ("task_sets", "tasks", "episodes", "scores"):
        assert f"| {table} | {toy_lake.version(table)} |" in card
    assert "| toy | Toy shop | 0.1.0 | hand-built | - | other | 4 |" in card


def test_dpo_and_rl_rows(toy_lake: Lake, toy: Domain, tmp_path: Path) -> None:
    export_hf(toy_lake, {"toy": toy}, TASK_SET, tmp_path / "dpo", "dpo")
    pairs = build_dpo(toy_lake, {"toy": toy}, TASK_SET, split="test").rows
    assert load_from_disk(str(tmp_path / "dpo"))["test"].to_list() == pairs
    export_hf(toy_lake, {"toy": toy}, TASK_SET, tmp_path / "rl", "rl", license_id="apache-2.0")
    rl = {r["task_id"]: r for r in load_from_disk(str(tmp_path / "rl"))["test"].to_list()}
    grpo = {
        r["task_id"]: r for r in build_grpo(toy_lake, {"toy": toy}, TASK_SET, split="test").rows
    }
    assert set(rl) == set(grpo) == {"toy_cancel", "toy_status"}
    for task_id, row in rl.items():
        assert row["prompt"] == grpo[task_id]["prompt"]
        assert row["tools"] == grpo[task_id]["tools"]
        assert row["task_ref"] == {
            "task_set_id": TASK_SET,
            "domain_id": "toy",
            "domain_version": "0.1.0",
            "domain_hash": domain_row(toy).content_hash,
            "task_id": task_id,
        }
    assert 'license: "apache-2.0"' in (tmp_path / "rl" / "README.md").read_text()


def test_splits_as_the_task_set_has_them_share_one_schema(
    two_splits: tuple[Lake, Domain], tmp_path: Path
) -> None:
    lake, domain = two_splits
    out = tmp_path / "sft"
    result = export_hf(lake, {"toy": domain}, TASK_SET, out, "sft", shard_rows=1)
    assert result.rows == {"train": 2, "test": 2}
    ds = load_from_disk(str(out))
    assert {s: {r["task_id"] for r in ds[s]} for s in ds} == {
        "train": {"toy_cancel"},
        "test": {"toy_status"},
    }
    assert ds["train"].features == ds["test"].features
    shards = sorted(p.name for p in (out / "data").iterdir())
    assert shards == [
        "test-00000-of-00002.parquet",
        "test-00001-of-00002.parquet",
        "train-00000-of-00002.parquet",
        "train-00001-of-00002.parquet",
    ]
    both = load_dataset(str(out))
    assert {s: len(both[s]) for s in both} == {"train": 2, "test": 2}


def test_a_second_export_leaves_nothing_of_the_first(
    two_splits: tuple[Lake, Domain], toy_lake: Lake, toy: Domain, tmp_path: Path
) -> None:
    lake, domain = two_splits
    out = tmp_path / "out"
    export_hf(lake, {"toy": domain}, TASK_SET, out, "sft", shard_rows=1)
    (out / "notes.txt").write_text("mine")
    export_hf(toy_lake, {"toy": toy}, TASK_SET, out, "rl")
    assert list(load_from_disk(str(out))) == ["test"]
    assert not (out / "train").exists()
    assert sorted(p.name for p in (out / "data").iterdir()) == ["test-00000-of-00001.parquet"]
    assert len(load_dataset(str(out))["test"]) == 2
    assert (out / "notes.txt").read_text() == "mine"


def test_bad_task_sets_are_named(toy_lake: Lake, toy: Domain, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="task set 'nope' is not in the task_sets table"):
        export_hf(toy_lake, {"toy": toy}, "nope", tmp_path / "a", "sft")
    with pytest.raises(ExportError, match="names domain 'toy', which is not loaded"):
        export_hf(toy_lake, {}, TASK_SET, tmp_path / "b", "sft")
    empty = Lake(LakeSettings(root=str(tmp_path / "empty")))
    with pytest.raises(ExportError, match="no task_sets table"):
        export_hf(empty, {"toy": toy}, TASK_SET, tmp_path / "c", "sft")
    # No DPO pair anywhere: the task set's tasks have no episodes.
    bare = Lake(LakeSettings(root=str(tmp_path / "bare")))
    bare.write("domains", [domain_row(toy)], "r1")
    refs = [{"domain_id": "toy", "task_id": "toy_cancel"}]
    bare.write("task_sets", [{"task_set_id": TASK_SET, "tasks": refs, "built_from": []}], "r1")
    with pytest.raises(ExportError, match=r"has no dpo rows in any split.*test: dpo dataset"):
        export_hf(bare, {"toy": toy}, TASK_SET, tmp_path / "d", "dpo")
    with pytest.raises(ExportError, match="kind 'ppo' is not one of sft, dpo, rl"):
        export_hf(toy_lake, {"toy": toy}, TASK_SET, tmp_path / "e", "ppo")  # type: ignore[arg-type]
    assert not any((tmp_path / n).exists() for n in ("a", "b", "c", "d", "e"))


def test_one_trl_sft_step_trains_on_the_exported_dataset(
    toy_lake: Lake, toy: Domain, tiny_spec: BaseModelSpec, tmp_path: Path
) -> None:
    from trl import SFTConfig, SFTTrainer

    export_hf(toy_lake, {"toy": toy}, TASK_SET, tmp_path / "sft", "sft")
    train = load_from_disk(str(tmp_path / "sft"))["test"]
    tok = load_tokenizer(tiny_spec)
    config = SFTConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=1,
        per_device_train_batch_size=2,
        max_length=16384,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        dataset_num_proc=None,
    )
    trainer = SFTTrainer(
        model=load_model(tiny_spec, tok), args=config, train_dataset=train, processing_class=tok
    )
    out = trainer.train()
    assert out.global_step == 1
    assert [h["loss"] for h in trainer.state.log_history if "loss" in h] or out.training_loss > 0


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, "export", "hf", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def test_the_command_writes_and_refuses_with_one_line(
    toy_lake: Lake, toy_copy: Path, tmp_path: Path
) -> None:
    out = tmp_path / "hf"
    lake = ["--lake-root", toy_lake.root]
    # The toy is no library domain: its folder is given.
    proc = _cli(TASK_SET, str(out), "--kind", "rl", *lake)
    assert proc.returncode == 2
    assert "names domain 'toy', which is not in the library: give its package folder" in (
        proc.stderr
    )
    assert not out.exists()
    proc = _cli(TASK_SET, str(out), "--kind", "rl", "--domain", str(toy_copy), *lake, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows"] == {"test": 2}
    assert len(load_from_disk(str(out))["test"]) == 2
    again = _cli(TASK_SET, str(out), "--kind", "sft", "--domain", str(toy_copy), *lake)
    assert again.returncode == 2 and "is not empty" in again.stderr
    unknown = _cli("nope", str(tmp_path / "x"), "--kind", "sft", *lake)
    assert unknown.returncode == 2 and "task set 'nope' is not in the task_sets table" in (
        unknown.stderr
    )
    kind = _cli(TASK_SET, str(tmp_path / "y"), "--kind", "ppo", *lake)
    assert kind.returncode == 2 and "'ppo' is not one of sft, dpo, rl" in kind.stderr


@pytest.mark.parametrize(
    ("package", "licence"),
    [("bfcl-eval", "Apache 2.0"), ("no-such-dist", "unknown (no-such-dist is not installed here)")],
)
def test_an_imported_domains_licence_is_its_distributions(
    toy_copy: Path, tmp_path: Path, package: str, licence: str
) -> None:
    manifest = json.loads((toy_copy / "domain.json").read_text())
    origin = {"benchmark": "bfcl", "package": package, "version": "2026.3.23"}
    manifest["provenance"] = {"source": "imported", "imported_from": origin}
    (toy_copy / "domain.json").write_text(json.dumps(manifest))
    domain = load_domain(toy_copy, trusted=True)
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    fill_lake(lake, domain, ["toy_status"])
    export_hf(lake, {"toy": domain}, TASK_SET, tmp_path / "out", "sft", license_id="mit")
    card = (tmp_path / "out" / "README.md").read_text()
    row = f"| toy | Toy shop | 0.1.0 | imported | bfcl from {package} 2026.3.23 | {licence} | 2 |"
    assert row in card
