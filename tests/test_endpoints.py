"""Model endpoints that explain themselves: a deadline per request, a cap on the reply body,
a preflight before the first episode, and the wait shown on the progress bar.

Every server here is a loopback one (``tests/raw_http_server.py`` for raw, scripted bytes;
``tests/chat_server.py`` for well-formed answers).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import socket
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openai")

from chat_server import ChatServer, completion  # noqa: E402
from raw_http_server import (  # noqa: E402
    RawServer,
    response_head,
    send_counted,
    send_slowly,
)

from humanclaw_agents import queue_reference  # noqa: E402
from humanclaw_agents.model_config import (  # noqa: E402
    FilesystemQueueConfig,
    OpenAICompatibleConfig,
)
from humanclaw_agents.transports import (  # noqa: E402
    MAX_REPLY_BYTES,
    FilesystemQueueModel,
    ModelCallError,
    ModelReply,
    ModelTimeoutError,
    OpenAICompatibleModel,
)

_KEY_ENV = "HUMANCLAW_ENDPOINT_TEST_KEY"
_MiB = 1 << 20
_REPO = Path(__file__).resolve().parent.parent


def _model(url: str, timeout_s: float = 30.0, **kwargs: Any) -> OpenAICompatibleModel:
    config = OpenAICompatibleConfig(
        model="loopback-vlm", base_url=url + "/v1", api_key_env=_KEY_ENV, timeout_s=timeout_s
    )
    return OpenAICompatibleModel(config, environ={_KEY_ENV: "loopback-key"}, **kwargs)


def _image() -> np.ndarray:
    return np.zeros((8, 8, 3), dtype=np.uint8)


def _completion_bytes(text: str = "hello") -> bytes:
    return json.dumps(completion(text)).encode()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- the deadline ------------------------------------------------------------------------------


def test_a_trickled_body_ends_at_the_deadline():
    """One byte every 50 ms: a per-read timeout of 1 s never trips (the call took the whole
    ~15 s trickle); the deadline ends it after 1 s."""
    body = _completion_bytes("x" * 100)

    def trickle(conn, request):
        head = response_head(
            200, {"Content-Type": "application/json", "Content-Length": str(len(body))}
        )
        conn.sendall(head)
        send_slowly(server, conn, body, 1, 0.05)

    with RawServer(trickle) as server:
        model = _model(server.url, timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match="within the 1 s deadline") as info:
            model.respond("hello", _image(), "planner")
        elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 2.5
    assert server.url in str(info.value) and "\n" not in str(info.value)


def test_trickled_headers_end_at_the_deadline():
    answer = response_head(200, {"Content-Type": "application/json", "X-Pad": "p" * 400})

    def trickle(conn, request):
        send_slowly(server, conn, answer + _completion_bytes(), 1, 0.02)

    with RawServer(trickle) as server:
        model = _model(server.url, timeout_s=0.6)
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match="deadline"):
            model.respond("hello", None, "verifier")
        assert time.monotonic() - started < 2.0


def test_a_slow_name_lookup_ends_at_the_deadline(monkeypatch):
    """``getaddrinfo`` cannot be interrupted: the lookup runs in a helper thread that the
    call waits for only until its deadline."""
    from humanclaw_agents import bounded_http

    def slow_lookup(*args: Any, **kwargs: Any) -> Any:
        time.sleep(3.0)
        raise OSError("never answered")

    monkeypatch.setattr(bounded_http.socket, "getaddrinfo", slow_lookup)
    model = _model("http://slow-dns.invalid", timeout_s=0.4)
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError, match="deadline"):
        model.respond("hello", None, "planner")
    assert time.monotonic() - started < 1.5


def test_a_prompt_answer_still_works_and_the_client_is_reused():
    with ChatServer(lambda body: '{"action_id": 0}') as server:
        model = _model(server.url, timeout_s=5.0)
        for _ in range(3):
            reply = model.respond("hello", _image(), "planner")
            assert reply.text == '{"action_id": 0}'
            assert reply.usage is not None and reply.usage.input_tokens == 1500
        model.close()
    assert len(server.requests) == 3


# ---- the reply cap -----------------------------------------------------------------------------


def _endless_chunks(server: RawServer, conn: socket.socket, total_mib: int, status: int) -> None:
    conn.sendall(
        response_head(status, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    )
    chunk = b'"' + b"x" * (_MiB - 2) + b'"'
    part = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    send_counted(server, conn, [b"1\r\n[\r\n"] + [part] * total_mib + [b"0\r\n\r\n"])


@pytest.mark.parametrize("status", [200, 500])
def test_a_huge_body_is_abandoned_at_the_cap(status):
    """64 MiB of reply (or of error page): reading stops past the 8 MiB cap, so neither the
    download nor the memory grows with the body."""

    with RawServer(lambda conn, request: _endless_chunks(server, conn, 64, status)) as server:
        model = _model(server.url, timeout_s=30.0)
        tracemalloc.start()
        try:
            with pytest.raises(ModelCallError, match=f"larger than {MAX_REPLY_BYTES} bytes"):
                model.respond("hello", None, "planner")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        model.close()
    assert MAX_REPLY_BYTES == 8 * _MiB
    assert peak < 3 * MAX_REPLY_BYTES
    assert server.sent < 40 * _MiB  # the rest was never sent: the client hung up


def test_a_compressed_body_is_capped_after_decompression():
    """64 MiB of zeros gzip to 64 KiB: the cap applies to what they decode to."""
    bomb = gzip.compress(b"0" * (64 * _MiB), compresslevel=9)
    head = response_head(
        200,
        {
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
            "Content-Length": str(len(bomb)),
        },
    )
    with RawServer(lambda conn, request: conn.sendall(head + bomb)) as server:
        model = _model(server.url, timeout_s=30.0)
        tracemalloc.start()
        try:
            with pytest.raises(ModelCallError, match="larger than"):
                model.respond("hello", None, "planner")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert len(bomb) < _MiB
    assert peak < 3 * MAX_REPLY_BYTES


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "deflate-raw"])
def test_compressed_replies_decode(encoding):
    body = _completion_bytes("compressed answer")
    if encoding == "gzip":
        data = gzip.compress(body)
    elif encoding == "deflate":
        data = zlib.compress(body)
    else:
        packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        data = packer.compress(body) + packer.flush()
    name = encoding.split("-")[0]
    head = response_head(
        200,
        {
            "Content-Type": "application/json",
            "Content-Encoding": name,
            "Content-Length": str(len(data)),
        },
    )
    with RawServer(lambda conn, request: conn.sendall(head + data)) as server:
        reply = _model(server.url).respond("hello", None, "planner")
    assert reply.text == "compressed answer"
    assert server.requests[0]["headers"]["accept-encoding"] == "gzip, deflate"


def test_an_unknown_content_encoding_is_one_line():
    head = response_head(
        200, {"Content-Type": "application/json", "Content-Encoding": "br", "Content-Length": "4"}
    )
    with RawServer(lambda conn, request: conn.sendall(head + b"\x00\x01\x02\x03")) as server:
        with pytest.raises(ModelCallError, match="Content-Encoding 'br'") as info:
            _model(server.url).respond("hello", None, "planner")
    assert "\n" not in str(info.value)


def test_a_smaller_cap_can_be_asked_for():
    with ChatServer(lambda body: "y" * 5000) as server:
        model = _model(server.url, max_reply_bytes=2000)
        with pytest.raises(ModelCallError, match="larger than 2000 bytes"):
            model.respond("hello", None, "planner")
        assert _model(server.url, max_reply_bytes=20000).respond("hi", None, "planner").text
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_reply_bytes"):
            _model("http://127.0.0.1:9", max_reply_bytes=bad)


def _answer_when_pending(queue_dir: Path, payload: bytes) -> None:
    """Write ``payload`` as the response of the first pending request (in a thread)."""
    import threading

    def worker() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pending = sorted((queue_dir / "pending").iterdir())
            if pending:
                done = queue_dir / "done" / pending[0].name
                done.mkdir(parents=True, exist_ok=True)
                temp = queue_dir / f"{pending[0].name}.part"  # the protocol: write, rename
                temp.write_bytes(payload)
                temp.replace(done / "response.json")
                return
            time.sleep(0.01)

    threading.Thread(target=worker, daemon=True).start()


@pytest.mark.parametrize("layout", ["humanclaw", "reference"])
def test_a_queue_response_file_over_the_cap_is_refused_unread(tmp_path, layout):
    fields = {"model": "worker-model"} if layout == "reference" else {}
    config = FilesystemQueueConfig(
        queue_dir=tmp_path / "queue", timeout_s=20.0, queue_layout=layout, **fields
    )
    model = FilesystemQueueModel(config)
    text = "z" * (MAX_REPLY_BYTES + 1024)
    key = "content" if layout == "reference" else "text"
    _answer_when_pending(config.queue_dir, json.dumps({key: text}).encode())
    started = time.monotonic()
    with pytest.raises(ModelCallError, match=str(MAX_REPLY_BYTES)) as info:
        model.respond("hello", None, "planner")
    assert time.monotonic() - started < 5.0  # refused at once, not waited for until timeout_s
    assert "\n" not in str(info.value)


def test_queue_response_within_the_cap_still_reads(tmp_path):
    config = FilesystemQueueConfig(queue_dir=tmp_path / "queue", timeout_s=20.0)
    model = FilesystemQueueModel(config, max_reply_bytes=4096)
    _answer_when_pending(config.queue_dir, json.dumps({"text": "fine"}).encode())
    assert model.respond("hello", None, "planner").text == "fine"
    assert queue_reference.read_response(tmp_path, "nothing") == (False, None)


# ---- preflight ---------------------------------------------------------------------------------


def test_preflight_passes_on_a_served_model_with_the_agents_own_request_fields():
    with ChatServer(lambda body: '{"ready": true}') as server:
        model = _model(server.url)
        model.preflight()
    (request,) = server.requests
    body = request["body"]
    assert body["stream"] is True and body["model"] == "loopback-vlm"
    assert body["response_format"] == {"type": "json_object"} and body["max_tokens"] == 1024
    content = body["messages"][0]["content"]
    assert [part["type"] for part in content] == ["text"]  # no image
    assert "JSON" in content[0]["text"]


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        (
            401,
            {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
            ["HTTP 401", "Incorrect API key provided", "$" + _KEY_ENV],
        ),
        (
            404,
            {"object": "error", "message": "The model `loopback-vlm` does not exist.", "code": 404},
            ["HTTP 404", "does not exist", "model name"],
        ),
        (400, {"detail": "response_format is not supported"}, ["HTTP 400", "not supported"]),
    ],
)
def test_preflight_refuses_a_wrong_endpoint_in_one_line(status, error, expected):
    with ChatServer(lambda body: (status, error)) as server:
        model = _model(server.url)
        with pytest.raises(ModelCallError) as info:
            model.preflight()
    message = str(info.value)
    assert message.startswith(f"model endpoint {server.url}/v1 (model 'loopback-vlm') answered")
    for part in expected:
        assert part in message
    assert "\n" not in message and "loopback-key" not in message


def test_preflight_lets_a_busy_endpoint_pass():
    with ChatServer(lambda body: (429, {"error": {"message": "rate limited"}})) as server:
        _model(server.url).preflight()


@pytest.mark.parametrize("where", ["closed_port", "unknown_host"])
def test_preflight_refuses_an_unreachable_endpoint_in_one_line(where):
    if where == "closed_port":
        url, cause = f"http://127.0.0.1:{_closed_port()}", "Connection refused"
    else:
        url, cause = "http://no-such-model-host.invalid", "cannot resolve host"
    model = _model(url)
    started = time.monotonic()
    with pytest.raises(ModelCallError) as info:
        model.preflight()
    assert time.monotonic() - started < 5.0
    message = str(info.value)
    assert message.startswith(f"model endpoint {url}/v1 (model 'loopback-vlm'): ")
    assert cause in message and "\n" not in message


def test_preflight_ends_at_its_own_deadline(monkeypatch):
    from humanclaw_agents import transports

    monkeypatch.setattr(transports, "PREFLIGHT_TIMEOUT_S", 0.5)

    def silent(conn, request):
        while not server.stopping():
            time.sleep(0.02)

    with RawServer(silent) as server:
        model = _model(server.url, timeout_s=60.0)
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match="within the 0.5 s deadline"):
            model.preflight()
        assert time.monotonic() - started < 1.5


def test_queue_preflight_checks_that_requests_can_be_filed(tmp_path):
    config = FilesystemQueueConfig(queue_dir=tmp_path / "queue")
    model = FilesystemQueueModel(config)
    model.preflight()
    assert sorted(p.name for p in (tmp_path / "queue" / "staging").iterdir()) == []
    (tmp_path / "queue" / "staging").rmdir()
    (tmp_path / "queue" / "staging").write_text("a file where the folder belongs")
    with pytest.raises(ModelCallError, match="cannot file requests"):
        model.preflight()


class _ScriptedModel:
    def __init__(self, failures: int = 0) -> None:
        self.preflights = 0
        self.calls = 0
        self.failures = failures

    def preflight(self) -> None:
        self.preflights += 1

    def close(self) -> None:
        self.closed = True

    def respond(self, prompt: str, image_rgb: Any, stage: str) -> ModelReply:
        self.calls += 1
        if self.calls <= self.failures:
            raise ModelCallError(f"{stage}: request to http://x/v1 failed: cannot connect")
        if stage == "verifier":
            return ModelReply('{"verdict": "accept", "reason": "ok", "final_action_id": 0}')
        return ModelReply('{"action_id": 0, "action_name": "Walk<forward><slow>"}')


def test_psv_agent_preflight_reaches_the_transport_and_records_no_usage():
    from humanclaw_agents.psv import PSVAgent, PSVAgentV1

    for cls in (PSVAgent, PSVAgentV1):
        model = _ScriptedModel()
        agent = cls(model=model)
        agent.preflight()
        assert (model.preflights, model.calls) == (1, 0)
        agent.reset({"instruction": "find the couch"})
        decision = agent.act(np.zeros((16, 16, 3), np.uint8), {"step": 0})
        assert len(decision.usage) == model.calls  # one record per real call, none for it
        agent.close()
        assert model.closed
        assert repr(agent) == (
            f"{cls.__name__}(model={model!r}, prompt_version={agent.prompt_version!r}, "
            f"verifier_version={agent.verifier_version!r})"
        )


# ---- the wait on the progress bar ----------------------------------------------------------


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_stage_retries_report_attempt_wait_and_cause():
    from humanclaw_agents.psv import PSVAgent
    from humanclaw_gym.evaluation.status import POLICY_STATUS_LOGGER

    handler = _Lines()
    logger = logging.getLogger(POLICY_STATUS_LOGGER)
    logger.addHandler(handler)
    try:
        slept: list[float] = []
        agent = PSVAgent(model=_ScriptedModel(failures=2), sleep=slept.append)
        agent.reset({"instruction": "find the couch"})
        agent.act(np.zeros((16, 16, 3), np.uint8), {"step": 0})
    finally:
        logger.removeHandler(handler)
    assert slept == [1.0, 2.0]
    assert handler.lines == [
        "planner attempt 1/5 failed, retrying in 1 s: planner: request to http://x/v1 failed: "
        "cannot connect",
        "planner attempt 2/5 failed, retrying in 2 s: planner: request to http://x/v1 failed: "
        "cannot connect",
        "",
    ]


def test_the_progress_bar_shows_a_waiting_policy(tmp_path, capfd):
    """The line reaches the bar from the local executor's worker processes."""
    from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, run_batch

    sys.path.insert(0, str(_REPO))
    config = RunConfig(
        agent="tests.helpers_endpoints:WaitingPolicy", output=str(tmp_path), max_steps=1
    )
    summary = run_batch(list_episode_specs("val100")[:1], config, workers=2, progress=True)
    assert summary.completed == 1
    err = capfd.readouterr().err
    assert "waiting=endpoint retry for step 0: attempt 2/5 in 0.4 s" in err, err[-2000:]


