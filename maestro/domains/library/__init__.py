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
