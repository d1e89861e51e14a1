"""HTTP transport of the benchmark server: loopback only, bearer token, bounded requests.

Only the standard library is used (:class:`http.server.ThreadingHTTPServer`, plus
:mod:`selectors`). The service runs one request at a time under its lock, so the simulation
never sees two calls at once.

A connection holds no thread while its request head (request line and headers) arrives: one
reader thread collects the heads of all such connections. Only a complete head is handed to
a thread, from one of two pools: heads carrying the right bearer token go to the pool of
authenticated connections, every other head (a wrong or missing token, a malformed head, a
head that did not arrive in time) to the pool that answers refusals. So slow or hostile
clients without the token can fill the refusal pool and the reader, never the slots of a
client that has the token.

Bounds (all enforced here, before the service sees anything):

* at most :data:`MAX_CONNECTIONS` authenticated connections are served at once (one thread
  each), and at most as many refusals are answered at once; a connection beyond either
  gets HTTP 503 (``server_busy``) at once and is closed;
* at most :data:`MAX_PENDING_CONNECTIONS` connections may be sending their head at once
  (no thread each); one more makes the reader answer the oldest of them 503 and close it;
* the request line and headers together are at most :data:`MAX_HEAD_BYTES` (431);
* receiving a request (request line, headers and body) must finish within
  :data:`REQUEST_TIMEOUT_S` of the connection's acceptance, however slowly the bytes
  trickle in (HTTP 408, ``request_timeout``); the service's own time is not counted;
* writing the answer must finish within :data:`RESPONSE_TIMEOUT_S`;
* one request per connection (HTTP/1.0), body at most
  :data:`~humanclaw_gym.server.protocol.MAX_REQUEST_BYTES`.

Per request, in this order:

1. a well-formed request line and headers (else 400, 414 or 431, as JSON like every
   refusal: nothing of the request is echoed);
2. path must be exactly ``/rpc`` as sent (404: ``//rpc`` is not normalised to ``/rpc``)
   and method ``POST`` (405);
3. ``Authorization: Bearer <token>`` must match, compared with
   :func:`hmac.compare_digest` (401, JSON-RPC code ``-32001``; the body is not parsed);
4. ``Content-Length`` must be present (411), one plain ASCII decimal (400) and at most
   :data:`~humanclaw_gym.server.protocol.MAX_REQUEST_BYTES` (413); no chunked bodies;
5. the body must be UTF-8 JSON (``-32700`` parse error, HTTP 200);
6. :meth:`BenchService.handle` answers (HTTP 200 with ``result`` or ``error``).

The log gets one line per request with the method name (only a known name, never raw
input), the HTTP status and the outcome; never the token, headers, bodies or images.
"""

from __future__ import annotations

import hmac
import http.client
import io
import json
import logging
import math
import os
import re
import selectors
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from humanclaw_gym.server.protocol import JSONRPC_VERSION, MAX_REQUEST_BYTES, RpcError