def test_the_bar_shows_the_latest_line_of_this_process_and_clears_it():
    from humanclaw_gym.evaluation.batch import _BarStatus
    from humanclaw_gym.evaluation.status import report_status

    class Bar:
        postfix: list[dict[str, Any]] = []

        def set_postfix(self, fields: dict[str, Any]) -> None:
            self.postfix.append(dict(fields))

    bar = Bar()
    status = _BarStatus(bar)
    status.attach()
    try:
        status.show({"fail": 0})
        report_status("planner attempt 1/5 failed,\nretrying in 1 s: refused")
        status.show({"fail": 1})
        report_status("")
    finally:
        status.detach()
    report_status("after the run: nobody listens")
    waiting = "planner attempt 1/5 failed, retrying in 1 s: refused"
    assert bar.postfix == [
        {"fail": 0},
        {"fail": 0, "waiting": waiting},
        {"fail": 1, "waiting": waiting},
        {"fail": 1},
    ]


# ---- refusing before the first episode ---------------------------------------------------------


def test_run_batch_refuses_on_a_policy_preflight_and_writes_nothing(tmp_path, monkeypatch):
    from humanclaw_gym.cli.errors import is_user_error
    from humanclaw_gym.evaluation.batch import (
        PolicyPreflightError,
        RunConfig,
        list_episode_specs,
        run_batch,
    )

    sys.path.insert(0, str(_REPO))
    log = tmp_path / "preflight.log"
    monkeypatch.setenv("HUMANCLAW_TEST_PREFLIGHT_LOG", str(log))
    out = tmp_path / "out"
    config = RunConfig(agent="tests.helpers_endpoints:RefusingPreflight", output=str(out))
    with pytest.raises(PolicyPreflightError) as info:
        run_batch(list_episode_specs("val100")[:3], config, workers=2, progress=False)
    assert str(info.value) == (
        "agent 'tests.helpers_endpoints:RefusingPreflight' preflight: model endpoint "
        "http://127.0.0.1:9/v1: cannot connect (refused)"
    )
    assert is_user_error(info.value)
    assert not out.exists()
    assert log.read_text() == "preflight\n"  # once, whatever the number of episodes


