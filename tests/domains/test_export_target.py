"""An export writes only into the folder it was given: an occupied folder needs ``force``, and a
link planted inside the target is an error, never a redirect."""

from __future__ import annotations

import ctypes
import multiprocessing
import time
from pathlib import Path

import pytest

from maestro.domains import Domain, load_domain
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


def _flip(a: bytes, b: bytes, seconds: float) -> None:
    """Swap two paths (renameat2 RENAME_EXCHANGE) as fast as possible for ``seconds``."""
    libc = ctypes.CDLL(None, use_errno=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            libc.renameat2(-100, a, -100, b, 2)


def test_a_folder_swapped_for_a_link_mid_export_never_redirects_a_write(
    toy_copy: Path, tmp_path: Path
) -> None:
    """Against lstat-then-open the swap won within a second: files landed outside the target
    (red-team finding 17)."""
    domain = load_domain(toy_copy, trusted=True, check_gold=False)
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.mkdir()
    folder = out / "data" / "tau2" / "domains" / "toy"
    folder.mkdir(parents=True)
    (folder.parent / "toy.alt").symlink_to(victim)
    flipper = multiprocessing.get_context("spawn").Process(
        target=_flip, args=(bytes(folder), bytes(folder.parent / "toy.alt"), 8.0)
    )
    flipper.start()
    try:
        exports = refused = 0
        end = time.monotonic() + 6.0
        while time.monotonic() < end and not list(victim.iterdir()):
            try:
                export_tau2(domain, out, force=True)
                exports += 1
            except Tau2ExportError as exc:
                assert "refusing to write" in str(exc) or "symbolic link" in str(exc), exc
                refused += 1
    finally:
        flipper.kill()
        flipper.join(10)
    assert refused > 0  # the swap did happen while exports ran
    assert list(victim.iterdir()) == []
