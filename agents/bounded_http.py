"""HTTP for model endpoints with a deadline per request and a cap on the reply body.

The ``openai`` client reads through ``httpx2``, whose timeouts apply to each socket
operation: a server that trickles one byte a second never trips a 3 s read timeout, and
a reply body is read whole, however large, before anyone looks at it. The transport here
gives the client the same connection pool (``httpcore2``) with two bounds on the call in
flight:

* a **deadline**: every socket operation of the request (name resolution, connect, TLS,
  each write and each read, response headers and body alike) waits at most until the
  deadline set when the call started, so the whole request/response ends within
  ``timeout_s`` whatever the server's pace (:class:`DeadlineBackend`);
* a **body cap**: the body is read chunk by chunk and abandoned once more than
  ``max_body_bytes`` arrived, on the wire or after decompression (gzip and deflate are
  decoded here, in bounded steps, so a small compressed body cannot expand past the cap;
  other encodings are refused), for error answers as for replies.

The bounds apply to the call opened with :meth:`RequestLimits.call` in the current thread;
outside a call the transport behaves like ``httpx2``'s own. When a bound stops a call, the
call's :class:`CallState` says which (``exceeded``), so the caller can report it whatever
the client made of the exception.

HTTP(S) proxies named by the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
``NO_PROXY``) are used as ``httpx2`` would; a SOCKS proxy is refused with one line.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2

__all__ = [
    "BodyTooLargeError",
    "BoundedTransport",
    "CallState",
    "DeadlineBackend",
    "RequestLimits",
    "bounded_client",
    "environment_proxy",
]

_WRITE_CHUNK = 1 << 16
_ACCEPT_ENCODING = b"gzip, deflate"
_EXCEPTIONS: tuple[tuple[type[Exception], type[Exception]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout),
    (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.TimeoutException, httpx2.TimeoutException),
    (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError),
    (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.NetworkError, httpx2.NetworkError),
    (httpcore2.ProxyError, httpx2.ProxyError),
    (httpcore2.UnsupportedProtocol, httpx2.UnsupportedProtocol),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError),
    (httpcore2.LocalProtocolError, httpx2.LocalProtocolError),
    (httpcore2.ProtocolError, httpx2.ProtocolError),
)


class BodyTooLargeError(httpx2.DecodingError):
    """A response body grew past the call's ``max_body_bytes``; reading stopped there."""


@dataclass
class CallState:
    """The bounds of one call and what stopped it.

    Attributes:
        timeout_s: the call's deadline, in seconds from its start.
        deadline: ``time.monotonic()`` value at which the call ends.
        max_body_bytes: the largest response body read (wire bytes and decoded bytes).
        exceeded: ``"deadline"`` or ``"body_size"`` once a bound stopped the call, else
            ``None``.
        body_bytes: decoded body bytes read so far in this call.
    """

    timeout_s: float
    deadline: float
    max_body_bytes: int
    exceeded: str | None = None
    body_bytes: int = 0

    def stopped_by(self) -> str | None:
        """Which bound stopped the call: ``"deadline"`` (also when a socket wait cut to the
        deadline ran out), ``"body_size"``, or ``None``."""
        if self.exceeded is None and time.monotonic() >= self.deadline:
            self.exceeded = "deadline"
        return self.exceeded

    def wait_s(self, timeout: float | None, error: type[Exception], what: str) -> float:
        """``timeout`` cut to the time left before the deadline; ``error`` once none is."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.exceeded = self.exceeded or "deadline"
            raise error(f"{what}: the {self.timeout_s:g} s deadline of the request has passed")
        return left if timeout is None else min(float(timeout), left)


class RequestLimits:
    """The bounds of the call in flight, one per thread (shared by a client's connections)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def current(self) -> CallState | None:
        """The current thread's call, or ``None`` outside :meth:`call`."""
        return getattr(self._local, "state", None)

    @contextmanager
    def call(self, timeout_s: float, max_body_bytes: int) -> Iterator[CallState]:
        """Bound every request made in this thread inside the ``with`` block.

        Args:
            timeout_s: deadline of the whole block, seconds (> 0).
            max_body_bytes: the largest response body read (>= 1).
        """
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s!r} is invalid: allowed seconds > 0")
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int):
            raise ValueError(f"max_body_bytes={max_body_bytes!r} is invalid: allowed an int >= 1")
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes={max_body_bytes!r} is invalid: allowed an int >= 1")
        state = CallState(float(timeout_s), time.monotonic() + float(timeout_s), max_body_bytes)
        previous = self.current()
        self._local.state = state
        try:
            yield state
        finally:
            self._local.state = previous

    def wait_s(self, timeout: float | None, error: type[Exception], what: str) -> float | None:
        state = self.current()
        return timeout if state is None else state.wait_s(timeout, error, what)


# ---- socket level: the deadline ----------------------------------------------------------------


