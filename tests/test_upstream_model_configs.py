"""The reference release's three model-config templates, loaded and used unchanged.

The fixtures below are written by hand in the reference's layout (``configs/models/``):
an OpenAI-compatible / vLLM config, an Azure OpenAI o-series config and a filesystem-queue
config. Each one drives the agent end to end: the first two against a loopback
chat-completions server (the Azure one through the ``openai`` package's Azure client), the
queue one through a worker that reads and writes the reference's on-disk layout.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openai")

from chat_server import ChatServer, prompt_text  # noqa: E402

from humanclaw_agents import queue_reference  # noqa: E402
from humanclaw_agents.model_config import (  # noqa: E402
    AzureOpenAIConfig,
    FilesystemQueueConfig,
    ModelConfigError,
    OpenAICompatibleConfig,
    accepted_fields,
    load_model_config,
    model_config_from_dict,
)
from humanclaw_agents.psv import PSVAgent  # noqa: E402
from humanclaw_agents.transports import (  # noqa: E402
    FilesystemQueueModel,
    ModelCallError,
    ModelTimeoutError,
    OpenAICompatibleModel,
    QueueRequest,
    answer_pending_requests,
    build_model,
)

VLLM_TEMPLATE = {
    "backend": "openai_compatible",
    "model": "replace-with-served-model-name",
    "base_url": "http://127.0.0.1:8100/v1",
    "api_key_env": "OPENAI_API_KEY",
    "max_tokens": 1200,
    "temperature": 0.0,
    "response_format": {"type": "json_object"},
    "extra_body": {},
}
AZURE_TEMPLATE = {
    "backend": "azure_openai",
    "model": "replace-with-azure-deployment-name",
    "model_env": "AZURE_OPENAI_DEPLOYMENT",
    "api_key_env": "AZURE_OPENAI_API_KEY",
    "azure_endpoint_env": "AZURE_OPENAI_ENDPOINT",
    "api_version_env": "AZURE_OPENAI_API_VERSION",
    "max_tokens": 4096,
    "max_tokens_parameter": "max_completion_tokens",
    "temperature": 0.0,
    "send_temperature": False,
    "reasoning_effort": "low",
    "response_format": {"type": "json_object"},
    "extra_body": {},
}
QUEUE_TEMPLATE = {
    "backend": "filesystem_queue",
    "model": "replace-with-provider-model-name",
    "queue_dir": "running/vlm_queue",
    "max_tokens": 1200,
    "temperature": 0.0,
    "response_format": {"type": "json_object"},
    "reasoning_budget_tokens": None,
    "timeout_s": 900,
    "poll_interval_s": 1,
}

_PLAN = {
    "visible_state": "A bed two metres ahead; the lane is clear.",
    "mid_level_progress_analysis": "The bed is in view.",
    "mid_level_goal": "walk to the bed",
    "low_level_action_reasoning": "Nothing blocks the lane.",
    "action_id": 0,
    "action_name": "Walk<forward><normal>",
    "additional_info": {},
}
_ACCEPT = {"verdict": "accept", "reason": "clear", "final_action_id": 0}


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(448, 448, 3), dtype=np.uint8)


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def _reply(body: dict[str, Any]) -> str:
    prompt = prompt_text(body)
    if "You check one proposed action" in prompt:
        return json.dumps(_ACCEPT)
    return "<think>Let me look.</think>\n" + json.dumps(_PLAN)


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


# ---- loading -----------------------------------------------------------------------------------


def test_the_three_templates_load_unchanged(tmp_path: Path):
    vllm = load_model_config(_write(tmp_path / "configs/models/vllm.json", VLLM_TEMPLATE))
    assert isinstance(vllm, OpenAICompatibleConfig)
    assert (vllm.model, vllm.max_tokens, vllm.max_tokens_field) == (
        "replace-with-served-model-name",
        1200,
        "max_tokens",
    )
    azure = load_model_config(_write(tmp_path / "configs/models/azure.json", AZURE_TEMPLATE))
    assert isinstance(azure, AzureOpenAIConfig)
    assert azure.max_tokens_field == "max_completion_tokens"
    assert (azure.send_temperature, azure.reasoning_effort, azure.model_env) == (
        False,
        "low",
        "AZURE_OPENAI_DEPLOYMENT",
    )
    assert (azure.azure_endpoint, azure.api_version) == (None, None)
    queue = load_model_config(_write(tmp_path / "configs/models/queue.json", QUEUE_TEMPLATE))
    assert isinstance(queue, FilesystemQueueConfig)
    assert queue.queue_layout == "reference"  # a queue config naming a model
    assert queue.queue_dir == tmp_path / "configs/models/running/vlm_queue"
    assert (queue.timeout_s, queue.poll_interval_s, queue.max_tokens) == (900.0, 1.0, 1200)
    for config in (vllm, azure, queue):
        assert model_config_from_dict(config.to_dict()) == config


@pytest.mark.parametrize("template", [VLLM_TEMPLATE, AZURE_TEMPLATE, QUEUE_TEMPLATE])
def test_unknown_fields_are_refused_with_the_accepted_ones(template: dict[str, Any]):
    data = {**template, "temprature": 0.0}
    with pytest.raises(ModelConfigError) as info:
        model_config_from_dict(data)
    message = str(info.value)
    assert "'temprature' is unknown" in message
    accepted = accepted_fields(template["backend"])
    assert "accepted fields: " + ", ".join(accepted) in message
    assert set(template) <= set(accepted)  # every template field is accepted


def test_config_field_checks():
    with pytest.raises(ModelConfigError, match="disagree"):
        model_config_from_dict(
            {
                **VLLM_TEMPLATE,
                "max_tokens_parameter": "max_tokens",
                "max_tokens_field": "max_completion_tokens",
            }
        )
    with pytest.raises(ModelConfigError, match="'send_temperature'"):
        model_config_from_dict({**AZURE_TEMPLATE, "send_temperature": "no"})
    with pytest.raises(ModelConfigError, match="'azure_endpoint'"):
        model_config_from_dict({**AZURE_TEMPLATE, "azure_endpoint": "example.com"})
    with pytest.raises(ModelConfigError, match="only applies to queue_layout 'reference'"):
        model_config_from_dict({**QUEUE_TEMPLATE, "queue_layout": "humanclaw"})
    with pytest.raises(ModelConfigError, match="'queue_layout'='grpc'"):
        model_config_from_dict({**QUEUE_TEMPLATE, "queue_layout": "grpc"})
    with pytest.raises(ModelConfigError, match="'model' is missing"):
        model_config_from_dict(
            {"backend": "filesystem_queue", "queue_dir": "q", "queue_layout": "reference"}
        )
    with pytest.raises(ModelConfigError, match="never put credentials"):
        model_config_from_dict({**AZURE_TEMPLATE, "api_key": "secret"})
    ours = model_config_from_dict({"backend": "filesystem_queue", "queue_dir": "q"})
    assert ours.queue_layout == "humanclaw"


# ---- OpenAI-compatible (vLLM) ----------------------------------------------------------------


def test_vllm_template_drives_the_agent(
    tmp_path: Path, no_proxy: None, monkeypatch: pytest.MonkeyPatch
):
    with ChatServer(_reply) as server:
        config = _write(tmp_path / "vllm.json", {**VLLM_TEMPLATE, "base_url": server.url + "/v1"})
        monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
        agent = PSVAgent(config, output_dir=tmp_path / "run", sleep=lambda s: None)
        agent.reset({"instruction": "Find the bed."})
        decision = agent.act(_image(), {"step": 0})
    assert str(decision.action) == "Walk<forward><normal>"
    assert [u.source for u in decision.usage] == ["provider", "provider"]
    body = server.requests[0]["body"]
    assert body["model"] == "replace-with-served-model-name"
    assert (body["max_tokens"], body["temperature"]) == (1200, 0.0)
    assert body["response_format"] == {"type": "json_object"}
    assert "reasoning_effort" not in body
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert (tmp_path / "run/step000_verifier.json").is_file()


# ---- Azure OpenAI --------------------------------------------------------------------------------


def test_azure_template_goes_through_the_azure_client(
    tmp_path: Path, no_proxy: None, monkeypatch: pytest.MonkeyPatch
):
    config_path = _write(tmp_path / "azure.json", AZURE_TEMPLATE)
    with ChatServer(_reply) as server:
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-test-key-do-not-leak")
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url)
        monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-12-01-preview")
        monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT", "o4-mini-deploy")
        model = build_model(load_model_config(config_path))
        assert isinstance(model, OpenAICompatibleModel)
        import openai

        assert isinstance(model._client, openai.AzureOpenAI)
        agent = PSVAgent(model, output_dir=tmp_path / "run", sleep=lambda s: None)
        agent.reset({"instruction": "Find the bed."})
        decision = agent.act(_image(), {"step": 0})
    assert str(decision.action) == "Walk<forward><normal>"
    request = server.requests[0]
    assert request["path"] == (
        "/openai/deployments/o4-mini-deploy/chat/completions?api-version=2024-12-01-preview"
    )
    headers = {key.lower(): value for key, value in request["headers"].items()}
    assert headers["api-key"] == "azure-test-key-do-not-leak"
    body = request["body"]
    assert body["max_completion_tokens"] == 4096 and "max_tokens" not in body
    assert "temperature" not in body  # send_temperature: false
    assert body["reasoning_effort"] == "low"
    assert body["response_format"] == {"type": "json_object"}
    assert "azure-test-key-do-not-leak" not in repr(model)
    for path in (tmp_path / "run").iterdir():
        assert "azure-test-key-do-not-leak" not in path.read_text()


def test_azure_needs_endpoint_and_version(tmp_path: Path):
    config = load_model_config(_write(tmp_path / "azure.json", AZURE_TEMPLATE))
    with pytest.raises(ModelConfigError, match="AZURE_OPENAI_ENDPOINT"):
        OpenAICompatibleModel(config, environ={"AZURE_OPENAI_API_KEY": "k"})
    with pytest.raises(ModelConfigError, match="AZURE_OPENAI_API_VERSION"):
        OpenAICompatibleModel(
            config,
            environ={"AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:9"},
        )
    literal = model_config_from_dict(
        {**AZURE_TEMPLATE, "azure_endpoint": "http://127.0.0.1:9", "api_version": "2024-10-21"}
    )
    model = OpenAICompatibleModel(literal, environ={"AZURE_OPENAI_API_KEY": "k"})
    assert model.model_name == "replace-with-azure-deployment-name"  # model_env unset
    assert model.endpoint == "http://127.0.0.1:9"


# ---- filesystem queue, reference layout ------------------------------------------------------------


class _ReferenceWorker:
    """A worker written against the reference layout only (no helper from this package)."""

    def __init__(self, queue_dir: Path, responses: list[Any]) -> None:
        self.queue_dir = queue_dir
        self.responses = list(responses)
        self.seen: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        pending = self.queue_dir / "pending"
        while not self._stop.is_set():
            for folder in sorted(pending.iterdir()) if pending.is_dir() else []:
                request = json.loads((folder / "request.json").read_text())
                files = sorted(p.name for p in folder.iterdir())
                image = (folder / "image_01.png").read_bytes() if "image_01.png" in files else None
                self.seen.append({"request": request, "files": files, "image": image})
                call = folder.name
                claimed = self.queue_dir / "in_progress" / call
                claimed.parent.mkdir(exist_ok=True)
                folder.rename(claimed)
                answer = self.responses.pop(0)
                done = self.queue_dir / "done" / call
                done.mkdir(parents=True)
                if isinstance(answer, bytes):  # a body still being written, then complete
                    (done / "response.json").write_bytes(answer)
                    time.sleep(0.1)
                    answer = self.responses.pop(0)
                (done / "response.json").write_text(json.dumps(answer))
            time.sleep(0.01)

    def __enter__(self) -> _ReferenceWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def test_queue_template_speaks_the_reference_layout(tmp_path: Path):
    config_path = _write(
        tmp_path / "configs/queue.json", {**QUEUE_TEMPLATE, "poll_interval_s": 0.01}
    )
    queue_dir = tmp_path / "configs/running/vlm_queue"
    image = _image(5)
    responses = [
        {"content": json.dumps(_PLAN), "usage": {"prompt_tokens": 1000, "completion_tokens": 80}},
        b'{"content": "half-writ',  # partial body: waited for, not a failed call
        {
            "content": json.dumps(_ACCEPT),
            "usage": "Usage(prompt_tokens=700, completion_tokens=20, num_reasoning_tokens=30)",
        },
    ]
    agent = PSVAgent(config_path, sleep=lambda s: None)
    agent.reset({"instruction": "Find the bed."})
    with _ReferenceWorker(queue_dir, responses) as worker:
        decision = agent.act(image, {"step": 3})
    assert str(decision.action) == "Walk<forward><normal>"
    planner, verifier = worker.seen
    request = planner["request"]
    assert request["schema"] == "humanclaw_vlm_queue_request_v1"
    assert re.fullmatch(r"000000_step0003_planner_skill_[0-9a-f]{10}", request["call_id"])
    assert re.fullmatch(r"000001_step0003_verifier_[0-9a-f]{10}", verifier["request"]["call_id"])
    assert (request["stage"], verifier["request"]["stage"]) == ("planner_skill", "verifier")
    assert planner["files"] == ["image_01.png", "request.json"]
    assert request["model"] == "replace-with-provider-model-name"
    assert (request["max_tokens"], request["temperature"]) == (1200, 0.0)
    assert request["response_format"] == {"type": "json_object"}
    assert request["reasoning_budget_tokens"] is None and request["episode_step"] == 3
    (message,) = request["messages"]
    text, picture = message["content"]
    assert text["type"] == "text" and "You choose both the plan and the skill" in text["text"]
    assert picture == {
        "type": "image_url",
        "image_url": {"stored_image_file": "image_01.png", "media_type": "image/png"},
    }
    assert request["images"] == [
        {"image_file": "image_01.png", "media_type": "image/png", "bytes": len(planner["image"])}
    ]
    from PIL import Image

    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(planner["image"]))), image)
    planner_usage, verifier_usage = decision.usage
    assert (planner_usage.input_tokens, planner_usage.output_tokens) == (1000, 80)
    assert (verifier_usage.input_tokens, verifier_usage.output_tokens) == (700, 20)
    assert verifier_usage.reasoning_tokens == 30 and verifier_usage.source == "provider"
    assert decision.extras["retries"]["transport"] == 0
    assert [p for p in queue_dir.rglob("*") if p.is_file()] == []


def test_reference_queue_errors_timeouts_and_our_worker_helper(tmp_path: Path):
    queue_dir = tmp_path / "q"
    config = model_config_from_dict(
        {**QUEUE_TEMPLATE, "queue_dir": str(queue_dir), "timeout_s": 0.2, "poll_interval_s": 0.01}
    )
    model = FilesystemQueueModel(config)
    with pytest.raises(ModelTimeoutError, match="no response file appeared"):
        model.respond("nobody answers", None, "planner")
    assert [p for p in queue_dir.rglob("*") if p.is_file()] == []

    seen: list[QueueRequest] = []

    def handler(request: QueueRequest) -> dict[str, Any]:
        seen.append(request)
        if "fail" in request.prompt:
            raise RuntimeError("provider down")
        return {"text": '{"verdict": "accept"}', "usage": {"input_tokens": 5, "output_tokens": 2}}

    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            answer_pending_requests(queue_dir, handler)
            time.sleep(0.01)

    config = model_config_from_dict(
        {**QUEUE_TEMPLATE, "queue_dir": str(queue_dir), "timeout_s": 5, "poll_interval_s": 0.01}
    )
    model = FilesystemQueueModel(config)
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        reply = model.respond("please check", _image(1), "verifier")
        with pytest.raises(ModelCallError, match="provider down"):
            model.respond("fail now", None, "planner")
    finally:
        stop.set()
        thread.join(timeout=5)
    assert reply.text == '{"verdict": "accept"}'
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (5, 2)
    assert seen[0].stage == "verifier" and seen[0].prompt == "please check"
    assert seen[0].image_png is not None and seen[1].image_png is None
    assert seen[0].metadata["schema"] == queue_reference.REQUEST_SCHEMA
    assert [p for p in queue_dir.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            {
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": 8,
                    "completion_tokens_details": {"reasoning_tokens": 3},
                }
            },
            (10, 5, 3),
        ),
        (
            {"usage": {"prompt_tokens": 10, "completion_tokens": 8, "num_reasoning_tokens": 3}},
            (10, 8, 3),
        ),
        ({"usage": {"input_tokens": 4, "output_tokens": 2, "thoughts_token_count": 1}}, (4, 2, 1)),
        ({"usage": "Usage(prompt_tokens=9, completion_tokens=4, total_tokens=13)"}, (9, 4, 0)),
        ({"usage": {"prompt_token_count": 6, "candidates_token_count": 3}}, (6, 3, 0)),
        ({"prompt_tokens": 7, "completion_tokens": 2, "content": "x"}, (7, 2, 0)),
        ({"usage": {"prompt_tokens": 10}}, None),
        ({}, None),
        # the reference's reading of edge cases
        ({"usage": {"prompt_tokens": 10, "completion_tokens": None}}, None),
        (
            {"usage": {"prompt_tokens": 10, "completion_tokens": 8, "output_tokens": 6}},
            (10, 6, 0),  # a visible count wins over completion_tokens
        ),
        ({"usage": {"prompt_tokens": "12", "completion_tokens": 3.7}}, (12, 3, 0)),  # int()
        (
            {"usage": {"prompt_tokens": 5, "completion_tokens": 4, "reasoning_tokens": True}},
            (5, 3, 1),
        ),
        (
            {
                "usage": {
                    "prompt_tokens": -1,
                    "input_tokens": "x",
                    "prompt_token_count": 4,
                    "completion_tokens": 2,
                }
            },
            (4, 2, 0),
        ),  # unreadable and negative skipped
        (
            {
                "usage": {
                    "prompt_tokens": 5,
                    "completion_tokens": 9,
                    "completion_tokens_details": "n/a",
                    "output_tokens_details": {"reasoning_tokens": 4},
                }
            },
            (5, 9, 0),  # details: the first non-empty of the two, a non-object has none
        ),
        (
            {"usage": {"prompt_tokens": 5, "output_tokens": float("inf"), "completion_tokens": 3}},
            (5, 3, 0),
        ),  # the reference raises OverflowError; we skip the field
    ],
)
def test_reference_usage_normalization(response: dict[str, Any], expected: tuple | None):
    usage = queue_reference.normalize_usage(response, "planner")
    if expected is None:
        assert usage is None
    else:
        assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == expected
        assert usage.source == "provider" and usage.stage == "planner"
