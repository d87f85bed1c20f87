"""Headless Chromium driven over the DevTools protocol, for the page tests of `opwire view` and its benchmark.

`Browser()` starts Debian's `chromium` (or $OPWIRE_CHROMIUM) with a throw-away profile and no network
services, and talks CDP over a websocket (`websocket-client`). `CHROMIUM` is None when no browser is
installed; tests skip loudly then (CI installs `chromium` in .ci/run, so there they run).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM", "Browser"]

CHROMIUM = os.environ.get("OPWIRE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
)


class Browser:
    """One headless Chromium with one page; `with Browser() as b: b.open(path); b.eval("...")`."""

    def __init__(self, width: int = 1400, height: int = 900, timeout: float = 60.0) -> None:
        import websocket

        if CHROMIUM is None:
            raise RuntimeError("no chromium installed (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="opwire-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, *_FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port = self._port(timeout)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        self._id = 0
        self.timeout = timeout
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.errors: list[str] = []

    def _port(self, timeout: float) -> int:
        f = Path(self.profile) / "DevToolsActivePort"
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if f.exists() and f.read_text().strip():
                return int(f.read_text().split()[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode} before it listened")
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port in time")

    def send(self, method: str, **params: Any) -> Any:
        """One CDP call; events that arrive meanwhile are checked for page errors."""
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if msg.get("method") == "Runtime.exceptionThrown":
                self.errors.append(json.dumps(msg["params"]["exceptionDetails"])[:2000])

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its (JSON) value; a thrown error raises."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page error: {json.dumps(r['exceptionDetails'])[:2000]}")
        return r["result"].get("value")

    def open(self, path: str | Path, ready: str = "document.body && document.body.dataset.ready === '1'") -> float:
        """Load a file and wait until `ready` is true; returns the seconds from navigation to ready."""
        start = time.perf_counter()
        self.send("Page.navigate", url=Path(path).resolve().as_uri())
        self.wait(ready)
        return time.perf_counter() - start

    def wait(self, expression: str, timeout: float | None = None) -> None:
        """Poll until `expression` is truthy in the page."""
        end = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < end:
            try:
                if self.eval(expression):
                    return
            except RuntimeError:
                pass  # the page is still loading
            time.sleep(0.02)
        raise TimeoutError(f"page never satisfied {expression!r}; page errors: {self.errors}")

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching `selector`."""
        box = self.eval(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def type(self, text: str) -> None:
        """Type text into the focused element."""
        self.send("Input.insertText", text=text)

    def key(self, key: str, code: str | None = None, text: str | None = None) -> None:
        """Press and release one key (e.g. "Enter", "+")."""
        extra = {"text": text} if text else {}
        self.send("Input.dispatchKeyEvent", type="keyDown", key=key, code=code or key, **extra)
        self.send("Input.dispatchKeyEvent", type="keyUp", key=key, code=code or key)

    def screenshot(self, path: str | Path) -> Path:
        """Save a PNG of the viewport."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        out = Path(path)
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
