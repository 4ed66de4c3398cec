"""Hand-built reference domains, shipped with maestro as package folders.

A reference comes from the command line, so the file system may refuse it as a name (a
component over 255 bytes, a path over 4,096, a ``~user`` with no home): each lookup turns that
into the same ``KeyError`` an unknown reference gets, saying why, never an ``OSError``.
"""

from __future__ import annotations

from pathlib import Path

LIBRARY_ROOT = Path(__file__).resolve().parent
#: How much of a reference an error quotes: a refused one may be thousands of bytes long.
_SHOWN_CHARS = 80


def library_ids() -> list[str]:
    """Ids (folder names) of the library's domains, sorted."""
    return sorted(p.name for p in LIBRARY_ROOT.iterdir() if (p / "domain.json").is_file())


def library_path(domain_id: str) -> Path:
    """The package folder of a library domain; KeyError naming the known ids when absent."""
    path = LIBRARY_ROOT / domain_id
    try:
        found = (path / "domain.json").is_file()
        why = ""
    except OSError as exc:  # ENAMETOOLONG: no folder of the library can have this name
        found, why = False, f": {exc.strerror}"
    if not found:
        raise KeyError(
            f"no library domain {_shown(domain_id)}{why}; "
            f"known: {', '.join(library_ids()) or 'none'}"
        )
    return path


def is_path_form(ref: str) -> bool:
    """Whether a domain reference is written as a path (``./hotel``, ``pkgs/hotel``, ``/srv/x``,
    ``~/x``) rather than as a bare name."""
    return "/" in ref or ref.startswith((".", "~"))


def domain_path(ref: str) -> Path:
    """The package folder a domain reference names: a bare name is a library id, and only a
    path names a folder, so ``hotel`` means the library's hotel whichever folder the command
    runs from (a ``./hotel`` there is ``./hotel``). KeyError saying what is wrong otherwise."""
    if is_path_form(ref):
        path = _folder(ref)
        if path is None:
            raise KeyError(f"{_shown(ref)} is not a folder")
        return path.resolve()
    try:
        return library_path(ref)
    except KeyError as exc:
        if _names_folder(ref):
            raise KeyError(f"{exc.args[0]}. A folder is named by its path: ./{ref}") from None
        raise


def _names_folder(ref: str) -> bool:
    """Whether a bare name is also a folder here (for the hint); False where it cannot be."""
    try:
        return _folder(ref) is not None
    except KeyError:
        return False


def _folder(ref: str) -> Path | None:
    """``ref`` (``~`` expanded) when it names a folder; None when it does not; KeyError when
    the file system cannot take it as a name."""
    try:
        path = Path(ref).expanduser()
    except RuntimeError:  # "~someone" without a home folder
        raise KeyError(f"{_shown(ref)}: {ref.split('/')[0]} has no home folder") from None
    try:
        return path if path.is_dir() else None
    except OSError as exc:
        raise KeyError(f"{_shown(ref)} cannot name a folder: {exc.strerror}") from None


def _shown(ref: str) -> str:
    """``ref`` quoted, cut to its first characters when long (with its length)."""
    if len(ref) <= _SHOWN_CHARS:
        return repr(ref)
    return f"{ref[:_SHOWN_CHARS]!r}... ({len(ref):,} characters)"
