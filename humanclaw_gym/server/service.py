"""The benchmark service: JSON-RPC envelope checks, method dispatch, one active episode.

:class:`BenchService` is transport-free: :meth:`BenchService.handle` takes one decoded
JSON value and returns the JSON-RPC response object; it never raises and never puts
tracebacks, server paths or secrets into a response. The HTTP layer
(:mod:`humanclaw_gym.server.transport`) adds authentication, size limits and logging.

Nothing here builds the environment before the first ``open``: constructing the service
and answering ``describe`` touch no simulator, renderer or model.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from humanclaw_gym.backends.config import BackendConfig
from humanclaw_gym.server.artifacts import ArtifactPathError, check_relative_path, read_regular_file
from humanclaw_gym.server.plan import EpisodePlan, PlanEntry
from humanclaw_gym.server.protocol import (
    ERROR_CODES,
    FRAME_RATE_HZ,
    FRAMES_PER_ACTION,
    JSONRPC_VERSION,
    MAX_REQUEST_BYTES,
    MAX_USAGE_RECORDS,
    MAX_VISIBLE_STATE_CHARS,
    PHYSICS_RATE_HZ,
    PHYSICS_TICKS_PER_ACTION,
    SUBSTEPS_PER_FRAME,
    WIRE_PROTOCOL,
    RpcError,
    action_spec,
    benchmark_protocol,
    jsonable,
    observation_spec,
)

__all__ = ["METHODS", "BenchService"]

METHODS = ("describe", "open", "reset", "step", "finish", "read_artifact")

_LOG = logging.getLogger("humanclaw_gym.server")
_MAX_ID_CHARS = 128
_MAX_ABANDON_REASON_CHARS = 2000
_MAX_ARTIFACT_BYTES = 256 << 20
_MAX_SEQUENCE = 2**53 - 1
_USAGE_KEYS = (
    "stage",
    "attempt",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "source",
    "prompt_chars",
)
_CLIENT_COUNT_KEYS = ("decision_calls", "acknowledged_steps")
_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


# --------------------------------------------------------------------------------------
# parameter checks (each raises RpcError("invalid_params") naming the field)
# --------------------------------------------------------------------------------------


def _invalid(field: str, message: str) -> RpcError:
    return RpcError("invalid_params", f"params.{field} {message}", field=field)


def _check_keys(
    params: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...]
) -> None:
    allowed = required + optional
    for key in params:
        if key not in allowed:
            shown = key if len(key) <= 40 else key[:40] + "..."
            raise RpcError(
                "invalid_params",
                f"unknown parameter {shown!r}; allowed: {', '.join(allowed) or 'none'}",
                field=shown,
            )
    for key in required:
        if key not in params:
            raise _invalid(key, "is required")


def _int_param(
    params: Mapping[str, Any], field: str, low: int = 0, high: int = _MAX_SEQUENCE
) -> int:
    value = params[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(field, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise _invalid(field, f"must be in {low}..{high}")
    return value


def _str_param(
    params: Mapping[str, Any], field: str, max_chars: int, nullable: bool = False
) -> str | None:
    value = params.get(field)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        kind = "a string or null" if nullable else "a string"
        raise _invalid(field, f"must be {kind}, got {type(value).__name__}")
    if len(value) > max_chars:
        raise _invalid(field, f"must have at most {max_chars} characters")
    return value


def _usage_param(params: Mapping[str, Any]) -> list[Any] | None:
    from humanclaw_gym.policy import Usage

    value = params.get("usage")
    if value is None:
        return None
    if not isinstance(value, list):
        raise _invalid(
            "usage", f"must be a list of usage records or null, got {type(value).__name__}"
        )
    if len(value) > MAX_USAGE_RECORDS:
        raise _invalid("usage", f"must have at most {MAX_USAGE_RECORDS} records")
    records = []
    for i, item in enumerate(value):
        field = f"usage[{i}]"
        if not isinstance(item, dict):
            raise _invalid(field, f"must be an object, got {type(item).__name__}")
        unknown = [k for k in item if k not in _USAGE_KEYS]
        if unknown:
            raise _invalid(field, f"has unknown key(s); allowed: {', '.join(_USAGE_KEYS)}")
        stage = item.get("stage")
        if not isinstance(stage, str) or not 1 <= len(stage) <= 64:
            raise _invalid(f"{field}.stage", "must be a string of 1..64 characters")
        try:
            records.append(Usage(**item))
        except (TypeError, ValueError) as exc:
            raise _invalid(field, f"is invalid: {exc}") from None
    return records


def _client_counts_param(params: Mapping[str, Any]) -> dict[str, int] | None:
    value = params.get("client_counts")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid("client_counts", f"must be an object or null, got {type(value).__name__}")
    if any(key not in _CLIENT_COUNT_KEYS for key in value):
        raise _invalid("client_counts", f"may only have the keys {', '.join(_CLIENT_COUNT_KEYS)}")
    out = {}
    for key in _CLIENT_COUNT_KEYS:
        if key in value:
            count = value[key]
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 10**9:
                raise _invalid(f"client_counts.{key}", "must be an integer in 0..1000000000")
            out[key] = count
    return out


# --------------------------------------------------------------------------------------
# the service
# --------------------------------------------------------------------------------------


class BenchService:
    """The benchmark server's application logic (transport-free).

    Args:
        plan: the declared episode plan (its output directory is the server's).
        backend: the simulator backends of the env (default: the embedded defaults).
        max_steps: step limit override (``None``: each episode's own limit, 100).
        env_factory: builds the env on the first ``open`` (tests may inject one); by
            default a ``FindNavInteractEnv`` over the plan's episodes, never privileged.
    """

    def __init__(
        self,
        plan: EpisodePlan,
        *,
        backend: BackendConfig | None = None,
        max_steps: int | None = None,
        env_factory: Callable[[], Any] | None = None,
    ) -> None:
        if max_steps is not None and (
            isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
        ):
            raise ValueError(f"max_steps={max_steps!r} is invalid: allowed None or an int >= 1")
        self.plan = plan
        self.output_dir = Path(plan.output_dir).resolve()
        self.backend = backend or BackendConfig()
        self.max_steps = max_steps
        self._env_factory = env_factory or self._default_env
        self._env: Any = None
        self._episodes_by_id: dict[str, Any] = {}
        self._session: Any = None
        self._frozen: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()

    # -- envelope ----------------------------------------------------------------------------
    def handle(self, request: Any) -> dict[str, Any]:
        """Answer one decoded JSON-RPC request (never raises).

        Args:
            request: the decoded JSON body.

        Returns:
            The JSON-RPC response object (``result`` or ``error``).
        """
        request_id: Any = None
        try:
            request_id, method, params = self._envelope(request)
            with self._lock:
                if self._closed:
                    raise RpcError("internal_error", "the server is shutting down")
                result = getattr(self, f"_m_{method}")(params)
            self.count_outcome("ok")
            return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": jsonable(result)}
        except RpcError as exc:
            self.count_outcome(exc.name)
            return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": exc.to_dict()}
        except Exception as exc:  # never leak internals to the client
            reference = secrets.token_hex(4)
            _LOG.error("internal error (reference %s)", reference, exc_info=exc)
            self.count_outcome("internal_error")
            session = self._session
            if session is not None and self.method_name(request) in ("reset", "step", "finish"):
                # in the episode's server_record.json too, not only in the log
                session.note_internal_error(self.method_name(request), reference)
            error = RpcError("internal_error", f"internal server error (reference {reference})")
            return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": error.to_dict()}

    def count_outcome(self, name: str) -> None:
        """Count one answered request by outcome (``ok`` or an error name)."""
        with self._stats_lock:
            self._stats[name] += 1

    def outcome_counts(self) -> dict[str, int]:
        """Answered requests by outcome since start (for describe and audits)."""
        with self._stats_lock:
            return dict(sorted(self._stats.items()))

    @staticmethod
    def method_name(request: Any) -> str:
        """The method of a request for logging: a known name or ``"?"`` (never raw input)."""
        if isinstance(request, dict) and request.get("method") in METHODS:
            return str(request["method"])
        return "?"

    def _envelope(self, request: Any) -> tuple[Any, str, dict[str, Any]]:
        if isinstance(request, list):
            raise RpcError(
                "invalid_request", "batch requests are not supported; send one request at a time"
            )
        if not isinstance(request, dict):
            raise RpcError("invalid_request", "the request must be a JSON object")
        request_id = request.get("id")
        id_ok = (isinstance(request_id, int) and not isinstance(request_id, bool)) or (
            isinstance(request_id, str) and len(request_id) <= _MAX_ID_CHARS
        )
        if not id_ok:
            raise RpcError(
                "invalid_request",
                f"id must be a string (at most {_MAX_ID_CHARS} characters) or an integer; "
                "notifications (no id) are not accepted",
            )
        if request.get("jsonrpc") != JSONRPC_VERSION:
            raise RpcError("invalid_request", 'jsonrpc must be "2.0"')
        extra = [k for k in request if k not in _ENVELOPE_KEYS]
        if extra:
            raise RpcError(
                "invalid_request", "the request has members other than jsonrpc, id, method, params"
            )
        method = request.get("method")
        if not isinstance(method, str):
            raise RpcError("invalid_request", "method must be a string")
        if method not in METHODS:
            raise RpcError("method_not_found", f"method not found; available: {', '.join(METHODS)}")
        params = request.get("params", {})
        if not isinstance(params, dict):
            raise RpcError("invalid_params", "params must be an object (named parameters)")
        # From here on errors carry the request id.
        return request_id, method, params

    # -- describe ------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The ``describe`` result: protocol ids, specs, budgets, counting rules, plan."""
        from humanclaw_gym import __version__

        if self.max_steps is not None:
            cap: Any = self.max_steps
            cap_source = "server option --max-steps (deployment override for smoke tests)"
        else:
            caps = sorted({e.max_steps for e in self.plan.entries})
            cap = caps[0] if len(caps) == 1 else caps
            cap_source = "the episode records (benchmark-defined)"
        return {
            "jsonrpc": JSONRPC_VERSION,
            "wire_protocol": WIRE_PROTOCOL,
            "benchmark_protocol": benchmark_protocol(),
            "server": {"name": "humanclaw-gym", "version": __version__},
            "methods": list(METHODS),
            "call_order": "describe -> open -> reset (sequence 0, once) -> step (sequence 1, 2, "
            "...) -> finish -> read_artifact",
            "observation_spec": observation_spec(),
            "action_spec": action_spec(),
            "budgets": {
                "budget_mode": "benchmark_fixed",
                "environment_step_cap": cap,
                "environment_step_cap_source": cap_source,
                "step_cap_rule": "the episode is truncated after this many executed actions "
                "without an active Stop; Stop counts as a step",
                "frames_per_action": FRAMES_PER_ACTION,
                "substeps_per_frame": SUBSTEPS_PER_FRAME,
                "physics_ticks_per_action": PHYSICS_TICKS_PER_ACTION,
                "physics_ticks_per_stop": 0,
                "frame_rate_hz": FRAME_RATE_HZ,
                "physics_rate_hz": PHYSICS_RATE_HZ,
                "simulation_paused_between_steps": True,
                "max_policy_calls": None,
                "max_policy_calls_note": "not limited by the server; a driver may set its own "
                "limit and must disclose it",
                "replan_interval": None,
                "replan_interval_note": "each step request carries exactly one action; how "
                "often a policy re-plans is its own choice (no required_replan_interval)",
            },
            "counting": {
                "decision_calls": "step requests that passed the sequence check and carried "
                "an action (executed + rejected + failed)",
                "executed_actions": "actions the simulator executed (Stop included)",
                "rejected_actions": "actions refused as invalid_action (nothing executed, no "
                "sequence consumed)",
                "failed_actions": "actions whose execution raised; effect unknown",
                "refused_requests": "requests for the episode refused before validation of "
                "the action (bad params, sequence errors, after the end)",
                "physics_ticks": "physics substeps actually stepped (counted frames x "
                "substeps per frame)",
                "model_requests": "usage records sent with the decisions; null with a reason "
                "when a decision came without its usage list",
                "driver_decision_calls / driver_acknowledged_steps": "as reported by the "
                "driver in finish; null with a reason when not reported",
            },
            "privileged_mode": {
                "supported": False,
                "note": "hidden simulator state is never served; policies that need it "
                "(the oracle) cannot run through this server",
            },
            "plan": self.plan.public_view(),
            "active_episode": None if self._session is None else self._session.status(),
            "limits": {
                "max_request_bytes": MAX_REQUEST_BYTES,
                "max_usage_records": MAX_USAGE_RECORDS,
                "max_visible_state_chars": MAX_VISIBLE_STATE_CHARS,
            },
            "deployment": {"renderer": self.backend.renderer, "motion": self.backend.motion},
            "request_outcomes": self.outcome_counts(),
            "errors": dict(ERROR_CODES),
        }

    def _m_describe(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_keys(params, (), ())
        return self.describe()

    # -- open ------------------------------------------------------------------------------
    def _m_open(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_keys(params, (), ("episode_id", "privileged"))
        privileged = params.get("privileged", False)
        if not isinstance(privileged, bool):
            raise _invalid("privileged", f"must be a boolean, got {type(privileged).__name__}")
        if privileged:
            raise RpcError(
                "privileged_refused",
                "privileged mode is not available through the server: hidden simulator state "
                "is never served",
            )
        expected = None
        if "episode_id" in params and params["episode_id"] is not None:
            expected = _str_param(params, "episode_id", 256)
        if self._session is not None:
            raise RpcError(
                "episode_active",
                "another episode is active on this server; finish it first (one active "
                "episode per server)",
                active_episode_handle=self._session.handle,
                active_episode_id=self._session.entry.episode_id,
            )
        entry = self.plan.next_entry
        if entry is None:
            raise RpcError("plan_exhausted", "every episode of the declared plan has been claimed")
        if expected is not None and expected != entry.episode_id:
            raise RpcError(
                "plan_mismatch",
                f"the next declared episode is {entry.episode_id!r}, not {expected[:64]!r}; "
                "episodes are claimed in the fixed plan order (see describe.plan)",
                next_episode_id=entry.episode_id,
                next_index=entry.index,
            )
        entry = self.plan.claim()  # persisted before anything else happens
        try:
            session = self._start_session(entry)
        except Exception as exc:
            _LOG.error("opening plan entry %d failed", entry.index, exc_info=exc)
            self.plan.mark(
                entry.index, "failed", ended_by="error", error=f"open: {type(exc).__name__}: {exc}"
            )
            raise RpcError(
                "execution_error",
                "the server could not prepare this episode; the claim is recorded as failed "
                "(details in the server's private record)",
                executed=False,
                plan_index=entry.index,
            ) from None
        self._session = session
        record = self._episodes_by_id[entry.episode_id]
        max_steps = self.max_steps if self.max_steps is not None else entry.max_steps
        return {
            **session.public_info(),
            "instruction": str(record.instruction),
            "max_steps": max_steps,
        }

    def _start_session(self, entry: PlanEntry) -> Any:
        from humanclaw_gym.server.session import EpisodeSession

        if self._env is None:
            self._env = self._env_factory()
            if getattr(self._env.unwrapped, "privileged", False):
                raise RuntimeError("the server refuses to run a privileged env")
            self._episodes_by_id = {ep.episode_id: ep for ep in self._env.unwrapped.episodes}
        handle = secrets.token_hex(8)
        return EpisodeSession(entry, handle, self._env.unwrapped, self.output_dir)

    def _default_env(self) -> Any:
        from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

        splits = sorted({e.split for e in self.plan.entries})
        if len(splits) != 1:
            raise RuntimeError(f"a plan must come from one split, got {splits}")
        return FindNavInteractEnv(
            split=splits[0],
            episode_ids=None if self.plan.episodes else [e.episode_id for e in self.plan.entries],
            episodes=self.plan.episodes,  # the records the plan was built from: loaded once
            backend=self.backend,
            privileged=False,
            max_steps=self.max_steps,
        )

    # -- episode methods ---------------------------------------------------------------------
    def _session_for(self, params: dict[str, Any]) -> Any:
        handle = params.get("episode_handle")
        if not isinstance(handle, str):
            raise _invalid("episode_handle", "must be a string (from open)")
        session = self._session
        # "surrogatepass": a lone surrogate (valid in JSON text, not in UTF-8) is just an
        # unknown handle, not an encoding error.
        presented = handle.encode("utf-8", "surrogatepass")
        if session is None or not secrets.compare_digest(presented, session.handle.encode()):
            raise RpcError(
                "no_active_episode",
                "episode_handle does not name the active episode (open one first)",
            )
        return session

    def _m_reset(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session_for(params)
        try:
            _check_keys(params, ("episode_handle", "sequence"), ())
            sequence = _int_param(params, "sequence")
            result = session.reset(sequence)
        except RpcError as exc:
            if exc.name == "execution_error":
                self.plan.mark(session.entry.index, "failed", ended_by="error")
            else:
                session.note_refused("reset", exc, params.get("sequence"))
            raise
        self.plan.mark(session.entry.index, "running")
        return result

    def _m_step(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session_for(params)
        try:
            _check_keys(
                params, ("episode_handle", "sequence", "action"), ("visible_state", "usage")
            )
            sequence = _int_param(params, "sequence")
            visible_state = _str_param(
                params, "visible_state", MAX_VISIBLE_STATE_CHARS, nullable=True
            )
            usage = _usage_param(params)
        except RpcError as exc:
            session.note_refused("step", exc, params.get("sequence"))
            raise
        try:
            return session.step(sequence, params["action"], visible_state, usage)
        except RpcError as exc:
            if exc.name in ("sequence_error", "episode_over"):
                session.note_refused("step", exc, sequence)
            elif exc.name == "execution_error":
                self.plan.mark(session.entry.index, "failed", ended_by="error")
            raise

    def _m_finish(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session_for(params)
        try:
            _check_keys(params, ("episode_handle",), ("client_counts", "abandon_reason"))
            counts = _client_counts_param(params)
            reason = _str_param(params, "abandon_reason", _MAX_ABANDON_REASON_CHARS, nullable=True)
        except RpcError as exc:
            session.note_refused("finish", exc)
            raise
        return self._finish_session(session, counts, reason)

    def _finish_session(
        self, session: Any, counts: dict[str, int] | None, reason: str | None
    ) -> dict[str, Any]:
        self._session = None  # whatever happens next, this episode is no longer active
        try:
            result = session.finish(counts, reason)
        except Exception:
            if self.plan.status(session.entry.index) not in ("completed", "failed", "abandoned"):
                self.plan.mark(
                    session.entry.index, "failed", ended_by="error", error="finish failed"
                )
            raise
        for item in result["artifacts"]:
            self._frozen[item["path"]] = item["sha256"]
        status = {"stop": "completed", "truncated": "completed", "error": "failed"}.get(
            result["ended_by"], "abandoned"
        )
        if self.plan.status(session.entry.index) not in ("completed", "failed", "abandoned"):
            self.plan.mark(
                session.entry.index, status, ended_by=result["ended_by"], abandon_reason=reason
            )
        return result

    # -- artifacts -----------------------------------------------------------------------------
    def _m_read_artifact(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_keys(params, ("path",), ())
        try:
            parts = check_relative_path(params["path"])
        except ArtifactPathError as exc:
            raise RpcError("artifact_refused", str(exc)) from None
        rel = "/".join(parts)
        frozen_sha = self._frozen.get(rel)
        if frozen_sha is None:
            raise RpcError(
                "artifact_not_found",
                "the path is not in the frozen artifact list of a finished episode",
            )
        try:
            content, sha = read_regular_file(self.output_dir, parts, _MAX_ARTIFACT_BYTES)
        except ArtifactPathError as exc:
            raise RpcError("artifact_refused", str(exc)) from None
        except FileNotFoundError:
            raise RpcError("artifact_not_found", "the artifact no longer exists") from None
        if not secrets.compare_digest(sha, frozen_sha):
            raise RpcError(
                "artifact_refused", "the artifact changed after finish; it is not served"
            )
        import base64

        return {
            "path": rel,
            "size_bytes": len(content),
            "sha256": sha,
            "content_b64": base64.b64encode(content).decode("ascii"),
        }

    # -- shutdown --------------------------------------------------------------------------------
    def close(self) -> None:
        """Abandon an active episode (keeping its evidence) and release the env. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            session, self._session = self._session, None
            if session is not None:
                session.abort("server shutdown")
                status = {"stop": "completed", "truncated": "completed", "error": "failed"}.get(
                    session.ended_by or "", "abandoned"
                )
                if self.plan.status(session.entry.index) not in (
                    "completed",
                    "failed",
                    "abandoned",
                ):
                    self.plan.mark(
                        session.entry.index,
                        status,
                        ended_by=session.ended_by,
                        abandon_reason="server shutdown",
                    )
            if self._env is not None:
                env, self._env = self._env, None
                env.close()
