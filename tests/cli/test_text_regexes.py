"""Regexes over package text stay linear: ``^\\s*`` under MULTILINE crossed every blank line
from every line start, so 200k blank lines in policy.md or tools.py kept ``domains show`` and
``export tau2`` running past 60 s (the third red team, cases 21 and 22)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from maestro.cli.domains import _policy_rules
from maestro.domains.tau2_export import _OTHER_MAESTRO_IMPORT


@pytest.fixture
def bounded() -> Iterator[None]:
    """Fail, rather than hang, well past what a linear scan of the text costs (milliseconds)."""

    def expire(*_: object) -> None:
        raise TimeoutError("the regex ran past 10 s: quadratic again")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_policy_rules_count_is_linear_in_blank_lines(bounded: None) -> None:
    assert _policy_rules("1. First rule.\n  2. Second rule.\nprose\n") == 2
    assert _policy_rules("1. Only rule.\n" + "\n" * 200_000 + "prose") == 1


def test_the_export_import_check_is_linear_in_blank_lines(bounded: None) -> None:
    source = "from maestro.domains.sdk import tool\n    import maestro.x\n"
    assert [m.group(1) for m in _OTHER_MAESTRO_IMPORT.finditer(source)] == ["from", "import"]
    assert _OTHER_MAESTRO_IMPORT.search("\n" * 200_000 + "x = 1") is None