__all__ = [
    "BIND_ADDRESS",
    "LOOPBACK_HOSTS",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "MAX_PENDING_CONNECTIONS",
    "REQUEST_TIMEOUT_S",
    "RESPONSE_TIMEOUT_S",
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

MAX_CONNECTIONS = 16
"""Authenticated connections served at once (and refusals answered at once, in a pool of
their own); one more is answered 503 and closed."""

MAX_PENDING_CONNECTIONS = 128
"""Connections whose request head is still arriving (held by the one reader thread, no
thread each); one more makes the reader answer the oldest 503 and close it."""

MAX_HEAD_BYTES = 65536
"""The request line and headers together (431 above)."""

REQUEST_TIMEOUT_S = 30.0
"""Time from accepting a connection to having read its whole request (line, headers, body)."""

RESPONSE_TIMEOUT_S = 60.0
"""Time to write one answer (an artifact can be a few hundred MiB of base64)."""

_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{32,256}")  # used with fullmatch (no newline slips by)
_LENGTH_RE = re.compile(r"[0-9]{1,12}")  # ASCII digits only: str.isdigit() accepts '²'
_HEAD_END = re.compile(rb"\n\r?\n")  # the blank line after the headers (LF or CRLF lines)
_LOG = logging.getLogger("humanclaw_gym.server")
_RPC_PATH = "/rpc"
_LINGER_S = 2.0
_LINGER_BYTES = 8 * MAX_REQUEST_BYTES
_MAX_REQUEST_LINE = 8192
_BUSY_DRAIN_BYTES = 1 << 16
_HTTP_REFUSALS = {
    400: "malformed HTTP request line or headers",
    408: "the request was not received in time",
    414: "the request line is too long",
    431: "the request headers are too long or too many",
    501: f"only POST {_RPC_PATH} is served",
}


class TokenError(ValueError):
    """The bearer token is missing or malformed (the message never contains the token)."""


def validate_token(token: Any) -> str:
    """Check a bearer token: the whole value is 32..256 URL-safe characters
    (``A-Z a-z 0-9 - _``); a trailing newline or space is refused, never stripped.

    Raises:
        TokenError: describing the problem without echoing the token.
    """
    if not isinstance(token, str) or not token:
        raise TokenError(f"no bearer token: set {TOKEN_ENV} to 32..256 URL-safe characters")
    if not _TOKEN_RE.fullmatch(token):
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


@dataclass
class _Head:
    """What the reader received of one connection before handing it to a thread."""

    deadline: float
    """When the whole request must have arrived (``REQUEST_TIMEOUT_S`` after acceptance)."""
    data: bytearray = field(default_factory=bytearray)
    """The bytes received so far: the head, perhaps a first part of the body."""
    too_large: bool = False
    """More than :data:`MAX_HEAD_BYTES` arrived without the end of the head."""


class _RpcHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        service: Any,
        token: str,
        *,
        max_connections: int = MAX_CONNECTIONS,
        max_pending: int = MAX_PENDING_CONNECTIONS,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        response_timeout_s: float = RESPONSE_TIMEOUT_S,
    ) -> None:
        self.service = service
        self.token_bytes = token.encode("ascii")
        self.max_connections = max_connections
        self.max_pending = max_pending
        self.request_timeout_s = request_timeout_s
        self.response_timeout_s = response_timeout_s
        self._authenticated_slots = threading.BoundedSemaphore(max_connections)
        self._refusal_slots = threading.BoundedSemaphore(max_connections)
        self._heads_lock = threading.Lock()
        self._heads: dict[socket.socket, _Head] = {}  # handed to a thread, not yet taken
        self._reader = _HeadReader(self)
        try:
            super().__init__(address, _Handler)
        except BaseException:  # e.g. the port is taken: the reader never started
            self._reader.discard()
            raise
        self._reader.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Give the accepted connection to the reader (no thread until its head is in)."""
        self._reader.add(request, client_address)

    def server_close(self) -> None:
        self._reader.stop()
        super().server_close()

    # -- called by the reader -------------------------------------------------------------
    def dispatch(self, sock: socket.socket, client_address: Any, head: _Head) -> None:
        """Serve a connection whose head is in (or that stopped sending it) in a thread of
        the pool its head earns; answer 503 when that pool is full."""
        authenticated = not head.too_large and _head_is_authenticated(
            bytes(head.data), self.token_bytes
        )
        slots = self._authenticated_slots if authenticated else self._refusal_slots
        if not slots.acquire(blocking=False):
            try:
                self.refuse_busy(sock)
            finally:
                self.shutdown_request(sock)
            return
        with self._heads_lock:
            self._heads[sock] = head
        try:
            thread = threading.Thread(
                target=self._serve, args=(sock, client_address, slots), daemon=True
            )
            thread.start()
        except BaseException:
            with self._heads_lock:
                self._heads.pop(sock, None)
            slots.release()
            self.shutdown_request(sock)
            raise

    def take_head(self, sock: socket.socket) -> _Head:
        """The head the reader received for ``sock`` (for the handler's setup)."""
        with self._heads_lock:
            return self._heads.pop(sock)

    def _serve(self, sock: socket.socket, client_address: Any, slots: Any) -> None:
        try:
            self.finish_request(sock, client_address)
        except Exception:
            self.handle_error(sock, client_address)
        finally:
            with self._heads_lock:
                self._heads.pop(sock, None)
            self.shutdown_request(sock)
            slots.release()

    def refuse_busy(self, sock: socket.socket) -> None:
        """Answer 503 without reading the request and without blocking (the answer fits in
        an empty socket buffer; if it does not, the client gets a closed connection)."""
        error = RpcError(
            "server_busy",
            f"the server is busy (at most {self.max_connections} connections with the token "
            f"and {self.max_connections} refusals at once, {self.max_pending} connections "
            "sending their headers); retry later",
        )
        body = json.dumps(
            {"jsonrpc": JSONRPC_VERSION, "id": None, "error": error.to_dict()},
            separators=(",", ":"),
        ).encode("utf-8")
        head = (
            "HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nRetry-After: 1\r\n"
            "Connection: close\r\n\r\n"
        ).encode("ascii")
        self.service.count_outcome("server_busy")
        _LOG.info("rpc method=? http=503 outcome=server_busy")
        try:
            sock.setblocking(False)
            sock.sendall(head + body)
            sock.shutdown(socket.SHUT_WR)
            # Read what already arrived, so that closing does not reset the connection
            # (which could discard the answer on the client's side); never wait for more.
            drained = 0
            while drained < _BUSY_DRAIN_BYTES:
                chunk = sock.recv(_BUSY_DRAIN_BYTES)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:  # includes BlockingIOError (nothing more to read)
            pass


class _HeadReader:
    """One thread that receives the request heads of all new connections without blocking.

    A connection leaves it when its head is complete (the blank line after the headers
    arrived), when :data:`MAX_HEAD_BYTES` arrived without it, when the client stopped
    sending (end of stream) or at its request deadline; it is then given to
    :meth:`_RpcHTTPServer.dispatch`. A client that closes before sending a byte is closed
    silently. With :attr:`_RpcHTTPServer.max_pending` connections waiting, a new one makes
    the oldest get 503.
    """

    def __init__(self, server: _RpcHTTPServer) -> None:
        self._server = server
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._incoming: list[tuple[socket.socket, Any, float]] = []
        self._pending: dict[socket.socket, tuple[Any, _Head]] = {}  # insertion = accept order
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="humanclaw-serve-heads", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, sock: socket.socket, client_address: Any) -> None:
        deadline = time.monotonic() + self._server.request_timeout_s
        with self._lock:
            if self._stopped:
                self._server.shutdown_request(sock)
                return
            self._incoming.append((sock, client_address, deadline))
        self._wake()

    def discard(self) -> None:
        """Release what an unstarted reader holds."""
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # the buffer is full (a wake-up is pending anyway) or closed
            pass

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopped:
                        break
                    incoming, self._incoming = self._incoming, []
                for sock, address, deadline in incoming:
                    self._admit(sock, address, deadline)
                self._expire()
                for key, _ in self._selector.select(self._timeout()):
                    if key.data is None:
                        self._drain_wake()
                    else:
                        self._receive(key.fileobj, key.data)  # type: ignore[arg-type]
        finally:
            with self._lock:
                leftover = [sock for sock, _, _ in self._incoming]
                self._incoming = []
            for sock in [*leftover, *self._pending]:
                self._server.shutdown_request(sock)
            self._pending.clear()
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _timeout(self) -> float | None:
        if not self._pending:
            return None
        soonest = min(head.deadline for _, head in self._pending.values())
        return max(soonest - time.monotonic(), 0.0)

    def _admit(self, sock: socket.socket, address: Any, deadline: float) -> None:
        while len(self._pending) >= self._server.max_pending:
            oldest = next(iter(self._pending))
            self._forget(oldest)
            try:
                self._server.refuse_busy(oldest)
            finally:
                self._server.shutdown_request(oldest)
        try:
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ, address)
        except (OSError, ValueError):  # the client is gone already
            self._server.shutdown_request(sock)
            return
        self._pending[sock] = (address, _Head(deadline))

    def _forget(self, sock: socket.socket) -> tuple[Any, _Head]:
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        return self._pending.pop(sock)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:  # BlockingIOError: drained
            pass

    def _receive(self, sock: socket.socket, address: Any) -> None:
        head = self._pending[sock][1]
        try:
            chunk = sock.recv(MAX_HEAD_BYTES + 1 - len(head.data))
        except BlockingIOError:
            return
        except OSError:  # reset by the client
            self._forget(sock)
            self._server.shutdown_request(sock)
            return
        if not chunk:  # the client stopped sending: answer what arrived, if anything
            self._forget(sock)
            if head.data:
                self._hand_over(sock, address, head)
            else:
                self._server.shutdown_request(sock)
            return
        searched_from = max(len(head.data) - 2, 0)
        head.data += chunk
        end = _HEAD_END.search(head.data, searched_from)
        if end is not None and end.end() <= MAX_HEAD_BYTES:
            self._forget(sock)
            self._hand_over(sock, address, head)
        elif len(head.data) > MAX_HEAD_BYTES:
            head.too_large = True
            self._forget(sock)
            self._hand_over(sock, address, head)

    def _expire(self) -> None:
        now = time.monotonic()
        for sock in [s for s, (_, head) in self._pending.items() if head.deadline <= now]:
            address, head = self._forget(sock)
            self._hand_over(sock, address, head)  # the handler answers 408

    def _hand_over(self, sock: socket.socket, address: Any, head: _Head) -> None:
        try:
            sock.setblocking(True)
        except OSError:
            self._server.shutdown_request(sock)
            return
        try:
            self._server.dispatch(sock, address, head)
        except Exception as exc:  # e.g. no thread could be started: drop this one, go on
            _LOG.error("could not hand a connection to a thread", exc_info=exc)


