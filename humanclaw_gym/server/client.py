"""Minimal trusted client of the benchmark server, and a remote episode for ``run_episode``.

* :class:`ServerClient`: JSON-RPC calls over HTTP (standard library only) with the bearer
  token from ``HUMANCLAW_SERVER_TOKEN``; typed errors; artifact download with SHA-256
  checks.
* :class:`RemoteEpisode`: one server episode behind the small env surface that
  :func:`humanclaw_gym.evaluation.run_episode` uses (``reset`` / ``step`` / ``unwrapped``),
  so the one episode loop also drives remote episodes. Observations come back as
  ``uint8 (448, 448, 3)`` arrays and the public info mapping.

Running a Policy through a server episode (open, the one episode loop, finish, download)
is :func:`humanclaw_gym.evaluation.remote.run_remote_episode`; this module depends on the
wire protocol only, never on ``humanclaw_gym.evaluation``.

Network failures raise :class:`ServerConnectionError`: the server may or may not have
executed the request, so nothing here retries ``reset`` or ``step``.

This module never imports ``humanclaw_agents``; the agents' driver builds on it.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import io
import itertools
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.fileio import write_bytes_atomic
from humanclaw_gym.policy import Decision
from humanclaw_gym.server.protocol import JSONRPC_VERSION, OBSERVATION_FIELDS
from humanclaw_gym.server.transport import TOKEN_ENV, validate_token
from humanclaw_gym.skills import SkillCall

__all__ = [
    "PrivilegedPolicyError",
    "ServerAddressError",
    "RemoteEpisode",
    "ServerClient",
    "ServerConnectionError",
    "ServerError",
    "ServerUnauthorizedError",
    "decode_observation",
]

_DEFAULT_TIMEOUT_S = 300.0
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


class ServerError(RuntimeError):
    """The server answered with a JSON-RPC error.

    Attributes:
        code: JSON-RPC error code.
        name: error name (``error.data.error``), e.g. ``"invalid_action"``.
        data: the whole ``error.data`` object.
    """

    def __init__(self, code: int, message: str, data: Mapping[str, Any] | None = None) -> None:
        self.code = int(code)
        self.data = dict(data or {})
        self.name = str(self.data.get("error", "unknown"))
        super().__init__(f"server error {self.name} ({self.code}): {message}")


class ServerUnauthorizedError(ServerError):
    """HTTP 401: the token is missing or wrong."""


class ServerConnectionError(ConnectionError):
    """No (complete) answer: whether the server executed the request is unknown."""


class ServerAddressError(ValueError):
    """The server URL is malformed or not on loopback (the token is never sent elsewhere)."""


class PrivilegedPolicyError(PermissionError):
    """The policy needs hidden simulator state, which the server never provides."""


def _check_url(url: str) -> str:
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {type(url).__name__}")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a port out of range or not a number raises here
    except ValueError as exc:
        raise ServerAddressError(
            f"url={url!r} is invalid ({exc}): expected http://127.0.0.1:PORT[/rpc]"
        ) from None
    if parts.scheme != "http" or parts.hostname is None:
        raise ServerAddressError(f"url={url!r} is invalid: expected http://127.0.0.1:PORT[/rpc]")
    if parts.hostname not in _LOOPBACK:
        raise ServerAddressError(
            f"url={url!r} is refused: the token is only sent to a loopback address "
            "(127.0.0.1, localhost); use a controlled forward (e.g. an SSH tunnel) for remote hosts"
        )
    path = parts.path.rstrip("/")
    if path not in ("", "/rpc"):
        raise ServerAddressError(f"url={url!r} is invalid: the path must be /rpc or empty")
    return urllib.parse.urlunsplit(("http", parts.netloc, "/rpc", "", ""))


class ServerClient:
    """JSON-RPC client of one benchmark server.

    Args:
        url: ``http://127.0.0.1:PORT`` (``/rpc`` optional); loopback only.
        token: the bearer token; default :data:`~humanclaw_gym.server.transport.TOKEN_ENV`.
        timeout_s: socket timeout per call.

    Raises:
        ValueError: bad or non-loopback url; TokenError (a ValueError) for a bad token.
    """

    def __init__(
        self, url: str, token: str | None = None, timeout_s: float = _DEFAULT_TIMEOUT_S
    ) -> None:
        self.url = _check_url(url)
        self._token = validate_token(os.environ.get(TOKEN_ENV) if token is None else token)
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s!r} is invalid: allowed > 0")
        self.timeout_s = float(timeout_s)
        self._ids = itertools.count(1)

    def __repr__(self) -> str:  # never show the token
        return f"ServerClient(url={self.url!r})"

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """One JSON-RPC call; returns ``result``.

        Raises:
            ServerUnauthorizedError: HTTP 401.
            ServerError: a JSON-RPC error answer.
            ServerConnectionError: no complete answer (outcome unknown).
        """
        request_id = next(self._ids)
        payload = {
            "jsonrpc": JSONRPC_VERSION,
            "id": request_id,
            "method": method,
            "params": dict(params or {}),
        }
        body = json.dumps(payload, allow_nan=False).encode("utf-8")
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            reply = _decode(raw)
            error = (reply or {}).get("error") or {}
            cls = ServerUnauthorizedError if exc.code == 401 else ServerError
            raise cls(
                int(error.get("code", -32603)),
                self._redact(str(error.get("message", f"HTTP {exc.code}"))),
                error.get("data") or {"error": f"http_{exc.code}"},
            ) from None
        except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException) as exc:
            raise ServerConnectionError(
                f"{method}: no complete answer from {self.url} ({self._redact(str(exc))}); "
                "the server may or may not have executed it: do not retry blindly, check "
                "describe.active_episode"
            ) from None
        except ValueError as exc:
            # http.client quotes a header value it refuses, and the Authorization header
            # carries the token: never pass such a message on.
            raise ServerConnectionError(
                f"{method}: the HTTP layer refused the request to {self.url} "
                f"({type(exc).__name__}; details withheld, they may quote the token); if it "
                "was sent, the server may or may not have executed it"
            ) from None
        reply = _decode(raw)
        if reply is None or reply.get("id") != request_id:
            raise ServerConnectionError(
                f"{method}: the answer is not a JSON-RPC response to this call"
            )
        if "error" in reply:
            error = reply["error"] or {}
            raise ServerError(
                int(error.get("code", -32603)),
                self._redact(str(error.get("message", ""))),
                error.get("data"),
            )
        return reply.get("result")

    def _redact(self, text: str) -> str:
        """``text`` with the token replaced (a message must never carry it)."""
        return text.replace(self._token, "<token>")

    # -- methods -------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return self.call("describe")

    def open(self, episode_id: str | None = None) -> dict[str, Any]:
        """Claim the next episode of the plan (``episode_id``: assert which one it is)."""
        return self.call("open", {} if episode_id is None else {"episode_id": episode_id})

    def reset(self, handle: str) -> dict[str, Any]:
        return self.call("reset", {"episode_handle": handle, "sequence": 0})

    def step(
        self,
        handle: str,
        sequence: int,
        action: str | Mapping[str, Any],
        visible_state: str | None = None,
        usage: list[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"episode_handle": handle, "sequence": sequence, "action": action}
        if visible_state is not None:
            params["visible_state"] = visible_state
        if usage is not None:
            params["usage"] = list(usage)
        return self.call("step", params)

    def finish(
        self,
        handle: str,
        client_counts: Mapping[str, int] | None = None,
        abandon_reason: str | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"episode_handle": handle}
        if client_counts is not None:
            params["client_counts"] = dict(client_counts)
        if abandon_reason is not None:
            params["abandon_reason"] = abandon_reason[:2000]
        return self.call("finish", params)

    def read_artifact(self, path: str) -> bytes:
        """Download one frozen artifact; its SHA-256 is checked against the server's.

        Raises:
            ServerError: refused or unknown path.
            ValueError: the content does not match the announced SHA-256.
        """
        result = self.call("read_artifact", {"path": path})
        content = base64.b64decode(result["content_b64"], validate=True)
        if hashlib.sha256(content).hexdigest() != result["sha256"]:
            raise ValueError(f"artifact {path!r}: content does not match its SHA-256")
        return content

    def download_artifacts(
        self, artifacts: list[Mapping[str, Any]], dest_dir: str | os.PathLike[str]
    ) -> list[Path]:
        """Save the artifacts of a ``finish`` result into ``dest_dir`` (by file name),
        atomically, checking each against the SHA-256 frozen at ``finish``."""
        dest = Path(dest_dir)
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        for item in artifacts:
            content = self.read_artifact(str(item["path"]))
            if hashlib.sha256(content).hexdigest() != item["sha256"]:
                raise ValueError(f"artifact {item['path']!r}: content differs from the finish list")
            name = Path(str(item["path"])).name
            target = dest / name
            write_bytes_atomic(target, content)
            written.append(target)
        return written


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def decode_observation(observation: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """Turn an observation object into ``(image uint8 (H, W, 3), public info)``.

    Raises:
        ValueError: the image is missing, not PNG, or has the wrong shape.
    """
    from PIL import Image

    try:
        png = base64.b64decode(observation["image_png_b64"], validate=True)
        with Image.open(io.BytesIO(png)) as image:
            if image.format != "PNG":
                raise ValueError(f"expected a PNG image, got {image.format}")
            array = np.array(image.convert("RGB"), dtype=np.uint8)
    except (KeyError, TypeError, OSError) as exc:
        raise ValueError(f"observation image cannot be decoded: {exc}") from exc
    expected = (int(observation["height_px"]), int(observation["width_px"]), 3)
    if array.shape != expected:
        raise ValueError(f"observation image has shape {array.shape}, declared {expected}")
    info = {key: observation[key] for key in OBSERVATION_FIELDS}
    return array, info


class RemoteEpisode:
    """One server episode with the env surface :func:`run_episode` needs.

    ``reset`` opens the next plan episode if :meth:`open` was not called, then resets it
    (sequence 0); ``step`` sends one decision (action text, ``visible_state``, usage) with
    the next sequence number. On the terminal step the episode is finished automatically
    and the scorer result is put into that step's ``info["metrics"]`` (as the in-process
    MetricsWrapper does); the full ``finish`` answer is in :attr:`finish_result`.

    Args:
        client: the server client.
        client_counts: called at finish for the driver-side counts
            (``decision_calls``, ``acknowledged_steps``).
    """

    privileged = False

    def __init__(self, client: ServerClient, client_counts: Any = None) -> None:
        self.client = client
        self._client_counts = client_counts
        self.opened: dict[str, Any] | None = None
        self.finish_result: dict[str, Any] | None = None
        self.acknowledged_steps = 0
        self._sequence = 0
        self._reset_done = False

    @property
    def unwrapped(self) -> RemoteEpisode:
        return self

    @property
    def active(self) -> bool:
        """An episode was opened here and is not finished yet."""
        return self.opened is not None and self.finish_result is None

    def open(self, episode_id: str | None = None) -> dict[str, Any]:
        """Claim the next plan episode (optionally asserting its id)."""
        if self.opened is not None:
            raise RuntimeError("this RemoteEpisode already opened an episode; make a new one")
        self.opened = self.client.open(episode_id)
        return self.opened

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            raise ValueError(
                "seed must be None: the server's plan fixes episodes and their initial state"
            )
        options = dict(options or {})
        unknown = set(options) - {"episode_id"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; allowed: episode_id")
        if self.opened is None:
            self.open(options.get("episode_id"))
        elif options.get("episode_id") not in (None, self.opened["episode_id"]):
            raise ValueError(
                f"options['episode_id']={options['episode_id']!r} differs from the opened "
                f"episode {self.opened['episode_id']!r}"
            )
        if self._reset_done:
            raise RuntimeError("a server episode is reset once; open a new one")
        self._reset_done = True
        result = self.client.reset(self.opened["episode_handle"])
        obs, info = decode_observation(result["observation"])
        info["executed_skill"] = None
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.opened is None or not self._reset_done:
            raise RuntimeError("step() called before reset()")
        if self.finish_result is not None:
            raise RuntimeError("step() called after the episode was finished")
        decision = (
            action if isinstance(action, Decision) else Decision(action=SkillCall.coerce(action))
        )
        usage = [u.to_dict() for u in decision.usage]
        sequence = self._sequence + 1
        result = self.client.step(
            self.opened["episode_handle"],
            sequence,
            str(decision.action),
            decision.visible_state,
            usage,
        )
        self._sequence = sequence
        self.acknowledged_steps += 1
        obs, info = decode_observation(result["observation"])
        info["executed_skill"] = result.get("executed_skill")
        terminated, truncated = bool(result["terminated"]), bool(result["truncated"])
        if terminated or truncated:
            finished = self.finish()
            if finished.get("metrics") is not None:
                info["metrics"] = finished["metrics"]
        return obs, 0.0, terminated, truncated, info

    def finish(self, abandon_reason: str | None = None) -> dict[str, Any]:
        """Close the episode on the server (idempotent here); returns the finish answer."""
        if self.finish_result is not None:
            return self.finish_result
        if self.opened is None:
            raise RuntimeError("finish() called before open()")
        counts = {"acknowledged_steps": self.acknowledged_steps}
        if callable(self._client_counts):
            counts.update(self._client_counts())
        self.finish_result = self.client.finish(
            self.opened["episode_handle"], counts, abandon_reason
        )
        return self.finish_result

    def close(self) -> None:
        """Finish a still-active episode as abandoned."""
        if self.active:
            self.finish("driver closed the episode before it ended")
