"""Screenshot a served viewer page with headless Chromium (docs and smoke checks).

``chromium --headless --screenshot --virtual-time-budget=...`` never finishes on a viser
page: the page keeps a websocket open and animates every frame, so virtual time never
reaches its budget. This helper drives Chromium through its DevTools protocol instead:
open the page, wait a fixed *real* time for the websocket to deliver the scene and for
the software WebGL renderer to draw it, then capture the viewport.

Needs a Chromium binary (``apt-get install chromium``) and the ``websockets`` package
(installed with viser). Chromium runs with a fresh, temporary profile and with
networking features that phone home switched off.
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

__all__ = ["CHROMIUM_FLAGS", "capture_page", "find_chromium"]

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
    from websockets.sync.client import connect

    binary = chromium or find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium binary found (apt-get install -y chromium)")
    out = Path(path)
    with tempfile.TemporaryDirectory(prefix="humanclaw-chromium-") as profile:
        cmd = [
            binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = _devtools_port(proc, Path(profile))
            with connect(_page_socket_url(port), max_size=64 * 1024 * 1024) as ws:
                counter = 0

                def call(method: str, **params: object) -> dict:
                    nonlocal counter
                    counter += 1
                    ws.send(json.dumps({"id": counter, "method": method, "params": params}))
                    while True:
                        reply = json.loads(ws.recv(timeout=60))
                        if reply.get("id") == counter:
                            if "error" in reply:
                                raise RuntimeError(f"chromium {method} failed: {reply['error']}")
                            return reply.get("result", {})

                call(
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                call("Page.navigate", url=url)
                time.sleep(wait_s)
                if hide_notifications:
                    call("Runtime.evaluate", expression=_HIDE_NOTIFICATIONS_JS)
                    time.sleep(0.5)
                data = call("Page.captureScreenshot", format="png")["data"]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    from humanclaw_gym.fileio import write_bytes_atomic

    return write_bytes_atomic(out, base64.b64decode(data))


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
