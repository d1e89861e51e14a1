"""Model transports: the real ``openai`` client against a loopback chat-completions server,
the filesystem queue with a worker thread, and model-config validation."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openai")

from humanclaw_agents.model_config import (  # noqa: E402
    FilesystemQueueConfig,
    ModelConfigError,
    OpenAICompatibleConfig,
    load_model_config,
    model_config_from_dict,
)
from humanclaw_agents.psv import PSVAgent  # noqa: E402
from humanclaw_agents.transports import (  # noqa: E402
    QUEUE_PROTOCOL,
    ChatModel,
    FilesystemQueueModel,
    MissingAPIKeyError,
    ModelCallError,
    ModelReply,
    ModelTimeoutError,
    OpenAICompatibleModel,
    QueueRequest,
    answer_pending_requests,
    build_model,
)

_KEY = "sk-test-0123456789-do-not-leak"
_KEY_ENV = "HUMANCLAW_TEST_API_KEY"


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(448, 448, 3), dtype=np.uint8)


def _decode_data_url(url: str) -> np.ndarray:
    from PIL import Image

    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :]))))


# ---- loopback chat-completions server ------------------------------------------------------


class _FakeProvider:
    """State shared between the test and the HTTP handler threads."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.reply_text = '{"answer": 42}'
        self.delay_s = 0.0
        self.usage: dict[str, Any] | None = None  # replaces the default usage when set
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()


def _completion(text: str, usage: dict[str, Any] | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-vlm",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
    }
    if usage is not None:
        data["usage"] = usage
    return data


def _make_handler(state: _FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            with state.lock:
                state.requests.append(
                    {"path": self.path, "headers": dict(self.headers.items()), "raw": raw}
                )
            if self.path != "/v1/chat/completions":
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            mode = state.mode
            if mode == "slow":
                time.sleep(state.delay_s)
            if mode in ("ok", "slow"):
                usage = state.usage or {
                    "prompt_tokens": 1234,
                    "completion_tokens": 300,
                    "total_tokens": 1534,
                    "completion_tokens_details": {"reasoning_tokens": 120},
                }
                body = json.dumps(_completion(state.reply_text, usage)).encode()
                self._send(200, body)
            elif mode == "no_usage":
                self._send(200, json.dumps(_completion(state.reply_text, None)).encode())
            elif mode == "http_500":
                self._send(500, b'{"error": {"message": "internal failure", "type": "server"}}')
            elif mode == "invalid_json":
                self._send(200, b'{"choices": [ this is not json')
            elif mode == "no_choices":
                body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m"}
                self._send(200, json.dumps(body).encode())
            else:  # pragma: no cover - test bug
                self._send(400, b"{}")

        def _send(self, status: int, body: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout test)
                pass

    return Handler


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_FakeProvider, str]]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    state = _FakeProvider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _config(base_url: str, **overrides: Any) -> OpenAICompatibleConfig:
    fields: dict[str, Any] = {
        "model": "fake-vlm",
        "base_url": base_url,
        "api_key_env": _KEY_ENV,
        "max_tokens": 256,
        "temperature": 0.0,
        "response_format": {"type": "json_object"},
        "extra_body": {"reasoning_effort": "low", "top_k": 1},
        "timeout_s": 5.0,
    }
    fields.update(overrides)
    return OpenAICompatibleConfig(**fields)


