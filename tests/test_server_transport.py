"""The server's HTTP transport in-process: request deadlines, the connection bound, strict
headers, token hygiene and private run state.

A real ``humanclaw serve`` subprocess is exercised in ``test_server.py``; here the same
transport runs in a thread around a service that has no environment (only ``describe``
is answered), so the limits can be set short and measured.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from humanclaw_gym.server.client import ServerClient, ServerConnectionError
from humanclaw_gym.server.plan import EpisodePlan
from humanclaw_gym.server.service import BenchService
from humanclaw_gym.server.transport import (
    MAX_CONNECTIONS,
    MAX_HEAD_BYTES,
    MAX_PENDING_CONNECTIONS,
    REQUEST_TIMEOUT_S,
    TokenError,
    make_server,
    validate_token,
)

_TOKEN = secrets.token_urlsafe(32)
_DESCRIBE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "describe"}).encode()


class Served:
    """A transport serving in a background thread; ``port``, ``service``, ``server``."""

    def __init__(self, root: Path, **limits: Any) -> None:
        plan = EpisodePlan.from_selection("val100", 0, root / "out", limit=2)
        self.service = BenchService(plan)
        self.server = make_server(self.service, _TOKEN, port=0, **limits)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.service.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    made: list[Served] = []

    def make(**limits: Any) -> Served:
        s = Served(tmp_path / f"s{len(made)}", **limits)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _head(token: str = _TOKEN, length: int | str = len(_DESCRIBE)) -> bytes:
    return (
        f"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def _status_and_body(answer: bytes) -> tuple[int, dict[str, Any]]:
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


# --------------------------------------------------------------------------------------
# slow requests and the connection bound
# --------------------------------------------------------------------------------------


def test_documented_limits() -> None:
    assert REQUEST_TIMEOUT_S == 30.0 and MAX_CONNECTIONS == 16
    assert MAX_PENDING_CONNECTIONS == 128 and MAX_HEAD_BYTES == 65536
    text = (Path(__file__).resolve().parents[1] / "docs" / "server.md").read_text()
    assert "30 s" in text and "16 connections" in text
    assert "128 connections" in text and "64 KiB" in text


def test_a_trickling_request_is_cut_at_its_deadline(served) -> None:
    """One byte at a time used to keep a connection open for ever (each byte restarted a
    per-read timeout); the whole request now has one deadline."""
    srv = served(request_timeout_s=1.0)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        started = time.monotonic()
        data = _head() + _DESCRIBE
        answer = b""
        for i in range(len(data)):
            try:
                sock.sendall(data[i : i + 1])
            except OSError:  # the server answered and closed: stop writing
                break
            time.sleep(0.1)
            if time.monotonic() - started > 8:
                break
        sock.settimeout(10)
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        elapsed = time.monotonic() - started
    assert elapsed < 6.0, f"the connection stayed open {elapsed:.1f} s past a 1 s deadline"
    status, body = _status_and_body(answer)
    assert status == 408 and body["error"]["data"]["error"] == "request_timeout"
    assert srv.service.outcome_counts().get("request_timeout") == 1


def test_a_stalled_body_is_cut_at_the_same_deadline(served) -> None:
    srv = served(request_timeout_s=1.0)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(_head() + _DESCRIBE[:5])  # headers complete, body never finished
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert time.monotonic() - started < 6.0
    assert _status_and_body(answer)[0] == 408


def _wait_for_thread_count(before: int, at_least: int, timeout_s: float = 10.0) -> None:
    """Until the server holds ``at_least`` threads more than ``before`` (a loaded machine
    may take a while to start them)."""
    deadline = time.monotonic() + timeout_s
    while threading.active_count() - before < at_least and time.monotonic() < deadline:
        time.sleep(0.05)


def _wait_for_threads(before: int, at_most: int, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while threading.active_count() - before > at_most and time.monotonic() < deadline:
        time.sleep(0.05)
    return threading.active_count() - before


def test_stalled_connections_hold_no_thread_and_a_client_with_the_token_is_served(
    served,
) -> None:
    """Connections that send nothing wait in the one reader thread, not in a thread each."""
    limit = 4
    srv = served(max_connections=limit, request_timeout_s=20.0)
    before = threading.active_count()
    stalled = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(50)]
    try:
        time.sleep(0.5)
        assert threading.active_count() - before <= 0
        status, body = _status_and_body(_exchange(srv.port, _head() + _DESCRIBE))
        assert status == 200 and "result" in body
    finally:
        for sock in stalled:
            sock.close()
    assert _wait_for_threads(before, 0) <= 0


def test_slow_clients_without_the_token_cannot_take_the_slots_of_a_client_with_it(
    served,
) -> None:
    """16 slow unauthenticated connections used to take every slot, and a client with the
    token got 503 for 30 s. Now they fill the reader and the refusal pool only."""
    limit = 4
    srv = served(max_connections=limit, request_timeout_s=20.0)
    before = threading.active_count()
    socks: list[socket.socket] = []
    try:
        # heads trickling in (a few bytes sent, the rest never)
        for _ in range(3 * limit):
            sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            sock.sendall(b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(sock)
        # complete heads with a wrong token whose bodies never come: each holds a refusal
        # thread while the server drains the announced body
        for _ in range(limit):
            sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            sock.sendall(_head(token=_TOKEN[::-1]) + _DESCRIBE[:3])
            socks.append(sock)
        _wait_for_thread_count(before, limit)
        time.sleep(0.2)
        assert threading.active_count() - before <= limit
        started = time.monotonic()
        status, body = _status_and_body(_exchange(srv.port, _head() + _DESCRIBE))
        assert status == 200 and "result" in body
        assert time.monotonic() - started < 5.0
        # one more refusal finds the refusal pool full
        status, body = _status_and_body(_exchange(srv.port, _head(token=_TOKEN[::-1]) + _DESCRIBE))
        assert status == 503 and body["error"]["data"]["error"] == "server_busy"
        assert threading.active_count() - before <= 2 * limit
    finally:
        for sock in socks:
            sock.close()
    assert _wait_for_threads(before, 0) <= 0
    assert _status_and_body(_exchange(srv.port, _head() + _DESCRIBE))[0] == 200


def test_authenticated_connections_beyond_the_bound_get_503_and_slots_come_back(
    served,
) -> None:
    limit = 3
    srv = served(max_connections=limit, request_timeout_s=20.0)
    before = threading.active_count()
    holding = []
    try:
        for _ in range(limit):  # the token, then a body that never comes
            sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            sock.sendall(_head() + _DESCRIBE[:3])
            holding.append(sock)
        _wait_for_thread_count(before, limit)
        time.sleep(0.2)
        assert threading.active_count() - before <= limit
        status, body = _status_and_body(_exchange(srv.port, _head() + _DESCRIBE))
        assert status == 503 and body["error"]["data"]["error"] == "server_busy"
    finally:
        for sock in holding:
            sock.close()
    assert _wait_for_threads(before, 0) <= 0
    status, body = _status_and_body(_exchange(srv.port, _head() + _DESCRIBE))
    assert status == 200 and "result" in body  # slots are given back
    assert srv.service.outcome_counts()["server_busy"] >= 1


def test_beyond_the_pending_bound_the_oldest_waiting_connection_gets_503(served) -> None:
    srv = served(max_pending=3, request_timeout_s=20.0)
    waiting = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(3)]
    try:
        time.sleep(0.3)
        status, body = _status_and_body(_exchange(srv.port, _head() + _DESCRIBE))
        assert status == 200 and "result" in body  # it made the oldest leave
        answer = b""
        while chunk := waiting[0].recv(65536):
            answer += chunk
        status, body = _status_and_body(answer)
        assert status == 503 and body["error"]["data"]["error"] == "server_busy"
    finally:
        for sock in waiting:
            sock.close()


@pytest.mark.parametrize("path", ["//rpc", "///rpc", "//rpc/", "/rpc/", "/RPC", "/rpc?x=1"])
def test_only_the_exact_rpc_path_is_served(served, path: str) -> None:
    """http.server turns a leading '//' into '/': '//rpc' and '///rpc' used to be answered."""
    srv = served()
    request = _head().replace(b"POST /rpc ", f"POST {path} ".encode()) + _DESCRIBE
    status, body = _status_and_body(_exchange(srv.port, request))
    assert status == 404 and body["error"]["code"] == -32600
    assert "result" not in body


def test_limits_are_checked() -> None:
    service = BenchService.__new__(BenchService)
    for bad in ({"max_connections": 0}, {"max_connections": True}, {"request_timeout_s": 0}):
        with pytest.raises(ValueError, match="is invalid"):
            make_server(service, _TOKEN, **bad)
    with pytest.raises(ValueError, match="finite"):
        make_server(service, _TOKEN, response_timeout_s=float("inf"))


# --------------------------------------------------------------------------------------
# headers: strict Content-Length, JSON refusals, nothing echoed
# --------------------------------------------------------------------------------------


def test_non_ascii_digits_in_content_length_get_400_and_the_server_carries_on(served) -> None:
    srv = served()
    for weird in ("\u00b2", "\u0661\u0662", "\uff11", "1_0", "+9", "-0", "0x2f"):
        answer = _exchange(srv.port, _head(length=weird) + _DESCRIBE)
        status, body = _status_and_body(answer)
        assert status == 400, (weird, answer[:120])
        assert "ASCII digits" in body["error"]["message"]
    duplicate = _head().replace(
        b"\r\n\r\n", f"\r\nContent-Length: {len(_DESCRIBE)}\r\n\r\n".encode()
    )
    assert _status_and_body(_exchange(srv.port, duplicate + _DESCRIBE))[0] == 400
    assert _status_and_body(_exchange(srv.port, _head() + _DESCRIBE))[0] == 200


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        (b"GARBAGE", 400),
        (b"POST /rpc HTTP/1.1 trailing words", 400),
        (b"POST /rpc HTTP/2.0.1", 400),
        (b"BREW /rpc HTTP/1.1", 501),
        (b"POST /" + b"a" * 9000 + b" HTTP/1.1", 414),
    ],
)
def test_malformed_requests_get_json_without_echo(served, request_line: bytes, status: int) -> None:
    srv = served()
    answer = _exchange(srv.port, request_line + b"\r\nX-Secret: " + _TOKEN.encode() + b"\r\n\r\n")
    got, body = _status_and_body(answer)
    assert got == status
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32600
    assert b"<html" not in answer.lower() and b"<!doctype" not in answer.lower()
    assert _TOKEN.encode() not in answer and request_line[:20] not in answer.split(b"\r\n", 1)[1]


def test_too_many_or_too_long_headers_get_431(served) -> None:
    srv = served()
    many = b"POST /rpc HTTP/1.1\r\n" + b"X-A: b\r\n" * 150 + b"\r\n"
    assert _status_and_body(_exchange(srv.port, many))[0] == 431
    long = b"POST /rpc HTTP/1.1\r\nX-A: " + b"b" * 70000 + b"\r\n\r\n"
    assert _status_and_body(_exchange(srv.port, long))[0] == 431
    # the head as a whole is bounded too (70 headers of 1 kB, the token among them)
    extra = b"".join(b"X-%d: %s\r\n" % (i, b"b" * 1000) for i in range(70))
    big = _head().replace(b"\r\n\r\n", b"\r\n" + extra + b"\r\n")
    assert len(big) > MAX_HEAD_BYTES
    assert _status_and_body(_exchange(srv.port, big + _DESCRIBE))[0] == 431


# --------------------------------------------------------------------------------------
# the token: validated whole, never echoed
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "\t"])
def test_a_token_with_trailing_whitespace_is_refused_without_echo(suffix: str) -> None:
    with pytest.raises(TokenError) as info:
        validate_token(_TOKEN + suffix)
    assert _TOKEN not in str(info.value)
    with pytest.raises(TokenError) as info:
        ServerClient("http://127.0.0.1:1", token=_TOKEN + suffix)
    assert _TOKEN not in str(info.value)
    service = BenchService.__new__(BenchService)
    with pytest.raises(TokenError):
        make_server(service, _TOKEN + suffix)


def test_client_errors_never_carry_the_token(served, caplog) -> None:
    """http.client quotes a header value it refuses: the token must not reach the error
    (the driver writes errors into episode_result.json and prints them)."""
    srv = served()
    client = ServerClient(f"http://127.0.0.1:{srv.port}", token=_TOKEN)
    client._token = _TOKEN + "\n"  # as a token that slipped past an older check
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ServerConnectionError) as info:
            client.describe()
    assert _TOKEN not in str(info.value) and _TOKEN not in repr(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is not None
    assert _TOKEN not in caplog.text
    # a server that echoes the token in an error message is redacted on the client side
    client._token = _TOKEN
    assert client._redact(f"bad {_TOKEN}!") == "bad <token>!"


def test_a_bad_token_never_reaches_the_episode_result(tmp_path: Path, monkeypatch) -> None:
    from humanclaw_gym.evaluation.batch import EpisodeSpec, RunConfig, run_one_episode

    monkeypatch.setenv("HUMANCLAW_SERVER_TOKEN", _TOKEN + "\n")
    spec = EpisodeSpec("val100", "hc_val_000", "x", "chair")
    config = RunConfig(agent="random", output=str(tmp_path), via_server="http://127.0.0.1:9")
    summary = run_one_episode(spec, config)
    assert summary["status"] == "failed" and "malformed" in summary["error"]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(_TOKEN not in p.read_text() for p in files)


def test_the_transport_log_never_holds_header_values(served, caplog) -> None:
    srv = served()
    with caplog.at_level(logging.DEBUG, logger="humanclaw_gym.server"):
        _exchange(srv.port, b"BAD " + _TOKEN.encode() + b"\r\n\r\n")
        _exchange(srv.port, _head(token=_TOKEN + "x") + _DESCRIBE)
        _exchange(srv.port, _head(length="\u00b2") + _DESCRIBE)
    assert caplog.records and _TOKEN not in caplog.text


# --------------------------------------------------------------------------------------
# run state that reveals the plan is private
# --------------------------------------------------------------------------------------


def test_plan_and_claims_are_private(tmp_path: Path) -> None:
    plan = EpisodePlan.from_selection("val100", 0, tmp_path / "out", limit=2)
    plan.claim()
    for name in ("plan.json", "claims.json"):
        mode = stat.S_IMODE(os.stat(tmp_path / "out" / name).st_mode)
        assert mode == 0o600, (name, oct(mode))
