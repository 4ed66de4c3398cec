"""Importers of outside benchmarks: their items as maestro domains and tasks.

An imported package runs code maestro did not write (a benchmark's API classes), so the loader
sends it through the sandbox; which vetted modules its child may import is decided here, by the
importer that wrote it, never by the package (:func:`vetted_imports`).

The host-side modules read benchmarks only as data; ``bfcl_runtime`` runs only in the sandbox
child and is never imported by the host.
"""

from __future__ import annotations

from pathlib import Path

from maestro.domains.errors import Problem
from maestro.domains.models import DomainManifest


def vetted_imports(
    root: Path, manifest: DomainManifest
) -> tuple[dict[str, tuple[str, ...]], list[Problem]]:
    """The imports an imported package's sandbox child may allow, with the problems that
    refuse it (an unknown benchmark, another installed version, an edited tools.py)."""
    origin = manifest.provenance.imported_from
    if origin is None:
        # Outside code of unknown origin: the sandbox runs it with nothing vetted.
        return {}, []
    if origin.benchmark == "bfcl":
        from maestro.domains.importers.bfcl_package import vetted_imports as bfcl_vetted

        return bfcl_vetted(root, origin.version)
    return {}, [
        Problem(
            "domain.json",
            "provenance.imported_from.benchmark",
            f"no importer for benchmark {origin.benchmark!r} (known: bfcl)",
        )
    ]


__all__ = ["vetted_imports"]