def _cli(args: list[str], env_extra: dict[str, str], timeout: float = 120) -> tuple[Any, float]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(env_extra)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", *args],
        env=env,
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, time.monotonic() - started


def _psv_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "model.json"
    path.write_text(
        json.dumps(
            {
                "backend": "openai_compatible",
                "model": "gpt-4o-mini",
                "base_url": base_url,
                "api_key_env": _KEY_ENV,
            }
        )
    )
    return path


def test_first_psv_run_with_nothing_listening_explains_itself(tmp_path):
    """README's model.json pointing at a closed port: one line naming the endpoint and the
    cause, exit 2, within 15 s, and no output folder (before: a progress bar for 300 s)."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    out = tmp_path / "run"
    args = ["run", "--episodes", "val100", "--limit", "2", "--agent", "psv"]
    args += ["--model-config", str(_psv_config(tmp_path, url)), "--output", str(out)]
    proc, elapsed = _cli(args, {_KEY_ENV: "sk-test"}, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert elapsed < 15.0
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith(
        f"humanclaw run: error: agent 'psv' preflight: model endpoint {url}"
    )
    assert "Connection refused" in errors[0]
    assert not out.exists()


def test_psv_rollout_refuses_an_unknown_model(tmp_path):
    def reply(body: dict[str, Any]) -> Any:
        return (404, {"error": {"message": f"The model `{body['model']}` does not exist"}})

    with ChatServer(reply) as server:
        out = tmp_path / "rollout"
        args = ["rollout", "--agent", "psv", "--max-steps", "1", "--output", str(out)]
        args += ["--model-config", str(_psv_config(tmp_path, server.url + "/v1"))]
        proc, elapsed = _cli(args, {_KEY_ENV: "sk-test", "NO_PROXY": "127.0.0.1"}, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert elapsed < 15.0
    (line,) = [line for line in proc.stderr.splitlines() if line.strip()]
    assert f"model endpoint {server.url}/v1 (model 'gpt-4o-mini') answered HTTP 404" in line
    assert "The model `gpt-4o-mini` does not exist" in line
    assert not out.exists()
    assert len(server.requests) == 1


def test_no_preflight_skips_the_check(tmp_path):
    args = ["run", "--episodes", "val100", "--limit", "1", "--max-steps", "1", "--quiet"]
    args += ["--agent", "tests.helpers_endpoints:RefusingPreflight"]
    proc, _ = _cli([*args, "--output", str(tmp_path / "o"), "--no-preflight"], {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "completed 1, skipped 0, failed 0" in proc.stdout
    proc, _ = _cli([*args, "--output", str(tmp_path / "p")], {})
    assert proc.returncode == 2 and "preflight: model endpoint" in proc.stderr
    assert not (tmp_path / "p").exists()


# ---- proxies from the environment --------------------------------------------------------------


def _clear_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


def test_an_http_proxy_from_the_environment_carries_the_request(monkeypatch):
    body = _completion_bytes("via the proxy")
    head = response_head(
        200, {"Content-Type": "application/json", "Content-Length": str(len(body))}
    )
    with RawServer(lambda conn, request: conn.sendall(head + body)) as proxy:
        _clear_proxy_env(monkeypatch)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        reply = _model("http://model-host.invalid:8000").respond("hi", None, "planner")
        assert reply.text == "via the proxy"
        assert proxy.requests[0]["path"] == "http://model-host.invalid:8000/v1/chat/completions"
        monkeypatch.setenv("NO_PROXY", "model-host.invalid")
        with pytest.raises(ModelCallError, match="cannot resolve host 'model-host.invalid'"):
            _model("http://model-host.invalid:8000").respond("hi", None, "planner")
    assert len(proxy.requests) == 1


def test_a_socks_proxy_is_refused_in_one_line(monkeypatch):
    from humanclaw_agents.model_config import ModelConfigError

    _clear_proxy_env(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(ModelConfigError, match="http:// and https:// proxies only"):
        _model("http://model-host.invalid:8000")
