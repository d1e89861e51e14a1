"""Screenshot a served viewer page with headless Chromium (docs and smoke checks).

``chromium --headless --screenshot --virtual-time-budget=...`` never finishes on a viser
page: the page keeps a websocket open and animates every frame, so virtual time never
reaches its budget. This helper drives Chromium through its DevTools protocol instead:
open the page, wait a fixed *real* time for the websocket to deliver the scene and for
the software WebGL renderer to draw it, then capture the viewport.

Needs a Chromium binary (``apt-get install chromium``) and the ``websockets`` package
(installed with viser). Chromium runs with a fresh, temporary profile and with
networking features that phone home switched off. :class:`ChromiumPage` is the small
DevTools client behind it (navigate, evaluate JavaScript, wait for a condition, capture);
the browser tests of the viewer and of the HTML report use it too.
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

__all__ = ["CHROMIUM_FLAGS", "ChromiumPage", "capture_page", "find_chromium"]

#: Flags for a quiet, isolated headless Chromium (a fresh --user-data-dir is added).
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-unsafe-swiftshader",
    "--use-angle=swiftshader",
)
_STARTUP_TIMEOUT_S = 30.0
_HIDE_NOTIFICATIONS_JS = (
    "document.querySelectorAll('[class*=\"Notification-root\"]').forEach((e) => e.remove());"
)


def find_chromium() -> str | None:
    """Path of a Chromium / Chrome binary, or ``None`` (``$CHROMIUM`` wins)."""
    env = os.environ.get("CHROMIUM")
    if env and Path(env).is_file():
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _devtools_port(proc: subprocess.Popen[bytes], profile: Path) -> int:
    """The DevTools port Chromium writes to ``<profile>/DevToolsActivePort``."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with code {proc.returncode} at startup")
        try:
            first = marker.read_text(encoding="utf-8").splitlines()[0].strip()
        except (FileNotFoundError, IndexError):
            first = ""
        if first.isdigit():
            return int(first)
        time.sleep(0.1)
    raise TimeoutError(f"chromium did not open its DevTools port within {_STARTUP_TIMEOUT_S} s")