class _DeadlineStream(httpcore2.NetworkStream):
    """A network stream whose every operation ends by the current call's deadline."""

    def __init__(self, stream: httpcore2.NetworkStream, limits: RequestLimits) -> None:
        self._stream = stream
        self._limits = limits

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        wait = self._limits.wait_s(timeout, httpcore2.ReadTimeout, "reading the response")
        return self._stream.read(max_bytes, wait)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # In slices, so that a server reading slowly cannot stretch one write past the
        # deadline (the inner stream applies its timeout to each send).
        for start in range(0, len(buffer), _WRITE_CHUNK):
            wait = self._limits.wait_s(timeout, httpcore2.WriteTimeout, "sending the request")
            self._stream.write(buffer[start : start + _WRITE_CHUNK], wait)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.NetworkStream:
        wait = self._limits.wait_s(timeout, httpcore2.ConnectTimeout, "the TLS handshake")
        return _DeadlineStream(
            self._stream.start_tls(ssl_context, server_hostname, wait), self._limits
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore2.NetworkBackend):
    """``httpcore2``'s socket backend with every wait cut to the current call's deadline.

    Host names are resolved in a helper thread that the caller waits for only until the
    deadline (``getaddrinfo`` itself cannot be interrupted); the addresses are then tried
    in the resolver's order.
    """

    def __init__(
        self, limits: RequestLimits, inner: httpcore2.NetworkBackend | None = None
    ) -> None:
        self._limits = limits
        self._inner = inner if inner is not None else httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        error: Exception | None = None
        for address in self._resolve(host, port, timeout):
            wait = self._limits.wait_s(timeout, httpcore2.ConnectTimeout, f"connecting to {host}")
            try:
                stream = self._inner.connect_tcp(
                    address, port, wait, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as exc:
                error = exc
                continue
            return _DeadlineStream(stream, self._limits)
        assert error is not None  # _resolve returns at least one address
        raise error

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        wait = self._limits.wait_s(timeout, httpcore2.ConnectTimeout, f"connecting to {path}")
        stream = self._inner.connect_unix_socket(path, wait, socket_options=socket_options)
        return _DeadlineStream(stream, self._limits)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def _resolve(self, host: str, port: int, timeout: float | None) -> list[str]:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return [host]
        box: dict[str, Any] = {}

        def resolve() -> None:
            try:
                box["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                box["error"] = exc

        worker = threading.Thread(target=resolve, name="humanclaw-resolve", daemon=True)
        worker.start()
        worker.join(self._limits.wait_s(timeout, httpcore2.ConnectTimeout, f"resolving {host}"))
        if worker.is_alive():
            state = self._limits.current()
            if state is not None and time.monotonic() >= state.deadline - 0.01:
                state.exceeded = state.exceeded or "deadline"
            raise httpcore2.ConnectTimeout(f"resolving {host} did not finish in time")
        if "error" in box:
            exc = box["error"]
            reason = getattr(exc, "strerror", None) or str(exc)
            raise httpcore2.ConnectError(f"cannot resolve host {host!r}: {reason}")
        addresses: list[str] = []
        for *_, sockaddr in box["infos"]:
            if sockaddr[0] not in addresses:
                addresses.append(str(sockaddr[0]))
        if not addresses:
            raise httpcore2.ConnectError(f"cannot resolve host {host!r}: no address")
        return addresses


# ---- HTTP level: the body cap ------------------------------------------------------------------


@contextmanager
def _httpx_errors() -> Iterator[None]:
    """``httpcore2`` exceptions as the ``httpx2`` ones the ``openai`` client expects."""
    try:
        yield
    except Exception as exc:
        for source, target in _EXCEPTIONS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


class _Decoder:
    """Content decoding that never produces more than it is asked for."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._deflate_first = encoding == "deflate"
        if encoding in ("gzip", "x-gzip"):
            self._zlib: Any = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()
        else:
            self._zlib = None

    def decode(self, data: bytes, limit: int) -> bytes:
        """Decode ``data``; more than ``limit - 1`` bytes out means "too large" (the output
        is cut at ``limit``)."""
        if self._zlib is None:
            return data
        try:
            out = self._zlib.decompress(data, limit)
        except zlib.error:
            if not self._deflate_first:
                raise httpx2.DecodingError(f"the {self.encoding} body does not decode") from None
            # "deflate" sent as a raw stream without the zlib header (as httpx accepts too)
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            self._deflate_first = False
            return self.decode(data, limit)
        self._deflate_first = False
        return out  # ``limit`` bytes with input left over: the caller stops there

    def flush(self, limit: int) -> bytes:
        if self._zlib is None:
            return b""
        out = self._zlib.flush()
        return out[:limit]


class _BoundedBody(httpx2.SyncByteStream):
    def __init__(
        self, response: httpcore2.Response, decoder: _Decoder, limits: RequestLimits
    ) -> None:
        self._response = response
        self._decoder = decoder
        self._state = limits.current()

    def __iter__(self) -> Iterator[bytes]:
        state = self._state
        cap = None if state is None else state.max_body_bytes
        wire = 0
        decoded = 0
        with _httpx_errors():
            assert isinstance(self._response.stream, Iterable)
            for chunk in self._response.stream:
                wire += len(chunk)
                room = None if cap is None else cap - decoded
                if room is not None and wire > cap:
                    self._too_large(f"more than {cap} bytes on the wire")
                data = self._decoder.decode(chunk, (room if room is not None else 1 << 62) + 1)
                decoded += len(data)
                if state is not None:
                    state.body_bytes = decoded
                if cap is not None and decoded > cap:
                    self._too_large(f"more than {cap} bytes")
                if data:
                    yield data
            room = None if cap is None else cap - decoded
            tail = self._decoder.flush((room if room is not None else 1 << 62) + 1)
            decoded += len(tail)
            if cap is not None and decoded > cap:
                self._too_large(f"more than {cap} bytes")
            if tail:
                yield tail

    def _too_large(self, detail: str) -> None:
        if self._state is not None:
            self._state.exceeded = self._state.exceeded or "body_size"
        raise BodyTooLargeError(f"response body of {detail}; reading stopped")

    def close(self) -> None:
        self._response.close()


class BoundedTransport(httpx2.BaseTransport):
    """An ``httpx2`` transport on a connection pool with :class:`DeadlineBackend`, whose
    response bodies are read within the current call's cap (see the module docstring).

    Args:
        limits: the per-thread call bounds.
        proxy: an ``http://`` or ``https://`` proxy URL, or ``None`` to connect directly.
        ssl_context: default: ``httpx2.create_ssl_context()`` (which honours
            ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).
    """

    def __init__(
        self,
        limits: RequestLimits,
        *,
        proxy: str | None = None,
        ssl_context: Any = None,
    ) -> None:
        self._limits = limits
        backend = DeadlineBackend(limits)
        context = httpx2.create_ssl_context() if ssl_context is None else ssl_context
        if proxy is None:
            self._pool: Any = httpcore2.ConnectionPool(
                ssl_context=context, max_connections=10, network_backend=backend
            )
        else:
            parsed = httpx2.Proxy(url=proxy)
            self._pool = httpcore2.HTTPProxy(
                proxy_url=httpcore2.URL(
                    scheme=parsed.url.raw_scheme,
                    host=parsed.url.raw_host,
                    port=parsed.url.port,
                    target=parsed.url.raw_path,
                ),
                proxy_auth=parsed.raw_auth,
                proxy_headers=parsed.headers.raw,
                ssl_context=context,
                max_connections=10,
                network_backend=backend,
            )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"accept-encoding"]
        headers.append((b"Accept-Encoding", _ACCEPT_ENCODING))
        core_request = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=headers,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_errors():
            response = self._pool.handle_request(core_request)
        encodings = [
            value.decode("latin-1").strip().lower()
            for key, value in response.headers
            if key.lower() == b"content-encoding"
        ]
        encoding = ",".join(e for e in encodings if e and e != "identity")
        if encoding not in ("", "gzip", "x-gzip", "deflate"):
            response.close()
            raise httpx2.DecodingError(
                f"the response's Content-Encoding {encoding!r} is not one this client "
                "accepts (gzip, deflate or none)"
            )
        kept = [
            (k, v)
            for k, v in response.headers
            if k.lower() != b"content-encoding"
            and not (encoding and k.lower() == b"content-length")
        ]
        return httpx2.Response(
            status_code=response.status,
            headers=kept,
            stream=_BoundedBody(response, _Decoder(encoding), self._limits),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


def environment_proxy(url: str) -> str | None:
    """The HTTP(S) proxy the environment names for ``url``, or ``None``.

    Reads ``<scheme>_proxy`` then ``all_proxy`` (either case) and honours ``no_proxy``.

    Raises:
        ValueError: the proxy is not an ``http://`` or ``https://`` URL.
    """
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    if "://" not in proxy:
        proxy = "http://" + proxy
    if not proxy.startswith(("http://", "https://")):
        raise ValueError(
            f"the environment's proxy for {url} is {proxy!r}: the model transport uses "
            "http:// and https:// proxies only; unset it or list the host in NO_PROXY"
        )
    return proxy


def bounded_client(url: str, limits: RequestLimits, timeout_s: float) -> httpx2.Client:
    """An ``httpx2.Client`` for the endpoint ``url`` over a :class:`BoundedTransport`
    (with the environment's proxy for it), following redirects as the ``openai`` client's
    default one does; ``timeout_s`` is also its per-operation timeout."""
    transport = BoundedTransport(limits, proxy=environment_proxy(url))
    return httpx2.Client(transport=transport, timeout=timeout_s, follow_redirects=True)
