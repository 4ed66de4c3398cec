"""Command-line input that is refused, not trusted: a clear message, exit code 2, nothing
started or written.

Click's ranges let ``nan`` through (every comparison with NaN is false) and have no notion of a
finite number, so ``--episode-deadline-s nan`` or ``inf`` reached the run as a deadline: one
parser per kind of number refuses them at parse time. A host, a file to write, the lake root and
a cron line were each found wrong only after a Prefect server was launched or the embedded
model extracted (400 MB): each has its check here, run before either.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError

from maestro.cli.output import echo

if TYPE_CHECKING:
    from maestro.storage import Lake

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


# ----- addresses, files and settings: checked before anything starts ------------------------


def host_option() -> Any:
    """``--host`` of a server without authentication: loopback unless ``--allow-public``."""
    return typer.Option("127.0.0.1", help="Address to listen on (loopback unless --allow-public).")


def allow_public_option(what: str) -> Any:
    """``--allow-public``: serve ``what`` on an address other than loopback, knowingly."""
    return typer.Option(
        False,
        "--allow-public",
        help=f"Serve on an address other than loopback ({what} has no authentication).",
    )


def listen_or_exit(host: str, port: int, *, allow_public: bool, what: str) -> None:
    """Refuse (exit 2) a ``--host``/``--port`` that cannot be listened on, and a host other than
    loopback unless ``allow_public``: ``what`` (a server without authentication) would answer
    anyone who reaches the machine."""
    from maestro.listen import ListenError, check_listen, is_loopback

    try:
        check_listen(host, port)
    except ListenError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"--{exc.option}") from None
    if not allow_public and not is_loopback(host):
        raise typer.BadParameter(
            f"{host} is not a loopback address and {what} has no authentication: anyone who "
            "reaches this machine could use it; give --allow-public to serve there anyway",
            param_hint="--host",
        )


def writable_file(path: Path, option: str) -> Path:
    """``path`` as a file this command can create later (its folder exists and is writable,
    it is not a folder), or exit 2 naming ``option`` now, before hours of work."""
    folder = path.parent
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a folder, not a file", param_hint=option)
    if not folder.is_dir():
        raise typer.BadParameter(f"{folder} is not an existing folder", param_hint=option)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"{folder} is not writable", param_hint=option)
    return path


def writable_folder(path: Path, option: str) -> Path:
    """``path`` as a folder this command can write into later: an existing writable folder, or
    a name the file system takes whose nearest existing folder above is writable; or exit 2
    naming ``option`` now (a name over 255 bytes failed only when the flow wrote the sheet)."""
    try:
        above = next(p for p in (path, *path.parents) if p.exists())
        is_dir = above.is_dir()
    except OSError as exc:  # ENAMETOOLONG: no such folder can ever be made
        raise typer.BadParameter(f"{path}: {exc.strerror}", param_hint=option) from None
    if not is_dir:
        raise typer.BadParameter(f"{path} is inside {above}, a file", param_hint=option)
    if not os.access(above, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"{above} is not writable", param_hint=option)
    return path


def lake_or_exit(root: str | None = None) -> Lake:
    """The lake at ``root`` (``--lake-root``), else ``MAESTRO_LAKE_ROOT``; a root that is not a
    folder, or lake settings that do not parse, end the command (exit 2) with the reason."""
    from maestro.storage import Lake, LakeSettings, StorageError

    try:
        lake = Lake(LakeSettings(root=root) if root else LakeSettings())
    except StorageError as exc:
        echo(f"error: {exc}", err=True)
    except ValidationError as exc:
        shown = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        echo(f"error: lake settings (MAESTRO_LAKE_*): {shown}", err=True)
    else:
        if lake.remote:
            return lake
        above = next(p for p in (Path(lake.root), *Path(lake.root).parents) if p.exists())
        if above.is_dir():
            return lake
        echo(f"error: the lake root {lake.root} is inside {above}, a file", err=True)
    raise typer.Exit(2)


#: The fields of a cron line: name, lowest and highest value, names allowed for the values.
_CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    (
        "month",
        1,
        12,
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    ),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_CRON_ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_CRON_ITEM = re.compile(r"(\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/([0-9]+))?")
_CRON_SPECIAL = re.compile(r"(?=.*[LW#?])[A-Za-z0-9#?/-]+")


def cron(text: str) -> str:
    """A parser for ``--cron``: five fields of numbers, names, ranges, lists and steps, or an
    alias like ``@daily``. Prefect checks the line again before it serves; this check only
    keeps a typo from launching a Prefect server first."""
    if text.strip().lower() in _CRON_ALIASES:
        return text.strip()
    fields = text.split()
    if len(fields) != len(_CRON_FIELDS):
        raise typer.BadParameter(
            f"{text!r} has {len(fields)} field(s); a cron line has 5 (minute hour day-of-month "
            "month day-of-week, e.g. '0 2 * * *') or is an alias like @daily"
        )
    for field, (name, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for item in field.split(","):
            problem = _cron_item(item, low, high, names)
            if problem:
                raise typer.BadParameter(f"{text!r}: {name} {item!r}: {problem}")
    return text


def _cron_item(item: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    if _CRON_SPECIAL.fullmatch(item):
        return None  # L, W, # and ? (last day, weekday, nth weekday): Prefect's own check judges
    match = _CRON_ITEM.fullmatch(item)
    if match is None:
        return "not a number, a name, a range, * or a step"
    if match.group(2) is not None and int(match.group(2)) == 0:
        return "a step of 0"
    if match.group(1) == "*":
        return None
    for value in match.group(1).split("-"):
        if value.lower() in names:
            continue
        if not value.isdigit():
            return f"{value!r} is not a number from {low} to {high}" + (
                f" or a name ({', '.join(names)})" if names else ""
            )
        if not low <= int(value) <= high:
            return f"{value} is not from {low} to {high}"
    return None
