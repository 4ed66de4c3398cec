"""Printing through Rich without letting the text being printed style itself.

Rich reads ``[...]`` as markup and ``:name:`` as an emoji code by default, so an error naming
``domain.json:id:`` printed as ``domain.json🆔`` and a pattern ``^[a-z][a-z0-9_]{1,39}$`` lost
its brackets. Every console the CLI prints with comes from here, with markup, emoji codes and
highlighting off; styles are given as ``style=`` or :class:`rich.text.Text` parts, never
embedded in the text.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def console(*, stderr: bool = False) -> Console:
    """A console that prints every string literally."""
    return Console(soft_wrap=True, markup=False, emoji=False, highlight=False, stderr=stderr)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text from plain parts and ``(text, style)`` pairs; no part is read as markup."""
    return Text.assemble(*parts)
