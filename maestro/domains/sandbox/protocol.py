"""The wire between host and sandbox child: framed JSON over two pipes, never pickle.

A frame is a 16-byte header (``MSB1`` and three big-endian lengths) and three sections:

- ``meta``: a JSON object (ASCII, so a lone surrogate crosses as an escape, never as an
  encoding error); every request carries ``seq`` and ``nonce`` and every reply echoes them;
- ``text``: UTF-8 text (a tool's answer: one string, whatever its size);
- ``data``: a JSON value (the database one way, a call's writes the other).

The host reads a child's frame against caps per section, checked from the header before any
byte of a section is read, so a child cannot make the host hold or parse more than the caps
allow (unpickling, or parsing without a bound, would hand the child the host's memory).
"""

from __future__ import annotations

import json
import os
import re
import select
import time
from dataclasses import dataclass
from typing import Any

from maestro.domains.files import json_nodes

MAGIC = b"MSB1"
HEADER_BYTES = 16
#: Most JSON values a frame's meta may hold (a describe reply's schemas fit in a tenth of it).
MAX_META_NODES = 200_000


class ChannelError(Exception):
    """The other end went away, sent garbage, or did not answer in time."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind  # "eof" | "timeout" | "protocol"
        self.reason = reason


@dataclass(frozen=True)
class Frame:
    """One message: its meta object, its text, and its data section still undecoded."""

    meta: dict[str, Any]
    text: str = ""
    data: bytes = b""

    def decoded_data(self, max_nodes: int | None = None) -> Any:
        """The data section as a JSON value (None when empty); ChannelError when not JSON, or
        (``max_nodes`` given: the host reading a child) over ``max_nodes`` values or holding a
        lone surrogate."""
        if not self.data:
            return None
        return loads_checked(self.data, "data section", max_nodes)


def loads_checked(data: bytes, what: str, max_nodes: int | None) -> Any:
    """JSON from a child: at most ``max_nodes`` values (counted before a byte is parsed) and no
    lone surrogate anywhere (it parses from ``"\\ud800"``, then breaks every UTF-8 writer
    downstream: a state hash, the MCP server's replies); ChannelError otherwise."""
    if max_nodes is not None and (n := json_nodes(data)) > max_nodes:
        raise ChannelError("protocol", f"its {what} holds {n} JSON values, over {max_nodes}")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ChannelError("protocol", f"the {what} is not JSON: {exc}") from None
    if max_nodes is not None and _has_lone_surrogate(value):
        raise ChannelError("protocol", f"its {what} holds a lone surrogate (not encodable text)")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if not _encodable(node):
                return True
        elif isinstance(node, dict):
            if not all(_encodable(key) for key in node):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _encodable(text: str) -> bool:
    # A str holds a surrogate only when one was decoded from an escape or surrogatepass: lone.
    return text.isascii() or _SURROGATE.search(text) is None


_SURROGATE = re.compile("[\ud800-\udfff]")


def readable_text(raw: bytes) -> str:
    """A child's answer text: UTF-8, each lone surrogate (which its encoder lets through)
    replaced by U+FFFD, so the text can be written anywhere downstream."""
    text = raw.decode("utf-8", "surrogatepass")
    if _encodable(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@dataclass(frozen=True)
class Caps:
    """The largest section of a frame the host accepts, in bytes."""

    meta: int
    text: int
    data: int


def encode(meta: dict[str, Any], text: str = "", data: Any = None) -> bytes:
    """One frame. ``text`` keeps lone surrogates (``surrogatepass``): what a tool returned."""
    m = json.dumps(meta, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    t = text.encode("utf-8", "surrogatepass")
    d = b"" if data is None else json.dumps(data, separators=(",", ":")).encode("ascii")
    header = MAGIC + b"".join(len(part).to_bytes(4, "big") for part in (m, t, d))
    return header + m + t + d


def _sizes(header: bytes) -> tuple[int, int, int]:
    if header[:4] != MAGIC:
        raise ChannelError("protocol", f"not a frame (header {header[:4]!r})")
    return (
        int.from_bytes(header[4:8], "big"),
        int.from_bytes(header[8:12], "big"),
        int.from_bytes(header[12:16], "big"),
    )


def _decode(m: bytes, t: bytes, d: bytes) -> Frame:
    try:
        meta = json.loads(m)
        text = t.decode("utf-8", "surrogatepass")
    except (ValueError, RecursionError) as exc:
        raise ChannelError("protocol", f"the frame does not decode: {exc}") from None
    if not isinstance(meta, dict):
        raise ChannelError("protocol", "the frame's meta is not a JSON object")
    return Frame(meta, text, d)


# ----- blocking side (the child) ----------------------------------------------------------------


def read_blocking(fd: int) -> Frame | None:
    """The next frame, waiting as long as it takes; None at end of file (the host is gone)."""
    header = _read_all(fd, HEADER_BYTES)
    if header is None:
        return None
    parts = []
    for size in _sizes(header):
        part = _read_all(fd, size)
        if part is None:
            return None
        parts.append(part)
    return _decode(*parts)


def _read_all(fd: int, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = os.read(fd, min(n - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def write_blocking(fd: int, frame: bytes) -> None:
    """Send one encoded frame, waiting as long as it takes."""
    view = memoryview(frame)
    while view:
        view = view[os.write(fd, view) :]


# ----- deadline side (the host) -----------------------------------------------------------------


def write_until(fd: int, frame: bytes, deadline: float) -> None:
    """Send one encoded frame on a non-blocking fd; ChannelError when the deadline passes."""
    view = memoryview(frame)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        except OSError as exc:
            raise ChannelError("eof", f"the sandbox child closed its input ({exc})") from None
        _wait(poller, deadline, "while sending the request")


def read_until(fd: int, deadline: float, caps: Caps) -> Frame:
    """The next frame; ChannelError at end of file, past the deadline or over a cap."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    sizes = _sizes(_read_until(fd, HEADER_BYTES, deadline, poller))
    for size, cap, name in zip(sizes, (caps.meta, caps.text, caps.data), SECTIONS, strict=True):
        if size > cap:
            raise ChannelError(
                "protocol", f"its {name} of {size} bytes is over the {cap}-byte limit"
            )
    m, t, d = (_read_until(fd, size, deadline, poller) for size in sizes)
    try:
        meta = loads_checked(m, "meta", MAX_META_NODES)
        text = readable_text(t)
    except UnicodeDecodeError as exc:
        raise ChannelError("protocol", f"its text is not UTF-8: {exc}") from None
    if not isinstance(meta, dict):
        raise ChannelError("protocol", "the frame's meta is not a JSON object")
    return Frame(meta, text, d)


SECTIONS = ("meta", "text", "data")


def pending(fd: int) -> bool | None:
    """Whether bytes wait on a non-blocking fd nobody asked for: True (data), None (the other
    end closed it), False (nothing). Reads at most one byte."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if not poller.poll(0):
        return False
    try:
        return True if os.read(fd, 1) else None
    except BlockingIOError:
        return False
    except OSError:
        return None


def _read_until(fd: int, n: int, deadline: float, poller: select.poll) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        try:
            chunk = os.read(fd, min(n - len(chunks), 1 << 20))
        except BlockingIOError:
            _wait(poller, deadline, "waiting for the reply")
            continue
        except OSError as exc:
            raise ChannelError("eof", f"the sandbox child's pipe failed ({exc})") from None
        if not chunk:
            raise ChannelError("eof", "the sandbox child exited")
        chunks += chunk
    return bytes(chunks)


def _wait(poller: select.poll, deadline: float, doing: str) -> None:
    remaining = deadline - time.monotonic()
    if (remaining <= 0 or not poller.poll(remaining * 1000)) and time.monotonic() >= deadline:
        raise ChannelError("timeout", f"no answer from the sandbox child {doing}")
