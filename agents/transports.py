"""Model transports: one multimodal request in, one text reply (plus token usage) out.

The agent sees every model through the small :class:`ChatModel` protocol::

    reply = model.respond(prompt, image_rgb, stage="planner")
    reply.text   # the model's answer (the agent parses the JSON itself)
    reply.usage  # Usage record or None

Two transports implement it:

* :class:`OpenAICompatibleModel`: a direct chat-completions request through the official
  ``openai`` package (optional extra ``humanclaw-gym[openai]``), with its plain client or
  its Azure client. The image travels as a PNG data URL next to the prompt text. The client
  never retries on its own (``max_retries=0``): the agent counts and logs every attempt
  itself. It reads through :mod:`humanclaw_agents.bounded_http`: ``timeout_s`` is a
  deadline for the whole request and response, and a body past :data:`MAX_REPLY_BYTES` is
  abandoned unread.
* :class:`FilesystemQueueModel`: writes the request into a queue folder and waits for an
  external worker to answer; the worker owns the credentials. It speaks our layout or the
  reference release's (:mod:`humanclaw_agents.queue_reference`), as the config says (see
  ``docs/agents.md`` for both and :func:`answer_pending_requests` for a ready-made worker
  loop body).

Both raise :class:`ModelCallError` (or its :class:`ModelTimeoutError` subclass) for any
failed call, with a one-line message; the agent treats that as a failed attempt and
retries. Both offer ``preflight()``, the cheap check a run makes before its first episode
(``docs/agents.md``, Preflight).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from humanclaw_agents import queue_reference
from humanclaw_agents.model_config import (
    QUEUE_LAYOUTS,
    AzureOpenAIConfig,
    FilesystemQueueConfig,
    ModelConfig,
    ModelConfigError,
    OpenAICompatibleConfig,
)
from humanclaw_agents.provider_usage import usage_fields, usage_from_fields
from humanclaw_gym.policy import Usage, estimate_tokens

__all__ = [
    "MAX_REPLY_BYTES",
    "PREFLIGHT_PROMPT",
    "PREFLIGHT_TIMEOUT_S",
    "QUEUE_PROTOCOL",
    "ChatModel",
    "FilesystemQueueModel",
    "ModelCallError",
    "ModelReply",
    "MissingAPIKeyError",
    "ModelTimeoutError",
    "OpenAICompatibleModel",
    "QueueRequest",
    "answer_pending_requests",
    "build_model",
    "encode_png",
    "png_data_url",
    "retry_after_s",
]

MAX_REPLY_BYTES = 8 << 20
"""The largest reply body read from an endpoint or a queue response file (8 MiB): more is
abandoned at that point, unread. A reply of the agents' longest accepted text
(:data:`~humanclaw_agents.replies.DEFAULT_MAX_REPLY_CHARS`, 1 Mi characters) fits in it
in any JSON escaping, with its envelope."""

PREFLIGHT_TIMEOUT_S = 10.0
"""The deadline of a preflight request (``timeout_s`` when that is shorter)."""

PREFLIGHT_PROMPT = 'Reply with the JSON object {"ready": true}.'
"""The text of a preflight request (it names JSON, as a ``json_object`` format requires)."""

QUEUE_PROTOCOL = "humanclaw-queue/v1"
"""Value of the ``protocol`` field of every queue ``request.json``."""

_PENDING = "pending"
_DONE = "done"
_STAGING = "staging"
_CLAIMED = "claimed"
_REQUEST_FILE = "request.json"
_IMAGE_FILE = "image.png"
_RESPONSE_FILE = "response.json"
_ESTIMATED = "estimated_chars_div_4"


class ModelCallError(RuntimeError):
    """One model call failed (transport, provider status, malformed reply).

    Attributes:
        retry_after_s: how long the provider asked to wait before the next call (its
            ``Retry-After`` on a 429 or 503 answer), or None.
    """

    def __init__(self, *args: Any, retry_after_s: float | None = None) -> None:
        super().__init__(*args)
        self.retry_after_s = retry_after_s


class ModelTimeoutError(ModelCallError, TimeoutError):
    """One model call got no answer within its timeout."""


@dataclass(frozen=True)
class ModelReply:
    """The answer of one model call.

    Attributes:
        text: the reply text (for the PSV agent, a JSON object as text).
        usage: token usage of this call; ``stage`` is the stage passed to ``respond`` and
            ``attempt`` is 1 (the agent restamps the attempt number). ``None`` when the
            transport knows nothing about tokens.
    """

    text: str
    usage: Usage | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A vision-language model behind one request/response call."""

    def respond(self, prompt: str, image_rgb: np.ndarray | None, stage: str) -> ModelReply:
        """Send one user turn (prompt text + optional RGB image) and return the reply.

        Args:
            prompt: the full prompt text.
            image_rgb: ``uint8 (H, W, 3)`` image, or ``None`` for a text-only call; a
                transport whose class sets ``multi_image = True`` also takes a tuple of
                images, sent in order (image-goal navigation: current view, goal picture).
            stage: logical stage name (``"planner"``, ``"verifier"``), for usage and logs.

        Raises:
            ModelCallError: the call failed; the caller may retry.
        """
        ...


