"""Headless Chromium driven over the DevTools protocol: real mouse clicks and key presses, the
page's own JavaScript, screenshots of one element. Debian's chromium (scripts/test.sh installs
it); the protocol's websocket through the ``websockets`` package Prefect already depends on."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import connect
from websockets.sync.connection import Connection

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
]


class Page:
    """One browser tab."""

    def __init__(self, ws: Connection) -> None:
        self.ws = ws
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            self.events.append(msg)

    def open(self, url: str, width: int = 1280, height: int = 900) -> None:
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            self.events.append(json.loads(self.ws.recv(timeout=60)))

    def eval(self, expression: str) -> Any:
        out = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def _center(self, selector: str) -> tuple[float, float]:
        box = self.eval(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (!el) return null; el.scrollIntoView({block: 'center'});"
            " const r = el.getBoundingClientRect(); if (!r.width || !r.height) return [];"
            " return [r.x + Math.min(r.width / 2, 40), r.y + r.height / 2]; })()"
        )
        assert box is not None, f"no element {selector!r} on the page"
        assert box, f"{selector!r} is not shown: a person could not click it"
        return float(box[0]), float(box[1])

    def click(self, selector: str) -> None:
        """A left click with the mouse on the element (scrolled into view first)."""
        x, y = self._center(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def press(self, key: str, code: str, key_code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                type=kind,
                key=key,
                code=code,
                windowsVirtualKeyCode=key_code,
            )

    def choose(self, selector: str, value: str) -> None:
        """Pick an option of a <select> from the keyboard, as a person tabbing to it would:
        focus it, then arrow down until it holds ``value``."""
        self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        self.press("Home", "Home", 36)
        for _ in range(200):
            if self.eval(f"document.querySelector({json.dumps(selector)}).value") == value:
                return
            self.press("ArrowDown", "ArrowDown", 40)
        raise AssertionError(f"{selector} has no option {value!r}")

    def screenshot(self, path: Path, selector: str | None = None, height: int = 0) -> None:
        """The box around one element, or the window as it is (its top ``height`` pixels)."""
        params: dict[str, Any] = {"format": "png"}
        if selector is None and height:
            width = self.eval("innerWidth")
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        if selector is not None:
            params["captureBeyondViewport"] = True
            box = self.eval(
                f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                ".getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width,"
                " r.height]; })()"
            )
            x, y, w, h = box
            params["clip"] = {"x": x - 8, "y": y - 8, "width": w + 16, "height": h + 16, "scale": 1}
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))


@contextmanager
def chromium(profile: Path) -> Iterator[Page]:
    """A headless Chromium with one tab, ended (and waited for) on exit."""
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is not installed (bash scripts/test.sh installs it)"
    port_file = profile / "DevToolsActivePort"
    port_file.unlink(missing_ok=True)  # a profile used before holds the last run's port
    proc = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            assert proc.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            tabs = [t for t in json.loads(r.read()) if t["type"] == "page"]
        with connect(tabs[0]["webSocketDebuggerUrl"], max_size=None) as ws:
            yield Page(ws)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
