"""``TrajectoryWrapper``: write the replay bundle of every episode.

The wrapper observes the env through the observer API (no extra needs: realized poses and
object poses come with every ``FrameEvent``) and, per episode, writes into the episode
directory (see :mod:`humanclaw_gym.replay.layout`):

* ``trajectory_before.npz``: generated 75-D frames of every motion step, action
  boundaries, the seed history, fps and the exact initial humanoid + object state;
* ``trajectory_after.npz``: realized 75-D pose and every dynamic object pose per physics
  frame;
* ``replay_manifest.json``: the task (``{"id", "version"}``), episode record, scene id +
  content hash, physics contract, backend names, SHA-256 of both NPZ files, counts and how
  the episode ended.

Arrays accumulate as per-step lists and are concatenated once when the episode ends. The
bundle is written (atomically, manifest last) when the episode ends for any reason: Stop,
step limit, an exception escaping ``step`` (the env's ``EndEvent(reason="error")``; the
bundle is then marked ``"complete": false`` with the error text), a new ``reset`` or
``close`` mid-episode (``"abandoned"``). A caller whose own code fails between steps (a
policy error) calls :meth:`TrajectoryWrapper.flush` in its ``finally`` block, or uses the
wrapper as a context manager, to force the bundle out. The schema is in ``docs/replay.md``
and :mod:`humanclaw_gym.replay.bundle`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from humanclaw_gym.envs.events import ChunkEvent, DecisionEvent, EndEvent, FrameEvent, ResetEvent
from humanclaw_gym.replay.bundle import DEFAULT_PHYSICS_CONTRACT, ENDED_BY, write_bundle
from humanclaw_gym.replay.layout import EpisodeDirFn, resolve_episode_dir

__all__ = ["EpisodeTrajectory", "TrajectoryRecorder", "TrajectoryWrapper"]

_FPS = 30.0
_FRAMES_PER_STEP = 15


@dataclass
class EpisodeTrajectory:
    """In-memory record of one episode (lists of per-step / per-frame arrays)."""

    directory: Path
    reset: ResetEvent
    backend_info: dict[str, Any]
    started_s: float
    task: dict[str, Any] | None = None
    generated: list[np.ndarray] = field(default_factory=list)
    step_start_frame: list[int] = field(default_factory=list)
    step_index: list[int] = field(default_factory=list)
    skill_id: list[int] = field(default_factory=list)
    skill_text: list[str] = field(default_factory=list)
    realized: list[np.ndarray] = field(default_factory=list)
    object_poses: list[np.ndarray] = field(default_factory=list)
    frame_step: list[int] = field(default_factory=list)
    decisions: int = 0
    generated_frames: int = 0

    def materialize(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Concatenate the lists once into the arrays of the two NPZ files."""
        r = self.reset
        ids = np.asarray(r.object_ids, dtype=np.int64).reshape(-1)
        m = ids.shape[0]
        generated = (
            np.concatenate(self.generated, axis=0).astype(np.float64)
            if self.generated
            else np.zeros((0, 75))
        )
        before = {
            "generated": generated,
            "step_start_frame": np.asarray(self.step_start_frame, dtype=np.int64),
            "step_index": np.asarray(self.step_index, dtype=np.int64),
            "skill_id": np.asarray(self.skill_id, dtype=np.int64),
            "skill_text": np.asarray(self.skill_text, dtype=np.str_).reshape(-1),
            "seed_history": np.asarray(r.seed_history, dtype=np.float64),
            "fps": np.float64(_FPS),
            "frames_per_step": np.int64(_FRAMES_PER_STEP),
            "initial_realized": np.asarray(r.realized_frame, dtype=np.float64),
            "initial_object_ids": ids,
            "initial_object_poses": np.asarray(r.object_poses, dtype=np.float64).reshape(m, 7),
        }
        reset_frame = getattr(r, "reset_frame", None)
        if reset_frame is not None:  # the physics did not start at seed_history[-1]
            before["reset_frame"] = np.asarray(reset_frame, dtype=np.float64)
        after = {
            "realized": (
                np.stack(self.realized).astype(np.float64) if self.realized else np.zeros((0, 75))
            ),
            "object_ids": ids.copy(),
            "object_poses": (
                np.stack(self.object_poses).astype(np.float64).reshape(len(self.object_poses), m, 7)
                if self.object_poses
                else np.zeros((0, m, 7))
            ),
            "frame_step": np.asarray(self.frame_step, dtype=np.int64),
        }
        return before, after


