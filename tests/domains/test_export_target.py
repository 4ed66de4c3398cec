"""An export writes only into the folder it was given: an occupied folder needs ``force``, and a
link planted inside the target is an error, never a redirect."""

from __future__ import annotations

from pathlib import Path

import pytest

from maestro.domains import Domain
from maestro.domains.tau2_export import Tau2ExportError, export_tau2


def test_a_non_empty_target_is_refused_without_force_and_nothing_is_written(
    toy: Domain, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(Tau2ExportError, match=r"is not empty \(1 entry\); give --force"):
        export_tau2(toy, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    result = export_tau2(toy, tmp_path, force=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert all(p.is_file() for p in result.files)


def test_a_link_planted_in_the_target_is_not_written_through(toy: Domain, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    (out / "data" / "tau2" / "domains").mkdir(parents=True)
    (out / "data" / "tau2" / "domains" / "toy").symlink_to(elsewhere)
    with pytest.raises(Tau2ExportError, match="toy is a symbolic link; refusing to write"):
        export_tau2(toy, out, force=True)
    assert list(elsewhere.iterdir()) == []
    (out / "data" / "tau2" / "domains" / "toy").unlink()
    (out / "data" / "tau2" / "domains" / "toy").mkdir()
    victim = elsewhere / "victim.md"
    victim.write_text("untouched")
    (out / "data" / "tau2" / "domains" / "toy" / "policy.md").symlink_to(victim)
    with pytest.raises(Tau2ExportError, match=r"policy\.md: it is a symbolic link"):
        export_tau2(toy, out, force=True)
    assert victim.read_text() == "untouched"


def test_an_unwritable_target_is_an_export_error(toy: Domain) -> None:
    with pytest.raises(Tau2ExportError, match="cannot create /proc/1/x"):
        export_tau2(toy, Path("/proc/1/x"))
