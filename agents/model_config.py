"""Model configs: which transport a VLM agent talks through, loaded from a small JSON file.

Two backends exist:

* ``"openai_compatible"``: a direct chat-completions request to any OpenAI-compatible
  endpoint (OpenAI, vLLM, SGLang, llama.cpp server, OpenRouter, ...). The API key is read
  at run time from the environment variable the config names; a config never holds a key.
* ``"filesystem_queue"``: requests are written as directories into a queue folder and an
  external worker (which owns the credentials) answers them.

Example (``configs/models/gpt.json``)::

    {"backend": "openai_compatible", "model": "gpt-4o-mini",
     "base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY",
     "max_tokens": 1024, "temperature": 0.0,
     "response_format": {"type": "json_object"}, "extra_body": {}}

Every field is checked on load; a bad value raises :class:`ModelConfigError` naming the
field, the value and what is allowed.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FilesystemQueueConfig",
    "ModelConfig",
    "ModelConfigError",
    "OpenAICompatibleConfig",
    "load_model_config",
    "model_config_from_dict",
]

_BACKENDS = ("openai_compatible", "filesystem_queue")
_MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Keys that look like a credential: a config must name an env var instead.
_SECRET_KEYS = ("api_key", "key", "token", "secret", "password", "authorization")


class ModelConfigError(ValueError):
    """A model config is invalid; the message names the field, the value and what is allowed."""


@dataclass(frozen=True)
class OpenAICompatibleConfig:
    """Direct chat-completions transport to an OpenAI-compatible endpoint.

    Attributes:
        model: model name sent in the request.
        base_url: endpoint root, e.g. ``"https://api.openai.com/v1"`` (``/chat/completions``
            is appended by the client).
        api_key_env: name of the environment variable holding the API key.
        max_tokens: output token limit per call (> 0).
        temperature: sampling temperature 0..2, or ``None`` to leave it out of the request
            (some reasoning models reject it).
        response_format: sent as ``response_format`` (``{"type": "json_object"}`` by
            default), or ``None`` to leave it out.
        extra_body: extra top-level request fields merged into the JSON body (provider
            specific switches such as ``{"reasoning_effort": "low"}``).
        timeout_s: per-request timeout in seconds (> 0).
        max_tokens_field: request field that carries ``max_tokens``: ``"max_tokens"`` or
            ``"max_completion_tokens"`` (newer OpenAI reasoning models need the latter).
    """

    model: str
    base_url: str
    api_key_env: str
    max_tokens: int = 1024
    temperature: float | None = 0.0
    response_format: dict[str, Any] | None = field(default_factory=lambda: {"type": "json_object"})
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    max_tokens_field: str = "max_tokens"

    backend: str = field(default="openai_compatible", init=False)

    def __post_init__(self) -> None:
        _check_str("model", self.model)
        _check_str("base_url", self.base_url)
        if not self.base_url.startswith(("http://", "https://")):
            raise ModelConfigError(
                f"model config field 'base_url'={self.base_url!r} is invalid: "
                "allowed an http:// or https:// URL"
            )
        _check_str("api_key_env", self.api_key_env)
        if not _ENV_NAME_RE.match(self.api_key_env):
            raise ModelConfigError(
                f"model config field 'api_key_env'={self.api_key_env!r} is invalid: allowed "
                "an environment variable name (letters, digits, '_'; not starting with a digit)"
            )
        _check_int("max_tokens", self.max_tokens, low=1)
        if self.temperature is not None:
            _check_float("temperature", self.temperature, low=0.0, high=2.0)
            object.__setattr__(self, "temperature", float(self.temperature))
        if self.response_format is not None:
            _check_json_object("response_format", self.response_format)
            if not isinstance(self.response_format.get("type"), str):
                raise ModelConfigError(
                    f"model config field 'response_format'={self.response_format!r} is "
                    "invalid: allowed an object with a string 'type', e.g. "
                    '{"type": "json_object"}, or null'
                )
        _check_json_object("extra_body", self.extra_body)
        _check_float("timeout_s", self.timeout_s, low=0.0, low_inclusive=False)
        object.__setattr__(self, "timeout_s", float(self.timeout_s))
        if self.max_tokens_field not in _MAX_TOKENS_FIELDS:
            raise ModelConfigError(
                f"model config field 'max_tokens_field'={self.max_tokens_field!r} is invalid: "
                f"allowed one of {_MAX_TOKENS_FIELDS}"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as accepted by :func:`model_config_from_dict` (holds no key)."""
        return {
            "backend": self.backend,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "response_format": self.response_format,
            "extra_body": dict(self.extra_body),
            "timeout_s": self.timeout_s,
            "max_tokens_field": self.max_tokens_field,
        }


