"""Importers of outside benchmarks: their items as maestro domains and tasks.

An imported package runs code maestro did not write (a benchmark's API classes), so the loader
sends it through the sandbox; which vetted modules its child may import is decided here, by the
importer that wrote it, never by the package (:func:`vetted_imports`).

The host-side modules read benchmarks only as data; ``bfcl_runtime`` runs only in the sandbox
child and is never imported by the host.
"""

from __future__ import annotations

from maestro.domains.errors import Problem
from maestro.domains.files import PackageFolder
from maestro.domains.models import DomainManifest


def vetted_imports(
    folder: PackageFolder, manifest: DomainManifest
) -> tuple[dict[str, tuple[str, ...]], list[Problem]]:
    """The imports an imported package's sandbox child may allow, with the problems that
    refuse it (an unknown benchmark, another installed version, an edited tools.py).

    tools.py is read through the load's own handle, which returns the load the same text: the
    source vetted is the source the child runs (by path, a folder renamed in between ran an
    edited tools.py with the benchmark's imports granted)."""
    origin = manifest.provenance.imported_from
    if origin is None:
        # Outside code of unknown origin: the sandbox runs it with nothing vetted.
        return {}, []
    if origin.benchmark == "bfcl":
        from maestro.domains.importers.bfcl_package import vetted_imports as bfcl_vetted

        problems: list[Problem] = []
        return bfcl_vetted(folder.read_text("tools.py", problems), origin.version, problems)
    return {}, [
        Problem(
            "domain.json",
            "provenance.imported_from.benchmark",
            f"no importer for benchmark {origin.benchmark!r} (known: bfcl)",
        )
    ]


__all__ = ["vetted_imports"]
