"""The reference release's filesystem-queue layout, for workers written against it.

:class:`~humanclaw_agents.transports.FilesystemQueueModel` speaks this layout when its
config says ``queue_layout: "reference"`` (or names a ``model`` without a layout, as the
reference's template does). All paths are below ``queue_dir``::

    tmp/<call_id>/          a request being written
    pending/<call_id>/      request.json + image_01.png, complete
    in_progress/<call_id>/  a request a worker took
    done/<call_id>/         response.json

``<call_id>`` is ``{index:06d}_step{step:04d}_{stage}_{10 hex}``, ``stage`` one of
``planner_skill``, ``verifier``, ``unknown``. ``request.json`` (schema
``humanclaw_vlm_queue_request_v1``) holds the chat ``messages`` as the model would get
them, except that every inline image is replaced by
``{"stored_image_file": "image_01.png", "media_type": "image/png"}`` and stored next to it,
plus ``images`` (file, media type, bytes), ``model``, ``max_tokens``, ``temperature``,
``reasoning_budget_tokens``, ``response_format``, ``stage``, ``episode_step``,
``created_time`` and ``pid``.

``response.json`` carries the reply text in ``content`` (or, as some workers write it,
``choices[0].message.content``), an optional ``usage`` (an object, or the text of a
``Usage(...)`` repr) or flat token fields, and ``error`` when the worker's call failed.
A response file that does not parse yet is treated as still being written (network file
systems can show the name before the body), until the timeout.

This module holds the format only (no waiting, no agent logic).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from humanclaw_agents.provider_usage import usage_from_fields
from humanclaw_gym.policy import Usage

__all__ = [
    "DIRECTORIES",
    "REQUEST_SCHEMA",
    "call_id",
    "normalize_usage",
    "read_request",
    "ResponseTooLargeError",
    "read_response",
    "remove_call",
    "response_text",
    "stage_label",
    "write_request",
    "write_response",
]

REQUEST_SCHEMA = "humanclaw_vlm_queue_request_v1"
"""``schema`` of every reference-layout ``request.json``."""

DIRECTORIES = ("pending", "done", "tmp", "in_progress")
"""Folders of the layout."""

_REQUEST_FILE = "request.json"
_RESPONSE_FILE = "response.json"
_STAGE_LABELS = {"planner": "planner_skill", "verifier": "verifier"}
_TOKEN_KEYS = (
    "input_tokens",
    "output_tokens",
    "visible_output_tokens",
    "reasoning_tokens",
    "num_reasoning_tokens",
    "thoughts_token_count",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "completion_tokens_details",
)
_REPR_FIELDS = {
    "prompt_tokens": re.compile(r"\bprompt_tokens=(\d+)"),
    "output_tokens": re.compile(r"\bcompletion_tokens=(\d+)"),
    "reasoning_tokens": re.compile(r"\bnum_reasoning_tokens=(\d+)"),
    "total_tokens": re.compile(r"\btotal_tokens=(\d+)"),
}


def stage_label(stage: str) -> str:
    """The layout's stage name: ``planner`` -> ``planner_skill``, ``verifier`` stays,
    anything else is ``unknown``."""
    return _STAGE_LABELS.get(stage, "unknown")


def call_id(index: int, episode_step: int, stage: str) -> str:
    """A fresh call id: ``{index:06d}_step{step:04d}_{stage label}_{10 hex digits}``."""
    return f"{index:06d}_step{episode_step:04d}_{stage_label(stage)}_{uuid.uuid4().hex[:10]}"


def write_request(
    queue_dir: Path,
    call: str,
    *,
    prompt: str,
    image_png: bytes | None,
    stage: str,
    episode_step: int,
    model: str,
    max_tokens: int,
    temperature: float,
    reasoning_budget_tokens: int | None,
    response_format: Mapping[str, Any] | None,
) -> None:
    """Write one request under ``tmp/`` and rename it into ``pending/`` in one step."""
    staging = queue_dir / "tmp" / call
    staging.mkdir(parents=True, exist_ok=False)
    content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    images: list[dict[str, Any]] = []
    if image_png is not None:
        name = "image_01.png"
        (staging / name).write_bytes(image_png)
        content.append(
            {
                "type": "image_url",
                "image_url": {"stored_image_file": name, "media_type": "image/png"},
            }
        )
        images.append({"image_file": name, "media_type": "image/png", "bytes": len(image_png)})
    request = {
        "schema": REQUEST_SCHEMA,
        "call_id": call,
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "images": images,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "reasoning_budget_tokens": reasoning_budget_tokens,
        "response_format": None if response_format is None else dict(response_format),
        "stage": stage_label(stage),
        "episode_step": episode_step,
        "created_time": time.time(),
        "pid": os.getpid(),
    }
    (staging / _REQUEST_FILE).write_text(
        json.dumps(request, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    os.replace(staging, queue_dir / "pending" / call)


class ResponseTooLargeError(ValueError):
    """A response file is larger than the reader accepts (it is not read)."""


def read_response(queue_dir: Path, call: str, max_bytes: int | None = None) -> tuple[bool, Any]:
    """``(True, object)`` once ``done/<call>/response.json`` parses as a JSON object,
    ``(False, error or None)`` while it is missing or still being written.

    Raises:
        ResponseTooLargeError: the file has more than ``max_bytes`` bytes (it is not read).
    """
    path = queue_dir / "done" / call / _RESPONSE_FILE
    if not path.is_file():
        return False, None
    try:
        with path.open("rb") as handle:
            raw = handle.read(-1 if max_bytes is None else max_bytes + 1)
        if max_bytes is not None and len(raw) > max_bytes:
            raise ResponseTooLargeError(
                f"queue response {path} has more than {max_bytes} bytes; refused unread"
            )
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        if isinstance(error, ResponseTooLargeError):
            raise
        return False, error
    if not isinstance(data, dict):
        return False, ValueError(f"response is a {type(data).__name__}, not a JSON object")
    return True, data


def remove_call(queue_dir: Path, call: str) -> None:
    """Delete every folder of one call."""
    for name in DIRECTORIES:
        shutil.rmtree(queue_dir / name / call, ignore_errors=True)


def response_text(response: Mapping[str, Any]) -> str:
    """The reply text: ``content``, else ``choices[0].message.content``, else ``""``."""
    text = response.get("content")
    if not text:
        choices = response.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get("message")
            if isinstance(message, Mapping):
                text = message.get("content")
    return str(text or "")


def normalize_usage(response: Mapping[str, Any], stage: str) -> Usage | None:
    """Token usage of a response in the ways reference-layout workers report it.

    ``usage`` may be an object or the text of a ``Usage(prompt_tokens=..,
    completion_tokens=.., num_reasoning_tokens=..)`` repr; without it the response's flat
    token fields are read. When a usage object holds ``completion_tokens`` together with
    ``num_reasoning_tokens`` (a Gemini worker), ``completion_tokens`` is already the
    visible count. The fields are then read by
    :func:`~humanclaw_agents.provider_usage.usage_from_fields` (input, visible output and
    reasoning, as the reference reads them).

    Returns:
        A ``"provider"`` Usage, or ``None`` when input or output counts are missing.
    """
    fields = _usage_fields(response.get("usage"))
    if not fields:
        fields = {key: response[key] for key in _TOKEN_KEYS if key in response}
    return usage_from_fields(fields, stage)


def _usage_fields(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        fields = dict(value)
        if (
            "completion_tokens" in fields
            and "num_reasoning_tokens" in fields
            and "output_tokens" not in fields
            and "visible_output_tokens" not in fields
        ):
            fields["output_tokens"] = fields.pop("completion_tokens")
            fields["reasoning_tokens"] = fields.pop("num_reasoning_tokens")
        return fields
    if isinstance(value, str):
        fields = {}
        for key, pattern in _REPR_FIELDS.items():
            match = pattern.search(value)
            if match:
                fields[key] = int(match.group(1))
        return fields
    return {}


# ---- worker side -------------------------------------------------------------------------------


def read_request(folder: Path) -> tuple[str, bytes | None, str, dict[str, Any]]:
    """A worker's view of one request folder: ``(prompt, image_png, stage, request)``.

    The prompt is the text parts of the messages joined by newlines; the image is the
    first stored image file.
    """
    request = json.loads((folder / _REQUEST_FILE).read_text(encoding="utf-8"))
    texts: list[str] = []
    image_png: bytes | None = None
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content or []:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif part.get("type") == "image_url" and image_png is None:
                stored = (part.get("image_url") or {}).get("stored_image_file")
                if stored:
                    image_png = (folder / str(stored)).read_bytes()
    return "\n".join(texts), image_png, str(request.get("stage", "")), request


def write_response(queue_dir: Path, call: str, response: Mapping[str, Any]) -> None:
    """Write ``done/<call>/response.json`` atomically (built in ``tmp/``, then renamed).

    A ``{"text": ...}`` response (our worker convention) is written as ``content``.
    """
    data = dict(response)
    if "text" in data and "content" not in data:
        data["content"] = data.pop("text")
    staging = queue_dir / "tmp" / f"{call}.response.{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        (staging / _RESPONSE_FILE).write_text(json.dumps(data), encoding="utf-8")
        os.replace(staging, queue_dir / "done" / call)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
