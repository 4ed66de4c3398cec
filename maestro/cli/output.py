"""Printing through Rich without letting the text being printed style itself or the terminal.

Rich reads ``[...]`` as markup and ``:name:`` as an emoji code by default, so an error naming
``domain.json:id:`` printed as ``domain.json🆔`` and a pattern ``^[a-z][a-z0-9_]{1,39}$`` lost
its brackets. Every console the CLI prints with comes from here, with markup, emoji codes and
highlighting off; styles are given as ``style=`` or :class:`rich.text.Text` parts, never
embedded in the text.

The text printed is often untrusted (a problem message a sandboxed package wrote, a tool's
answer): control characters in it would drive the operator's terminal (an OSC 52 clipboard
write, a window title, erased lines and a fake "ok"). Every string printed through these
consoles and :func:`styled` has its control characters shown as escapes instead
(:func:`printable`); newlines and tabs stay. So has every log line :func:`log_handler`
prints: a library's log can quote a client's text (the MCP SDK logs a refused ``Host`` header
as it came).
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

#: C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and
#: isolates (which reorder what the operator reads).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with each control character written as an escape (``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class _LiteralConsole(Console):
    """A console whose strings are printed as they are, control characters escaped."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)


def console(*, stderr: bool = False) -> Console:
    """A console that prints every string literally."""
    return _LiteralConsole(
        soft_wrap=True, markup=False, emoji=False, highlight=False, stderr=stderr
    )


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text from plain parts and ``(text, style)`` pairs; no part is read as markup."""
    return Text.assemble(
        *(printable(p) if isinstance(p, str) else (printable(p[0]), p[1]) for p in parts)
    )


def echo(text: str, *, err: bool = False) -> None:
    """``typer.echo`` for text that may carry untrusted parts (an error naming a package's
    problem): control characters escaped."""
    typer.echo(printable(text), err=err)


class _EscapingFormatter(logging.Formatter):
    """Log records formatted as usual, then the whole line (a traceback too) escaped."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def log_handler(level: int = logging.WARNING) -> logging.Handler:
    """A handler printing log records of ``level`` and above to stderr, control characters
    escaped: for a server whose libraries log what clients send."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(_EscapingFormatter("%(levelname)s: %(message)s"))
    return handler
