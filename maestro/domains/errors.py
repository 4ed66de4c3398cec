"""Error types of the domain runtime, one per boundary."""

from __future__ import annotations

from dataclasses import dataclass


class ToolError(Exception):
    """A business-rule violation or a bad request; its message is the tool's answer."""


class ToolDeadlineExceeded(BaseException):
    """Raised asynchronously into a tool call that ran past its deadline.

    A ``BaseException`` so that a tool's ``except Exception`` cannot swallow it.
    """


class StoreError(Exception):
    """Misuse of the state store by a tool: unknown table, bad record, closed session."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a domain package: which file, where in it, and what."""

    file: str
    location: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.location}" if self.location else self.file
        return f"{where}: {self.message}"


class DomainLoadError(Exception):
    """A domain package failed validation; carries every problem found, not only the first."""

    def __init__(self, path: str, problems: list[Problem]) -> None:
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"domain package {path} has {len(problems)} problem(s):\n{lines}")
