"""HTTP transport of the benchmark server: loopback only, bearer token, bounded bodies.

Only the standard library is used (:class:`http.server.ThreadingHTTPServer`). Requests are
read and authenticated in their own threads; the service runs one request at a time under
its lock, so the simulation never sees two calls at once.

Per request, in this order:

1. path must be ``/rpc`` (404) and method ``POST`` (405);
2. ``Authorization: Bearer <token>`` must match, compared with
   :func:`hmac.compare_digest` (401, JSON-RPC code ``-32001``; the body is not parsed);
3. ``Content-Length`` must be present (411), a plain decimal (400) and at most
   :data:`~humanclaw_gym.server.protocol.MAX_REQUEST_BYTES` (413); no chunked bodies;
4. the body must be UTF-8 JSON (``-32700`` parse error, HTTP 200);
5. :meth:`BenchService.handle` answers (HTTP 200 with ``result`` or ``error``).

The log gets one line per request with the method name (only a known name, never raw
input), the HTTP status and the outcome; never the token, headers, bodies or images.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import socket
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from humanclaw_gym.server.protocol import JSONRPC_VERSION, MAX_REQUEST_BYTES, RpcError

__all__ = [
    "BIND_ADDRESS",
    "LOOPBACK_HOSTS",
    "TOKEN_ENV",
    "TokenError",
    "check_bind_host",
    "make_server",
    "token_from_env",
    "validate_token",
]

TOKEN_ENV = "HUMANCLAW_SERVER_TOKEN"
"""Environment variable holding the bearer token (server and driver)."""

BIND_ADDRESS = "127.0.0.1"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
"""Accepted ``--host`` values; both bind ``127.0.0.1``."""

_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{32,256}$")
_LOG = logging.getLogger("humanclaw_gym.server")
_RPC_PATH = "/rpc"
_SOCKET_TIMEOUT_S = 30.0
_LINGER_S = 2.0
_LINGER_BYTES = 8 * MAX_REQUEST_BYTES


class TokenError(ValueError):
    """The bearer token is missing or malformed (the message never contains the token)."""


def validate_token(token: Any) -> str:
    """Check a bearer token: 32..256 URL-safe characters (``A-Z a-z 0-9 - _``).

    Raises:
        TokenError: describing the problem without echoing the token.
    """
    if not isinstance(token, str) or not token:
        raise TokenError(f"no bearer token: set {TOKEN_ENV} to 32..256 URL-safe characters")
    if not _TOKEN_RE.match(token):
        raise TokenError(
            f"{TOKEN_ENV} is malformed (length {len(token)}): it must have 32..256 URL-safe "
            "characters A-Z a-z 0-9 - _ (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return token


def token_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The validated token from :data:`TOKEN_ENV`.

    Raises:
        TokenError: missing or malformed.
    """
    env = os.environ if environ is None else environ
    return validate_token(env.get(TOKEN_ENV))


def check_bind_host(host: str) -> str:
    """The address to bind for ``host``; only loopback is allowed.

    Raises:
        ValueError: any non-loopback host (e.g. ``0.0.0.0``), naming the allowed values.
    """
    if host not in LOOPBACK_HOSTS:
        raise ValueError(
            f"host={host!r} is refused: the server binds loopback only (allowed: "
            f"{', '.join(LOOPBACK_HOSTS)}); reach it from elsewhere through a controlled "
            "forward such as an SSH tunnel"
        )
    return BIND_ADDRESS


