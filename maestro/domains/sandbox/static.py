"""Static validation of LLM-written ``tools.py`` and ``models.py``, before anything runs."""

from __future__ import annotations

from maestro.domains.errors import Problem


def check_tools_source(source: str, filename: str = "tools.py") -> list[Problem]:
    """Every rule a generated ``tools.py`` breaks, each as a Problem at ``line L col C``.

    An empty list means the source may be loaded into the sandbox; it does not make it safe to
    import in the host.
    """
    raise NotImplementedError


def check_models_source(source: str, filename: str = "models.py") -> list[Problem]:
    """Every rule a generated ``models.py`` breaks; models.py may only declare record types.

    Allowed: imports from the allowlist, classes whose bodies are annotated fields with literal
    or ``Field(...)`` defaults, simple constants (literals, ``Literal[...]`` aliases) and
    ``TABLES``. Because nothing else is allowed, a models.py that passes is imported in the host.
    """
    raise NotImplementedError