def _bearer_matches(header: str, token_bytes: bytes) -> bool:
    """Whether an ``Authorization`` header value carries exactly the token."""
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        # Still run one comparison so a missing header costs about the same time.
        hmac.compare_digest(token_bytes, token_bytes[::-1])
        return False
    try:
        # HTTP's optional whitespace is space and tab only (RFC 9110, 5.6.3); str.strip()
        # would also drop \x0b, \x0c, \x1c-\x1f, \x85 and \xa0 around the token.
        presented_bytes = presented.strip(" \t").encode("ascii")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(presented_bytes, token_bytes)


def _head_is_authenticated(data: bytes, token_bytes: bytes) -> bool:
    """Whether a received head carries the token (only to choose the pool: the handler
    checks everything again). Anything that does not parse is not authenticated."""
    _, sep, rest = data.partition(b"\n")
    if not sep:
        return False
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    except (http.client.HTTPException, ValueError):
        return False
    return _bearer_matches(headers.get("Authorization", ""), token_bytes)


class _DeadlineReader(io.RawIOBase):
    """Socket reads that all end by one deadline (a slow sender cannot stretch a request).

    The bytes the reader thread received already (``prefix``) come first; then each
    ``recv`` gets the time left as its timeout; once the deadline has passed, reading raises
    :class:`TimeoutError` without touching the socket.
    """

    def __init__(self, sock: socket.socket, deadline: float, prefix: bytes = b"") -> None:
        super().__init__()
        self._sock = sock
        self._prefix = memoryview(prefix)
        self.deadline = deadline
        self.timed_out = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.timed_out = True
            raise TimeoutError("the request deadline has passed")
        self._sock.settimeout(left)
        try:
            return self._sock.recv_into(buffer)
        except TimeoutError:
            self.timed_out = True
            raise