def _model(base_url: str, **overrides: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(_config(base_url, **overrides), environ={_KEY_ENV: _KEY})


# ---- OpenAI-compatible transport -----------------------------------------------------------


def test_openai_reply_with_usage_and_request_contents(provider: tuple[_FakeProvider, str]):
    state, base_url = provider
    model = _model(base_url)
    assert isinstance(model, ChatModel)
    image = _image(1)
    reply = model.respond("Describe the room.", image, "planner")

    assert reply == ModelReply(text='{"answer": 42}', usage=reply.usage)
    usage = reply.usage
    assert usage is not None
    assert (usage.stage, usage.attempt, usage.source) == ("planner", 1, "provider")
    assert usage.input_tokens == 1234
    assert usage.reasoning_tokens == 120
    assert usage.output_tokens == 300 - 120  # visible output only

    assert len(state.requests) == 1
    request = state.requests[0]
    assert request["path"] == "/v1/chat/completions"
    body = json.loads(request["raw"])
    assert body["model"] == "fake-vlm"
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 256
    assert body["response_format"] == {"type": "json_object"}
    assert body["reasoning_effort"] == "low" and body["top_k"] == 1  # extra_body merged
    (message,) = body["messages"]
    assert message["role"] == "user"
    parts = {part["type"]: part for part in message["content"]}
    assert parts["text"]["text"] == "Describe the room."
    url = parts["image_url"]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    np.testing.assert_array_equal(_decode_data_url(url), image)

    headers = {key.lower(): value for key, value in request["headers"].items()}
    assert headers["authorization"] == f"Bearer {_KEY}"
    for key, value in headers.items():
        if key != "authorization":
            assert _KEY not in value, key
    assert _KEY.encode() not in request["raw"]
    assert _KEY not in repr(model)
    assert _KEY not in str(model)
    assert _KEY not in json.dumps(model.config.to_dict())
    model.close()


def test_openai_max_completion_tokens_and_optional_fields(provider: tuple[_FakeProvider, str]):
    state, base_url = provider
    model = _model(
        base_url,
        max_tokens_field="max_completion_tokens",
        temperature=None,
        response_format=None,
        extra_body={},
    )
    model.respond("text only", None, "verifier")
    body = json.loads(state.requests[0]["raw"])
    assert body["max_completion_tokens"] == 256
    assert "max_tokens" not in body
    assert "temperature" not in body and "response_format" not in body
    assert body["messages"][0]["content"] == [{"type": "text", "text": "text only"}]


def test_openai_reply_without_usage_is_estimated(provider: tuple[_FakeProvider, str]):
    state, base_url = provider
    state.mode = "no_usage"
    state.reply_text = "x" * 40
    prompt = "p" * 100
    reply = _model(base_url).respond(prompt, _image(), "planner")
    assert reply.text == "x" * 40
    assert reply.usage is not None
    assert reply.usage.source == "estimated_chars_div_4"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (25, 10)
    assert reply.usage.reasoning_tokens == 0


def test_openai_usage_edge_cases_read_as_the_reference_reads_them(
    provider: tuple[_FakeProvider, str],
):
    state, base_url = provider
    state.reply_text = "x" * 40
    # completion_tokens null: no usable provider counts, so the chars/4 estimate
    state.usage = {"prompt_tokens": 900, "completion_tokens": None, "total_tokens": 900}
    usage = _model(base_url).respond("p" * 100, _image(), "planner").usage
    assert usage is not None and usage.source == "estimated_chars_div_4"
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (25, 10, 0)
    # a visible output_tokens next to completion_tokens wins (some vLLM builds report both)
    state.usage = {
        "prompt_tokens": 900,
        "completion_tokens": 300,
        "output_tokens": 250,
        "completion_tokens_details": {"reasoning_tokens": 40},
    }
    usage = _model(base_url).respond("p" * 100, _image(), "planner").usage
    assert usage is not None and usage.source == "provider"
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (900, 250, 40)


def test_openai_timeout_raises_without_hidden_retry(provider: tuple[_FakeProvider, str]):
    state, base_url = provider
    state.mode = "slow"
    state.delay_s = 1.5
    model = _model(base_url, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError) as info:
        model.respond("hello", _image(), "planner")
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, ModelCallError)
    assert time.monotonic() - started < 1.4
    assert len(state.requests) == 1
    assert _KEY not in str(info.value)


def test_openai_http_500_is_one_request(provider: tuple[_FakeProvider, str]):
    state, base_url = provider
    state.mode = "http_500"
    with pytest.raises(ModelCallError, match="HTTP 500") as info:
        _model(base_url).respond("hello", _image(), "planner")
    assert not isinstance(info.value, ModelTimeoutError)
    time.sleep(0.1)  # a hidden retry would arrive now
    assert len(state.requests) == 1
    assert _KEY not in str(info.value)


def test_openai_invalid_json_body(provider: tuple[_FakeProvider, str]):
    state, base_url = provider
    state.mode = "invalid_json"
    with pytest.raises(ModelCallError, match="malformed"):
        _model(base_url).respond("hello", _image(), "planner")
    assert len(state.requests) == 1


def test_openai_reply_without_choices(provider: tuple[_FakeProvider, str]):
    state, base_url = provider
    state.mode = "no_choices"
    with pytest.raises(ModelCallError, match="choices"):
        _model(base_url).respond("hello", _image(), "planner")


def test_openai_missing_key_is_a_clear_error():
    config = _config("http://127.0.0.1:9/v1")
    with pytest.raises(MissingAPIKeyError, match=_KEY_ENV):
        OpenAICompatibleModel(config, environ={})
    with pytest.raises(MissingAPIKeyError, match=_KEY_ENV):
        OpenAICompatibleModel(config, environ={_KEY_ENV: ""})


