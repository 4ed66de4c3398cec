"""Hand-built reference domains, shipped with maestro as package folders."""

from __future__ import annotations

from pathlib import Path

LIBRARY_ROOT = Path(__file__).resolve().parent


def library_ids() -> list[str]:
    """Ids (folder names) of the library's domains, sorted."""
    return sorted(p.name for p in LIBRARY_ROOT.iterdir() if (p / "domain.json").is_file())


def library_path(domain_id: str) -> Path:
    """The package folder of a library domain; KeyError naming the known ids when absent."""
    path = LIBRARY_ROOT / domain_id
    if not (path / "domain.json").is_file():
        raise KeyError(
            f"no library domain {domain_id!r}; known: {', '.join(library_ids()) or 'none'}"
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
        path = Path(ref).expanduser()
        if not path.is_dir():
            raise KeyError(f"{ref!r} is not a folder")
        return path.resolve()
    try:
        return library_path(ref)
    except KeyError as exc:
        if Path(ref).is_dir():
            raise KeyError(f"{exc.args[0]}. A folder is named by its path: ./{ref}") from None
        raise
