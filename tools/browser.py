"""Look at a page as a reader does: headless Chromium (Debian's ``chromium``) driven over the DevTools protocol.

:class:`Browser` starts Chromium with a fresh profile and the flags that keep it off the network (without
``--disable-background-networking`` and friends it waits on the closed network), connects to its DevTools
websocket (``websocket-client``), opens one page at a given viewport and answers :meth:`Browser.evaluate` and
:meth:`Browser.screenshot`. ``make test`` installs Chromium (``apt-get install chromium``) where it is missing and
the user is root.

``python tools/browser.py OUT.png PAGE.html [WIDTHxHEIGHT]`` saves a screenshot of the first screen of a page
(1366x768 by default): how ``docs/report.png`` is made from ``kubeflux demo``'s report.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
)
"""Chromium's flags: headless, no sandbox (root in CI), nothing that reaches for the network."""
TIMEOUT = 60.0
"""Seconds to wait for Chromium to start, a page to load or an answer."""


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or a page did not load."""


def find_chromium() -> str | None:
    """The Chromium executable, or None."""
    for name in CHROMIUM:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium and one page in it (a context manager: it stops Chromium and removes its profile)."""

    def __init__(self, width: int = 1366, height: int = 768) -> None:
        self.width, self.height = width, height
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        import websocket  # websocket-client: a dependency of the Kubernetes client

        executable = find_chromium()
        if executable is None:
            raise BrowserError("Chromium is not installed (apt-get install chromium; make test does it as root)")
        self._profile = tempfile.mkdtemp(prefix="kubeflux-chromium-")
        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            address = self._devtools_address()
            self._socket = websocket.create_connection(address, timeout=TIMEOUT, suppress_origin=True)
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call(
                "Emulation.setDeviceMetricsOverride",
                session=True,
                width=self.width,
                height=self.height,
                deviceScaleFactor=1,
                mobile=False,
            )
            self.call("Page.enable", session=True)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        socket = getattr(self, "_socket", None)
        if socket is not None:
            socket.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _devtools_address(self) -> str:
        """The browser's websocket address, from the ``DevToolsActivePort`` file Chromium writes in its profile."""
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrowserError(f"Chromium exited with code {self._process.returncode} before it listened")
            lines = port_file.read_text().split() if port_file.is_file() else []
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        raise BrowserError(f"Chromium did not open its DevTools port in {TIMEOUT:g} s")

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one DevTools command (to the page with ``session``) and return its result; events that arrive
        meanwhile are kept for :meth:`wait_for`."""
        number = next(self._ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        self._socket.send(json.dumps(message))
        while True:
            answer = json.loads(self._socket.recv())
            if answer.get("id") == number:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error'].get('message')}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            if "method" in answer:
                self._events.append(answer)

    def wait_for(self, event: str) -> dict[str, Any]:
        """The next event named ``event`` (those already received first)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for index, seen in enumerate(self._events):
                if seen.get("method") == event:
                    del self._events[index]
                    return seen
            self._events.append(json.loads(self._socket.recv()))
        raise BrowserError(f"no {event} in {TIMEOUT:g} s")

    def open(self, page: Path) -> None:
        """Load a local page and wait until it (and every image on it) has loaded."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=page.resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression evaluated in the page."""
        answer = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression[:60]}…: {answer['exceptionDetails'].get('text')}")
        return answer["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """Save what the viewport shows (the first screen) as a PNG."""
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=False)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    width, height = (int(n) for n in (argv[2] if len(argv) == 3 else "1366x768").split("x"))
    with Browser(width, height) as browser:
        browser.open(Path(argv[1]))
        browser.screenshot(Path(argv[0]))
    print(f"{argv[0]}: first {width}x{height} of {argv[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LANG", "C.UTF-8")
    raise SystemExit(main(sys.argv[1:]))
