"""Numeric command-line options that are refused, not trusted: one parser per kind of number.

Click's ranges let ``nan`` through (every comparison with NaN is false) and have no notion of a
finite number, so ``--episode-deadline-s nan`` or ``inf`` reached the run as a deadline. These
parsers refuse them at parse time: a clear message, exit code 2, nothing started.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import typer

#: The longest deadline or timeout any option takes: 30 days.
MAX_SECONDS = 30 * 24 * 3600.0


def bounded_float(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """A parser for ``typer.Option(parser=...)``: a finite float in ``[low, high]`` (``(low,
    high]`` when ``low_open``)."""
    shown = f"{'more than' if low_open else 'at least'} {low:g} and at most {high:g}"

    def parse(text: str | float) -> float:
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise typer.BadParameter(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise typer.BadParameter(f"{text} is not a finite number; give one {shown}")
        if value < low or (low_open and value == low) or value > high:
            raise typer.BadParameter(f"{text} is out of range; give a number {shown}")
        return value

    return parse


#: Deadlines and timeouts: more than 0 s, at most 30 days.
seconds = bounded_float(0.0, MAX_SECONDS, low_open=True)