class _Handler(BaseHTTPRequestHandler):
    server: _RpcHTTPServer
    server_version = "humanclaw-serve"
    sys_version = ""
    protocol_version = "HTTP/1.0"

    # -- plumbing ---------------------------------------------------------------------------
    def setup(self) -> None:
        super().setup()
        self._body_consumed = True
        self._responded = False
        self._raw_path = ""
        head = self.server.take_head(self.connection)
        self._head_too_large = head.too_large
        self.rfile.close()
        self._reader = _DeadlineReader(self.connection, head.deadline, bytes(head.data))
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        """Read the request line and headers (bounded), then dispatch to ``do_<VERB>``.

        Every refusal, including a malformed request line or headers, is answered through
        :meth:`send_error` as JSON; a request not received in time gets 408.
        """
        self.close_connection = True  # HTTP/1.0: one request per connection
        self.command = self.request_version = self.requestline = ""
        try:
            self.raw_requestline = self.rfile.readline(_MAX_REQUEST_LINE + 1)
            if len(self.raw_requestline) > _MAX_REQUEST_LINE:
                self.send_error(414)
                return
            if not self.raw_requestline:
                return  # the client closed without sending anything
            if self._head_too_large:
                self.send_error(431)
                return
            # The target as sent: parse_request turns a leading '//' into '/'.
            words = str(self.raw_requestline, "iso-8859-1").split()
            self._raw_path = words[1] if len(words) >= 2 else ""
            if not self.parse_request():  # it has answered through send_error
                return
            handler = getattr(self, f"do_{self.command}", None)
            if handler is None:
                self.send_error(501)
                return
            handler()
        except TimeoutError:
            if self._reader.timed_out and not self._responded:
                self._body_consumed = True  # do not linger: the client is too slow already
                self._error(408, "request_timeout", _HTTP_REFUSALS[408])
            self.close_connection = True
        except OSError:  # the client reset or closed the connection mid-request
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer a refusal of :class:`BaseHTTPRequestHandler` (malformed request line,
        headers, unknown verb) as JSON; ``message`` and ``explain`` are dropped because
        they can quote the request."""
        self._body_consumed = False
        self._error(code, "invalid_request", _HTTP_REFUSALS.get(code, "the request is refused"))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence the default access log (it would print raw request lines)."""

    def _send(
        self, status: int, payload: dict[str, Any], extra: Mapping[str, str] | None = None
    ) -> None:
        body = json.dumps(payload, allow_nan=False, separators=(",", ":")).encode("utf-8")
        deadline = time.monotonic() + self.server.response_timeout_s
        self._responded = True
        if not self.request_version.startswith("HTTP/1."):
            self.request_version = "HTTP/1.0"  # always answer with a status line and headers
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        try:
            self.connection.settimeout(self.server.response_timeout_s)
            self.end_headers()
            self.connection.settimeout(max(deadline - time.monotonic(), 0.001))
            self.wfile.write(body)
        except OSError:  # the client went away or does not read (timeout): give up on it
            self.close_connection = True

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
        if self._raw_path != _RPC_PATH:
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
                400,
                "invalid_request",
                "Content-Length must be given once, as a non-negative decimal integer of "
                "ASCII digits 0-9",
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
        except TimeoutError:
            self._body_consumed = True  # do not linger: the client is too slow already
            self._error(408, "request_timeout", _HTTP_REFUSALS[408])
            return
        except OSError:
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
        return _bearer_matches(self.headers.get("Authorization", ""), self.server.token_bytes)

    def _content_length(self) -> int | None:
        """The body length, or None unless exactly one Content-Length of ASCII digits
        was sent (``int()`` would also take ``'²'``, ``'١٢'``, ``'1_0'`` or ``' +1'``)."""
        values = self.headers.get_all("Content-Length") or []
        if len(values) != 1:
            return None
        raw = values[0].strip(" \t")
        if not _LENGTH_RE.fullmatch(raw):
            return None
        return int(raw)

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
    service: Any,
    token: str,
    host: str = BIND_ADDRESS,
    port: int = 0,
    *,
    max_connections: int = MAX_CONNECTIONS,
    max_pending: int = MAX_PENDING_CONNECTIONS,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    response_timeout_s: float = RESPONSE_TIMEOUT_S,
) -> ThreadingHTTPServer:
    """Bind the HTTP server (not yet serving).

    Args:
        service: a :class:`~humanclaw_gym.server.service.BenchService`.
        token: the bearer token (validated here).
        host: ``127.0.0.1`` or ``localhost``; anything else is refused.
        port: TCP port; 0 picks a free one (read it from ``server.server_address[1]``).
        max_connections: authenticated connections served at once (each holds one thread),
            and refusals answered at once; more get 503.
        max_pending: connections still sending their request head (no thread each); one
            more makes the oldest get 503.
        request_timeout_s: from accepting a connection to having read its whole request.
        response_timeout_s: to write one answer.

    Raises:
        ValueError / TokenError: bad host, port, limit or token.
        OSError: the port cannot be bound.
    """
    address = check_bind_host(host)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port={port!r} is invalid: allowed an int in 0..65535")
    for name, count in (("max_connections", max_connections), ("max_pending", max_pending)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{name}={count!r} is invalid: allowed an int >= 1")
    for name, value in (
        ("request_timeout_s", request_timeout_s),
        ("response_timeout_s", response_timeout_s),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value < math.inf
        ):
            raise ValueError(f"{name}={value!r} is invalid: allowed a finite number of seconds > 0")
    return _RpcHTTPServer(
        (address, port),
        service,
        validate_token(token),
        max_connections=max_connections,
        max_pending=max_pending,
        request_timeout_s=float(request_timeout_s),
        response_timeout_s=float(response_timeout_s),
    )
