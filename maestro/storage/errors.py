"""The one error type of storage/."""

from __future__ import annotations


class StorageError(Exception):
    """A lake operation failed: bad rows, unknown table or column, or commits that kept
    conflicting."""