def _page_socket_url(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
        targets = json.loads(resp.read().decode("utf-8"))
    for target in targets:
        if target.get("type") == "page":
            return str(target["webSocketDebuggerUrl"])
    raise RuntimeError("chromium has no page target")


class ChromiumPage:
    """One headless Chromium page driven through the DevTools protocol (a context manager).

    Chromium runs with :data:`CHROMIUM_FLAGS` and a fresh temporary profile, which is
    deleted on exit together with the browser process.

    Args:
        width, height: viewport size in CSS pixels (device scale factor 1).
        chromium: browser binary (default: :func:`find_chromium`).

    Raises:
        FileNotFoundError: no Chromium binary.
        RuntimeError / TimeoutError: the browser did not start or answer.
    """

    def __init__(self, width: int = 1280, height: int = 800, chromium: str | None = None) -> None:
        self.width, self.height = int(width), int(height)
        self._binary = chromium or find_chromium()
        if self._binary is None:
            raise FileNotFoundError("no chromium binary found (apt-get install -y chromium)")
        self._profile: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ws: Any = None
        self._counter = 0

    def __enter__(self) -> ChromiumPage:
        from websockets.sync.client import connect

        self._profile = tempfile.TemporaryDirectory(prefix="humanclaw-chromium-")
        profile = self._profile.name
        cmd = [
            str(self._binary),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={self.width},{self.height}",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = _devtools_port(self._proc, Path(profile))
            self._ws = connect(_page_socket_url(port), max_size=64 * 1024 * 1024)
            self.call(
                "Emulation.setDeviceMetricsOverride",
                width=self.width,
                height=self.height,
                deviceScaleFactor=1,
                mobile=False,
            )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            except Exception:
                pass
            self._ws = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._profile is not None:
            self._profile.cleanup()
            self._profile = None

    def call(self, method: str, **params: object) -> dict:
        """One DevTools command; returns its result (events in between are skipped)."""
        self._counter += 1
        self._ws.send(json.dumps({"id": self._counter, "method": method, "params": params}))
        while True:
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == self._counter:
                if "error" in reply:
                    raise RuntimeError(f"chromium {method} failed: {reply['error']}")
                return reply.get("result", {})

    def navigate(self, url: str, wait_s: float = 0.0) -> None:
        """Open ``url``, then wait ``wait_s`` seconds of real time."""
        self.call("Page.navigate", url=url)
        if wait_s > 0:
            time.sleep(wait_s)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"javascript error: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float = 30.0, poll_s: float = 0.25) -> Any:
        """Poll a JavaScript expression until it is truthy; returns its value.

        Raises:
            TimeoutError: still falsy after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} stayed falsy for {timeout_s} s")
            time.sleep(poll_s)

    def screenshot(self, path: str | os.PathLike[str]) -> Path:
        """Save a PNG of the viewport (written atomically)."""
        from humanclaw_gym.fileio import write_bytes_atomic

        data = self.call("Page.captureScreenshot", format="png")["data"]
        return write_bytes_atomic(Path(path), base64.b64decode(data))


def capture_page(
    url: str,
    path: str | os.PathLike[str],
    *,
    chromium: str | None = None,
    width: int = 1280,
    height: int = 800,
    wait_s: float = 10.0,
    hide_notifications: bool = True,
) -> Path:
    """Open ``url`` in headless Chromium, wait ``wait_s`` seconds, save a PNG of the viewport.

    Args:
        url: the page (loopback URL of a running viewer).
        path: output PNG (written atomically).
        chromium: browser binary (default: :func:`find_chromium`).
        width, height: viewport size in pixels.
        wait_s: real time to let the page load and draw before capturing.
        hide_notifications: remove toast notifications (viser warns about software
            WebGL under headless Chromium) before capturing.

    Returns:
        The written path.

    Raises:
        FileNotFoundError: no Chromium binary.
        RuntimeError / TimeoutError: the browser did not start or answer.
    """
    with ChromiumPage(width, height, chromium) as page:
        page.navigate(url, wait_s=wait_s)
        if hide_notifications:
            page.evaluate(_HIDE_NOTIFICATIONS_JS)
            time.sleep(0.5)
        return page.screenshot(path)


def main(argv: list[str] | None = None) -> int:
    """``python -m humanclaw_gym.viewer.screenshot --output OUT.png``: serve an oracle episode in a
    :class:`~humanclaw_gym.viewer.DebugViewer`, take a few steps, capture the page."""
    import tyro

    def shoot(
        output: Path,
        episode_id: str | None = None,
        steps: int = 3,
        wait_s: float = 10.0,
        width: int = 1280,
        height: int = 800,
    ) -> int:
        """Write a screenshot of the debug viewer page to --output (PNG).

        Args:
            output: PNG to write.
            episode_id: val100 episode to show (default: the first one).
            steps: oracle decision steps before the capture.
            wait_s: seconds to let the page draw.
            width: viewport width in pixels.
            height: viewport height in pixels.
        """
        from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
        from humanclaw_gym.viewer.debug_viewer import DebugViewer
        from humanclaw_gym.viewer.loop import resolve_viewer_policy

        env_kwargs = {} if episode_id is None else {"episode_ids": [episode_id]}
        policy, name, kwargs = resolve_viewer_policy("oracle", env_kwargs)
        viewer = DebugViewer(
            FindNavInteractEnv(**kwargs), policy, agent_name=name, port=0, paused=True
        )
        viewer.start()
        try:
            for _ in range(steps):
                viewer.request_step().result(timeout=120)
            path = capture_page(viewer.url, output, width=width, height=height, wait_s=wait_s)
        finally:
            viewer.close()
        viewer.join(60)
        print(path)
        return 0

    return int(tyro.cli(shoot, args=argv, prog="python -m humanclaw_gym.viewer.screenshot"))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
