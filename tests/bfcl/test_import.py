"""``maestro import bfcl``: a BFCL category as packages, BFCL's code only in the sandbox."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from maestro.domains import Domain, DomainLoadError, load_domain, replay_gold
from maestro.domains.files import PackageFolder
from maestro.domains.importers.bfcl import ImportResult, import_category, type_problem
from maestro.domains.importers.bfcl_checker import BfclChecker, ground_truth_strings
from maestro.domains.importers.bfcl_package import RUNTIME_MODULE, bfcl_version
from maestro.domains.sandbox import check_tools_source
from maestro.domains.store import canonical_json


def test_a_category_is_one_package_per_class_combination_with_its_version(
    base_import: ImportResult, packages: dict[str, Path]
) -> None:
    assert len(packages) == 20 and base_import.tasks == 199
    # The one entry left out, and why: its ground truth breaks BFCL's own function doc.
    assert list(base_import.skipped) == ["multi_turn_base_173"]
    assert "ticket_id='ticket_001'" in base_import.skipped["multi_turn_base_173"]
    manifest = json.loads((packages["bfcl_gorilla_twitter"] / "domain.json").read_text())
    origin = manifest["provenance"]["imported_from"]
    assert origin == {"benchmark": "bfcl", "package": "bfcl-eval", "version": bfcl_version()}
    first = json.loads(
        (packages["bfcl_gorilla_twitter"] / "tasks.jsonl").read_text().splitlines()[0]
    )
    assert first["provenance"]["imported_from"]["item_id"] == "multi_turn_base_0"
    assert first["user_turns"][0]["action_ids"] == ["t0_c0", "t0_c1", "t0_c2"]
    assert first["evaluation_criteria"]["reward_basis"] == ["DB", "ACTION"]


def test_the_package_loads_as_any_domain_and_the_host_never_imports_bfcl(gorilla: Domain) -> None:
    task = gorilla.tasks[0]
    result = replay_gold(gorilla, task)
    assert result.ok and result.session.diff()  # the ground truth changes the file system
    assert gorilla.toolkit.child_pid is not None  # type: ignore[attr-defined]
    assert not [m for m in sys.modules if m.startswith("bfcl_eval")]
    assert RUNTIME_MODULE not in sys.modules


def test_ground_truth_runs_as_bfcls_own_executor_runs_it(travel: Domain) -> None:
    """Same result text for every call, same final state, as BFCL's executor (in a child)."""
    checker = BfclChecker(travel)
    try:
        for task in travel.tasks:
            native = checker.execute(task, ground_truth_strings(task))
            replay = replay_gold(travel, task)
            assert [o.content for o in replay.outcomes] == [r for t in native["results"] for r in t]
            state = replay.session.materialise()
            for table, attributes in native["state"].items():
                mine = {k: v["value"] for k, v in state[table].items()}
                assert canonical_json(mine) == canonical_json(attributes), task.id
    finally:
        checker.close()


def test_an_edited_tools_py_is_refused(packages: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "pkg"
    shutil.copytree(packages["bfcl_gorilla"], copy)
    tools = copy / "tools.py"
    tools.write_text(tools.read_text().replace("Change the current", "Change a current"))
    with pytest.raises(DomainLoadError, match="not the file maestro's BFCL importer writes"):
        load_domain(copy)


def test_vetting_reads_the_tools_py_that_runs(
    packages: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is swapped right after the load opened it: the load's handle holds an edited
    tools.py, its path the importer's own. Vetting by path granted BFCL's imports to the edit."""
    pkg, clean = tmp_path / "pkg", tmp_path / "clean"
    shutil.copytree(packages["bfcl_gorilla"], pkg)
    shutil.copytree(packages["bfcl_gorilla"], clean)
    tools = pkg / "tools.py"
    tools.write_text(tools.read_text().replace("Change the current", "Change a current"))
    opened = PackageFolder.open.__func__  # type: ignore[attr-defined]

    def open_then_swap(cls: type[PackageFolder], path: str | Path, **kw: bool) -> object:
        folder = opened(cls, path, **kw)
        if Path(path) == pkg and not clean.with_name("moved").exists():
            pkg.rename(clean.with_name("moved"))
            clean.rename(pkg)
        return folder

    monkeypatch.setattr(PackageFolder, "open", classmethod(open_then_swap))
    with pytest.raises(DomainLoadError, match="not the file maestro's BFCL importer writes"):
        load_domain(pkg)
    assert clean.with_name("moved").exists()  # the swap happened inside the load


def test_a_package_from_another_bfcl_version_is_refused(
    packages: dict[str, Path], tmp_path: Path
) -> None:
    copy = tmp_path / "pkg"
    shutil.copytree(packages["bfcl_gorilla"], copy)
    manifest = json.loads((copy / "domain.json").read_text())
    manifest["provenance"]["imported_from"]["version"] = "2020.1.1"
    (copy / "domain.json").write_text(json.dumps(manifest))
    with pytest.raises(DomainLoadError, match=r"imported from bfcl-eval 2020\.1\.1"):
        load_domain(copy)


def test_only_the_vetted_names_may_be_imported() -> None:
    source = f"from {RUNTIME_MODULE} import call_api, describe_classes\n"
    assert [p.message for p in check_tools_source(source)] == [
        f"[import] import from {RUNTIME_MODULE!r} is not allowed (allowed: the SDK, .models,"
        " bisect, calendar, collections, collections.abc, dataclasses, datetime, decimal, enum,"
        " fractions, functools, heapq, itertools, json, math, re, statistics, textwrap, typing)"
    ] * 2
    vetted = {RUNTIME_MODULE: ("call_api",)}
    assert [p.message for p in check_tools_source(source, vetted=vetted)] == [
        f"[import] only ['call_api'] may be imported from {RUNTIME_MODULE}"
    ]


def test_a_ground_truth_that_breaks_bfcls_own_doc_is_named() -> None:
    doc = {"parameters": {"properties": {"ticket_id": {"type": "integer"}}}}
    assert type_problem("close_ticket", {"ticket_id": "ticket_001"}, doc) == (
        "ticket_id='ticket_001' is not integer, as BFCL's doc of close_ticket says"
    )
    assert type_problem("close_ticket", {"ticket_id": 1}, doc) is None
    assert type_problem("close_ticket", {"ticket_id": True}, doc) is not None


def test_missed_function_turns_hide_the_functions_until_their_turn(miss_func: ImportResult) -> None:
    domain = load_domain(miss_func.packages[0])
    try:
        task = domain.tasks[0]
        added = next(i for i, t in enumerate(task.user_turns) if t.add_tools)
        held = task.user_turns[added].add_tools
        assert held and set(held) <= set(task.hidden_tools)
        assert "more functions" in task.user_turns[added].content  # BFCL's own message
        before = task.visible_tools(domain.toolkit.names, added)
        after = task.visible_tools(domain.toolkit.names, added + 1)
        assert before is not None and after is not None
        assert not set(held) & set(before) and set(held) <= set(after)
    finally:
        domain.close()


def test_an_unknown_category_is_named_with_the_known_ones(tmp_path: Path) -> None:
    from maestro.domains.importers.bfcl_package import BfclDataError

    with pytest.raises(BfclDataError, match=r"no category 'multi_turn_nope'.*multi_turn_base"):
        import_category("multi_turn_nope", tmp_path)