def test_psv_agent_over_openai_never_writes_the_key(
    provider: tuple[_FakeProvider, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    state, base_url = provider
    state.reply_text = json.dumps(
        {
            "visible_state": "A hallway; no couch is visible.",
            "mid_level_progress_analysis": "just started",
            "mid_level_goal": "scan the room",
            "low_level_action_reasoning": "look left first",
            "action_id": 2,
            "action_name": "Turn<left><45>",
            "additional_info": {},
        }
    )
    config_path = tmp_path / "model.json"
    config_path.write_text(json.dumps(_config(base_url).to_dict()))
    monkeypatch.setenv(_KEY_ENV, _KEY)
    out = tmp_path / "run"
    agent = PSVAgent(str(config_path), output_dir=out)
    agent.reset({"instruction": "Find the couch.", "max_steps": 100})
    decision = agent.act(_image(), {"instruction": "Find the couch.", "step": 0})
    assert str(decision.action) == "Turn<left><45>"
    assert decision.usage[0].source == "provider"
    assert _KEY not in repr(agent)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert [p.name for p in files if p.parent == out] == ["step000_percept_mid_low.json"]
    for path in files:
        assert _KEY not in path.read_text(encoding="utf-8", errors="replace"), path


# ---- filesystem queue ----------------------------------------------------------------------


class _Worker:
    """Answers queue requests in a background thread with a fixed handler."""

    def __init__(self, queue_dir: Path, handler: Any) -> None:
        self.queue_dir = queue_dir
        self.handler = handler
        self.seen: list[QueueRequest] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _handle(self, request: QueueRequest) -> Any:
        self.seen.append(request)
        return self.handler(request)

    def _run(self) -> None:
        while not self._stop.is_set():
            answer_pending_requests(self.queue_dir, self._handle)
            time.sleep(0.01)

    def __enter__(self) -> _Worker:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _queue_files(queue_dir: Path) -> list[Path]:
    return [p for p in queue_dir.rglob("*") if p.is_file()]


def test_queue_round_trip_with_worker(tmp_path: Path):
    queue_dir = tmp_path / "queue"
    model = FilesystemQueueModel(FilesystemQueueConfig(queue_dir, timeout_s=5.0))
    usage = {"input_tokens": 900, "output_tokens": 40, "reasoning_tokens": 7}

    def handler(request: QueueRequest) -> dict[str, Any]:
        return {"text": f"echo:{request.stage}:{request.prompt}", "usage": usage}

    image = _image(3)
    with _Worker(queue_dir, handler) as worker:
        reply = model.respond("find the bed", image, "planner")
        text_only = model.respond("no image", None, "verifier")

    assert reply.text == "echo:planner:find the bed"
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (900, 40)
    assert (reply.usage.reasoning_tokens, reply.usage.source) == (7, "provider")
    assert text_only.text == "echo:verifier:no image"

    first = worker.seen[0]
    assert first.metadata["protocol"] == QUEUE_PROTOCOL
    assert first.metadata["image"] == "image.png"
    from PIL import Image

    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(first.image_png))), image)
    assert worker.seen[1].image_png is None
    assert _queue_files(queue_dir) == []  # every transport file removed
    for name in ("pending", "done", "claimed", "staging"):
        assert list((queue_dir / name).iterdir()) == []


def test_queue_reply_without_usage_is_estimated(tmp_path: Path):
    queue_dir = tmp_path / "queue"
    model = build_model(FilesystemQueueConfig(queue_dir, timeout_s=5.0))
    assert isinstance(model, FilesystemQueueModel)
    with _Worker(queue_dir, lambda request: {"text": "y" * 8}):
        reply = model.respond("z" * 20, None, "planner")
    assert reply.usage is not None
    assert reply.usage.source == "estimated_chars_div_4"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (5, 2)


def test_queue_worker_error_and_bad_response(tmp_path: Path):
    queue_dir = tmp_path / "queue"
    model = FilesystemQueueModel(FilesystemQueueConfig(queue_dir, timeout_s=5.0))

    def failing(request: QueueRequest) -> dict[str, Any]:
        raise RuntimeError("provider is down")

    with _Worker(queue_dir, failing):
        with pytest.raises(ModelCallError, match="provider is down"):
            model.respond("hello", None, "planner")
    with _Worker(queue_dir, lambda request: {"text": 5}):
        with pytest.raises(ModelCallError, match="'text'"):
            model.respond("hello", None, "planner")
    assert _queue_files(queue_dir) == []


def test_queue_timeout_cleans_pending_request(tmp_path: Path):
    queue_dir = tmp_path / "queue"
    model = FilesystemQueueModel(
        FilesystemQueueConfig(queue_dir, timeout_s=0.2, poll_interval_s=0.02)
    )
    seen_pending: list[list[str]] = []

    def watch() -> None:
        deadline = time.monotonic() + 0.15
        while time.monotonic() < deadline:
            names = [p.name for p in (queue_dir / "pending").iterdir()]
            if names:
                seen_pending.append(names)
                files = sorted(q.name for q in (queue_dir / "pending" / names[0]).iterdir())
                seen_pending.append(files)
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError, match="within 0.2 s") as info:
        model.respond("nobody answers", _image(), "planner")
    watcher.join()
    assert isinstance(info.value, TimeoutError)
    assert 0.15 < time.monotonic() - started < 2.0
    assert seen_pending and seen_pending[1] == ["image.png", "request.json"]
    assert _queue_files(queue_dir) == []


