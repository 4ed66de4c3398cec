"""The wire between host and sandbox child: length-prefixed JSON frames over two pipes.

JSON, never pickle, in both directions: unpickling what an untrusted child sends would run its
code in the host.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any

HEADER_BYTES = 8


class ChannelError(Exception):
    """The other end went away, sent garbage, or did not answer in time."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind  # "eof" | "timeout" | "protocol"
        self.reason = reason


def encode(message: dict[str, Any]) -> bytes:
    """One frame: the body's length as 8 big-endian bytes, then the JSON body."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    return len(body).to_bytes(HEADER_BYTES, "big") + body


def decode(body: bytes) -> dict[str, Any]:
    """A frame's body as a dict; ChannelError when it is not a JSON object."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ChannelError("protocol", f"reply is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ChannelError("protocol", "reply is not a JSON object")
    return value


# ----- blocking side (the child) ----------------------------------------------------------------


def read_blocking(fd: int) -> dict[str, Any] | None:
    """The next frame, waiting as long as it takes; None at end of file (the host is gone)."""
    header = _read_all(fd, HEADER_BYTES)
    if header is None:
        return None
    body = _read_all(fd, int.from_bytes(header, "big"))
    if body is None:
        return None
    return decode(body)


def _read_all(fd: int, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = os.read(fd, min(n - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def write_blocking(fd: int, message: dict[str, Any]) -> None:
    """Send one frame, waiting as long as it takes."""
    view = memoryview(encode(message))
    while view:
        view = view[os.write(fd, view) :]


# ----- deadline side (the host) -----------------------------------------------------------------


def write_until(fd: int, message: dict[str, Any], deadline: float) -> None:
    """Send one frame on a non-blocking fd; ChannelError when the deadline passes first."""
    view = memoryview(encode(message))
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        except (BrokenPipeError, OSError) as exc:
            raise ChannelError("eof", f"the sandbox child closed its input ({exc})") from None
        _wait(poller, deadline, "while sending the request")


def read_until(fd: int, deadline: float, max_bytes: int) -> dict[str, Any]:
    """The next frame; ChannelError at end of file, past the deadline or over ``max_bytes``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    header = _read_until(fd, HEADER_BYTES, deadline, poller)
    size = int.from_bytes(header, "big")
    if size > max_bytes:
        raise ChannelError("protocol", f"reply of {size} bytes is over the {max_bytes}-byte limit")
    return decode(_read_until(fd, size, deadline, poller))


def _read_until(fd: int, n: int, deadline: float, poller: select.poll) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        try:
            chunk = os.read(fd, min(n - len(chunks), 1 << 20))
        except BlockingIOError:
            _wait(poller, deadline, "waiting for the reply")
            continue
        if not chunk:
            raise ChannelError("eof", "the sandbox child exited")
        chunks += chunk
    return bytes(chunks)


def _wait(poller: select.poll, deadline: float, doing: str) -> None:
    remaining = deadline - time.monotonic()
    if (remaining <= 0 or not poller.poll(remaining * 1000)) and time.monotonic() >= deadline:
        raise ChannelError("timeout", f"no answer from the sandbox child {doing}")