class TrajectoryRecorder:
    """The observer behind :class:`TrajectoryWrapper` (usable on its own with ``add_observer``).

    Args:
        output_dir: root directory of the bundles.
        episode_dir_fn: ``(episode, index) -> dir`` (see :mod:`humanclaw_gym.replay.layout`).
        backend_info: called at each reset; returns ``{"physics", "renderer", "motion", ...}``
            names recorded in the manifest.
        task_info: called at each reset; returns the task's record (``{"id", "version"}``)
            recorded in the manifest (None: no ``task`` field).
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        episode_dir_fn: EpisodeDirFn | None = None,
        backend_info: Any = None,
        task_info: Any = None,
    ) -> None:
        self.output_dir = Path(output_dir)
        self.episode_dir_fn = episode_dir_fn
        self._backend_info = backend_info
        self._task_info = task_info
        self.episode_index = 0
        self.current: EpisodeTrajectory | None = None
        self.last_bundle_dir: Path | None = None

    # -- observer callbacks ---------------------------------------------------------------
    def on_reset(self, event: ResetEvent) -> None:
        if self.current is not None:  # no end event seen for the previous episode
            self.finish("abandoned")
        directory = resolve_episode_dir(
            self.output_dir, self.episode_dir_fn, event.episode, self.episode_index
        )
        self.episode_index += 1
        info = dict(self._backend_info()) if callable(self._backend_info) else {}
        task = dict(self._task_info()) if callable(self._task_info) else None
        self.current = EpisodeTrajectory(directory, event, info, time.time(), task)

    def on_decision(self, event: DecisionEvent) -> None:
        if self.current is not None:
            self.current.decisions = max(self.current.decisions, event.step + 1)

    def on_chunk(self, event: ChunkEvent) -> None:
        cur = self.current
        if cur is None:
            return
        frames = np.array(event.frames, dtype=np.float64)
        cur.step_start_frame.append(cur.generated_frames)
        cur.step_index.append(int(event.step))
        cur.skill_id.append(int(event.call.skill))
        cur.skill_text.append(str(event.call))
        cur.generated.append(frames)
        cur.generated_frames += frames.shape[0]

    def on_frame(self, event: FrameEvent) -> None:
        cur = self.current
        if cur is None:
            return
        cur.realized.append(np.asarray(event.realized, dtype=np.float64))
        cur.object_poses.append(np.asarray(event.object_poses, dtype=np.float64))
        cur.frame_step.append(int(event.step))

    def on_episode_end(self, event: EndEvent) -> None:
        if self.current is None:
            return
        if event.reason == "error":
            # Keep the env's original exception: write what we can, never raise from here.
            try:
                self.finish("error", steps=event.steps, error=event.error)
            except Exception as exc:
                gym.logger.warn(f"TrajectoryWrapper: writing the replay bundle failed: {exc!r}")
            return
        self.finish(event.reason, steps=event.steps, error=event.error)

    # -- finishing ------------------------------------------------------------------------
    def finish(
        self, reason: str, steps: int | None = None, error: str | None = None
    ) -> Path | None:
        """Write the bundle of the current episode (if any) and forget it.

        Args:
            reason: one of ``"stop"``, ``"truncated"``, ``"error"``, ``"abandoned"``.
            steps: decision steps taken (including a final Stop); default: decisions seen.
            error: error text for ``"error"`` / ``"abandoned"`` endings.

        Returns:
            The bundle directory, or None when no episode was being recorded.
        """
        if reason not in ENDED_BY:
            raise ValueError(f"reason must be one of {ENDED_BY}, got {reason!r}")
        cur, self.current = self.current, None
        if cur is None:
            return None
        before, after = cur.materialize()
        manifest = self._manifest(cur, reason, steps, error, before, after)
        write_bundle(cur.directory, before, after, manifest)
        self.last_bundle_dir = cur.directory
        return cur.directory

    def _manifest(
        self,
        cur: EpisodeTrajectory,
        reason: str,
        steps: int | None,
        error: str | None,
        before: dict[str, np.ndarray],
        after: dict[str, np.ndarray],
    ) -> dict[str, Any]:
        from humanclaw_gym import __version__

        r = cur.reset
        n_generated = int(before["generated"].shape[0])
        n_realized = int(after["realized"].shape[0])
        contract = r.physics_contract
        complete = reason in ("stop", "truncated") and n_generated == n_realized
        episode = r.episode
        task = {} if cur.task is None else {"task": cur.task}
        return {
            **task,
            "episode_id": str(getattr(episode, "episode_id", "")),
            "scene_id": str(getattr(episode, "scene_id", getattr(r.scene, "scene_id", ""))),
            "scene_content_hash": r.scene.content_hash(),
            "episode": episode,
            "physics": dict(contract) if contract else dict(DEFAULT_PHYSICS_CONTRACT),
            "physics_contract_source": "backend" if contract else "documented_defaults",
            "backends": cur.backend_info,
            "renderer": cur.backend_info.get("renderer"),
            "fps": _FPS,
            "frames_per_step": _FRAMES_PER_STEP,
            "frames": n_realized,
            "generated_frames": n_generated,
            "video_frames": 1 + n_realized,
            "motion_steps": int(before["step_start_frame"].shape[0]),
            "steps": int(cur.decisions if steps is None else steps),
            "ended_by": reason,
            "complete": bool(complete),
            "error": error,
            "started_unix_s": cur.started_s,
            "written_unix_s": time.time(),
            "humanclaw_gym_version": __version__,
            "assets": _asset_hashes(),
            "cameras": _camera_contract(),
            "conventions": {
                "world": "Y up, metres, radians",
                "frame_75": "root position (3), root axis-angle (3), 23 joint axis-angles (69)",
                "pose_7": "[x, y, z, qx, qy, qz, qw], object frame -> world",
                "realized_rows": "row i = state after physics frame i (reset state: initial_*)",
            },
        }


def _asset_hashes() -> dict[str, str]:
    """SHA-256 of the packaged body assets the realized poses depend on."""
    import hashlib
    from importlib import resources

    out = {}
    for name in ("smpl_neutral_body22.json",):
        data = resources.files("humanclaw_gym.assets").joinpath(name).read_bytes()
        out[name] = hashlib.sha256(data).hexdigest()
    return out


def _camera_contract() -> dict[str, Any]:
    """The camera placement the videos use (see :mod:`humanclaw_gym.render.cameras`)."""
    from humanclaw_gym.body.skeleton import EYE_OFFSET_IN_HEAD_M
    from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX
    from humanclaw_gym.render import cameras

    return {
        "ego": {
            "width": EGO_SIZE_PX,
            "height": EGO_SIZE_PX,
            "fov_y_deg": cameras.EGO_FOV_Y_DEG,
            "pitch_down_deg": cameras.EGO_PITCH_DOWN_DEG,
            "eye_offset_in_head_m": list(EYE_OFFSET_IN_HEAD_M),
        },
        "exo": {
            "width": EXO_SIZE_PX,
            "height": EXO_SIZE_PX,
            "fov_y_deg": cameras.EXO_FOV_Y_DEG,
            "behind_m": cameras.EXO_BEHIND_M,
            "above_pelvis_m": cameras.EXO_HEIGHT_ABOVE_PELVIS_M,
        },
    }


class TrajectoryWrapper(gym.Wrapper):
    """Record every episode's replay bundle (``trajectory_before/after.npz`` + manifest).

    Args:
        env: a HumanClaw env (anything whose ``unwrapped`` has ``add_observer``).
        output_dir: root directory of the bundles.
        episode_dir_fn: ``(episode, index) -> dir``; default one subdirectory per episode
            (``<index:04d>_<scene>_<episode>``), :func:`humanclaw_gym.replay.layout.flat_dir`
            writes into ``output_dir`` itself.

    Attributes:
        last_bundle_dir: directory of the last bundle written.
        episode_dir: directory of the current episode (None between episodes).

    Use in a ``finally`` block or as a context manager so that a failure outside
    ``env.step`` (e.g. in the policy) still leaves a bundle::

        env = TrajectoryWrapper(env, "runs/x", episode_dir_fn=flat_dir)
        try:
            ...
        finally:
            env.flush()   # marks a still-running episode "abandoned" and writes it
    """

    def __init__(
        self,
        env: gym.Env,
        output_dir: str | os.PathLike[str],
        episode_dir_fn: EpisodeDirFn | None = None,
    ) -> None:
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "add_observer"):
            raise TypeError(
                "TrajectoryWrapper needs an env with the observer API (add_observer); got"
                f" {type(base).__name__}"
            )
        spec = getattr(getattr(base, "task", None), "spec", None)
        self._recorder = TrajectoryRecorder(
            output_dir,
            episode_dir_fn,
            backend_info=lambda: dict(getattr(base, "backend_info", {})),
            task_info=spec.record if callable(getattr(spec, "record", None)) else None,
        )
        self._handle = base.add_observer(self._recorder, needs=())
        self._closed = False

    @property
    def last_bundle_dir(self) -> Path | None:
        return self._recorder.last_bundle_dir

    @property
    def episode_dir(self) -> Path | None:
        cur = self._recorder.current
        return None if cur is None else cur.directory

    def flush(self, error: BaseException | str | None = None) -> Path | None:
        """Write the bundle of a still-running episode now; no-op between episodes.

        Args:
            error: the exception (or text) that interrupted the episode; the bundle is then
                marked ``ended_by="error"``, otherwise ``"abandoned"``. Either way
                ``"complete": false``.

        Returns:
            The bundle directory written, or None when nothing was pending.
        """
        if self._recorder.current is None:
            return None
        if error is None:
            return self._recorder.finish("abandoned")
        text = error if isinstance(error, str) else repr(error)
        return self._recorder.finish("error", error=text)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            self.flush(exc)
        finally:
            self.close()
        return False

    def detach(self) -> None:
        """Finish the current episode's output and stop observing the env, without closing
        it (lets a long-lived env be re-wrapped per episode); idempotent."""
        if not self._closed:
            self._closed = True
            try:
                self.flush()
            finally:
                self.env.unwrapped.remove_observer(self._handle)

    def close(self) -> None:
        """Write a pending bundle, unregister the observer and close the env; idempotent."""
        try:
            self.detach()
        finally:
            super().close()
