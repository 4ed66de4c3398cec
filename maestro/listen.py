"""Addresses a maestro server may listen on: checked before anything is started.

Every server maestro starts (``serve-mcp``, ``llm serve``, ``ui``, ``view``) takes ``--host``.
A host that does not resolve, is not an address of this machine, or a port already taken was
found only after the model was extracted or the Prefect server launched; and a host other than
loopback exposes a server anyone on the network can reach. :func:`check_listen` binds the
address once, now, and says what is wrong; :func:`is_loopback` tells the addresses only this
machine reaches.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket

#: Names and IPv4/IPv6 addresses (``[::1]``, ``fe80::1%eth0``): no spaces, nothing else.
_HOST = re.compile(r"[A-Za-z0-9._:%\[\]-]{1,253}")


class ListenError(ValueError):
    """``host:port`` cannot be listened on; ``option`` names the part at fault."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(host: str, port: int) -> None:
    """:class:`ListenError` unless ``host:port`` can be listened on now (port 0: any free port,
    which checks the host alone)."""
    if not 0 <= port <= 65535:
        raise ListenError(f"port {port} is not between 0 and 65535", "port")
    if not _HOST.fullmatch(host):
        raise ListenError(f"{host!r} is not a host name or address", "host")
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ListenError(f"cannot listen on {host}: {reason}", "host") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as exc:
            # EADDRNOTAVAIL: not an address of this machine; EADDRINUSE: the port is taken.
            option = "port" if port and exc.errno == errno.EADDRINUSE else "host"
            raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}", option) from None
