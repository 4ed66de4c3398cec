"""Reading a domain package's files as hostile input: what an LLM wrote, or a stranger sent.

Every refusal is a :class:`Problem` naming the file and where in it, never an exception:

- only regular files inside the package are read: a symbolic link anywhere in the package
  (``policy.md -> /etc/passwd``) and a FIFO, socket or device are refused, and a file is opened
  relative to the package folder's handle with ``O_NOFOLLOW | O_NONBLOCK`` and checked again
  on its descriptor, so swapping it for a link or a FIFO after the check changes nothing (a
  FIFO would otherwise block the open); a file with a second name (a hard link) is refused;
- sizes are capped per file (:data:`MAX_BYTES`), checked on the descriptor before reading, and
  only the cap plus one byte is ever read;
- problems are capped per file (:data:`MAX_PROBLEMS_PER_FILE`);
- text must be UTF-8; JSON must be JSON, read strictly (``strict_json.py``: duplicate keys,
  ``NaN``, huge integers, deep nesting, lone surrogates, more values than the file's size
  allows are each a problem with their location).

The loader and the sandbox's package reader both read through one :class:`PackageFolder`,
opened once per load.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maestro.domains.errors import Problem

# json_nodes is imported from here by the sandbox (a bound on what a child's JSON may cost).
from maestro.domains.strict_json import json_nodes as json_nodes
from maestro.domains.strict_json import parse_json

#: Per-file caps in bytes (the largest library files are 0.5 MB db.json and 48 KB tasks.jsonl).
MAX_BYTES: dict[str, int] = {
    "domain.json": 64 * 1024,
    "models.py": 1024 * 1024,
    "tools.py": 2 * 1024 * 1024,
    "policy.md": 1024 * 1024,
    "db.json": 64 * 1024 * 1024,
    "tasks.jsonl": 32 * 1024 * 1024,
}
DEFAULT_MAX_BYTES = 1024 * 1024
#: Entries (files and folders) a package may hold, and how deep its folders may go.
MAX_ENTRIES = 1000
MAX_FOLDER_DEPTH = 4


#: Problems kept per file: past it a file's reading stops (a tasks.jsonl of 200k bad lines took
#: minutes and 300 MB to report, line by line) and one more problem says how many lines were
#: left unchecked, or how many more problems there were.
MAX_PROBLEMS_PER_FILE = 100


@dataclass(frozen=True)
class StoppedReading(Problem):
    """The last problem of a file whose reading stopped at :data:`MAX_PROBLEMS_PER_FILE`."""


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC


class PackageFolder:
    """A package folder opened once: its scan and every read go through this one handle.

    Each file is opened relative to the handle (``openat``) with ``O_NOFOLLOW | O_NONBLOCK``
    and checked on its descriptor, so renaming the folder, or swapping one of its files for a
    link, a FIFO or a folder after the scan, never redirects a read or blocks it. A file with
    more than one name (a hard link) is refused unless ``shared_files``: a hard link is a
    regular file the scan cannot tell from the package's own, and made by root it can be any
    file on the machine (a secret ending up in an export as ``policy.md``). The shipped library
    allows them (an installer may hard-link its files from a cache).
    """

    def __init__(self, path: Path, fd: int, *, shared_files: bool) -> None:
        self.path = path
        self._fd = fd
        self.shared_files = shared_files
        self._code: dict[str, str] = {}

    @classmethod
    def open(cls, path: str | Path, *, shared_files: bool = False) -> PackageFolder | Problem:
        """The folder (it may be reached through a link: the user named it), or why not."""
        root = Path(path)
        try:
            fd = os.open(root, _FOLDER_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return Problem(str(root), "", "not a folder")
        except OSError as exc:
            return Problem(str(root), "", f"cannot be opened: {exc.strerror}")
        return cls(root, fd, shared_files=shared_files)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> PackageFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def scan(self) -> list[Problem]:
        """Every symbolic link and special file in the package, and too many entries.

        Nothing inside the package may be a link: subfolders are opened relative to their
        parent's handle, with ``O_NOFOLLOW``.
        """
        problems: list[Problem] = []
        count = 0
        pending: list[tuple[str, int, int]] = [("", os.dup(self._fd), 0)]
        try:
            while pending:
                folder, fd, depth = pending.pop()
                try:
                    count = _scan_folder(folder, fd, depth, count, pending, problems)
                finally:
                    os.close(fd)
                if count > MAX_ENTRIES:
                    return [*problems, Problem(".", "", f"holds more than {MAX_ENTRIES} entries")]
        finally:
            for _, fd, _ in pending:
                os.close(fd)
        return sorted(problems, key=lambda p: p.file)

    def lexists(self, name: str) -> bool:
        """Whether the package has an entry of that name, of any kind (a dangling link counts)."""
        try:
            os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def read_bytes(self, name: str, problems: list[Problem]) -> bytes | None:
        """The file's bytes; None (and a problem, unless it is missing) when it cannot be read."""
        if "/" in name:
            raise ValueError(f"{name!r}: package files are read by their name in the package")
        limit = MAX_BYTES.get(name, DEFAULT_MAX_BYTES)
        try:
            mode = os.stat(name, dir_fd=self._fd, follow_symlinks=False).st_mode
            if not stat.S_ISREG(mode):  # before opening: opening a device can act on it
                problems.append(Problem(name, "", _not_regular(_mode_kind(mode), self._fd, name)))
                return None
            fd = os.open(name, _READ_FLAGS, dir_fd=self._fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            reason = "is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
            problems.append(Problem(name, "", f"cannot be read: {reason}"))
            return None
        try:
            problem = self._descriptor_problem(os.fstat(fd), limit)
            if problem:
                problems.append(Problem(name, "", problem))
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(limit + 1)  # it may have grown since the fstat
        finally:
            os.close(fd)
        if len(data) > limit:
            problems.append(Problem(name, "", f"is larger than {limit:,} bytes"))
            return None
        return data

    def _descriptor_problem(self, info: os.stat_result, limit: int) -> str | None:
        if not stat.S_ISREG(info.st_mode):  # swapped after the stat
            return f"is a {_mode_kind(info.st_mode)}, not a regular file"
        if info.st_nlink > 1 and not self.shared_files:
            return (
                f"has {info.st_nlink} names (hard links); a package file must have one, since a "
                "hard link can be any file on this machine: copy the file instead"
            )
        if info.st_size > limit:  # before reading: a sparse file is large at no cost on disk
            return f"is larger than {limit:,} bytes"
        return None

    def read_text(self, name: str, problems: list[Problem]) -> str | None:
        """The file as UTF-8 text; None (and a problem, unless missing) when it cannot be read.

        A Python file is read once: every later read of it through this handle returns the
        same text, so what a check decided about a source (the importer's vetting) is about the
        source that runs, whatever is written to the file in between."""
        if name in self._code:
            return self._code[name]
        data = self.read_bytes(name, problems)
        text = None if data is None else decode(data, name, problems)
        if text is not None and name.endswith(".py"):
            self._code[name] = text
        return text

    def read_json(self, name: str, problems: list[Problem]) -> Any:
        """The file's JSON value; None (and a problem, unless missing) when it is not usable."""
        text = self.read_text(name, problems)
        return None if text is None else parse_json(text, name, problems)

    def read_jsonl(self, name: str, problems: list[Problem]) -> Iterator[tuple[int, Any]]:
        """``(line number, value)`` of every non-blank line that is usable JSON; a problem for
        each line that is not. Once :data:`MAX_PROBLEMS_PER_FILE` problems were added while
        reading (the caller's problems with the values it was given count too: it adds them to
        the same list), reading stops with one more problem saying how many lines were left."""
        data = self.read_bytes(name, problems)
        if data is None:
            return
        first = len(problems)
        lines = data.split(b"\n")
        for lineno, raw in enumerate(lines, start=1):
            if len(problems) - first >= MAX_PROBLEMS_PER_FILE:
                rest = sum(1 for line in lines[lineno - 1 :] if line.strip())
                if rest:
                    problems.append(
                        StoppedReading(
                            name,
                            f"line {lineno}",
                            f"{rest:,} more line(s) not checked: reading stops at "
                            f"{MAX_PROBLEMS_PER_FILE} problems a file",
                        )
                    )
                return
            where = f"line {lineno}"
            line = decode(raw, name, problems, where)
            if line is None or not line.strip():
                continue
            value = parse_json(line, name, problems, where)
            if value is not None:
                yield lineno, value


def read_text(root: str | Path, name: str, problems: list[Problem]) -> str | None:
    """One file of the package at ``root`` as UTF-8 text, read as every package file is
    (through a handle on the folder, no link, no special file, one name, size-capped): for a
    caller that needs a single file, not a load. None (and a problem, unless it is missing)
    when it cannot be read."""
    package = PackageFolder.open(root)
    if isinstance(package, Problem):
        problems.append(package)
        return None
    with package:
        return package.read_text(name, problems)


def _scan_folder(
    folder: str,
    fd: int,
    depth: int,
    count: int,
    pending: list[tuple[str, int, int]],
    problems: list[Problem],
) -> int:
    """Check one open folder's entries; its subfolders go on ``pending``; the entries seen."""
    try:
        entries = _entries(fd)
    except OSError as exc:
        problems.append(Problem(folder or ".", "", f"cannot be listed: {exc.strerror}"))
        return count
    for name, kind in entries:
        count += 1
        if count > MAX_ENTRIES:
            return count
        rel = f"{folder}/{name}" if folder else name
        if kind == "folder":
            if depth + 1 >= MAX_FOLDER_DEPTH:
                problems.append(Problem(rel, "", f"folders nest deeper than {MAX_FOLDER_DEPTH}"))
                continue
            try:
                child = os.open(name, _FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                problems.append(Problem(rel, "", f"cannot be opened: {exc.strerror}"))
                continue
            pending.append((rel, child, depth + 1))
        elif kind != "file":
            problems.append(Problem(rel, "", _not_regular(kind, fd, name)))
    return count


def _entries(fd: int) -> list[tuple[str, str]]:
    """(name, kind) of each entry of an open folder, by name, not following links."""
    with os.scandir(fd) as it:
        return sorted((entry.name, _kind(entry)) for entry in it)


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return "unreadable entry"
    return _mode_kind(mode)


def _mode_kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def _not_regular(kind: str, folder_fd: int, name: str) -> str:
    if kind == "link":
        try:
            target = os.readlink(name, dir_fd=folder_fd)
        except OSError:
            target = "?"
        return (
            f"is a symbolic link (to {target}); package files must be regular files inside "
            "the package"
        )
    return f"is a {kind}, not a regular file"


def cap_problems(problems: list[Problem]) -> list[Problem]:
    """At most :data:`MAX_PROBLEMS_PER_FILE` problems of each file, then one saying how many
    more there were (a report of a million lines helps nobody, and printing it took minutes)."""
    kept: list[Problem] = []
    counts: dict[str, int] = {}
    for problem in problems:
        if isinstance(problem, StoppedReading):  # says more than "and N more": kept
            kept.append(problem)
            continue
        counts[problem.file] = counts.get(problem.file, 0) + 1
        if counts[problem.file] <= MAX_PROBLEMS_PER_FILE:
            kept.append(problem)
    kept.extend(
        Problem(file, "", f"and {count - MAX_PROBLEMS_PER_FILE:,} more problem(s)")
        for file, count in counts.items()
        if count > MAX_PROBLEMS_PER_FILE
    )
    return kept


def decode(data: bytes, name: str, problems: list[Problem], where: str = "") -> str | None:
    """``data`` as UTF-8, or a problem naming the first bad byte and its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if where:
            problems.append(Problem(name, where, f"not UTF-8 text (byte {exc.start} of the line)"))
        else:
            line = data.count(b"\n", 0, exc.start) + 1
            problems.append(
                Problem(name, f"line {line}", f"not UTF-8 text (byte {exc.start} of the file)")
            )
        return None


# ----- writing an export ----------------------------------------------------------------------


class TargetError(ValueError):
    """An export's target folder cannot be written as asked; the message says why."""


def check_target(out: Path, *, force: bool) -> None:
    """Refuse a target that is not a folder, or a non-empty one unless ``force``; nothing is
    written here."""
    try:
        mode = os.lstat(out).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TargetError(f"{out}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        raise TargetError(f"{out} is a symbolic link; give the folder itself")
    if not stat.S_ISDIR(mode):
        raise TargetError(f"{out} exists and is not a folder")
    try:
        entries = sum(1 for _ in os.scandir(out))
    except OSError as exc:
        raise TargetError(f"{out}: cannot be listed: {exc.strerror}") from None
    if entries and not force:
        raise TargetError(
            f"{out} is not empty ({entries} {'entry' if entries == 1 else 'entries'}); give "
            "--force to write into it "
            "(files of the same name are replaced)"
        )


def write_inside(out: Path, path: Path, text: str) -> None:
    """Write ``text`` to ``path`` under ``out``, creating folders, never through a link: a
    link planted in the target (``data -> /etc``) is an error, not a redirect.

    Every step is taken relative to a handle on the folder above it (``mkdirat``, ``openat``
    with ``O_NOFOLLOW``), so a folder swapped for a link between a check and a write (a race
    won 1 in a few thousand tries against lstat-then-open) cannot redirect it; the file is
    written under a fresh name and renamed over the old one, so no existing file (a hard link,
    a FIFO) is ever written into.
    """
    relative = path.relative_to(out)  # ValueError for a path outside: a bug, not input
    try:
        out.mkdir(parents=True, exist_ok=True)  # the user's own path may pass through links
        fd = os.open(out, _FOLDER_FLAGS)
    except OSError as exc:
        raise TargetError(f"cannot create {out}: {exc.strerror}") from None
    try:
        for depth, part in enumerate(relative.parts[:-1], start=1):
            child = _enter(fd, part, out.joinpath(*relative.parts[:depth]), relative)
            os.close(fd)
            fd = child
        _replace_at(fd, relative.parts[-1], path, text)
    finally:
        os.close(fd)


def _enter(parent: int, name: str, shown: Path, relative: Path) -> int:
    """The folder ``name`` inside ``parent`` (made if missing), opened without following a
    link."""
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent)
        try:
            return os.open(name, _FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            # Linux answers ENOTDIR for a link under O_DIRECTORY | O_NOFOLLOW, as for any
            # non-folder: the entry itself (never followed) tells which it is.
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
            raise TargetError(
                f"{shown} is {kind}; refusing to write {relative} through it"
            ) from None
    except OSError as exc:
        raise TargetError(f"cannot create {shown}: {exc.strerror}") from None


def _replace_at(folder: int, name: str, shown: Path, text: str) -> None:
    """Write ``text`` as ``name`` in ``folder``: a fresh file, renamed over the old entry."""
    try:
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        mode = 0
    except OSError as exc:
        raise TargetError(f"cannot write {shown}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):  # renaming over it would be safe; saying so is clearer
        raise TargetError(f"cannot write {shown}: it is a symbolic link")
    temporary = f".{name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    try:
        fd = os.open(temporary, flags, 0o644, dir_fd=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise TargetError(f"cannot write {shown}: {exc.strerror}") from None


def write_file(path: Path, text: str) -> Path:
    """Write ``text`` as ``path`` (its folder made if missing) never through a link or into a
    special file: a link or FIFO planted under the file's name is an error, and the file is
    replaced by a fresh one, never written into. For every writer of the run folder (pages,
    sheets, job specs): the folder itself is the user's, and may be reached through links.
    Returns the path written; :class:`TargetError` names what was refused."""
    path = Path(os.path.abspath(path))
    if path.exists() and path.is_dir() and not path.is_symlink():
        raise TargetError(f"cannot write {path}: it is a folder")
    write_inside(path.parent, path, text)
    return path


def open_log(path: Path) -> int:
    """A descriptor, open for reading and writing, on a fresh empty file named ``path`` (its
    folder made if missing), for a child's output that is then read back through it.

    The file is created under a temporary name (``O_CREAT | O_EXCL``: never an existing file)
    and renamed over ``path``, so whatever held the name before is replaced, never opened: a
    hard link planted as ``job.log`` (a second name of a file outside the run folder) was
    truncated and overwritten. A symbolic link, FIFO, device or folder already there is
    refused (:class:`TargetError`), as before; one swapped in after the check is replaced by
    the rename, and one swapped in after the rename is never read, since the caller reads
    through the descriptor, not the name.
    """
    path = Path(os.path.abspath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # the user's path may pass through links
        folder = os.open(path.parent, _FOLDER_FLAGS)
    except OSError as exc:
        raise TargetError(f"cannot write {path}: {exc.strerror}") from None
    try:
        return _fresh_log_at(folder, path)
    finally:
        os.close(folder)


def _fresh_log_at(folder: int, path: Path) -> int:
    """A new file renamed to ``path.name`` in ``folder``, open read-write; see :func:`open_log`."""
    try:
        mode = os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        mode = 0
    except OSError as exc:
        raise TargetError(f"cannot write {path}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        raise TargetError(f"cannot write {path}: it is a symbolic link")
    if mode and not stat.S_ISREG(mode):
        raise TargetError(f"cannot write {path}: it is a {_mode_kind(mode)}, not a regular file")
    temporary = f".{path.name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    fd = -1
    try:
        fd = os.open(temporary, flags, 0o644, dir_fd=folder)
        os.rename(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        if fd >= 0:
            os.close(fd)
        raise TargetError(f"cannot write {path}: {exc.strerror}") from None
    return fd
