"""A tiny loopback chat-completions server for tests (OpenAI and Azure OpenAI paths).

``ChatServer(reply)`` answers every ``POST .../chat/completions`` (``/v1/chat/completions``
for the OpenAI client, ``/openai/deployments/<name>/chat/completions?api-version=...`` for
the Azure client) with ``reply(body)``: the reply text, an ``(http_status, json)`` pair or
an ``(http_status, json, headers)`` triple. Every request is recorded (path, headers,
parsed body, arrival time).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

USAGE = {
    "prompt_tokens": 1500,
    "completion_tokens": 200,
    "total_tokens": 1700,
    "completion_tokens_details": {"reasoning_tokens": 50},
}


def completion(text: str, usage: dict[str, Any] | None = USAGE) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "loopback-vlm",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
    }
    if usage is not None:
        data["usage"] = usage
    return data


def prompt_text(body: dict[str, Any]) -> str:
    """The text parts of the request's messages."""
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(p.get("text", "") for p in content or [] if p.get("type") == "text")
    return "\n".join(parts)


class ChatServer:
    """Loopback server; use as a context manager. ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, reply: Callable[[dict[str, Any]], Any]) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.loads(raw or b"{}")
                with server.lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers.items()),
                            "body": body,
                            "time": time.monotonic(),
                        }
                    )
                if not urlsplit(self.path).path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                answer = server.reply(body)
                if isinstance(answer, tuple):
                    self._send(*answer)
                else:
                    self._send(200, completion(str(answer)))

            def _send(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

        return Handler
