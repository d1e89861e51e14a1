"""Model configs: which transport a VLM agent talks through, loaded from a small JSON file.

Three backends exist, and the three model-config templates of the reference release load
unchanged:

* ``"openai_compatible"``: a direct chat-completions request to any OpenAI-compatible
  endpoint (OpenAI, vLLM, SGLang, llama.cpp server, OpenRouter, ...).
* ``"azure_openai"``: the same request through the ``openai`` package's Azure client
  (deployment name, endpoint and API version, each from the config or an environment
  variable).
* ``"filesystem_queue"``: requests are written as directories into a queue folder and an
  external worker (which owns the credentials) answers them, in our layout
  (``queue_layout: "humanclaw"``) or the reference release's (``"reference"``). Without
  ``queue_layout``, a config that names a ``model`` (as the reference's template does)
  speaks the reference layout, one without it ours.

API keys are read at run time from the environment variable the config names; a config
never holds a key.

Example (``configs/models/gpt.json``)::

    {"backend": "openai_compatible", "model": "gpt-4o-mini",
     "base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY",
     "max_tokens": 1024, "temperature": 0.0,
     "response_format": {"type": "json_object"}, "extra_body": {}}

Every field is checked on load; an unknown field is refused with the list of accepted ones
and a bad value raises :class:`ModelConfigError` naming the field, the value and what is
allowed.
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
    "MODEL_CONFIG_TYPES",
    "QUEUE_LAYOUTS",
    "AzureOpenAIConfig",
    "FilesystemQueueConfig",
    "ModelConfig",
    "ModelConfigError",
    "OpenAICompatibleConfig",
    "accepted_fields",
    "load_model_config",
    "model_config_from_dict",
]

_BACKENDS = ("openai_compatible", "azure_openai", "filesystem_queue")
_MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Keys that look like a credential: a config must name an env var instead.
_SECRET_KEYS = ("api_key", "key", "token", "secret", "password", "authorization")
# The reference's name of ``max_tokens_field``; both spellings are accepted.
_MAX_TOKENS_ALIAS = "max_tokens_parameter"
_MAX_CONFIG_BYTES = 1 << 20

QUEUE_LAYOUTS: tuple[str, ...] = ("humanclaw", "reference")
"""Request/response layouts the filesystem queue speaks (see ``docs/agents.md``)."""


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
            specific switches such as ``{"top_k": 1}``).
        timeout_s: per-request timeout in seconds (> 0).
        max_tokens_field: request field that carries ``max_tokens``: ``"max_tokens"`` or
            ``"max_completion_tokens"`` (newer OpenAI reasoning models need the latter); the
            reference's name ``max_tokens_parameter`` is accepted in JSON.
        model_env: optional environment variable whose value, when set, replaces
            ``model`` (the reference's switch for deployment names).
        send_temperature: ``False`` leaves ``temperature`` out of the request (the
            reference's switch; ``temperature: null`` does the same).
        reasoning_effort: sent as the ``reasoning_effort`` request field when given
            (e.g. ``"low"`` for OpenAI o-series models).
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
    model_env: str | None = None
    send_temperature: bool = True
    reasoning_effort: str | None = None

    backend: str = field(default="openai_compatible", init=False)

    def __post_init__(self) -> None:
        _check_str("model", self.model)
        _check_str("base_url", self.base_url)
        if not self.base_url.startswith(("http://", "https://")):
            raise ModelConfigError(
                f"model config field 'base_url'={self.base_url!r} is invalid: "
                "allowed an http:// or https:// URL"
            )
        _check_env_name("api_key_env", self.api_key_env)
        _check_request_fields(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as accepted by :func:`model_config_from_dict` (holds no key)."""
        return {
            "backend": self.backend,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            **_request_fields_dict(self),
        }


