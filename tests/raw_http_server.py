"""A loopback TCP server that answers HTTP requests with scripted raw bytes, for tests of
hostile or broken model endpoints (trickled, huge, truncated, mislabelled answers).

``RawServer(script)`` reads each request (headers and a ``Content-Length`` body) and calls
``script(conn, request)``, which writes whatever it likes to the socket ``conn``; the
connection is closed after it returns. ``request`` holds ``method``, ``path``, ``headers``
(lower-case names) and ``body`` (parsed JSON, or None). Every request is recorded; a script
may count what it sent in ``server.sent`` (bytes written before the client went away).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any


def response_head(
    status: int = 200,
    headers: dict[str, str] | None = None,
    reason: str = "OK",
) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_response(data: Any, status: int = 200, content_type: str = "application/json") -> bytes:
    body = json.dumps(data).encode()
    head = response_head(status, {"Content-Type": content_type, "Content-Length": str(len(body))})
    return head + body


class RawServer:
    """Loopback server; use as a context manager. ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, script: Callable[[socket.socket, dict[str, Any]], None]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.sent = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.05)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._workers: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for worker in self._workers:
            worker.join(timeout=5)
        self._sock.close()

    def stopping(self) -> bool:
        return self._stop.is_set()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            worker = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._workers.append(worker)
            worker.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                request = _read_request(conn)
            except (OSError, ValueError):
                return
            if request is None:
                return
            with self.lock:
                self.requests.append(request)
            try:
                self.script(conn, request)
            except OSError:  # the client went away: what a hostile server cannot know
                pass


def _read_request(conn: socket.socket) -> dict[str, Any] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    try:
        body = json.loads(rest) if rest else None
    except ValueError:
        body = None
    return {
        "method": method,
        "path": path,
        "headers": headers,
        "body": body,
        "time": time.monotonic(),
    }


def send_slowly(
    server: RawServer, conn: socket.socket, data: bytes, step: int, pause_s: float
) -> None:
    """Send ``data`` ``step`` bytes at a time with ``pause_s`` between, until done or the
    server stops."""
    for start in range(0, len(data), step):
        if server.stopping():
            return
        conn.sendall(data[start : start + step])
        with server.lock:
            server.sent += len(data[start : start + step])
        time.sleep(pause_s)


def send_counted(server: RawServer, conn: socket.socket, parts: Iterable[bytes]) -> None:
    """Send every part (stopping when the client goes away), counting the bytes sent."""
    for part in parts:
        if server.stopping():
            return
        conn.sendall(part)
        with server.lock:
            server.sent += len(part)
