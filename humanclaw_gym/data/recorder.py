"""Bounded, crash-safe recording of demonstration episodes (schema ``humanclaw_demos_v1``).

:class:`EpisodeRecorder` keeps the steps of unfinished episodes in memory, under a fixed
byte budget, and publishes each finished episode as one NPZ file plus a ``.done`` marker
(see :mod:`humanclaw_gym.data.schema`). It works with a single env (:meth:`begin` /
:meth:`record`) and with a Gymnasium vector env in ``NEXT_STEP`` autoreset mode
(:meth:`record_batch`).

Error semantics:

* **Input errors** (a missing ``info`` field, a step index that does not continue the
  episode, an observation that is not the previous step's next observation, an invalid
  action) raise ``ValueError``/``TypeError`` before anything is copied; the recorder is
  unchanged and the call can be retried with corrected input.
* **Budget**: the payload bytes of a whole call are computed and checked against
  ``max_buffer_bytes`` before any copy. Over budget raises :class:`BufferError`; nothing of
  that call is kept, and later smaller calls are accepted. :meth:`discard` drops an
  unfinished episode that can no longer be recorded.
* **Write errors** (disk full, permissions) propagate unchanged and put the recorder in a
  failed state: every later ``begin``/``record``/``record_batch`` raises
  :class:`RecorderFailedError` chained to the original error. Files already published stay
  valid: publication is atomic per episode, not across episodes.
* :meth:`close` writes every still-unfinished episode as ``*.partial.npz`` with
  ``complete: false`` (readers skip them unless asked) and is idempotent.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.data.schema import (
    DEFAULT_IMAGE_KEY,
    EPISODE_PREFIX,
    PARTIAL_SUFFIX,
    RUN_FILE,
    SCHEMA,
    ActionField,
    action_layout,
    atomic_write_json,
    check_key,
    encode_action,
    safe_name_part,
    write_episode_file,
)

__all__ = ["DEFAULT_MAX_BUFFER_BYTES", "EpisodeRecorder", "RecorderFailedError"]

DEFAULT_MAX_BUFFER_BYTES = 256 * 1024 * 1024
"""Default budget for the array payload of unfinished episodes (256 MiB)."""

_UNICODE_BYTES_PER_CHAR = 4  # numpy "U" arrays store UCS-4
_FLAG_BYTES_PER_STEP = 8 + 1 + 1 + 1  # step int64, terminated, truncated, has_policy_text


class RecorderFailedError(RuntimeError):
    """The recorder failed to write a file earlier and accepts no more data.

    The original error is chained as ``__cause__``.
    """


@dataclass
class _OpenEpisode:
    """Steps of one unfinished episode (arrays owned by the recorder)."""

    episode_id: str
    scene_id: str
    instruction: str
    target_category: str
    interact: bool
    obs_spec: dict[str, tuple[tuple[int, ...], str]]
    first_obs_digest: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    nbytes: int = 0

    @property
    def num_steps(self) -> int:
        return len(self.steps)


@dataclass
class _RowPlan:
    """A validated, not yet committed, step of one row (arrays still owned by the caller)."""

    slot: int
    kind: str  # "record" | "reset" (autoreset transition) | "ignored" (discarded episode)
    header: _OpenEpisode | None = None  # a new episode starts at this row
    abandon: bool = False  # the slot's open episode was left without a terminal step
    obs: dict[str, np.ndarray] | None = None
    next_obs: dict[str, np.ndarray] | None = None
    action: dict[str, np.ndarray] | None = None
    action_text: str = ""
    policy_text: str | None = None
    step: int = 0
    terminated: bool = False
    truncated: bool = False
    nbytes: int = 0


class EpisodeRecorder:
    """Record env steps into verifiable per-episode NPZ files.

    Single env::

        recorder = EpisodeRecorder("runs/demos", env=env)
        obs, info = env.reset(seed=0)
        recorder.begin(obs, info)
        while True:
            decision = policy.act(obs, info)
            next_obs, _, terminated, truncated, next_info = env.step(decision)
            recorder.record(obs, info, decision, next_obs, terminated, truncated)
            if terminated or truncated:
                break
            obs, info = next_obs, next_info
        recorder.close()

    Vector env (``NEXT_STEP`` autoreset): call :meth:`record_batch` after every
    ``envs.step`` with the observations/infos the actions were chosen on; rows that were
    only resetting their sub-env are recognised and skipped.

    Args:
        directory: output directory (created if missing). Several runs may share one
            directory when their schema, image key and action layout agree; each run is
            appended to ``run.json``'s ``sessions``.
        max_buffer_bytes: budget (bytes) for the array payload of unfinished episodes:
            observations, next observations, action columns, texts and flags. It is not a
            process memory limit (Python objects, the caller's arrays and compression
            buffers come on top). A finished episode's bytes are released once published.
        image_key: observation key used when the observation is a plain array (the env's
            ego RGB image); dict observations keep their own keys.
        env: optional env (or vector env); its ``spec.id`` is written to ``run.json``.
        env_id: the env spec id, when no ``env`` is given.
        compress: write ``np.savez_compressed`` (default) or uncompressed ``np.savez``.

    Raises:
        ValueError / TypeError: an argument is out of range or of the wrong type, or
            ``run.json`` in ``directory`` belongs to an incompatible recording.
    """

    def __init__(
        self,
        directory: str | Path,
        max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
        image_key: str = DEFAULT_IMAGE_KEY,
        *,
        env: Any = None,
        env_id: str | None = None,
        compress: bool = True,
    ) -> None:
        if isinstance(max_buffer_bytes, bool) or not isinstance(
            max_buffer_bytes, (int, np.integer)
        ):
            raise TypeError(
                f"max_buffer_bytes must be an int number of bytes, got {max_buffer_bytes!r}"
            )
        if max_buffer_bytes < 1:
            raise ValueError(f"max_buffer_bytes={max_buffer_bytes!r} must be >= 1")
        check_key(image_key, "image_key")
        if env is not None and env_id is None:
            spec = getattr(env, "spec", None)
            env_id = getattr(spec, "id", None)
        if env_id is not None and not isinstance(env_id, str):
            raise TypeError(f"env_id must be a str or None, got {type(env_id).__name__}")

        self._directory = Path(directory)
        self._max_buffer_bytes = int(max_buffer_bytes)
        self._image_key = image_key
        self._env_id = env_id
        self._compress = bool(compress)
        self._layout: tuple[ActionField, ...] = action_layout()
        self._session_id = uuid.uuid4().hex
        self._open: dict[int, _OpenEpisode] = {}
        self._autoreset: dict[int, bool] = {}
        self._discarded: dict[int, tuple[str, str]] = {}
        self._mode: str | None = None  # "single" or "vector", fixed by the first call
        self._buffered_bytes = 0
        self._failure: BaseException | None = None
        self._closed = False
        self._published: list[Path] = []
        self._partials: list[Path] = []
        self.cleanup_errors: list[BaseException] = []

        self._directory.mkdir(parents=True, exist_ok=True)
        self._write_run_file()

    # ------------------------------------------------------------------------------------
    # read-only properties
    # ------------------------------------------------------------------------------------
    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def max_buffer_bytes(self) -> int:
        """The fixed budget for unfinished episodes, in bytes."""
        return self._max_buffer_bytes

    @property
    def buffered_bytes(self) -> int:
        """Array payload bytes currently held for unfinished episodes."""
        return self._buffered_bytes

    @property
    def image_key(self) -> str:
        return self._image_key

    @property
    def env_id(self) -> str | None:
        return self._env_id

    @property
    def session_id(self) -> str:
        """Random id of this recorder, written into run.json and every episode file."""
        return self._session_id

    @property
    def action_layout(self) -> tuple[ActionField, ...]:
        return self._layout

    @property
    def failed(self) -> bool:
        return self._failure is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def published_paths(self) -> tuple[Path, ...]:
        """Complete episode files published by this recorder, in publication order."""
        return tuple(self._published)

    @property
    def partial_paths(self) -> tuple[Path, ...]:
        """``*.partial.npz`` files written for abandoned or unfinished episodes."""
        return tuple(self._partials)

    @property
    def open_episodes(self) -> dict[int, tuple[str, str, int]]:
        """``{env_index: (scene_id, episode_id, steps recorded)}`` of unfinished episodes."""
        return {slot: (ep.scene_id, ep.episode_id, ep.num_steps) for slot, ep in self._open.items()}

    # ------------------------------------------------------------------------------------
    # single env
    # ------------------------------------------------------------------------------------
    def begin(self, obs: Any, info: Mapping[str, Any]) -> None:
        """Start an episode from the observation and info returned by ``env.reset``.

        Optional (the first :meth:`record` of an episode starts it too) but recommended:
        the first recorded step is then checked against this observation. An unfinished
        episode still open is written as ``*.partial.npz`` (``ended_by="abandoned"``).

        Raises:
            ValueError: ``info["step"]`` is not 0 or an identity field is missing.
        """
        self._check_usable("single")
        obs_dict = self._as_obs_dict(obs, "obs")
        header = self._header_from_info(info, obs_dict, "info")
        step = self._info_step(info, "info")
        if step != 0:
            raise ValueError(f"begin(): info['step']={step} must be 0 (the reset observation)")
        header.first_obs_digest = _digest(obs_dict)
        old = self._open.pop(0, None)
        self._discarded.pop(0, None)
        self._open[0] = header
        if old is not None:
            self._buffered_bytes -= old.nbytes
            self._write_guarded(old, ended_by="abandoned")

    def record(
        self,
        obs: Any,
        info: Mapping[str, Any],
        action: Any,
        next_obs: Any,
        terminated: bool,
        truncated: bool,
        text: str | None = None,
    ) -> None:
        """Record one step of a single env.

        Args:
            obs: the observation the action was chosen on (``uint8 (448, 448, 3)`` for the
                HumanClaw env, or a dict of arrays).
            info: the info returned together with ``obs`` (``step`` is the step index).
            action: anything ``env.step`` accepts: a SkillCall, a Decision, its text or its
                action-space encoding.
            next_obs: the observation ``env.step`` returned.
            terminated / truncated: the flags ``env.step`` returned.
            text: the policy's ``visible_state`` text; defaults to the Decision's.

        Raises:
            ValueError / TypeError: invalid input (nothing is recorded).
            BufferError: the step would exceed ``max_buffer_bytes`` (nothing is recorded).
            RecorderFailedError: an earlier write failed.
            OSError: writing the finished episode failed (the recorder is now failed).
        """
        self._check_usable("single")
        plan = self._plan_row(
            0, obs, info, action, next_obs, terminated, truncated, text, pending={}
        )
        self._commit([plan])

    # ------------------------------------------------------------------------------------
    # vector env
    # ------------------------------------------------------------------------------------
    def record_batch(
        self,
        obs: Any,
        infos: Mapping[str, Any],
        actions: Any,
        next_obs: Any,
        terminated: Any,
        truncated: Any,
        texts: Sequence[str | None] | None = None,
    ) -> None:
        """Record one ``envs.step`` of a Gymnasium vector env in ``NEXT_STEP`` mode.

        A row whose previous recorded step was terminal is the autoreset transition (the
        sub-env only reset and ignored its action): it is not recorded, and that row's next
        call starts the new episode from the reset observation. If the caller reset the
        vector env explicitly instead, the row's info has ``step == 0`` and is recorded as
        the first step of the new episode.

        Args:
            obs: ``[N, ...]`` observations the actions were chosen on (or a dict of them).
            infos: the vector info dict returned with ``obs`` (arrays with ``_key`` masks).
            actions: the batched action-space dict passed to ``envs.step``, or a sequence
                of N per-row actions (SkillCall, Decision, text or action dict).
            next_obs: ``[N, ...]`` observations ``envs.step`` returned.
            terminated / truncated: ``bool [N]`` flags ``envs.step`` returned.
            texts: optional per-row ``visible_state`` texts (``None`` entries allowed).

        Raises:
            ValueError / TypeError: invalid input in any row (nothing of the batch is kept).
            BufferError: the recorded rows would exceed ``max_buffer_bytes`` (nothing of
                the batch is kept).
            RecorderFailedError / OSError: as for :meth:`record`.
        """
        self._check_usable("vector")
        term = _flag_vector(terminated, "terminated")
        trunc = _flag_vector(truncated, "truncated")
        n = len(term)
        if len(trunc) != n:
            raise ValueError(f"truncated has {len(trunc)} rows, terminated has {n}")
        obs_batch = self._as_obs_dict(obs, "obs", rows=n)
        next_batch = self._as_obs_dict(next_obs, "next_obs", rows=n)
        if texts is not None and len(texts) != n:
            raise ValueError(f"texts has {len(texts)} entries, expected one per row ({n})")
        row_actions = _split_actions(actions, n)
        plans: list[_RowPlan] = []
        pending: dict[int, _OpenEpisode] = {}
        for i in range(n):
            info_i = _row_info(infos, i, n)
            if self._autoreset.get(i, False) and info_i.get("step") != 0:
                # The step after a terminal one: the sub-env only reset. (Infos with step 0
                # instead mean the caller reset the envs explicitly: a real first step.)
                plans.append(_RowPlan(slot=i, kind="reset"))
                continue
            discarded = self._discarded.get(i)
            if discarded is not None:
                ids = (str(info_i.get("scene_id")), str(info_i.get("episode_id")))
                if ids == discarded and self._info_step(info_i, f"infos[{i}]") != 0:
                    plans.append(
                        _RowPlan(slot=i, kind="ignored", terminated=term[i], truncated=trunc[i])
                    )
                    continue
            plans.append(
                self._plan_row(
                    i,
                    {k: v[i] for k, v in obs_batch.items()},
                    info_i,
                    row_actions[i],
                    {k: v[i] for k, v in next_batch.items()},
                    term[i],
                    trunc[i],
                    None if texts is None else texts[i],
                    pending=pending,
                )
            )
        self._commit(plans)

    # ------------------------------------------------------------------------------------
    # episode control
    # ------------------------------------------------------------------------------------
    def discard(self, env_index: int = 0) -> bool:
        """Drop the unfinished episode of ``env_index`` without writing anything.

        Use it after a :class:`BufferError` when an episode cannot be completed within the
        budget. Later rows of the same episode are ignored by :meth:`record_batch` (and
        rejected by :meth:`record`) until that sub-env starts a new episode.

        Returns:
            True when an episode was dropped.
        """
        episode = self._open.pop(env_index, None)
        if episode is None:
            return False
        self._buffered_bytes -= episode.nbytes
        self._discarded[env_index] = (episode.scene_id, episode.episode_id)
        return True

    def close(self) -> None:
        """Write every unfinished episode as ``*.partial.npz`` and stop accepting data.

        Idempotent. Errors while writing partial files are collected in
        :attr:`cleanup_errors`; the first is raised unless the recorder had already failed
        (whose original error was raised when it happened).
        """
        if self._closed:
            return
        self._closed = True
        open_episodes = sorted(self._open.items())
        self._open.clear()
        self._buffered_bytes = 0
        for _, episode in open_episodes:
            if not episode.steps:
                continue
            try:
                self._partials.append(self._write(episode, ended_by="closed"))
            except BaseException as exc:  # keep writing the others
                self.cleanup_errors.append(exc)
        if self.cleanup_errors and self._failure is None:
            raise self.cleanup_errors[0]

    def __enter__(self) -> EpisodeRecorder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except BaseException as cleanup:  # never hide the error of the with-block
            if cleanup not in self.cleanup_errors:
                self.cleanup_errors.append(cleanup)

    # ------------------------------------------------------------------------------------
    # validation (no state changes)
    # ------------------------------------------------------------------------------------
    def _check_usable(self, mode: str) -> None:
        if self._failure is not None:
            raise RecorderFailedError(
                f"the recorder for {self._directory} failed earlier and accepts no more data: "
                f"{self._failure!r}"
            ) from self._failure
        if self._closed:
            raise RuntimeError(f"the recorder for {self._directory} is closed")
        if self._mode is not None and self._mode != mode:
            other = "record_batch()" if self._mode == "vector" else "begin()/record()"
            raise RuntimeError(
                f"this recorder already records with {other}; use one recorder per env kind"
            )
        self._mode = mode

    def _as_obs_dict(self, obs: Any, name: str, rows: int | None = None) -> dict[str, np.ndarray]:
        if isinstance(obs, Mapping):
            if not obs:
                raise ValueError(f"{name} is an empty mapping")
            out = {check_key(str(k), f"{name} key"): np.asarray(v) for k, v in obs.items()}
        else:
            out = {self._image_key: np.asarray(obs)}
        for key, value in out.items():
            if value.dtype == object or value.dtype.kind not in "biuf":
                raise TypeError(
                    f"{name}[{key!r}] has dtype {value.dtype}; observations must be numeric"
                )
            if rows is not None and (value.ndim == 0 or value.shape[0] != rows):
                raise ValueError(
                    f"{name}[{key!r}] has shape {value.shape}; expected {rows} rows first"
                )
        return out

    def _info_step(self, info: Mapping[str, Any], name: str) -> int:
        if "step" not in info:
            raise ValueError(f"{name} has no 'step' entry (the env's decision-step counter)")
        step = info["step"]
        if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
            raise ValueError(f"{name}['step']={step!r} must be an int >= 0")
        if step < 0:
            raise ValueError(f"{name}['step']={step!r} must be >= 0")
        return int(step)

    def _header_from_info(
        self, info: Mapping[str, Any], obs: dict[str, np.ndarray], name: str
    ) -> _OpenEpisode:
        if not isinstance(info, Mapping):
            raise TypeError(f"{name} must be the env's info mapping, got {type(info).__name__}")
        values: dict[str, str] = {}
        for key in ("episode_id", "scene_id", "instruction"):
            value = info.get(key)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name}[{key!r}]={value!r} must be a non-empty str")
            values[key] = value
        category = info.get("target_category", "")
        if not isinstance(category, str):
            raise ValueError(f"{name}['target_category']={category!r} must be a str")
        return _OpenEpisode(
            episode_id=values["episode_id"],
            scene_id=values["scene_id"],
            instruction=values["instruction"],
            target_category=category,
            interact=bool(info.get("interact", False)),
            obs_spec={k: (tuple(v.shape), v.dtype.str) for k, v in obs.items()},
        )

    def _plan_row(
        self,
        slot: int,
        obs: Any,
        info: Mapping[str, Any],
        action: Any,
        next_obs: Any,
        terminated: Any,
        truncated: Any,
        text: str | None,
        pending: dict[int, _OpenEpisode],
    ) -> _RowPlan:
        where = f"infos[{slot}]" if self._mode == "vector" else "info"
        obs_dict = self._as_obs_dict(obs, "obs")
        next_dict = self._as_obs_dict(next_obs, "next_obs")
        if sorted(obs_dict) != sorted(next_dict):
            raise ValueError(
                f"obs keys {sorted(obs_dict)} differ from next_obs keys {sorted(next_dict)}"
            )
        for key, value in obs_dict.items():
            other = next_dict[key]
            if value.shape != other.shape or value.dtype != other.dtype:
                raise ValueError(
                    f"next_obs[{key!r}] is {other.dtype}{other.shape}, obs[{key!r}] is "
                    f"{value.dtype}{value.shape}; they must match"
                )
        term = _flag(terminated, "terminated")
        trunc = _flag(truncated, "truncated")
        call, policy_text = _coerce_action(action, text)
        columns = encode_action(call, self._layout)
        header = self._header_from_info(info, obs_dict, where)
        step = self._info_step(info, where)

        plan = _RowPlan(
            slot=slot,
            kind="record",
            obs=obs_dict,
            next_obs=next_dict,
            action=columns,
            action_text=str(call),
            policy_text=policy_text,
            step=step,
            terminated=term,
            truncated=trunc,
        )
        current = pending.get(slot) or self._open.get(slot)
        same = current is not None and (current.scene_id, current.episode_id) == (
            header.scene_id,
            header.episode_id,
        )
        if same and step == current.num_steps and (step > 0 or current.first_obs_digest):
            self._check_continuity(current, obs_dict, slot)
            if header.instruction != current.instruction:
                raise ValueError(
                    f"{where}['instruction'] changed within episode {current.episode_id!r}"
                )
        elif step == 0:
            # A new episode starts here (a still-open one is abandoned).
            plan.header = header
            plan.abandon = current is not None and current.num_steps > 0
        else:
            if self._discarded.get(slot) == (header.scene_id, header.episode_id):
                raise ValueError(
                    f"episode {header.episode_id!r} of env {slot} was discarded; record again "
                    "from the next episode's first step"
                )
            if current is None or not same:
                raise ValueError(
                    f"{where}['step']={step} but no episode {header.episode_id!r} of scene "
                    f"{header.scene_id!r} is being recorded for env {slot}; recording must "
                    "start at step 0"
                )
            raise ValueError(
                f"{where}['step']={step} does not continue episode {current.episode_id!r}, "
                f"which has {current.num_steps} recorded steps (expected step "
                f"{current.num_steps})"
            )
        spec = (plan.header or current).obs_spec  # type: ignore[union-attr]
        for key, value in obs_dict.items():
            if spec.get(key) != (tuple(value.shape), value.dtype.str):
                raise ValueError(
                    f"obs[{key!r}] is {value.dtype}{value.shape}; this episode records "
                    f"(shape, dtype) {spec}"
                )
        if sorted(spec) != sorted(obs_dict):
            raise ValueError(
                f"obs keys {sorted(obs_dict)} differ from the episode's {sorted(spec)}"
            )
        if plan.header is not None:
            pending[slot] = plan.header
        plan.nbytes = _row_nbytes(plan, header)
        return plan

    def _check_continuity(
        self, episode: _OpenEpisode, obs: dict[str, np.ndarray], slot: int
    ) -> None:
        if episode.steps:
            previous = episode.steps[-1]["next_obs"]
            for key, value in obs.items():
                if not np.array_equal(value, previous[key]):
                    raise ValueError(
                        f"obs[{key!r}] of env {slot} step {episode.num_steps} is not the "
                        "next_obs of the previous recorded step; record every step in order"
                    )
        elif episode.first_obs_digest is not None and _digest(obs) != episode.first_obs_digest:
            raise ValueError(
                f"obs of env {slot} step 0 is not the observation given to begin(); pass the "
                "reset observation"
            )

    # ------------------------------------------------------------------------------------
    # commit (copies, state changes, publication)
    # ------------------------------------------------------------------------------------
    def _commit(self, plans: list[_RowPlan]) -> None:
        incoming = sum(p.nbytes for p in plans if p.kind == "record")
        if self._buffered_bytes + incoming > self._max_buffer_bytes:
            raise BufferError(
                f"recording this call needs {incoming} bytes but {self._buffered_bytes} of "
                f"max_buffer_bytes={self._max_buffer_bytes} are already held by unfinished "
                "episodes; nothing of this call was recorded (lower the image size, the number "
                "of envs or the episode length, discard() an episode, or raise the budget)"
            )
        # Copy everything first: an allocation failure leaves the recorder unchanged.
        copied = [_copy_row(p) if p.kind == "record" else None for p in plans]

        to_write: list[tuple[_OpenEpisode, str]] = []
        for plan, row in zip(plans, copied, strict=True):
            slot = plan.slot
            if plan.kind == "reset":
                self._autoreset[slot] = False
                continue
            done = plan.terminated or plan.truncated
            self._autoreset[slot] = done
            if plan.kind == "ignored":
                if done:
                    self._discarded.pop(slot, None)
                continue
            assert row is not None
            if plan.header is not None:
                old = self._open.pop(slot, None)
                self._discarded.pop(slot, None)
                if old is not None:
                    self._buffered_bytes -= old.nbytes
                    if plan.abandon:
                        to_write.append((old, "abandoned"))
                self._open[slot] = plan.header
            episode = self._open[slot]
            episode.steps.append(row)
            episode.nbytes += plan.nbytes
            self._buffered_bytes += plan.nbytes
            if done:
                del self._open[slot]
                self._buffered_bytes -= episode.nbytes
                to_write.append((episode, "terminated" if plan.terminated else "truncated"))
        for episode, ended_by in to_write:
            self._write_guarded(episode, ended_by)

    def _write_guarded(self, episode: _OpenEpisode, ended_by: str) -> None:
        if not episode.steps:
            return
        try:
            path = self._write(episode, ended_by)
        except BaseException as exc:
            self._failure = exc
            raise
        (self._published if ended_by in ("terminated", "truncated") else self._partials).append(
            path
        )

    def _write(self, episode: _OpenEpisode, ended_by: str) -> Path:
        complete = ended_by in ("terminated", "truncated")
        steps = episode.steps
        arrays: dict[str, np.ndarray] = {}
        for key in episode.obs_spec:
            arrays[f"obs_{key}"] = np.stack([s["obs"][key] for s in steps])
            arrays[f"next_obs_{key}"] = np.stack([s["next_obs"][key] for s in steps])
        for f in self._layout:
            arrays[f"action_{f.key}"] = np.stack([s["action"][f.key] for s in steps]).astype(
                f.dtype, copy=False
            )
        arrays["action_text"] = np.array([s["action_text"] for s in steps], dtype=np.str_)
        arrays["policy_text"] = np.array([s["policy_text"] or "" for s in steps], dtype=np.str_)
        arrays["has_policy_text"] = np.array([s["policy_text"] is not None for s in steps])
        arrays["step"] = np.array([s["step"] for s in steps], dtype=np.int64)
        arrays["terminated"] = np.array([s["terminated"] for s in steps], dtype=bool)
        arrays["truncated"] = np.array([s["truncated"] for s in steps], dtype=bool)
        arrays["episode_id"] = np.array([episode.episode_id] * len(steps), dtype=np.str_)
        arrays["scene_id"] = np.array([episode.scene_id] * len(steps), dtype=np.str_)
        metadata = {
            "schema": SCHEMA,
            "episode_id": episode.episode_id,
            "scene_id": episode.scene_id,
            "instruction": episode.instruction,
            "target_category": episode.target_category,
            "interact": episode.interact,
            "num_steps": len(steps),
            "complete": complete,
            "ended_by": ended_by,
            "image_key": self._image_key,
            "observation_keys": sorted(episode.obs_spec),
            "observation_spec": {
                k: {"shape": list(shape), "dtype": dtype}
                for k, (shape, dtype) in sorted(episode.obs_spec.items())
            },
            "action_layout": [f.to_json() for f in self._layout],
            "env_id": self._env_id,
            "session_id": self._session_id,
            "written_unix": time.time(),
            "humanclaw_gym_version": _package_version(),
        }
        name = "{}{}_{}_{}{}".format(
            EPISODE_PREFIX,
            safe_name_part(episode.scene_id),
            safe_name_part(episode.episode_id),
            uuid.uuid4().hex,
            ".npz" if complete else PARTIAL_SUFFIX,
        )
        path = self._directory / name
        write_episode_file(path, arrays, metadata, compress=self._compress)
        return path

    def _write_run_file(self) -> None:
        path = self._directory / RUN_FILE
        layout = [f.to_json() for f in self._layout]
        session = {
            "session_id": self._session_id,
            "started_unix": time.time(),
            "max_buffer_bytes": self._max_buffer_bytes,
            "env_id": self._env_id,
            "compress": self._compress,
            "humanclaw_gym_version": _package_version(),
        }
        data: dict[str, Any]
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ValueError(f"{path} exists but is not readable JSON: {exc}") from exc
            for key, want in (
                ("schema", SCHEMA),
                ("image_key", self._image_key),
                ("action_layout", layout),
            ):
                if data.get(key) != want:
                    raise ValueError(
                        f"{path} belongs to a recording with {key}={data.get(key)!r}; this "
                        f"recorder writes {key}={want!r}: use another directory"
                    )
            data.setdefault("sessions", []).append(session)
        else:
            data = {
                "schema": SCHEMA,
                "image_key": self._image_key,
                "action_layout": layout,
                "sessions": [session],
            }
        # The newest session's budget and env id, at the top for a quick look.
        data["max_buffer_bytes"] = self._max_buffer_bytes
        data["env_id"] = self._env_id
        atomic_write_json(path, data)


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------


def _package_version() -> str:
    try:
        from humanclaw_gym import __version__

        return str(__version__)
    except Exception:  # pragma: no cover - partial installs
        return "unknown"


def _digest(obs: Mapping[str, np.ndarray]) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for key in sorted(obs):
        value = np.ascontiguousarray(obs[key])
        digest.update(f"{key}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype == bool:
        return bool(value)
    raise TypeError(f"{name}={value!r} must be a bool")


def _flag_vector(value: Any, name: str) -> list[bool]:
    array = np.asarray(value)
    if array.ndim != 1 or array.dtype != bool:
        raise TypeError(f"{name} must be a 1-D bool array (one flag per sub-env), got {value!r}")
    return [bool(v) for v in array]


def _coerce_action(action: Any, text: str | None) -> tuple[Any, str | None]:
    from humanclaw_gym.policy import Decision
    from humanclaw_gym.skills import SkillCall

    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be a str or None, got {type(text).__name__}")
    if isinstance(action, Decision):
        return action.action, text if text is not None else action.visible_state
    return SkillCall.coerce(action), text


def _split_actions(actions: Any, n: int) -> list[Any]:
    """Per-row actions from a batched action dict or a sequence of N actions."""
    if isinstance(actions, Mapping) and not isinstance(actions.get("skill"), str):
        rows: list[dict[str, Any]] = [{} for _ in range(n)]
        for key, value in actions.items():
            array = np.asarray(value)
            if array.ndim == 0 or array.shape[0] != n:
                raise ValueError(
                    f"actions[{key!r}] has shape {array.shape}; expected {n} rows first"
                )
            for i in range(n):
                rows[i][key] = array[i]
        return rows
    if isinstance(actions, (str, bytes)) or not isinstance(actions, Sequence):
        raise TypeError(
            "actions must be the batched action-space dict passed to envs.step or a sequence "
            f"of one action per sub-env, got {type(actions).__name__}"
        )
    if len(actions) != n:
        raise ValueError(f"actions has {len(actions)} entries, expected one per sub-env ({n})")
    return list(actions)


def _row_info(infos: Mapping[str, Any], i: int, n: int) -> dict[str, Any]:
    """Row ``i`` of a Gymnasium vector info dict (entries masked out by ``_key`` are absent)."""
    if not isinstance(infos, Mapping):
        raise TypeError(f"infos must be the vector env's info dict, got {type(infos).__name__}")
    row: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not bool(np.asarray(mask)[i]):
            continue
        array = np.asarray(value) if not isinstance(value, np.ndarray) else value
        if array.ndim == 0 or array.shape[0] != n:
            continue  # not a per-row entry
        item = array[i]
        row[key] = item.item() if isinstance(item, np.generic) else item
    return row


def _text_bytes(text: str | None) -> int:
    return 0 if text is None else len(text) * _UNICODE_BYTES_PER_CHAR


def _row_nbytes(plan: _RowPlan, header: _OpenEpisode) -> int:
    assert plan.obs is not None and plan.next_obs is not None and plan.action is not None
    total = sum(v.nbytes for v in plan.obs.values()) + sum(v.nbytes for v in plan.next_obs.values())
    total += sum(v.nbytes for v in plan.action.values())
    total += _text_bytes(plan.action_text) + _text_bytes(plan.policy_text)
    total += _text_bytes(header.episode_id) + _text_bytes(header.scene_id)
    return total + _FLAG_BYTES_PER_STEP


def _copy_row(plan: _RowPlan) -> dict[str, Any]:
    assert plan.obs is not None and plan.next_obs is not None and plan.action is not None
    return {
        "obs": {k: np.array(v, copy=True) for k, v in plan.obs.items()},
        "next_obs": {k: np.array(v, copy=True) for k, v in plan.next_obs.items()},
        "action": {k: np.array(v, copy=True) for k, v in plan.action.items()},
        "action_text": plan.action_text,
        "policy_text": plan.policy_text,
        "step": plan.step,
        "terminated": plan.terminated,
        "truncated": plan.truncated,
    }
