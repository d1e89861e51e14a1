"""One claimed episode on the server: reset once, strictly sequenced steps, finish.

An :class:`EpisodeSession` owns the per-episode wrappers around the server's single env
(:class:`~humanclaw_gym.wrappers.TrajectoryWrapper` for the replay bundle and
:class:`~humanclaw_gym.wrappers.MetricsWrapper`, the native scorer), the sequence
counter, the counts and the request log. It never hands simulator internals to the
caller: observations are built from a whitelist (:data:`~.protocol.OBSERVATION_FIELDS`)
and the scorer's result is kept until :meth:`EpisodeSession.finish`.

Life cycle (``state``)::

    opened --reset(seq 0)--> running --Stop / step limit / native error--> ended
       \\__________________________ finish ______________________________/--> finished
"""

from __future__ import annotations

import base64
import io
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.fileio import write_json_record
from humanclaw_gym.policy import Decision, Usage
from humanclaw_gym.server.artifacts import list_artifacts
from humanclaw_gym.server.plan import PlanEntry
from humanclaw_gym.server.protocol import (
    MAX_ACTION_TEXT_CHARS,
    OBSERVATION_FIELDS,
    WIRE_PROTOCOL,
    RpcError,
    benchmark_protocol,
    jsonable,
)
from humanclaw_gym.skills import SkillCall, SkillCallError

__all__ = ["RECORD_FILE", "EpisodeSession", "encode_png"]

RECORD_FILE = "server_record.json"
RECORD_SCHEMA = "humanclaw_server_record_v1"

_LOG = logging.getLogger("humanclaw_gym.server")
_PNG_COMPRESS_LEVEL = 3


def encode_png(image_rgb: np.ndarray) -> str:
    """Base64 (standard alphabet) of the lossless PNG of a ``uint8 (H, W, 3)`` image."""
    from PIL import Image

    array = np.ascontiguousarray(image_rgb)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(f"image must be uint8 (H, W, 3), got {array.dtype} {array.shape}")
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG", compress_level=_PNG_COMPRESS_LEVEL)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


class _ActivityCounter:
    """Observer that counts what the simulator actually did (motion chunks, physics frames)."""

    def __init__(self) -> None:
        self.chunks = 0
        self.frames = 0
        self.substeps_per_frame: int | None = None

    def on_reset(self, event: Any) -> None:
        contract = event.physics_contract or {}
        value = contract.get("substeps_per_frame")
        self.substeps_per_frame = int(value) if isinstance(value, (int, np.integer)) else None

    def on_chunk(self, event: Any) -> None:
        self.chunks += 1

    def on_frame(self, event: Any) -> None:
        self.frames += 1