@dataclass(frozen=True)
class AzureOpenAIConfig:
    """Chat completions through the ``openai`` package's Azure client (``openai.AzureOpenAI``).

    The request is the same as :class:`OpenAICompatibleConfig`'s; only the client differs.
    Defaults follow the reference release's Azure template.

    Attributes:
        model: the Azure deployment name (``model_env`` can override it at run time).
        api_key_env: environment variable holding the key (default
            ``"AZURE_OPENAI_API_KEY"``).
        azure_endpoint: the resource endpoint, e.g. ``"https://NAME.openai.azure.com"``;
            when ``None`` it is read from ``azure_endpoint_env``.
        azure_endpoint_env: environment variable holding the endpoint (default
            ``"AZURE_OPENAI_ENDPOINT"``).
        api_version: the Azure API version, e.g. ``"2024-12-01-preview"``; when ``None`` it
            is read from ``api_version_env``.
        api_version_env: environment variable holding the API version (default
            ``"AZURE_OPENAI_API_VERSION"``).
        max_tokens, temperature, response_format, extra_body, timeout_s, max_tokens_field,
        model_env, send_temperature, reasoning_effort: as in :class:`OpenAICompatibleConfig`.
    """

    model: str
    api_key_env: str = "AZURE_OPENAI_API_KEY"
    azure_endpoint: str | None = None
    azure_endpoint_env: str = "AZURE_OPENAI_ENDPOINT"
    api_version: str | None = None
    api_version_env: str = "AZURE_OPENAI_API_VERSION"
    max_tokens: int = 1024
    temperature: float | None = 0.0
    response_format: dict[str, Any] | None = field(default_factory=lambda: {"type": "json_object"})
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    max_tokens_field: str = "max_tokens"
    model_env: str | None = None
    send_temperature: bool = True
    reasoning_effort: str | None = None

    backend: str = field(default="azure_openai", init=False)

    def __post_init__(self) -> None:
        _check_str("model", self.model)
        _check_env_name("api_key_env", self.api_key_env)
        _check_env_name("azure_endpoint_env", self.azure_endpoint_env)
        _check_env_name("api_version_env", self.api_version_env)
        if self.azure_endpoint is not None:
            _check_str("azure_endpoint", self.azure_endpoint)
            if not self.azure_endpoint.startswith(("http://", "https://")):
                raise ModelConfigError(
                    f"model config field 'azure_endpoint'={self.azure_endpoint!r} is invalid: "
                    "allowed an http:// or https:// URL, or null to read it from "
                    "azure_endpoint_env"
                )
        if self.api_version is not None:
            _check_str("api_version", self.api_version)
        _check_request_fields(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as accepted by :func:`model_config_from_dict` (holds no key)."""
        return {
            "backend": self.backend,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "azure_endpoint": self.azure_endpoint,
            "azure_endpoint_env": self.azure_endpoint_env,
            "api_version": self.api_version,
            "api_version_env": self.api_version_env,
            **_request_fields_dict(self),
        }


@dataclass(frozen=True)
class FilesystemQueueConfig:
    """Transport through a queue folder answered by an external worker.

    Attributes:
        queue_dir: the queue root; the layout's folders live below it.
        timeout_s: how long one request waits for its response (> 0 seconds).
        poll_interval_s: how often the response folder is checked (> 0 seconds).
        queue_layout: ``"humanclaw"`` (our ``request.json`` + ``image.png`` layout) or
            ``"reference"`` (the reference release's: chat messages plus numbered image
            files in, a ``content`` field out). ``None`` picks ``"reference"`` when
            ``model`` is given, else ``"humanclaw"``.
        model: model name written into reference-layout requests (required there; the
            worker decides what to do with it).
        model_env: optional environment variable whose value, when set, replaces ``model``.
        max_tokens: written into reference-layout requests (default 4096).
        temperature: written into reference-layout requests (default 0.0).
        response_format: written into reference-layout requests (default ``None``).
        reasoning_budget_tokens: written into reference-layout requests (default ``None``).

    The last five fields belong to the reference layout only; with
    ``queue_layout="humanclaw"`` they are refused.
    """

    queue_dir: Path
    timeout_s: float = 300.0
    poll_interval_s: float = 0.05
    queue_layout: str | None = None
    model: str | None = None
    model_env: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    response_format: dict[str, Any] | None = None
    reasoning_budget_tokens: int | None = None

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
        layout = self.queue_layout
        if layout is None:
            layout = "reference" if self.model is not None else "humanclaw"
            object.__setattr__(self, "queue_layout", layout)
        if layout not in QUEUE_LAYOUTS:
            raise ModelConfigError(
                f"model config field 'queue_layout'={layout!r} is invalid: allowed one of "
                f"{QUEUE_LAYOUTS}"
            )
        if layout == "humanclaw":
            for name in _QUEUE_REFERENCE_FIELDS:
                if getattr(self, name) is not None:
                    raise ModelConfigError(
                        f"model config field {name!r} only applies to queue_layout "
                        "'reference' (requests in our layout carry no model settings); "
                        "remove it or set queue_layout to 'reference'"
                    )
            return
        if self.model is None:
            raise ModelConfigError(
                "model config field 'model' is missing: queue_layout 'reference' writes the "
                "model name into every request"
            )
        _check_str("model", self.model)
        if self.model_env is not None:
            _check_env_name("model_env", self.model_env)
        if self.max_tokens is None:
            object.__setattr__(self, "max_tokens", 4096)
        _check_int("max_tokens", self.max_tokens, low=1)
        if self.temperature is None:
            object.__setattr__(self, "temperature", 0.0)
        _check_float("temperature", self.temperature, low=0.0, high=2.0)
        object.__setattr__(self, "temperature", float(self.temperature))
        if self.response_format is not None:
            _check_json_object("response_format", self.response_format)
        if self.reasoning_budget_tokens is not None:
            _check_int("reasoning_budget_tokens", self.reasoning_budget_tokens, low=0)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as accepted by :func:`model_config_from_dict`."""
        data: dict[str, Any] = {
            "backend": self.backend,
            "queue_dir": str(self.queue_dir),
            "timeout_s": self.timeout_s,
            "poll_interval_s": self.poll_interval_s,
            "queue_layout": self.queue_layout,
        }
        if self.queue_layout == "reference":
            data.update({name: getattr(self, name) for name in _QUEUE_REFERENCE_FIELDS})
        return data


_QUEUE_REFERENCE_FIELDS = (
    "model",
    "model_env",
    "max_tokens",
    "temperature",
    "response_format",
    "reasoning_budget_tokens",
)

ModelConfig = OpenAICompatibleConfig | AzureOpenAIConfig | FilesystemQueueConfig
"""Any model config; dispatch on its ``backend`` attribute."""

MODEL_CONFIG_TYPES: tuple[type, ...] = (
    OpenAICompatibleConfig,
    AzureOpenAIConfig,
    FilesystemQueueConfig,
)
"""The config classes, for ``isinstance`` checks."""

_REQUEST_FIELDS = (
    "max_tokens",
    "temperature",
    "response_format",
    "extra_body",
    "timeout_s",
    "max_tokens_field",
    "model_env",
    "send_temperature",
    "reasoning_effort",
)
_REQUIRED = {
    "openai_compatible": ("model", "base_url", "api_key_env"),
    "azure_openai": ("model",),
    "filesystem_queue": ("queue_dir",),
}
_OPTIONAL = {
    "openai_compatible": _REQUEST_FIELDS,
    "azure_openai": (
        "api_key_env",
        "azure_endpoint",
        "azure_endpoint_env",
        "api_version",
        "api_version_env",
        *_REQUEST_FIELDS,
    ),
    "filesystem_queue": ("timeout_s", "poll_interval_s", "queue_layout", *_QUEUE_REFERENCE_FIELDS),
}
_CLASSES = {
    "openai_compatible": OpenAICompatibleConfig,
    "azure_openai": AzureOpenAIConfig,
    "filesystem_queue": FilesystemQueueConfig,
}


def accepted_fields(backend: str) -> tuple[str, ...]:
    """Every JSON field a config of ``backend`` may hold (``backend`` included).

    Raises:
        ModelConfigError: unknown backend.
    """
    if backend not in _BACKENDS:
        raise ModelConfigError(
            f"model config field 'backend'={backend!r} is invalid: allowed one of {_BACKENDS}"
        )
    extra = (_MAX_TOKENS_ALIAS,) if "max_tokens_field" in _OPTIONAL[backend] else ()
    return ("backend", *_REQUIRED[backend], *_OPTIONAL[backend], *extra)


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
        An :class:`OpenAICompatibleConfig`, :class:`AzureOpenAIConfig` or
        :class:`FilesystemQueueConfig`.

    Raises:
        ModelConfigError: naming the offending field (for an unknown field, listing the
            accepted ones).
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
    allowed = accepted_fields(backend)
    unknown = [key for key in data if key not in allowed]
    if unknown:
        raise ModelConfigError(
            f"{source} field {unknown[0]!r} is unknown for backend {backend!r}; accepted "
            "fields: " + ", ".join(allowed)
        )
    missing = [key for key in _REQUIRED[backend] if key not in data]
    if missing:
        raise ModelConfigError(
            f"{source} field {missing[0]!r} is missing: backend {backend!r} requires "
            + ", ".join(_REQUIRED[backend])
        )
    kwargs = {key: value for key, value in data.items() if key != "backend"}
    if _MAX_TOKENS_ALIAS in kwargs:
        alias = kwargs.pop(_MAX_TOKENS_ALIAS)
        if "max_tokens_field" in kwargs and kwargs["max_tokens_field"] != alias:
            raise ModelConfigError(
                f"{source} fields 'max_tokens_field'={kwargs['max_tokens_field']!r} and "
                f"'{_MAX_TOKENS_ALIAS}'={alias!r} disagree: give one of them"
            )
        kwargs["max_tokens_field"] = alias
    try:
        if backend == "filesystem_queue":
            queue_dir = kwargs.get("queue_dir")
            if isinstance(queue_dir, str) and queue_dir and base_dir is not None:
                path = Path(queue_dir).expanduser()
                kwargs["queue_dir"] = path if path.is_absolute() else Path(base_dir) / path
        return _CLASSES[backend](**kwargs)
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
    from humanclaw_gym.fileio import FileContentError, loads_json, read_bytes_limited

    file_path = Path(path)
    try:  # a regular file only (a FIFO would block), bounded, any nesting refused cleanly
        data = loads_json(
            read_bytes_limited(file_path, _MAX_CONFIG_BYTES, "model config"),
            f"model config {str(file_path)!r}",
        )
    except FileContentError as error:
        raise ModelConfigError(str(error)) from None
    return model_config_from_dict(
        data, base_dir=file_path.parent, source=f"model config {str(file_path)!r}"
    )


# ---- field checks ------------------------------------------------------------------------


def _check_request_fields(config: Any) -> None:
    """Checks shared by the two chat-completions configs."""
    _check_int("max_tokens", config.max_tokens, low=1)
    if config.temperature is not None:
        _check_float("temperature", config.temperature, low=0.0, high=2.0)
        object.__setattr__(config, "temperature", float(config.temperature))
    if config.response_format is not None:
        _check_json_object("response_format", config.response_format)
        if not isinstance(config.response_format.get("type"), str):
            raise ModelConfigError(
                f"model config field 'response_format'={config.response_format!r} is "
                "invalid: allowed an object with a string 'type', e.g. "
                '{"type": "json_object"}, or null'
            )
    _check_json_object("extra_body", config.extra_body)
    _check_float("timeout_s", config.timeout_s, low=0.0, low_inclusive=False)
    object.__setattr__(config, "timeout_s", float(config.timeout_s))
    if config.max_tokens_field not in _MAX_TOKENS_FIELDS:
        raise ModelConfigError(
            f"model config field 'max_tokens_field'={config.max_tokens_field!r} is invalid: "
            f"allowed one of {_MAX_TOKENS_FIELDS}"
        )
    if config.model_env is not None:
        _check_env_name("model_env", config.model_env)
    if not isinstance(config.send_temperature, bool):
        raise ModelConfigError(
            f"model config field 'send_temperature'={config.send_temperature!r} is invalid: "
            "allowed true or false"
        )
    if config.reasoning_effort is not None:
        _check_str("reasoning_effort", config.reasoning_effort)


def _request_fields_dict(config: Any) -> dict[str, Any]:
    return {
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "response_format": config.response_format,
        "extra_body": dict(config.extra_body),
        "timeout_s": config.timeout_s,
        "max_tokens_field": config.max_tokens_field,
        "model_env": config.model_env,
        "send_temperature": config.send_temperature,
        "reasoning_effort": config.reasoning_effort,
    }


def _check_str(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ModelConfigError(
            f"model config field {name!r}={value!r} is invalid: allowed a non-empty string"
        )


def _check_env_name(name: str, value: Any) -> None:
    _check_str(name, value)
    if not _ENV_NAME_RE.match(value):
        raise ModelConfigError(
            f"model config field {name!r}={value!r} is invalid: allowed an environment "
            "variable name (letters, digits, '_'; not starting with a digit)"
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