# ---- images --------------------------------------------------------------------------------


def encode_png(image_rgb: np.ndarray) -> bytes:
    """Encode a ``uint8 (H, W, 3)`` RGB image as PNG bytes.

    Raises:
        ValueError: the array is not ``uint8`` with shape ``(H, W, 3)``.
    """
    from PIL import Image

    array = np.asarray(image_rgb)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(
            f"image_rgb must be a uint8 array of shape (H, W, 3), got dtype {array.dtype} "
            f"and shape {array.shape}"
        )
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buffer, format="PNG")
    return buffer.getvalue()


def png_data_url(image_rgb: np.ndarray) -> str:
    """The image as a ``data:image/png;base64,...`` URL."""
    return "data:image/png;base64," + base64.b64encode(encode_png(image_rgb)).decode("ascii")


def _estimated_usage(prompt: str, text: str, stage: str) -> Usage:
    """chars/4 estimate for a call whose provider reported no usage (the image is not counted)."""
    return Usage(
        stage=stage,
        attempt=1,
        input_tokens=estimate_tokens(prompt),
        output_tokens=estimate_tokens(text),
        reasoning_tokens=0,
        source=_ESTIMATED,
    )


# ---- OpenAI-compatible -----------------------------------------------------------------------


class OpenAICompatibleModel:
    """Chat-completions transport over the official ``openai`` client (plain or Azure).

    With an :class:`~humanclaw_agents.model_config.OpenAICompatibleConfig` the client is
    ``openai.OpenAI(base_url=...)``; with an
    :class:`~humanclaw_agents.model_config.AzureOpenAIConfig` it is
    ``openai.AzureOpenAI(azure_endpoint=..., api_version=...)``, and ``model`` is the
    deployment name. The request is the same for both.

    Everything read from the environment is read when the model is built: the API key
    (``api_key_env``), the model name override (``model_env``) and, for Azure, the endpoint
    and API version when the config does not give them. The key is handed to the client
    only and appears in no repr, log or file.

    Token usage is read from the reply's usage object as the reference release reads it
    (:mod:`humanclaw_agents.provider_usage`): ``input_tokens`` = ``prompt_tokens``;
    ``reasoning_tokens`` = ``completion_tokens_details.reasoning_tokens`` when the
    provider reports it, else 0; ``output_tokens`` = a visible count the provider gives
    (``output_tokens``, e.g. some vLLM builds), else ``completion_tokens -
    reasoning_tokens`` (the OpenAI convention counts hidden reasoning inside
    ``completion_tokens``; we keep it apart). Without usable counts (no usage field, or
    ``completion_tokens: null``) the reply carries a chars/4 estimate of prompt and reply
    text (source ``"estimated_chars_div_4"``; the image is not counted).

    Args:
        config: the validated endpoint config.
        environ: where to look variables up (defaults to ``os.environ``; tests pass a dict).

    Raises:
        ImportError: the ``openai`` package is not installed.
        MissingAPIKeyError: the key's environment variable is unset or empty.
        ModelConfigError: Azure endpoint or API version neither in the config nor in the
            environment.
    """

    #: ``respond`` also takes a tuple of images, sent as image parts in order (image-goal
    #: navigation sends the current view and the goal picture).
    multi_image = True

    def __init__(
        self,
        config: OpenAICompatibleConfig | AzureOpenAIConfig,
        *,
        environ: Mapping[str, str] | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        if not isinstance(config, (OpenAICompatibleConfig, AzureOpenAIConfig)):
            raise TypeError(
                "OpenAICompatibleModel needs an OpenAICompatibleConfig or an AzureOpenAIConfig, "
                f"got {type(config).__name__}"
            )
        _check_reply_bytes(max_reply_bytes)
        try:
            import openai

            from humanclaw_agents import bounded_http
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                "OpenAICompatibleModel needs the 'openai' package (3.57 or newer, which "
                f"reads through httpx2): pip install 'humanclaw-gym[openai]' ({error})"
            ) from error
        env = os.environ if environ is None else environ
        key = env.get(config.api_key_env)
        if not key:
            raise MissingAPIKeyError(
                f"environment variable {config.api_key_env!r} (named by the model config "
                "field 'api_key_env') is not set or empty; export the API key there (a "
                "server without authentication accepts any value, e.g. EMPTY)"
            )
        self.config = config
        self.model_name = (env.get(config.model_env) if config.model_env else None) or config.model
        self._openai = openai
        if isinstance(config, AzureOpenAIConfig):
            endpoint = config.azure_endpoint or env.get(config.azure_endpoint_env)
            version = config.api_version or env.get(config.api_version_env)
            for name, value, env_name in (
                ("azure_endpoint", endpoint, config.azure_endpoint_env),
                ("api_version", version, config.api_version_env),
            ):
                if not value:
                    raise ModelConfigError(
                        f"Azure OpenAI needs {name}: set the model config field {name!r} or "
                        f"the environment variable {env_name!r} (named by '{name}_env')"
                    )
            self.endpoint = str(endpoint)
        else:
            self.endpoint = config.base_url
        self.max_reply_bytes = max_reply_bytes
        self._limits = bounded_http.RequestLimits()
        try:
            http_client = bounded_http.bounded_client(self.endpoint, self._limits, config.timeout_s)
        except ValueError as error:  # a SOCKS proxy in the environment
            raise ModelConfigError(str(error)) from None
        if isinstance(config, AzureOpenAIConfig):
            self._client = openai.AzureOpenAI(
                api_key=key,
                azure_endpoint=self.endpoint,
                api_version=str(version),
                timeout=config.timeout_s,
                max_retries=0,
                http_client=http_client,
            )
        else:
            self._client = openai.OpenAI(
                api_key=key,
                base_url=config.base_url,
                timeout=config.timeout_s,
                max_retries=0,
                http_client=http_client,
            )

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleModel(backend={self.config.backend!r}, model={self.model_name!r}, "
            f"endpoint={self.endpoint!r}, api_key_env={self.config.api_key_env!r})"
        )

    def close(self) -> None:
        """Close the underlying HTTP client."""
        self._client.close()

    def build_messages(self, prompt: str, image_rgb: Any) -> list[dict[str, Any]]:
        """The chat messages of one call: a single user turn with text and the optional image
        (or a tuple of images, in order: see :attr:`multi_image`)."""
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        images = image_rgb if isinstance(image_rgb, (tuple, list)) else (image_rgb,)
        for image in images:
            if image is not None:
                content.append({"type": "image_url", "image_url": {"url": png_data_url(image)}})
        return [{"role": "user", "content": content}]

    def request_fields(self) -> dict[str, Any]:
        """The request fields besides ``messages``, as sent with every call."""
        config = self.config
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            config.max_tokens_field: config.max_tokens,
        }
        if config.send_temperature and config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if config.response_format is not None:
            kwargs["response_format"] = config.response_format
        if config.reasoning_effort is not None:
            kwargs["reasoning_effort"] = config.reasoning_effort
        if config.extra_body:
            kwargs["extra_body"] = dict(config.extra_body)
        return kwargs

    def respond(self, prompt: str, image_rgb: np.ndarray | None, stage: str) -> ModelReply:
        """One chat-completions request; see :meth:`ChatModel.respond`.

        The request ends within ``timeout_s`` (a deadline over the whole request and
        response) and a reply body larger than ``max_reply_bytes`` is abandoned unread;
        both raise (:class:`ModelTimeoutError`, :class:`ModelCallError`).
        """
        kwargs = self.request_fields()
        kwargs["messages"] = self.build_messages(prompt, image_rgb)
        with self._limits.call(self.config.timeout_s, self.max_reply_bytes) as call:
            try:
                completion = self._client.chat.completions.create(**kwargs)
            except Exception as error:
                raise self._call_error(error, call, stage) from error
        text = _completion_text(completion, stage, self.endpoint)
        usage = _completion_usage(completion, stage)
        if usage is None:
            usage = _estimated_usage(prompt, text, stage)
        return ModelReply(text=text, usage=usage)

    def preflight(self) -> None:
        """One cheap request that proves the endpoint answers this config, before any episode.

        It sends the agent's own request fields (model, token limit, response format, extra
        body) with a one-line text prompt and no image, asks for a streamed reply, and
        hangs up as soon as the status line and headers arrive: a 2xx status (or 429 / 503,
        an endpoint that is there but busy) passes. Nothing of it reaches any episode's
        token usage. The request ends within :data:`PREFLIGHT_TIMEOUT_S` (or
        ``timeout_s`` when that is shorter).

        Raises:
            ModelCallError: one line naming the endpoint, the model and the cause (refused
                connection, unknown host, no answer, HTTP 401 / 404 / 400 ... with the
                provider's message).
        """
        kwargs = self.request_fields()
        kwargs["messages"] = [
            {"role": "user", "content": [{"type": "text", "text": PREFLIGHT_PROMPT}]}
        ]
        kwargs["stream"] = True
        timeout = min(self.config.timeout_s, PREFLIGHT_TIMEOUT_S)
        where = f"model endpoint {self.endpoint} (model {self.model_name!r})"
        with self._limits.call(timeout, self.max_reply_bytes) as call:
            try:
                stream = self._client.chat.completions.create(**kwargs, timeout=timeout)
            except self._openai.APIStatusError as error:
                if error.status_code in _RATE_LIMITED:
                    return  # there and answering, only busy
                raise ModelCallError(
                    f"{where} answered {_status_text(error, self.config)}"
                ) from error
            except Exception as error:
                cause = self._call_error(error, call, "preflight", bare=True)
                raise type(cause)(f"{where}: {cause}") from error
            close = getattr(stream, "close", None)
            if callable(close):
                close()

    def _call_error(
        self, error: Exception, call: Any, stage: str, *, bare: bool = False
    ) -> ModelCallError:
        """The ModelCallError for an exception of one request; ``bare`` leaves the stage and
        the endpoint out of the message (the preflight names them itself)."""
        errors = self._openai
        prefix = "" if bare else f"{stage}: "
        source = "" if bare else f" from {self.endpoint}"
        stopped_by = call.stopped_by()
        if stopped_by == "deadline":
            return ModelTimeoutError(
                f"{prefix}no complete reply{source} within the {call.timeout_s:g} s deadline"
                + ("" if bare else " (timeout_s)")
            )
        if stopped_by == "body_size":
            return ModelCallError(
                f"{prefix}the reply{source} is larger than {call.max_body_bytes} bytes "
                "(max_reply_bytes); reading stopped there"
            )
        if isinstance(error, errors.APITimeoutError):
            return ModelTimeoutError(f"{prefix}no reply{source} within {call.timeout_s:g} s")
        if isinstance(error, errors.APIStatusError):
            wait = retry_after_s(error.status_code, getattr(error, "response", None))
            return ModelCallError(
                f"{prefix}{'' if bare else self.endpoint + ' '}answered "
                + _status_text(error, self.config)
                + ("" if wait is None else f" (Retry-After: {wait:g} s)"),
                retry_after_s=wait,
            )
        if isinstance(error, errors.APIError) or _is_http_error(error):
            cause = _transport_cause(error)
            return ModelCallError(
                cause if bare else f"{prefix}request to {self.endpoint} failed: {cause}"
            )
        if isinstance(error, (ValueError, TypeError, AttributeError, RecursionError)):
            # e.g. a body that is not valid JSON, or an object of the wrong shape.
            return ModelCallError(f"{prefix}malformed reply{source}: {_short(str(error))}")
        raise error