class EpisodeSession:
    """The active episode of a server (see the module docstring).

    Args:
        entry: the claimed plan entry.
        handle: opaque id the client passes back with every call for this episode.
        env: the server's unwrapped ``FindNavInteractEnv`` (built with ``privileged=False``).
        output_root: the server's output directory; files go to
            ``output_root/<entry.directory_name>/``.
    """

    def __init__(self, entry: PlanEntry, handle: str, env: Any, output_root: Path) -> None:
        from humanclaw_gym.replay.layout import flat_dir
        from humanclaw_gym.wrappers import MetricsWrapper, TrajectoryWrapper

        self.entry = entry
        self.handle = handle
        self.output_root = output_root
        self.directory = output_root / entry.directory_name
        self.directory.mkdir(parents=True, exist_ok=True)
        self.state = "opened"
        self.last_sequence: int | None = None
        self.ended_by: str | None = None
        self.opened_unix_s = time.time()
        self._env = env
        self._counter = _ActivityCounter()
        self._counter_handle: int | None = None
        trajectory = TrajectoryWrapper(env, self.directory, episode_dir_fn=flat_dir)
        try:
            metrics_wrapper = MetricsWrapper(trajectory, self.directory, episode_dir_fn=flat_dir)
        except BaseException:
            trajectory.detach()  # leave no observer behind on the shared env
            raise
        try:
            self._counter_handle = env.add_observer(self._counter, needs=())
        except BaseException:
            trajectory.detach()
            metrics_wrapper.detach()
            raise
        self._trajectory = trajectory
        self._metrics_wrapper = metrics_wrapper
        self._wrapped = metrics_wrapper
        self._metrics: dict[str, Any] | None = None
        self._error: str | None = None
        self.executed = 0
        self.rejected = 0
        self.failed = 0
        self.refused = 0
        self._usage_reported = 0
        self._usage_missing = 0
        self._model_requests = 0
        self._log: list[dict[str, Any]] = []
        self._detached = False

    # -- public identity -------------------------------------------------------------------
    def public_info(self) -> dict[str, Any]:
        """What ``open`` returns about the episode (public fields only)."""
        return {
            "episode_handle": self.handle,
            "plan_index": self.entry.index,
            "episode_id": self.entry.episode_id,
            "scene_id": self.entry.scene_id,
            "target_category": self.entry.target_category,
            "artifact_dir": self.entry.directory_name,
        }

    def status(self) -> dict[str, Any]:
        """State summary for ``describe`` (no scores)."""
        return {
            **self.public_info(),
            "state": self.state,
            "last_sequence": self.last_sequence,
            "executed_actions": self.executed,
        }

    def note_refused(self, method: str, error: RpcError, sequence: Any = None) -> None:
        """Count and log a request for this episode that was refused before execution."""
        self.refused += 1
        self._log.append(
            {
                "method": method,
                "sequence": sequence if isinstance(sequence, int) else None,
                "outcome": "refused",
                "error": error.name,
                "unix_s": time.time(),
            }
        )

    def note_internal_error(self, method: str, reference: str) -> None:
        """Log a request for this episode that failed inside the server (a bug), with the
        reference the client was given; nothing of the request is kept."""
        self._log.append(
            {
                "method": method,
                "outcome": "internal_error",
                "reference": reference,
                "unix_s": time.time(),
            }
        )

    # -- reset -----------------------------------------------------------------------------
    def reset(self, sequence: int) -> dict[str, Any]:
        """Initialise the episode once (sequence 0) and return the first observation.

        Raises:
            RpcError: ``sequence_error`` (not 0, or already reset), ``execution_error``
                (the native reset failed; the episode is over).
        """
        if self.state != "opened":
            raise RpcError(
                "sequence_error",
                "reset was already done for this episode (it uses sequence 0 once)",
                expected_sequence=None if self.last_sequence is None else self.last_sequence + 1,
                last_sequence=self.last_sequence,
            )
        if sequence != 0:
            raise RpcError(
                "sequence_error",
                f"reset must use sequence 0, got {sequence}",
                expected_sequence=0,
                last_sequence=None,
            )
        self.last_sequence = 0
        try:
            obs, info = self._wrapped.reset(options={"episode_id": self.entry.episode_id})
        except Exception as exc:
            self._fail("reset", exc)
            raise RpcError(
                "execution_error",
                "the simulator failed to initialise this episode; it is recorded as failed "
                "(details are in the server's private record); call finish",
                executed=None,
                sequence=0,
            ) from None
        self.state = "running"
        self._log.append(
            {"method": "reset", "sequence": 0, "outcome": "executed", "unix_s": time.time()}
        )
        return {"sequence": 0, "observation": self._observation(obs, info)}

    # -- step ------------------------------------------------------------------------------
    def step(
        self,
        sequence: int,
        action: Any,
        visible_state: str | None,
        usage: Sequence[Usage] | None,
    ) -> dict[str, Any]:
        """Validate and execute one action.

        Checks, in order, and refuses without executing: reset done, ``sequence`` equal to
        the last accepted one + 1, episode not over, action valid. An invalid action
        consumes no sequence number.

        Args:
            sequence: the client's sequence number.
            action: the text form (str) or JSON form (object) of a SkillCall, as received.
            visible_state: the policy's visibility claim text, or None.
            usage: the decision's model-call usage records (``None``: not reported).

        Raises:
            RpcError: ``sequence_error``, ``episode_over``, ``invalid_action``,
                ``execution_error``.
        """
        if self.state == "opened":
            raise RpcError(
                "sequence_error",
                "the episode has not been reset; call reset with sequence 0 first",
                expected_sequence=0,
                last_sequence=None,
            )
        expected = (self.last_sequence or 0) + 1
        if sequence != expected:
            kind = (
                "duplicate or replayed" if sequence <= (self.last_sequence or 0) else "out of order"
            )
            raise RpcError(
                "sequence_error",
                f"sequence {sequence} is {kind}; the next accepted sequence is {expected}",
                expected_sequence=expected,
                last_sequence=self.last_sequence,
            )
        if self.state != "running":
            raise RpcError(
                "episode_over",
                f"the episode is over ({self.ended_by}); call finish",
                ended_by=self.ended_by,
            )
        call = self._parse_action(sequence, action)
        decision = Decision(action=call, visible_state=visible_state, usage=tuple(usage or ()))
        if usage is None:
            self._usage_missing += 1
        else:
            self._usage_reported += 1
            self._model_requests += len(usage)
        self.last_sequence = sequence
        entry: dict[str, Any] = {
            "method": "step",
            "sequence": sequence,
            "action": str(call),
            "visible_state": visible_state,
            "usage": None if usage is None else [u.to_dict() for u in usage],
            "unix_s": time.time(),
        }
        try:
            obs, _reward, terminated, truncated, info = self._wrapped.step(decision)
        except Exception as exc:
            self.failed += 1
            entry["outcome"] = "failed"
            self._log.append(entry)
            self._fail("step", exc)
            raise RpcError(
                "execution_error",
                "the simulator failed while executing the action; whether it changed the "
                "world is unknown; the episode is over (recorded as failed); call finish",
                executed=None,
                executed_unknown_reason="the native step raised after validation",
                sequence=sequence,
            ) from None
        self.executed += 1
        entry["outcome"] = "executed"
        self._log.append(entry)
        if "metrics" in info:
            self._metrics = dict(info["metrics"])
        if terminated or truncated:
            self.state = "ended"
            self.ended_by = "stop" if terminated else "truncated"
        return {
            "sequence": sequence,
            "executed": True,
            "executed_skill": str(call),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "observation": self._observation(obs, info),
        }

    def _parse_action(self, sequence: int, action: Any) -> SkillCall:
        try:
            if isinstance(action, str):
                if len(action) > MAX_ACTION_TEXT_CHARS:
                    raise SkillCallError(
                        "text",
                        action[:40] + "...",
                        f"at most {MAX_ACTION_TEXT_CHARS} characters",
                        reason="is too long",
                    )
                return self._executable(SkillCall.parse(action))
            if isinstance(action, Mapping):
                return self._executable(SkillCall.from_dict(action))
            raise SkillCallError(
                "action",
                type(action).__name__,
                "a SkillCall text (string) or JSON form (object)",
                reason="has the wrong JSON type",
            )
        except (SkillCallError, TypeError) as exc:
            self.rejected += 1
            shown = action if isinstance(action, str) else type(action).__name__
            self._log.append(
                {
                    "method": "step",
                    "sequence": sequence,
                    "outcome": "rejected",
                    "action": shown[:MAX_ACTION_TEXT_CHARS] if isinstance(shown, str) else shown,
                    "error": str(exc)[:600],
                    "unix_s": time.time(),
                }
            )
            raise RpcError(
                "invalid_action",
                str(exc),
                executed=False,
                sequence_consumed=False,
                field=getattr(exc, "field", None),
                param=getattr(exc, "param", None),
                allowed=getattr(exc, "allowed", None),
                expected_sequence=sequence,
            ) from None

    def _executable(self, call: SkillCall) -> SkillCall:
        """``call``, or ``SkillNotExecutableError`` (a rejected action) when the env's motion
        generator cannot execute its skill (a skill registered on top of the built-ins)."""
        self._wrapped.unwrapped.simulation.check_executable(call)
        return call

    def _fail(self, where: str, exc: BaseException) -> None:
        self.state = "ended"
        self.ended_by = "error"
        self._error = f"{where}: {type(exc).__name__}: {exc}"
        _LOG.error(
            "episode %s failed in %s: %s",
            self.entry.episode_id,
            where,
            type(exc).__name__,
            exc_info=exc,
        )

    def _observation(self, obs: np.ndarray, info: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "image_png_b64": encode_png(obs),
            "width_px": int(obs.shape[1]),
            "height_px": int(obs.shape[0]),
        }
        for key in OBSERVATION_FIELDS:
            value = info[key]
            out[key] = int(value) if key in ("step", "max_steps") else str(value)
        return out

    # -- finish ----------------------------------------------------------------------------
    def finish(
        self, client_counts: Mapping[str, int] | None, abandon_reason: str | None
    ) -> dict[str, Any]:
        """Close the episode, write the server record, freeze and return the artifact list.

        An episode that has not ended (no Stop, no step limit, no native error) is
        recorded as abandoned; it gets no score.

        Args:
            client_counts: counts the trusted driver reports about its side
                (``decision_calls``, ``acknowledged_steps``), recorded as driver-reported.
            abandon_reason: why the driver gives up on an unfinished episode.

        Returns:
            The ``finish`` result (see docs/server.md).
        """
        if self.state in ("opened", "running"):
            self.ended_by = "abandoned" if self.state == "running" else "abandoned_before_reset"
            self.state = "ended"
        self._detach()
        counts, unknown = self._counts(client_counts or {})
        metrics = self._metrics if self.ended_by in ("stop", "truncated") else None
        metrics_unknown = None
        if metrics is None:
            metrics_unknown = (
                "the scorer produced no result"
                if self.ended_by in ("stop", "truncated")
                else f"no score: the episode ended by {self.ended_by}, not by Stop or the step limit"
            )
        record = {
            "schema": RECORD_SCHEMA,
            "wire_protocol": WIRE_PROTOCOL,
            "benchmark_protocol": benchmark_protocol(),
            "plan_index": self.entry.index,
            "split": self.entry.split,
            "episode_id": self.entry.episode_id,
            "scene_id": self.entry.scene_id,
            "target_category": self.entry.target_category,
            "episode_handle": self.handle,
            "ended_by": self.ended_by,
            "abandon_reason": abandon_reason,
            "error": self._error,
            "opened_unix_s": self.opened_unix_s,
            "finished_unix_s": time.time(),
            "last_sequence": self.last_sequence,
            "counts": counts,
            "counts_unknown": unknown,
            "metrics_unknown_reason": metrics_unknown,
            "requests": self._log,
        }
        write_json_record(self.directory / RECORD_FILE, jsonable(record))
        artifacts = list_artifacts(self.output_root, self.directory)
        self.state = "finished"
        return {
            **self.public_info(),
            "ended_by": self.ended_by,
            "steps": self.executed,
            "counts": counts,
            "counts_unknown": unknown,
            "metrics": None if metrics is None else jsonable(metrics),
            "metrics_unknown_reason": metrics_unknown,
            "artifacts": artifacts,
        }

    def _counts(self, client: Mapping[str, int]) -> tuple[dict[str, Any], dict[str, str]]:
        unknown: dict[str, str] = {}
        ticks: int | None = None
        if self._counter.substeps_per_frame is None:
            unknown["physics_ticks"] = (
                "the physics backend declared no substeps_per_frame"
                if self.state != "opened" and self.last_sequence is not None
                else "the episode was never reset"
            )
        else:
            ticks = self._counter.frames * self._counter.substeps_per_frame
        model_requests: int | None = self._model_requests
        decisions = self._usage_reported + self._usage_missing
        if self._usage_missing:
            model_requests = None
            unknown["model_requests"] = (
                f"usage records were not sent for {self._usage_missing} of {decisions} executed "
                "or failed decision(s)"
            )
        counts: dict[str, Any] = {
            "decision_calls": self.executed + self.rejected + self.failed,
            "executed_actions": self.executed,
            "rejected_actions": self.rejected,
            "failed_actions": self.failed,
            "refused_requests": self.refused,
            "motion_chunks": self._counter.chunks,
            "physics_frames": self._counter.frames,
            "physics_ticks": ticks,
            "model_requests": model_requests,
        }
        for key in ("decision_calls", "acknowledged_steps"):
            name = f"driver_{key}"
            if key in client:
                counts[name] = int(client[key])
            else:
                counts[name] = None
                unknown[name] = "not reported by the driver"
        return counts, unknown

    def _detach(self) -> None:
        """Write the pending bundle (an unfinished episode is marked abandoned) and stop
        observing the env. Idempotent."""
        if self._detached:
            return
        self._detached = True
        try:
            self._trajectory.detach()
        finally:
            self._metrics_wrapper.detach()
            if self._counter_handle is not None:
                self._env.remove_observer(self._counter_handle)
                self._counter_handle = None

    def abort(self, reason: str) -> None:
        """Close without a driver's finish (server shutdown); keeps the evidence."""
        try:
            self.finish(None, reason)
        except Exception as exc:  # keep shutting down
            _LOG.error("closing episode %s failed: %r", self.entry.episode_id, exc)
            self._detach()