# ---- model configs -------------------------------------------------------------------------


def test_load_model_config_files(tmp_path: Path):
    path = tmp_path / "openai.json"
    path.write_text(
        json.dumps(
            {
                "backend": "openai_compatible",
                "model": "gpt-x",
                "base_url": "https://api.example.com/v1",
                "api_key_env": "EXAMPLE_KEY",
                "max_tokens": 800,
                "temperature": 0.0,
                "response_format": {"type": "json_object"},
                "extra_body": {},
            }
        )
    )
    config = load_model_config(path)
    assert isinstance(config, OpenAICompatibleConfig)
    assert (config.model, config.max_tokens, config.timeout_s) == ("gpt-x", 800, 120.0)
    assert model_config_from_dict(config.to_dict()) == config

    queue = tmp_path / "queue.json"
    queue.write_text(json.dumps({"backend": "filesystem_queue", "queue_dir": "q", "timeout_s": 9}))
    queue_config = load_model_config(queue)
    assert isinstance(queue_config, FilesystemQueueConfig)
    assert queue_config.queue_dir == tmp_path / "q"
    assert queue_config.timeout_s == 9.0


_GOOD = {
    "backend": "openai_compatible",
    "model": "m",
    "base_url": "http://localhost:8000/v1",
    "api_key_env": "KEY_VAR",
}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"backend": "grpc"}, "'backend'='grpc'"),
        ({"model": ""}, "'model'"),
        ({"base_url": "localhost:8000"}, "'base_url'"),
        ({"api_key_env": "1BAD-NAME"}, "'api_key_env'"),
        ({"api_key": "sk-123"}, "never put credentials"),
        ({"max_tokens": 0}, "'max_tokens'=0"),
        ({"max_tokens": 12.5}, "'max_tokens'"),
        ({"temperature": 3.0}, "'temperature'=3.0"),
        ({"temperature": True}, "'temperature'"),
        ({"response_format": "json"}, "'response_format'"),
        ({"extra_body": []}, "'extra_body'"),
        ({"timeout_s": 0}, "'timeout_s'=0"),
        ({"max_tokens_field": "tokens"}, "'max_tokens_field'"),
        ({"colour": "blue"}, "'colour' is unknown"),
    ],
)
def test_model_config_rejects_bad_fields(changes: dict[str, Any], match: str):
    data = {**_GOOD, **changes}
    with pytest.raises(ModelConfigError, match=match):
        model_config_from_dict(data)


def test_model_config_missing_and_queue_fields(tmp_path: Path):
    data = dict(_GOOD)
    del data["api_key_env"]
    with pytest.raises(ModelConfigError, match="'api_key_env' is missing"):
        model_config_from_dict(data)
    with pytest.raises(ModelConfigError, match="'queue_dir' is missing"):
        model_config_from_dict({"backend": "filesystem_queue"})
    with pytest.raises(ModelConfigError, match="'poll_interval_s'"):
        model_config_from_dict(
            {"backend": "filesystem_queue", "queue_dir": "q", "poll_interval_s": -1}
        )
    with pytest.raises(ModelConfigError, match="must be a JSON object"):
        model_config_from_dict(["not", "a", "dict"])  # type: ignore[arg-type]
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(ModelConfigError, match="not valid JSON"):
        load_model_config(bad)


def test_psv_agent_over_filesystem_queue(tmp_path: Path):
    queue_dir = tmp_path / "queue"
    reply = json.dumps(
        {
            "visible_state": "A bed is right in front of me.",
            "mid_level_progress_analysis": "close to the bed",
            "mid_level_goal": "stop at the bed",
            "low_level_action_reasoning": "it is within reach",
            "action_id": 5,
            "action_name": "Step back<0.2>",
            "additional_info": {},
        }
    )
    config_path = tmp_path / "queue.json"
    config_path.write_text(json.dumps({"backend": "filesystem_queue", "queue_dir": "queue"}))
    agent = PSVAgent(config_path, output_dir=tmp_path / "run")
    agent.reset({"instruction": "Find the bed."})
    with _Worker(queue_dir, lambda request: {"text": reply}) as worker:
        decision = agent.act(_image(), {"step": 0})
    assert str(decision.action) == "Step back<0.2>"
    assert decision.usage[0].source == "estimated_chars_div_4"
    assert worker.seen[0].stage == "planner"
    assert "Find the bed." in worker.seen[0].prompt
    assert _queue_files(queue_dir) == []