@dataclass(frozen=True)
class FilesystemQueueConfig:
    """Transport through a queue folder answered by an external worker.

    Attributes:
        queue_dir: the queue root; ``pending/``, ``done/`` and ``staging/`` live below it.
        timeout_s: how long one request waits for its response (> 0 seconds).
        poll_interval_s: how often the response folder is checked (> 0 seconds).
    """

    queue_dir: Path
    timeout_s: float = 300.0
    poll_interval_s: float = 0.05

    backend: str = field(default="filesystem_queue", init=False)

    def __post_init__(self) -> None:
        if isinstance(self.queue_dir, str):
            _check_str("queue_dir", self.queue_dir)
            object.__setattr__(self, "queue_dir", Path(self.queue_dir))
        if not isinstance(self.queue_dir, Path):
            raise ModelConfigError(
                f"model config field 'queue_dir'={self.queue_dir!r} is invalid: "
                "allowed a directory path string"
            )
        _check_float("timeout_s", self.timeout_s, low=0.0, low_inclusive=False)
        _check_float("poll_interval_s", self.poll_interval_s, low=0.0, low_inclusive=False)
        object.__setattr__(self, "timeout_s", float(self.timeout_s))
        object.__setattr__(self, "poll_interval_s", float(self.poll_interval_s))

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as accepted by :func:`model_config_from_dict`."""
        return {
            "backend": self.backend,
            "queue_dir": str(self.queue_dir),
            "timeout_s": self.timeout_s,
            "poll_interval_s": self.poll_interval_s,
        }


ModelConfig = OpenAICompatibleConfig | FilesystemQueueConfig
"""Any model config; dispatch on its ``backend`` attribute."""

_REQUIRED = {
    "openai_compatible": ("model", "base_url", "api_key_env"),
    "filesystem_queue": ("queue_dir",),
}
_OPTIONAL = {
    "openai_compatible": (
        "max_tokens",
        "temperature",
        "response_format",
        "extra_body",
        "timeout_s",
        "max_tokens_field",
    ),
    "filesystem_queue": ("timeout_s", "poll_interval_s"),
}


def model_config_from_dict(
    data: Mapping[str, Any], *, base_dir: Path | None = None, source: str = "model config"
) -> ModelConfig:
    """Validate a parsed JSON model config and build the matching config object.

    Args:
        data: the parsed JSON object.
        base_dir: a relative ``queue_dir`` is resolved against this directory (the config
            file's folder when loading from a file); ``None`` keeps it relative.
        source: where the data came from, used in error messages.

    Returns:
        An :class:`OpenAICompatibleConfig` or a :class:`FilesystemQueueConfig`.

    Raises:
        ModelConfigError: naming the offending field.
    """
    if not isinstance(data, Mapping):
        raise ModelConfigError(f"{source} must be a JSON object, got {type(data).__name__}")
    for key in data:
        if str(key).lower() in _SECRET_KEYS:
            raise ModelConfigError(
                f"{source} field {key!r} is not allowed: never put credentials in a model "
                "config; name the environment variable that holds the key in 'api_key_env'"
            )
    backend = data.get("backend")
    if backend not in _BACKENDS:
        raise ModelConfigError(
            f"{source} field 'backend'={backend!r} is invalid: allowed one of {_BACKENDS}"
        )
    allowed = ("backend", *_REQUIRED[backend], *_OPTIONAL[backend])
    unknown = [key for key in data if key not in allowed]
    if unknown:
        raise ModelConfigError(
            f"{source} field {unknown[0]!r} is unknown for backend {backend!r}: allowed "
            + ", ".join(allowed)
        )
    missing = [key for key in _REQUIRED[backend] if key not in data]
    if missing:
        raise ModelConfigError(
            f"{source} field {missing[0]!r} is missing: backend {backend!r} requires "
            + ", ".join(_REQUIRED[backend])
        )
    kwargs = {key: value for key, value in data.items() if key != "backend"}
    try:
        if backend == "openai_compatible":
            return OpenAICompatibleConfig(**kwargs)
        queue_dir = kwargs.get("queue_dir")
        if isinstance(queue_dir, str) and queue_dir and base_dir is not None:
            path = Path(queue_dir).expanduser()
            kwargs["queue_dir"] = path if path.is_absolute() else Path(base_dir) / path
        return FilesystemQueueConfig(**kwargs)
    except ModelConfigError as error:
        raise ModelConfigError(f"{source}: {error}") from None


def load_model_config(path: str | os.PathLike[str]) -> ModelConfig:
    """Load and validate a JSON model config file.

    Args:
        path: the JSON file. A relative ``queue_dir`` inside it is resolved against the
            file's directory.

    Returns:
        The validated config.

    Raises:
        FileNotFoundError: the file does not exist.
        ModelConfigError: the file is not valid JSON or a field is invalid.
    """
    file_path = Path(path)
    text = file_path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ModelConfigError(
            f"model config {str(file_path)!r} is not valid JSON: {error}"
        ) from None
    return model_config_from_dict(
        data, base_dir=file_path.parent, source=f"model config {str(file_path)!r}"
    )


# ---- field checks ------------------------------------------------------------------------


def _check_str(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ModelConfigError(
            f"model config field {name!r}={value!r} is invalid: allowed a non-empty string"
        )


def _check_int(name: str, value: Any, *, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ModelConfigError(
            f"model config field {name!r}={value!r} is invalid: allowed an integer >= {low}"
        )


def _check_float(
    name: str,
    value: Any,
    *,
    low: float,
    high: float | None = None,
    low_inclusive: bool = True,
) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        number = float(value)
        ok = math.isfinite(number) and (number >= low if low_inclusive else number > low)
        ok = ok and (high is None or number <= high)
    if not ok:
        low_text = f"{low:g} <= {name}" if low_inclusive else f"{low:g} < {name}"
        high_text = f" <= {high:g}" if high is not None else ""
        raise ModelConfigError(
            f"model config field {name!r}={value!r} is invalid: allowed a finite number "
            f"with {low_text}{high_text}"
        )


def _check_json_object(name: str, value: Any) -> None:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ModelConfigError(
            f"model config field {name!r}={value!r} is invalid: allowed a JSON object"
        )
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise ModelConfigError(
            f"model config field {name!r} is invalid: it must be JSON-serialisable ({error})"
        ) from None
