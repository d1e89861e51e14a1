"""Fuzzing the reply stream: hostile or broken answers from a model endpoint.

Generated answers (truncated JSON, bodies past the cap, wrong content types and framings,
chunked trickles, invalid UTF-8, deep nesting, fields of the wrong type, compressed and
corrupt bodies, broken status lines) are served by a loopback server to the
OpenAI-compatible transport, written as queue response files, and fed to both reply
readers. Each must either parse or fail with a one-line :class:`ModelCallError` (or
:class:`ResponseFormatError` for the readers), within the call's deadline and without
holding more than a few times the reply cap in memory. Hypothesis runs derandomized: the
same examples on every run.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
hypothesis = pytest.importorskip("hypothesis")

from chat_server import completion  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from raw_http_server import RawServer, response_head, send_slowly  # noqa: E402

from humanclaw_agents.model_config import (  # noqa: E402
    FilesystemQueueConfig,
    OpenAICompatibleConfig,
)
from humanclaw_agents.replies import READERS, ResponseFormatError, read_reply_json  # noqa: E402
from humanclaw_agents.transports import (  # noqa: E402
    FilesystemQueueModel,
    ModelCallError,
    ModelReply,
    OpenAICompatibleModel,
)
from humanclaw_gym.policy import Usage  # noqa: E402

_CAP = 64 << 10  # a small reply cap keeps the examples fast; the 8 MiB default is tested
_TIMEOUT_S = 1.5  # in test_endpoints.py
_QUEUE_TIMEOUT_S = 0.3
_MAX_MESSAGE = 1000
_FUZZ = settings(
    derandomize=True,
    deadline=None,
    max_examples=100,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # ``traced`` spans all examples on purpose
    ],
    database=None,
)

_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.lists(st.integers(), max_size=4),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)
_FIELD_PATHS = [
    ("choices",),
    ("choices", 0),
    ("choices", 0, "message"),
    ("choices", 0, "message", "content"),
    ("choices", 0, "message", "refusal"),
    ("usage",),
    ("usage", "prompt_tokens"),
    ("usage", "completion_tokens"),
    ("usage", "completion_tokens_details"),
    ("usage", "completion_tokens_details", "reasoning_tokens"),
]


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@st.composite
def _bodies(draw: st.DrawFn) -> bytes:
    """A reply body: a completion, broken in one of many ways."""
    text = draw(st.text(max_size=60))
    valid = json.dumps(completion(text)).encode()
    kind = draw(
        st.sampled_from(
            [
                "valid",
                "truncated",
                "invalid_utf8",
                "wrong_type",
                "nested",
                "huge",
                "top_level",
                "binary",
                "nan",
            ]
        )
    )
    if kind == "truncated":
        return valid[: draw(st.integers(0, len(valid) - 1))]
    if kind == "invalid_utf8":
        at = draw(st.integers(0, len(valid)))
        return (
            valid[:at]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]))
            + valid[at:]
        )
    if kind == "wrong_type":
        data = json.loads(valid)  # a copy: completion() shares its usage dict
        for path in draw(st.lists(st.sampled_from(_FIELD_PATHS), min_size=1, max_size=3)):
            try:
                _set(data, path, draw(_JUNK))
            except (KeyError, IndexError, TypeError):
                pass  # an earlier change removed the parent: the shape is broken enough
        return json.dumps(data, allow_nan=True).encode()
    if kind == "nested":
        depth = draw(st.sampled_from([50, 900, 5000, 30000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        inner = opener * depth + "1" + closer * depth
        return ('{"choices": [{"message": {"content": "x"}}], "extra": ' + inner + "}").encode()
    if kind == "huge":
        size = draw(st.integers(_CAP // 2, 3 * _CAP))
        content = "y" * size
        return json.dumps(completion(content)).encode()
    if kind == "top_level":
        return json.dumps(draw(_JUNK)).encode()
    if kind == "binary":
        return draw(st.binary(max_size=300))
    if kind == "nan":
        return valid.replace(b"1500", b"NaN").replace(b"200", b"1e999")
    return valid


@st.composite
def _answers(draw: st.DrawFn) -> tuple[list[bytes], float]:
    """Raw bytes of one HTTP answer, as the parts to send and the pause between them."""
    body = draw(_bodies())
    encoding = draw(st.sampled_from([None, None, "gzip", "deflate", "gzip-corrupt", "br"]))
    if encoding == "gzip":
        body = gzip.compress(body)
    elif encoding == "deflate":
        body = zlib.compress(body)
    elif encoding == "gzip-corrupt":
        packed = gzip.compress(body)
        body = packed[: len(packed) // 2] + b"\x00garbage" + packed[len(packed) // 2 :]
    status = draw(st.sampled_from([200, 200, 200, 400, 401, 404, 429, 500, 503]))
    headers: dict[str, str] = {}
    content_type = draw(
        st.sampled_from(
            [
                "application/json",
                "text/html",
                "text/plain; charset=utf-8",
                "application/octet-stream",
                "application/json; charset=latin-1",
                "application/json; charset=utf-16",
                None,
            ]
        )
    )
    if content_type is not None:
        headers["Content-Type"] = content_type
    if encoding is not None:
        headers["Content-Encoding"] = encoding.split("-")[0]
    framing = draw(st.sampled_from(["length", "chunked", "close", "short", "long"]))
    if framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
        size = draw(st.integers(1, 4096))
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        payload = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
        if draw(st.booleans()):
            payload = payload[: draw(st.integers(0, len(payload)))]  # cut mid-stream
    elif framing == "length":
        headers["Content-Length"] = str(len(body))
        payload = body
    elif framing == "short":  # says less than it sends
        headers["Content-Length"] = str(max(0, len(body) // 2))
        payload = body
    elif framing == "long":  # says more than it sends, then hangs up
        headers["Content-Length"] = str(len(body) + 1000)
        payload = body
    else:
        headers["Connection"] = "close"
        payload = body
    head = response_head(status, headers)
    if draw(st.integers(0, 19)) == 0:
        head = draw(st.sampled_from([b"", b"NOT HTTP AT ALL\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n"]))
    data = head + payload
    step, pause = len(data) or 1, 0.0
    if len(data) <= 2048 and draw(st.booleans()):  # a trickle (long ones: test_endpoints.py)
        step, pause = draw(st.sampled_from([7, 64])), 0.001
    elif draw(st.booleans()):
        step = draw(st.sampled_from([512, 1 << 14]))
    return [data[i : i + step] for i in range(0, len(data), step)] or [b""], pause


_HTTP_SETTINGS = settings(_FUZZ, max_examples=60)


def _check_error(error: BaseException) -> None:
    message = str(error)
    assert "\n" not in message and "\r" not in message, message[:300]
    assert 0 < len(message) <= _MAX_MESSAGE, len(message)


def _check_reply(reply: Any) -> None:
    assert isinstance(reply, ModelReply)
    assert isinstance(reply.text, str)
    assert isinstance(reply.usage, Usage)


@pytest.fixture(scope="module")
def endpoint():
    holder: dict[str, Any] = {"parts": [b""], "pause": 0.0}

    def script(conn, request):
        parts, pause = holder["parts"], holder["pause"]
        if pause:
            send_slowly(server, conn, b"".join(parts), len(parts[0]), pause)
        else:
            for part in parts:
                conn.sendall(part)

    with RawServer(script) as server:
        config = OpenAICompatibleConfig(
            model="fuzz-vlm",
            base_url=server.url + "/v1",
            api_key_env="FUZZ_KEY",
            timeout_s=_TIMEOUT_S,
        )
        model = OpenAICompatibleModel(config, environ={"FUZZ_KEY": "k"}, max_reply_bytes=_CAP)
        # The first call builds the client's reply models (tens of MB, once): not a body's
        # cost, so it happens before memory is traced.
        body = json.dumps(completion("warm")).encode()
        holder["parts"] = [response_head(200, {"Content-Length": str(len(body))}) + body]
        assert model.respond("hello", None, "planner").text == "warm"
        yield holder, model
        model.close()


@pytest.fixture
def traced():
    """Memory tracing for one test (all its examples)."""
    tracemalloc.start()
    yield
    tracemalloc.stop()


@pytest.mark.filterwarnings("error::UserWarning")  # e.g. pydantic's about wrong field types
@_HTTP_SETTINGS
@given(answer=_answers())
def test_hostile_http_answers_parse_or_fail_in_one_line(endpoint, traced, answer):
    holder, model = endpoint
    holder["parts"], holder["pause"] = answer
    tracemalloc.reset_peak()
    started = time.monotonic()
    try:
        reply = model.respond("hello", None, "planner")
    except ModelCallError as error:
        _check_error(error)
    else:
        _check_reply(reply)
        assert len(reply.text) <= _CAP
    assert time.monotonic() - started < _TIMEOUT_S + 1.0
    assert tracemalloc.get_traced_memory()[1] < 40 * _CAP + (4 << 20)


_REPLY_TEXT = st.one_of(
    st.text(max_size=400),
    st.text(alphabet='{}[]":,\\ <>/thinkgTruefalsnul0123456789`\n', max_size=2000),
    st.builds(
        lambda a, b, c: a + json.dumps(b) + c,
        st.text(max_size=60),
        st.dictionaries(st.text(max_size=10), _JUNK, max_size=4),
        st.text(max_size=60),
    ),
    st.integers(1, 40000).map(lambda n: "{" * n),
    st.integers(1, 3000).map(lambda n: '{"a": ' * n + "1" + "}" * n),
)


@_FUZZ
@given(text=_REPLY_TEXT, reader=st.sampled_from(READERS))
def test_reply_readers_parse_or_fail_in_one_line(text, reader):
    started = time.monotonic()
    try:
        reply = read_reply_json(text, reader=reader, max_chars=_CAP)
    except ResponseFormatError as error:
        _check_error(error)
    else:
        assert isinstance(reply.data, dict)
    assert time.monotonic() - started < 2.0


_QUEUE_SETTINGS = settings(_FUZZ, max_examples=40)


@_QUEUE_SETTINGS
@given(
    body=_bodies(),
    layout=st.sampled_from(["humanclaw", "reference"]),
    key=st.sampled_from(["text", "content", "error"]),
)
def test_hostile_queue_response_files_parse_or_fail_in_one_line(
    tmp_path_factory, body, layout, key
):
    root = tmp_path_factory.mktemp("queue")
    fields = {"model": "worker-model"} if layout == "reference" else {}
    # A reference-layout response that does not parse is waited for (it may be half
    # written), so a short timeout keeps those examples fast.
    config = FilesystemQueueConfig(
        queue_dir=root,
        timeout_s=_QUEUE_TIMEOUT_S,
        poll_interval_s=0.002,
        queue_layout=layout,
        **fields,
    )
    model = FilesystemQueueModel(config, max_reply_bytes=_CAP)
    if body.startswith(b"{") and key != "text":  # the reply under another name, if it parses
        try:
            data = json.loads(body)
            if isinstance(data, dict):
                data = {key: data, **data}
                body = json.dumps(data, allow_nan=True).encode()
        except (ValueError, RecursionError):
            pass
    done = threading.Event()

    def worker() -> None:
        deadline = time.monotonic() + _QUEUE_TIMEOUT_S
        while time.monotonic() < deadline and not done.is_set():
            pending = sorted((root / "pending").iterdir())
            if pending:
                answer = root / "done" / pending[0].name
                answer.mkdir(parents=True, exist_ok=True)
                temp = Path(str(answer) + ".part")
                temp.write_bytes(body)
                temp.replace(answer / "response.json")
                return
            time.sleep(0.002)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        reply = model.respond("hello", None, "planner")
    except ModelCallError as error:
        _check_error(error)
    else:
        _check_reply(reply)
    finally:
        done.set()
        thread.join()
    assert time.monotonic() - started < _QUEUE_TIMEOUT_S + 1.0