class _RpcHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], service: Any, token: str) -> None:
        self.service = service
        self.token_bytes = token.encode("ascii")
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _RpcHTTPServer
    server_version = "humanclaw-serve"
    sys_version = ""
    protocol_version = "HTTP/1.0"
    timeout = _SOCKET_TIMEOUT_S

    # -- plumbing ---------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence the default access log (it would print raw request lines)."""

    def _send(
        self, status: int, payload: dict[str, Any], extra: Mapping[str, str] | None = None
    ) -> None:
        body = json.dumps(payload, allow_nan=False, separators=(",", ":")).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _error(
        self, status: int, name: str, message: str, extra: Mapping[str, str] | None = None
    ) -> None:
        error = RpcError(name, message)
        self._send(
            status, {"jsonrpc": JSONRPC_VERSION, "id": None, "error": error.to_dict()}, extra
        )
        self.server.service.count_outcome(name)
        self._log("?", status, name)
        if not self._body_consumed:
            self._linger_close()

    def _linger_close(self) -> None:
        """Close after an error answered before the body was read, without resetting it.

        Closing a socket that still has unread request bytes makes the kernel send a reset,
        and a client still writing its (refused) body then sees ``Broken pipe`` instead of
        our status. So: finish our side (``SHUT_WR``), then read and discard what the client
        still sends, bounded by :data:`_LINGER_BYTES` and :data:`_LINGER_S`.
        """
        self.close_connection = True
        self._body_consumed = True
        try:
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            return
        deadline = time.monotonic() + _LINGER_S
        remaining = _LINGER_BYTES
        try:
            while remaining > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.connection.settimeout(left)
                chunk = self.connection.recv(min(1 << 16, remaining))
                if not chunk:
                    break
                remaining -= len(chunk)
        except OSError:  # includes the timeout
            pass

    def _log(self, method: str, status: int, outcome: str, started: float | None = None) -> None:
        elapsed = "" if started is None else f" ms={1000.0 * (time.perf_counter() - started):.1f}"
        _LOG.info("rpc method=%s http=%d outcome=%s%s", method, status, outcome, elapsed)

    # -- verbs ---------------------------------------------------------------------------------
    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        started = time.perf_counter()
        self._body_consumed = False
        if self.path != _RPC_PATH:
            self._error(404, "invalid_request", f"not found: POST JSON-RPC requests to {_RPC_PATH}")
            return
        length = self._content_length()
        if not self._authorized():
            if length is not None:
                self._drain(length)
            self._error(
                401,
                "unauthorized",
                "unauthorized: a valid 'Authorization: Bearer <token>' header is required",
                {"WWW-Authenticate": 'Bearer realm="humanclaw"'},
            )
            return
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._error(
                411, "invalid_request", "chunked bodies are not accepted; send Content-Length"
            )
            return
        raw_length = self.headers.get("Content-Length")
        if raw_length is None:
            self._error(411, "invalid_request", "Content-Length is required")
            return
        if length is None:
            self._error(
                400, "invalid_request", "Content-Length must be a non-negative decimal integer"
            )
            return
        if length > MAX_REQUEST_BYTES:
            self._error(
                413, "invalid_request", f"the request body is larger than {MAX_REQUEST_BYTES} bytes"
            )
            return
        try:
            body = self.rfile.read(length)
            self._body_consumed = True
        except (OSError, TimeoutError):
            self._error(400, "invalid_request", "the request body could not be read")
            return
        if len(body) != length:
            self._error(400, "invalid_request", "the request body is shorter than Content-Length")
            return
        try:
            request = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, int limits
            error = RpcError("parse_error", "parse error: the body is not valid UTF-8 JSON")
            self._send(200, {"jsonrpc": JSONRPC_VERSION, "id": None, "error": error.to_dict()})
            self.server.service.count_outcome("parse_error")
            self._log("?", 200, "parse_error", started)
            return
        response = self.server.service.handle(request)
        method = self.server.service.method_name(request)
        outcome = "ok" if "result" in response else response["error"]["data"]["error"]
        try:
            self._send(200, response)
        except (TypeError, ValueError) as exc:  # a result that is not JSON: never leak it
            _LOG.error("could not encode the response of %s", method, exc_info=exc)
            self._error(500, "internal_error", "internal server error (response encoding)")
            return
        self._log(method, 200, outcome, started)

    def _refuse_verb(self) -> None:
        self._body_consumed = False
        self._error(405, "invalid_request", f"only POST {_RPC_PATH} is served", {"Allow": "POST"})

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse_verb  # noqa: N815

    # -- checks -------------------------------------------------------------------------------
    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented:
            # Still run one comparison so a missing header costs about the same time.
            hmac.compare_digest(self.server.token_bytes, self.server.token_bytes[::-1])
            return False
        try:
            presented_bytes = presented.strip().encode("ascii")
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(presented_bytes, self.server.token_bytes)

    def _content_length(self) -> int | None:
        raw = self.headers.get("Content-Length")
        if raw is None or not raw.strip().isdigit() or len(raw.strip()) > 12:
            return None
        return int(raw.strip())

    def _drain(self, length: int) -> None:
        if length > MAX_REQUEST_BYTES:
            return  # _error lingers instead
        try:
            self.rfile.read(length)
            self._body_consumed = True
        except (OSError, TimeoutError):
            pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def make_server(
    service: Any, token: str, host: str = BIND_ADDRESS, port: int = 0
) -> ThreadingHTTPServer:
    """Bind the HTTP server (not yet serving).

    Args:
        service: a :class:`~humanclaw_gym.server.service.BenchService`.
        token: the bearer token (validated here).
        host: ``127.0.0.1`` or ``localhost``; anything else is refused.
        port: TCP port; 0 picks a free one (read it from ``server.server_address[1]``).

    Raises:
        ValueError / TokenError: bad host, port or token.
        OSError: the port cannot be bound.
    """
    address = check_bind_host(host)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port={port!r} is invalid: allowed an int in 0..65535")
    return _RpcHTTPServer((address, port), service, validate_token(token))