class MissingAPIKeyError(RuntimeError):
    """The environment variable named by a config's ``api_key_env`` is unset or empty."""


_RATE_LIMITED = (429, 503)


def retry_after_s(status: int, response: Any, now: float | None = None) -> float | None:
    """Seconds a 429 / 503 answer asks the client to wait, or None.

    Reads ``retry-after-ms`` (milliseconds, sent by OpenAI) or ``Retry-After`` (seconds, or
    an HTTP date); a negative, non-finite or unreadable value counts as absent. Other
    statuses ask for nothing. The caller bounds the wait (``max_retry_after_s``).
    """
    if status not in _RATE_LIMITED:
        return None
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        text = str(raw).strip()
        try:
            value = float(text) * scale
        except ValueError:
            if scale != 1.0:
                continue
            try:  # an HTTP date
                from email.utils import parsedate_to_datetime

                when = parsedate_to_datetime(text).timestamp()
            except (TypeError, ValueError, IndexError, OverflowError):
                continue
            value = when - (time.time() if now is None else now)
            value = max(value, 0.0)
        if value == value and 0.0 <= value < float("inf"):
            return value
    return None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _check_reply_bytes(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_reply_bytes={value!r} is invalid: allowed an int >= 1")


_STATUS_HINTS = {
    401: "the key was refused: check the one in ${key}",
    403: "the key may not use this model: check the one in ${key}",
    404: "check base_url and that the model name is served there",
}


def _status_text(error: Any, config: Any) -> str:
    """``HTTP <status>: <the provider's message> (<hint>)`` on one line."""
    status = int(error.status_code)
    message = _provider_message(getattr(error, "body", None)) or _short(str(error))
    hint = _STATUS_HINTS.get(status)
    text = f"HTTP {status}: {message}"
    if hint is not None:
        text += " (" + hint.replace("{key}", str(getattr(config, "api_key_env", "?"))) + ")"
    return text


def _provider_message(body: Any) -> str:
    """The error message of a provider's error body (OpenAI, vLLM, Azure and FastAPI
    shapes), or ``""``."""
    if isinstance(body, str):
        return _short(body)
    if not isinstance(body, Mapping):
        return ""
    inner = body.get("error", body)
    if isinstance(inner, str):
        return _short(inner)
    if isinstance(inner, Mapping):
        for name in ("message", "detail"):
            value = inner.get(name)
            if isinstance(value, str) and value.strip():
                return _short(value)
    return ""


_HTTP_CAUSES = (
    ("ConnectTimeout", "connecting timed out"),
    ("ConnectError", "cannot connect"),
    ("ReadTimeout", "no answer in time"),
    ("WriteTimeout", "sending timed out"),
    ("RemoteProtocolError", "the answer is not valid HTTP"),
    ("DecodingError", "the body does not decode"),
    ("ReadError", "the connection broke while reading"),
    ("WriteError", "the connection broke while sending"),
    ("ProxyError", "the proxy refused"),
    ("UnsupportedProtocol", "unsupported URL"),
)


def _is_http_error(error: BaseException) -> bool:
    import httpx2

    return isinstance(error, httpx2.HTTPError)


def _transport_cause(error: BaseException) -> str:
    """What went wrong below HTTP, on one line: the kind of failure (from the first
    ``httpx2`` error in the exception chain) and the innermost message."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    kind = ""
    for exc in chain:
        names = {cls.__name__ for cls in type(exc).__mro__}
        kind = next((label for name, label in _HTTP_CAUSES if name in names), "")
        if kind:
            break
    detail = next((str(exc) for exc in reversed(chain) if str(exc).strip()), "")
    detail = _short(detail, 200) or type(chain[-1]).__name__
    if not kind or detail.startswith("cannot "):
        return detail
    return f"{kind} ({detail})"


def _completion_text(completion: Any, stage: str, base_url: str) -> str:
    """The reply text. An empty reply (a reasoning model that spent its whole budget
    thinking, a refusal) is returned as text, not raised: the call happened and was billed,
    so it keeps its usage record and the agent counts it as an unreadable reply."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise ModelCallError(f"{stage}: reply from {base_url} has no 'choices'")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if isinstance(content, list):  # some servers return content parts
        content = "".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    if isinstance(content, str) and content.strip():
        return content
    refusal = getattr(message, "refusal", None)
    return str(refusal) if refusal else ""


def _completion_usage(completion: Any, stage: str) -> Usage | None:
    """The provider usage of a completion, read by
    :func:`~humanclaw_agents.provider_usage.usage_from_fields` from the client's usage
    object (its ``model_dump()``, extra provider fields included), or ``None``."""
    return usage_from_fields(usage_fields(getattr(completion, "usage", None)), stage)


# ---- filesystem queue ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRequest:
    """One request as a worker sees it (see :func:`answer_pending_requests`).

    Attributes:
        request_id: the folder name, also the name of the response folder.
        stage: logical stage name.
        prompt: the prompt text.
        image_png: the PNG bytes of the image, or ``None`` for a text-only call.
        metadata: the whole parsed ``request.json``.
    """

    request_id: str
    stage: str
    prompt: str
    image_png: bytes | None
    metadata: Mapping[str, Any]


class FilesystemQueueModel:
    """Transport through a queue folder answered by an external, credential-owning worker.

    Protocol (all paths below ``config.queue_dir``):

    1. The agent builds ``staging/<id>/`` holding ``request.json`` (``protocol``,
       ``request_id``, ``stage``, ``prompt``, ``image`` = ``"image.png"`` or ``null``,
       ``created_unix_s``) and ``image.png``, then renames it to ``pending/<id>/`` in one
       step, so a worker never sees a half-written request.
    2. A worker answers by creating ``done/<id>/response.json`` atomically (write it
       elsewhere in ``done/`` or ``staging/``, then rename): ``{"text": "..."}`` plus an
       optional ``"usage": {"input_tokens", "output_tokens", "reasoning_tokens"}``, or
       ``{"error": "..."}`` when its provider call failed. It may first move the request
       to ``claimed/<id>/`` to keep other workers off it.
    3. The agent reads the response and deletes ``done/<id>``, ``pending/<id>`` and
       ``claimed/<id>``. On timeout it deletes its pending request and raises
       :class:`ModelTimeoutError`.

    With ``config.queue_layout == "reference"`` the reference release's layout is spoken
    instead (see :mod:`humanclaw_agents.queue_reference`): chat messages plus numbered image
    files in ``pending/<call_id>/``, the reply's ``content`` back in ``done/<call_id>/``. The
    agent tells the transport the episode step through :attr:`current_episode_step`, which
    goes into the call id, as the reference's does.
    """

    def __init__(
        self,
        config: FilesystemQueueConfig,
        *,
        environ: Mapping[str, str] | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        if not isinstance(config, FilesystemQueueConfig):
            raise TypeError(
                f"FilesystemQueueModel needs a FilesystemQueueConfig, got {type(config).__name__}"
            )
        _check_reply_bytes(max_reply_bytes)
        self.config = config
        self.max_reply_bytes = max_reply_bytes
        self.current_episode_step = -1
        self.call_index = 0
        env = os.environ if environ is None else environ
        self.model_name = (env.get(config.model_env) if config.model_env else None) or config.model
        folders = (
            queue_reference.DIRECTORIES
            if config.queue_layout == "reference"
            else (_PENDING, _DONE, _STAGING, _CLAIMED)
        )
        for name in folders:
            (config.queue_dir / name).mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return (
            f"FilesystemQueueModel(queue_dir={str(self.config.queue_dir)!r}, "
            f"layout={self.config.queue_layout!r})"
        )

    def preflight(self) -> None:
        """Check that the agent can file requests: a probe folder is made and removed in
        ``staging/``. No request is queued (a worker may be a person or an agent that
        answers slowly, so its presence is not tested).

        Raises:
            ModelCallError: the queue folder cannot be written, naming it and the cause.
        """
        staging = self.config.queue_dir / (
            "tmp" if self.config.queue_layout == "reference" else _STAGING
        )
        try:
            staging.mkdir(parents=True, exist_ok=True)
            probe = Path(tempfile.mkdtemp(prefix="preflight.", dir=staging))
            probe.rmdir()
        except OSError as error:
            raise ModelCallError(
                f"model queue {self.config.queue_dir}: cannot file requests in {staging} "
                f"({error.strerror or error})"
            ) from error

    def respond(self, prompt: str, image_rgb: np.ndarray | None, stage: str) -> ModelReply:
        """Queue one request and wait for its response; see :meth:`ChatModel.respond`.

        A response file larger than ``max_reply_bytes`` is refused unread."""
        if self.config.queue_layout == "reference":
            return self._respond_reference(prompt, image_rgb, stage)
        request_id = uuid.uuid4().hex
        queue_dir = self.config.queue_dir
        try:
            self._submit(request_id, prompt, image_rgb, stage)
            data = self._wait(request_id, stage)
        finally:
            for name in (_PENDING, _DONE, _CLAIMED, _STAGING):
                shutil.rmtree(queue_dir / name / request_id, ignore_errors=True)
        return _queue_reply(data, prompt, stage, request_id)

    def _submit(
        self, request_id: str, prompt: str, image_rgb: np.ndarray | None, stage: str
    ) -> None:
        queue_dir = self.config.queue_dir
        staging = queue_dir / _STAGING / request_id
        staging.mkdir(parents=True)
        image_name = None
        if image_rgb is not None:
            (staging / _IMAGE_FILE).write_bytes(encode_png(image_rgb))
            image_name = _IMAGE_FILE
        request = {
            "protocol": QUEUE_PROTOCOL,
            "request_id": request_id,
            "stage": stage,
            "prompt": prompt,
            "image": image_name,
            "created_unix_s": time.time(),
        }
        (staging / _REQUEST_FILE).write_text(json.dumps(request), encoding="utf-8")
        os.replace(staging, queue_dir / _PENDING / request_id)

    def _wait(self, request_id: str, stage: str) -> Any:
        response_path = self.config.queue_dir / _DONE / request_id / _RESPONSE_FILE
        deadline = time.monotonic() + self.config.timeout_s
        while True:
            if response_path.is_file():
                from humanclaw_gym.fileio import FileContentError, read_bytes_limited

                try:
                    raw = read_bytes_limited(response_path, self.max_reply_bytes, "queue response")
                except FileContentError as error:
                    raise ModelCallError(f"{stage}: {_short(str(error))}") from error
                try:
                    return json.loads(raw.decode("utf-8"))
                except (ValueError, RecursionError) as error:
                    raise ModelCallError(
                        f"{stage}: queue response {request_id} is not valid JSON: "
                        f"{_short(str(error))}"
                    ) from error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ModelTimeoutError(
                    f"{stage}: no queue response for request {request_id} in "
                    f"{self.config.queue_dir} within {self.config.timeout_s:g} s "
                    "(is a worker running?)"
                )
            time.sleep(min(self.config.poll_interval_s, remaining))

    def _respond_reference(
        self, prompt: str, image_rgb: np.ndarray | None, stage: str
    ) -> ModelReply:
        config = self.config
        queue_dir = config.queue_dir
        call = queue_reference.call_id(self.call_index, self.current_episode_step, stage)
        self.call_index += 1
        try:
            queue_reference.write_request(
                queue_dir,
                call,
                prompt=prompt,
                image_png=None if image_rgb is None else encode_png(image_rgb),
                stage=stage,
                episode_step=self.current_episode_step,
                model=str(self.model_name),
                max_tokens=int(config.max_tokens or 0),
                temperature=float(config.temperature or 0.0),
                reasoning_budget_tokens=config.reasoning_budget_tokens,
                response_format=config.response_format,
            )
            deadline = time.monotonic() + config.timeout_s
            last_error: Any = None
            while True:
                try:
                    ready, value = queue_reference.read_response(
                        queue_dir, call, max_bytes=self.max_reply_bytes
                    )
                except queue_reference.ResponseTooLargeError as error:
                    raise ModelCallError(f"{stage}: {error}") from error
                if ready:
                    response = value
                    break
                last_error = value if value is not None else last_error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    detail = (
                        f"the response file stayed unreadable ({last_error})"
                        if last_error is not None
                        else "no response file appeared"
                    )
                    raise ModelTimeoutError(
                        f"{stage}: queue call {call} in {queue_dir}: {detail} within "
                        f"{config.timeout_s:g} s (is a worker running?)"
                    )
                time.sleep(min(config.poll_interval_s, remaining))
        finally:
            queue_reference.remove_call(queue_dir, call)
        if response.get("error"):
            raise ModelCallError(
                f"{stage}: queue call {call} reports a worker error: {_short(str(response['error']))}"
            )
        text = queue_reference.response_text(response)
        usage = queue_reference.normalize_usage(response, stage)
        return ModelReply(text=text, usage=usage or _estimated_usage(prompt, text, stage))


def _queue_reply(data: Any, prompt: str, stage: str, request_id: str) -> ModelReply:
    where = f"{stage}: queue response {request_id}"
    if not isinstance(data, Mapping):
        raise ModelCallError(f"{where} must be a JSON object, got {type(data).__name__}")
    if data.get("error"):
        raise ModelCallError(f"{where} reports a worker error: {_short(str(data['error']))}")
    text = data.get("text")
    if not isinstance(text, str):
        raise ModelCallError(
            f"{where} field 'text'={_short(repr(text), 80)} is invalid: allowed a string"
        )
    raw_usage = data.get("usage")
    if raw_usage is None:
        return ModelReply(text=text, usage=_estimated_usage(prompt, text, stage))
    if not isinstance(raw_usage, Mapping):
        raise ModelCallError(
            f"{where} field 'usage'={_short(repr(raw_usage), 80)} is invalid: allowed an object"
        )
    counts = {}
    for name in ("input_tokens", "output_tokens", "reasoning_tokens"):
        value = raw_usage.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ModelCallError(
                f"{where} field 'usage.{name}'={_short(repr(value), 80)} is invalid: allowed an "
                "integer >= 0"
            )
        counts[name] = value
    return ModelReply(text=text, usage=Usage(stage=stage, attempt=1, source="provider", **counts))


def answer_pending_requests(
    queue_dir: str | os.PathLike[str],
    handler: Callable[[QueueRequest], Mapping[str, Any]],
    layout: str | None = None,
) -> int:
    """Worker side of the queue: answer every request currently pending, once.

    Each pending request is claimed (renamed into ``claimed/``, or ``in_progress/`` in the
    reference layout), passed to ``handler``, and the handler's mapping
    (``{"text": ..., "usage": {...}}`` or ``{"error": ...}``) is written atomically as
    ``done/<id>/response.json`` (in the reference layout ``text`` is written as
    ``content``). An exception in the handler is answered as
    ``{"error": "<type>: <message>"}``. A worker process calls this in a loop with a short
    sleep in between.

    Args:
        queue_dir: the queue root shared with :class:`FilesystemQueueModel`.
        handler: turns one request into a response mapping (this is where the worker calls
            its provider with its own credentials). In the reference layout
            :attr:`QueueRequest.prompt` is the text of the request's messages and
            :attr:`QueueRequest.image_png` its first image.
        layout: ``"humanclaw"``, ``"reference"``, or ``None`` to tell each request's layout
            from its ``request.json``.

    Returns:
        The number of requests answered.
    """
    if layout is not None and layout not in QUEUE_LAYOUTS:
        raise ValueError(f"layout={layout!r} is invalid: allowed one of {QUEUE_LAYOUTS} or None")
    root = Path(queue_dir)
    pending = root / _PENDING
    if not pending.is_dir():
        return 0
    answered = 0
    for entry in sorted(pending.iterdir()):
        kind = layout or _request_layout(entry)
        if kind is None:
            continue  # unreadable for now (the agent may be withdrawing it)
        claim_dir = "in_progress" if kind == "reference" else _CLAIMED
        (root / claim_dir).mkdir(parents=True, exist_ok=True)
        claimed = root / claim_dir / entry.name
        try:
            os.replace(entry, claimed)
        except OSError:
            continue  # another worker took it, or the agent withdrew it
        try:
            request = _read_request(claimed) if kind == "humanclaw" else _read_reference(claimed)
            response: Mapping[str, Any] = handler(request)
        except Exception as error:  # noqa: BLE001 - reported to the waiting agent
            response = {"error": f"{type(error).__name__}: {error}"}
        if kind == "reference":
            (root / "tmp").mkdir(parents=True, exist_ok=True)
            (root / _DONE).mkdir(parents=True, exist_ok=True)
            queue_reference.write_response(root, entry.name, response)
            shutil.rmtree(claimed, ignore_errors=True)
        else:
            for name in (_DONE, _STAGING):
                (root / name).mkdir(parents=True, exist_ok=True)
            _write_response(root, entry.name, response)
        answered += 1
    return answered


def _request_layout(folder: Path) -> str | None:
    try:
        data = json.loads((folder / _REQUEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, Mapping) and data.get("schema") == queue_reference.REQUEST_SCHEMA:
        return "reference"
    return "humanclaw"


def _read_reference(folder: Path) -> QueueRequest:
    prompt, image_png, stage, request = queue_reference.read_request(folder)
    return QueueRequest(
        request_id=folder.name,
        stage=stage,
        prompt=prompt,
        image_png=image_png,
        metadata=request,
    )


def _read_request(folder: Path) -> QueueRequest:
    metadata = json.loads((folder / _REQUEST_FILE).read_text(encoding="utf-8"))
    image_name = metadata.get("image")
    image_png = (folder / image_name).read_bytes() if image_name else None
    return QueueRequest(
        request_id=folder.name,
        stage=str(metadata.get("stage", "")),
        prompt=str(metadata.get("prompt", "")),
        image_png=image_png,
        metadata=metadata,
    )


def _write_response(root: Path, request_id: str, response: Mapping[str, Any]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f"{request_id}.", dir=root / _STAGING))
    try:
        (staging / _RESPONSE_FILE).write_text(json.dumps(dict(response)), encoding="utf-8")
        os.replace(staging, root / _DONE / request_id)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise


# ---- factory ----------------------------------------------------------------------------------


def build_model(config: ModelConfig, **kwargs: Any) -> ChatModel:
    """Build the transport a model config asks for.

    Args:
        config: a config from :func:`~humanclaw_agents.model_config.load_model_config`.
        **kwargs: passed to the transport (``environ=`` to read variables from a mapping
            instead of ``os.environ``).

    Returns:
        An :class:`OpenAICompatibleModel` (plain or Azure) or a :class:`FilesystemQueueModel`.
    """
    if isinstance(config, (OpenAICompatibleConfig, AzureOpenAIConfig)):
        return OpenAICompatibleModel(config, **kwargs)
    if isinstance(config, FilesystemQueueConfig):
        return FilesystemQueueModel(config, **kwargs)
    raise TypeError(
        "build_model needs an OpenAICompatibleConfig, AzureOpenAIConfig or "
        f"FilesystemQueueConfig, got {type(config).__name__}"
    )
