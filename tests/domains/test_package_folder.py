"""A package folder read as hostile input, through one handle (``files.PackageFolder``):
hard links, a file swapped after the scan, a folder or a sparse giant where a file should be,
and a flood of problems (red-team findings 9, 11, 12, 13, 15)."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

from maestro.domains import inspect_package
from maestro.domains.errors import Problem
from maestro.domains.files import MAX_PROBLEMS_PER_FILE, PackageFolder, read_text


def _messages(package: Path, *, trusted: bool = False) -> list[str]:
    domain, problems = inspect_package(package, trusted=trusted)
    if domain is not None:
        domain.close()
    return [str(p) for p in problems]


def test_a_hard_linked_package_file_is_refused_and_its_content_never_read(
    toy_copy: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# s3cr3t host file\n")
    (toy_copy / "policy.md").unlink()
    os.link(secret, toy_copy / "policy.md")  # a regular file: the scan cannot tell
    messages = _messages(toy_copy)
    assert messages == [
        "policy.md: has 2 names (hard links); a package file must have one, since a hard link "
        "can be any file on this machine: copy the file instead"
    ]
    # Code that vouches for the package (the library, whose installer may hard-link it) reads it.
    assert _messages(toy_copy, trusted=True) == []


def test_a_folder_where_a_python_file_should_be_is_a_problem_not_a_traceback(
    toy_copy: Path,
) -> None:
    (toy_copy / "tools.py").unlink()
    (toy_copy / "tools.py").mkdir()
    assert "tools.py: is a folder, not a regular file" in _messages(toy_copy)


def test_a_sparse_giant_file_is_refused_by_its_size_before_it_is_read(toy_copy: Path) -> None:
    with open(toy_copy / "tools.py", "r+b") as f:
        f.truncate(700 * 1024 * 1024)  # 700 MB that take no room on disk
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert "tools.py: is larger than 2,097,152 bytes" in _messages(toy_copy)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024


def test_a_file_swapped_for_a_fifo_after_the_scan_is_refused_without_blocking(
    toy_copy: Path,
) -> None:
    with PackageFolder.open(toy_copy) as folder:
        assert isinstance(folder, PackageFolder) and folder.scan() == []
        (toy_copy / "tools.py").unlink()
        os.mkfifo(toy_copy / "tools.py")  # opening it plainly would block for ever
        problems: list[Problem] = []
        started = time.monotonic()
        assert folder.read_text("tools.py", problems) is None
        assert time.monotonic() - started < 5
    assert [str(p) for p in problems] == ["tools.py: is a FIFO, not a regular file"]


def test_reads_stay_in_the_folder_that_was_opened_when_its_path_is_swapped(
    toy_copy: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "policy.md").write_text("# s3cr3t from elsewhere\n")
    with PackageFolder.open(toy_copy) as folder:
        assert isinstance(folder, PackageFolder)
        toy_copy.rename(tmp_path / "moved")
        toy_copy.symlink_to(other)  # the path now leads elsewhere; the handle does not
        problems: list[Problem] = []
        text = folder.read_text("policy.md", problems)
    assert problems == [] and text is not None and "s3cr3t" not in text
    assert text == (tmp_path / "moved" / "policy.md").read_text()


def test_a_flood_of_bad_task_lines_stops_at_the_cap_and_says_how_many_were_left(
    toy_copy: Path,
) -> None:
    (toy_copy / "tasks.jsonl").write_text("1\n" * 200_000)
    started = time.monotonic()
    messages = _messages(toy_copy)
    assert time.monotonic() - started < 60  # it took minutes (and 300 MB) line by line
    assert len(messages) == MAX_PROBLEMS_PER_FILE + 1
    assert messages[-1] == (
        f"tasks.jsonl:line {MAX_PROBLEMS_PER_FILE + 1}: "
        f"{200_000 - MAX_PROBLEMS_PER_FILE:,} more line(s) not checked: reading stops at "
        f"{MAX_PROBLEMS_PER_FILE} problems a file"
    )


def test_problems_past_the_cap_of_a_file_are_counted_not_listed(toy_copy: Path) -> None:
    refs = ", ".join(f'"P{i}"' for i in range(500))
    db = (toy_copy / "db.json").read_text()
    # One order naming 500 products that do not exist: 500 reference problems in db.json.
    db = db.replace('"items": [', f'"items": [{refs}, ', 1)
    (toy_copy / "db.json").write_text(db)
    messages = [m for m in _messages(toy_copy, trusted=True) if m.startswith("db.json")]
    assert len(messages) == MAX_PROBLEMS_PER_FILE + 1
    assert messages[-1].startswith("db.json: and ") and messages[-1].endswith("more problem(s)")


def test_one_file_read_alone_is_read_as_a_load_reads_it(toy_copy: Path, tmp_path: Path) -> None:
    """``files.read_text`` (an importer checking one file) refuses what a load refuses."""
    problems: list[Problem] = []
    assert read_text(toy_copy, "policy.md", problems) == (toy_copy / "policy.md").read_text()
    assert read_text(toy_copy, "nope.md", problems) is None and problems == []
    secret = tmp_path / "secret"
    secret.write_text("S3CRET")
    (toy_copy / "policy.md").unlink()
    (toy_copy / "policy.md").symlink_to(secret)
    assert read_text(toy_copy, "policy.md", problems) is None
    assert [p.message.split(" (")[0] for p in problems] == ["is a symbolic link"]
    problems.clear()
    assert read_text(tmp_path / "nowhere", "policy.md", problems) is None
    assert [p.message for p in problems] == ["not a folder"]
