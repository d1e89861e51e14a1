"""Verified reading of recorded episodes, with observation selection and worker sharding.

:func:`read_episodes` yields one :class:`Episode` per published file after checking it
against its ``.done`` marker (SHA-256) and the ``humanclaw_demos_v1`` contract:

* **identity**: every step carries the file's one ``episode_id`` / ``scene_id``;
* **time**: ``step`` is ``0 .. T-1`` without gaps or repeats;
* **terminal boundary**: only the last step may be terminated/truncated, and the last
  step of a complete episode is one of them;
* **continuity**: ``next_obs[t] == obs[t + 1]`` for every observation key that is read;
* **actions**: every stored action decodes to a valid SkillCall whose text is the stored
  ``action_text``.

A failed check raises :class:`~humanclaw_gym.data.schema.DatasetError` naming the file,
the field and what is wrong. Plain numpy; no torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.data.schema import (
    EPISODE_PREFIX,
    SCHEMA,
    ActionField,
    DatasetError,
    decode_action,
    is_partial_name,
    marker_path,
    sha256_file,
)

__all__ = ["Episode", "EpisodeReadOptions", "list_episode_files", "load_episode", "read_episodes"]

_REQUIRED = (
    "step",
    "terminated",
    "truncated",
    "episode_id",
    "scene_id",
    "action_text",
    "policy_text",
    "has_policy_text",
)


@dataclass(frozen=True)
class EpisodeReadOptions:
    """Immutable read configuration.

    Attributes:
        observation_keys: which observation keys to load and check (``obs_<key>`` and
            ``next_obs_<key>``). ``None`` loads all; ``()`` loads none (identity, time,
            terminal flags, actions and texts are always read and checked). A key that a
            file lacks raises :class:`DatasetError`. Unselected arrays are neither
            decompressed nor checked, so accept a dataset with ``options=None`` first.
        shard_index / num_shards: keep only the episodes whose position in the sorted list
            of published files is ``shard_index`` modulo ``num_shards``. Decided from file
            names and markers before any array is opened; the shards of an unchanged
            dataset are disjoint and cover it. For ``W`` workers on each of ``R`` ranks use
            ``shard_index = rank * W + worker``, ``num_shards = R * W``.
        include_partial: also read ``*.partial.npz`` files (episodes that never reached a
            terminal step; the last-step-is-terminal check is skipped for them).
        verify_sha256: compare each file with its marker's SHA-256 before opening it.
    """

    observation_keys: tuple[str, ...] | None = None
    shard_index: int = 0
    num_shards: int = 1
    include_partial: bool = False
    verify_sha256: bool = True

    def __post_init__(self) -> None:
        keys = self.observation_keys
        if keys is not None:
            if isinstance(keys, str) or not isinstance(keys, Sequence):
                raise TypeError(
                    f"EpisodeReadOptions.observation_keys={keys!r} must be None or a sequence "
                    "of str, e.g. ('ego_rgb',)"
                )
            keys = tuple(keys)
            for key in keys:
                if not isinstance(key, str) or not key:
                    raise TypeError(
                        f"EpisodeReadOptions.observation_keys entry {key!r} must be a non-empty str"
                    )
            if len(set(keys)) != len(keys):
                raise ValueError(f"EpisodeReadOptions.observation_keys={keys!r} has duplicates")
            object.__setattr__(self, "observation_keys", keys)
        for name in ("shard_index", "num_shards"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"EpisodeReadOptions.{name}={value!r} must be an int")
        if self.num_shards < 1:
            raise ValueError(f"EpisodeReadOptions.num_shards={self.num_shards!r} must be >= 1")
        if not 0 <= self.shard_index < self.num_shards:
            raise ValueError(
                f"EpisodeReadOptions.shard_index={self.shard_index!r} is out of range: allowed "
                f"0 <= shard_index <= {self.num_shards - 1}"
            )
        for name in ("include_partial", "verify_sha256"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"EpisodeReadOptions.{name} must be a bool")


@dataclass(frozen=True)
class Episode:
    """One validated episode; all arrays are owned by the caller.

    Attributes:
        path: the NPZ file.
        metadata: the file's JSON metadata (schema, ids, instruction, ``complete``,
            ``ended_by``, layouts, env id, ...).
        observations / next_observations: ``{key: [T, ...]}`` for the selected keys.
        actions: ``{action key: [T] or [T, *shape]}``, the flattened action columns.
        action_text: SkillCall text per step.
        policy_text: the policy's ``visible_state`` per step (``None`` where it gave none).
        step: ``int64 [T]``, ``0 .. T-1``.
        terminated / truncated: ``bool [T]``.
        action_layout: how ``actions`` map back to the action space.
    """

    path: Path
    metadata: Mapping[str, Any]
    observations: Mapping[str, np.ndarray]
    next_observations: Mapping[str, np.ndarray]
    actions: Mapping[str, np.ndarray]
    action_text: tuple[str, ...]
    policy_text: tuple[str | None, ...]
    step: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    action_layout: tuple[ActionField, ...] = field(repr=False)

    def __len__(self) -> int:
        return int(self.step.shape[0])

    @property
    def episode_id(self) -> str:
        return str(self.metadata["episode_id"])

    @property
    def scene_id(self) -> str:
        return str(self.metadata["scene_id"])

    @property
    def instruction(self) -> str:
        return str(self.metadata["instruction"])

    @property
    def target_category(self) -> str:
        return str(self.metadata.get("target_category", ""))

    @property
    def interact(self) -> bool:
        return bool(self.metadata.get("interact", False))

    @property
    def complete(self) -> bool:
        return bool(self.metadata["complete"])

    def action(self, t: int) -> dict[str, Any]:
        """The action-space element of step ``t`` (for ``SkillCall.from_action``)."""
        if not 0 <= t < len(self):
            raise IndexError(f"step {t} is out of range: allowed 0 <= t <= {len(self) - 1}")
        return decode_action(self.actions, t, self.action_layout)

    def skill_calls(self) -> list[Any]:
        """The recorded SkillCalls, in step order."""
        from humanclaw_gym.skills import SkillCall

        return [SkillCall.from_action(self.action(t)) for t in range(len(self))]


def list_episode_files(
    path: str | os.PathLike[str], options: EpisodeReadOptions | None = None
) -> list[Path]:
    """The published episode files of one shard, in sorted order; no array is opened.

    Args:
        path: a dataset directory, or one episode ``.npz`` file.
        options: shard and partial-file selection (see :class:`EpisodeReadOptions`).

    Raises:
        FileNotFoundError: ``path`` does not exist, or a single file has no marker.
    """
    options = options or EpisodeReadOptions()
    root = Path(path)
    if root.is_file():
        if not marker_path(root).exists():
            raise FileNotFoundError(
                f"{root} has no completion marker {marker_path(root).name}: it was never "
                "published completely"
            )
        files = [root]
    elif root.is_dir():
        files = []
        for candidate in sorted(root.glob(f"{EPISODE_PREFIX}*.npz")):
            if is_partial_name(candidate.name) and not options.include_partial:
                continue
            if marker_path(candidate).exists():
                files.append(candidate)
    else:
        raise FileNotFoundError(f"no episode dataset at {root}")
    return files[options.shard_index :: options.num_shards]


def read_episodes(
    path: str | os.PathLike[str], options: EpisodeReadOptions | None = None
) -> Iterator[Episode]:
    """Yield the validated episodes of a dataset directory (or one file), in file order.

    Args:
        path: a directory written by :class:`~humanclaw_gym.data.EpisodeRecorder`, or one
            episode file.
        options: observation selection and sharding; ``None`` reads and checks everything.

    Raises:
        DatasetError: a file breaks the contract (raised when that file is reached).
        FileNotFoundError: ``path`` does not exist.
    """
    options = options or EpisodeReadOptions()
    for file in list_episode_files(path, options):
        yield load_episode(file, options)


def load_episode(
    path: str | os.PathLike[str], options: EpisodeReadOptions | None = None
) -> Episode:
    """Read and validate one episode file (see :func:`read_episodes`)."""
    options = options or EpisodeReadOptions()
    path = Path(path)
    marker = _read_marker(path)
    if options.verify_sha256:
        actual = sha256_file(path)
        if actual != marker.get("sha256"):
            raise DatasetError(
                path,
                "sha256",
                f"file content does not match its marker (marker {marker.get('sha256')}, "
                f"file {actual}); it was modified or damaged after publication",
            )
    try:
        archive = np.load(path, allow_pickle=False)
    except _DECODE_ERRORS as exc:
        raise DatasetError(path, "npz", f"cannot be opened as NPZ: {_describe(exc)}") from exc
    with archive:
        return _validate(path, archive, marker, options)


# A damaged or truncated archive can make zipfile / zlib / numpy raise almost anything
# while it is opened or an array is decompressed (EOFError, zlib.error, BadZipFile,
# NotImplementedError for a garbled zip version, struct.error, MemoryError for a garbled
# shape, ...): with hashing off nothing stops such a file before numpy reads it, so every
# failure of the decoder becomes a DatasetError naming the file. Only decoding is wrapped.
_DECODE_ERRORS = (Exception,)


def _describe(exc: BaseException) -> str:
    text = str(exc) or "no details"
    if isinstance(exc, EOFError):
        text = f"the file ends early ({text})"
    return f"{type(exc).__name__}: {text}"


def _read_marker(path: Path) -> dict[str, Any]:
    from humanclaw_gym.fileio import read_bytes_limited

    marker_file = marker_path(path)
    try:  # a regular file only: a FIFO would block the reader
        marker = json.loads(read_bytes_limited(marker_file, 1 << 20, "marker").decode("utf-8"))
    except FileNotFoundError as exc:
        raise DatasetError(path, "marker", f"{marker_file.name} is missing") from exc
    except (OSError, ValueError, RecursionError) as exc:
        raise DatasetError(path, "marker", f"{marker_file.name} is not valid JSON: {exc}") from exc
    if not isinstance(marker, dict) or marker.get("schema") != SCHEMA:
        raise DatasetError(
            path, "marker", f"{marker_file.name} is not a {SCHEMA} marker: {marker!r:.200}"
        )
    return marker


def _get(path: Path, archive: Any, name: str) -> np.ndarray:
    if name not in archive.files:
        raise DatasetError(path, name, "array is missing")
    try:
        return archive[name]
    except _DECODE_ERRORS as exc:
        raise DatasetError(path, name, f"array cannot be decoded: {_describe(exc)}") from exc


def _validate(
    path: Path, archive: Any, marker: Mapping[str, Any], options: EpisodeReadOptions
) -> Episode:
    raw_meta = _get(path, archive, "metadata")
    try:
        metadata = json.loads(str(raw_meta[()]))
    except (ValueError, IndexError) as exc:
        raise DatasetError(path, "metadata", f"is not JSON: {exc}") from exc
    if not isinstance(metadata, dict) or metadata.get("schema") != SCHEMA:
        schema = metadata.get("schema") if isinstance(metadata, dict) else None
        raise DatasetError(path, "metadata.schema", f"is {schema!r}, expected {SCHEMA!r}")
    for key in ("episode_id", "scene_id", "instruction", "complete", "action_layout"):
        if key not in metadata:
            raise DatasetError(path, f"metadata.{key}", "is missing")
    complete = metadata["complete"]
    if complete is not bool(marker.get("complete")) or complete is is_partial_name(path.name):
        raise DatasetError(
            path,
            "metadata.complete",
            f"is {complete!r} but the marker says {marker.get('complete')!r} and the file name "
            f"{'is' if is_partial_name(path.name) else 'is not'} partial",
        )
    for key in ("episode_id", "scene_id"):
        if marker.get(key) != metadata[key]:
            raise DatasetError(
                path, key, f"marker has {marker.get(key)!r}, metadata has {metadata[key]!r}"
            )
    try:
        layout = tuple(ActionField.from_json(f) for f in metadata["action_layout"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DatasetError(path, "metadata.action_layout", f"is malformed: {exc}") from exc

    # --- observation keys: the obs/next sets must agree; only selected ones are loaded --
    obs_keys = {n[len("obs_") :] for n in archive.files if n.startswith("obs_")}
    next_keys = {n[len("next_obs_") :] for n in archive.files if n.startswith("next_obs_")}
    if obs_keys != next_keys:
        raise DatasetError(
            path,
            "observations",
            f"obs keys {sorted(obs_keys)} differ from next_obs keys {sorted(next_keys)}",
        )
    selected = (
        sorted(obs_keys) if options.observation_keys is None else list(options.observation_keys)
    )
    for key in selected:
        if key not in obs_keys:
            raise DatasetError(
                path,
                f"obs_{key}",
                f"observation key {key!r} is not recorded; available {sorted(obs_keys)}",
            )

    # --- per-step fields ------------------------------------------------------------------
    step = _get(path, archive, "step")
    if step.ndim != 1 or step.dtype.kind not in "iu":
        raise DatasetError(
            path, "step", f"must be a 1-D integer array, got {step.dtype}{step.shape}"
        )
    length = int(step.shape[0])
    if length < 1:
        raise DatasetError(path, "step", "episode has no steps")
    fields: dict[str, np.ndarray] = {}
    for name in _REQUIRED[1:]:
        array = _get(path, archive, name)
        if array.shape[:1] != (length,):
            raise DatasetError(
                path, name, f"has shape {array.shape}, expected {length} steps first"
            )
        fields[name] = array
    for name in ("terminated", "truncated", "has_policy_text"):
        if fields[name].dtype != bool or fields[name].ndim != 1:
            raise DatasetError(
                path, name, f"must be bool [T], got {fields[name].dtype}{fields[name].shape}"
            )
    for name in ("episode_id", "scene_id", "action_text", "policy_text"):
        if fields[name].dtype.kind != "U" or fields[name].ndim != 1:
            raise DatasetError(
                path, name, f"must be str [T], got {fields[name].dtype}{fields[name].shape}"
            )

    # identity
    for name in ("episode_id", "scene_id"):
        wrong = np.flatnonzero(fields[name] != metadata[name])
        if wrong.size:
            t = int(wrong[0])
            raise DatasetError(
                path,
                name,
                f"step {t} belongs to {fields[name][t]!r}, but this file holds {metadata[name]!r}"
                " (one episode per file)",
            )
    # time
    expected = np.arange(length)
    wrong = np.flatnonzero(step != expected)
    if wrong.size:
        t = int(wrong[0])
        raise DatasetError(
            path,
            "step",
            f"step order is broken at position {t}: step[{t}]={int(step[t])}, expected {t} "
            "(steps must run 0..T-1 without gaps or repeats)",
        )
    # terminal boundary
    ended = fields["terminated"] | fields["truncated"]
    early = np.flatnonzero(ended[:-1])
    if early.size:
        raise DatasetError(
            path,
            "terminated",
            f"step {int(early[0])} is terminal but is not the last step ({length - 1})",
        )
    if complete and not ended[-1]:
        raise DatasetError(
            path,
            "terminated",
            f"complete episode's last step {length - 1} is neither terminated nor truncated",
        )
    if not complete and ended[-1]:
        raise DatasetError(
            path, "terminated", "a partial episode must not end with a terminal step"
        )

    # actions
    actions: dict[str, np.ndarray] = {}
    for f in layout:
        name = f"action_{f.key}"
        array = _get(path, archive, name)
        want_kind = "iu" if f.kind == "discrete" else "f"
        if array.shape != (length, *f.stored_shape) or array.dtype.kind not in want_kind:
            raise DatasetError(
                path,
                name,
                f"is {array.dtype}{array.shape}, expected {f.dtype}{(length, *f.stored_shape)}",
            )
        actions[f.key] = array
    from humanclaw_gym.skills import SkillCall, SkillCallError

    action_text = tuple(str(v) for v in fields["action_text"])
    for t in range(length):
        try:
            call = SkillCall.from_action(decode_action(actions, t, layout))
        except (SkillCallError, TypeError) as exc:
            raise DatasetError(path, "action", f"step {t} does not decode: {exc}") from exc
        if str(call) != action_text[t]:
            raise DatasetError(
                path,
                "action_text",
                f"step {t} text {action_text[t]!r} differs from the decoded action {str(call)!r}",
            )

    # observations + continuity
    observations: dict[str, np.ndarray] = {}
    next_observations: dict[str, np.ndarray] = {}
    for key in selected:
        obs = _get(path, archive, f"obs_{key}")
        nxt = _get(path, archive, f"next_obs_{key}")
        if obs.shape[:1] != (length,) or obs.shape != nxt.shape or obs.dtype != nxt.dtype:
            raise DatasetError(
                path,
                f"obs_{key}",
                f"obs is {obs.dtype}{obs.shape} and next_obs is {nxt.dtype}{nxt.shape}; both "
                f"must be [T={length}, ...] of one dtype",
            )
        if length > 1:
            same = (obs[1:] == nxt[:-1]).reshape(length - 1, -1).all(axis=1)
            broken = np.flatnonzero(~same)
            if broken.size:
                t = int(broken[0])
                raise DatasetError(
                    path,
                    f"obs_{key}",
                    f"continuity is broken: next_obs[{t}] differs from obs[{t + 1}]",
                )
        observations[key] = obs
        next_observations[key] = nxt

    has_text = fields["has_policy_text"]
    policy_text = tuple(
        str(text) if flag else None
        for text, flag in zip(fields["policy_text"], has_text, strict=True)
    )
    return Episode(
        path=path,
        metadata=metadata,
        observations=observations,
        next_observations=next_observations,
        actions=actions,
        action_text=action_text,
        policy_text=policy_text,
        step=step.astype(np.int64, copy=False),
        terminated=fields["terminated"],
        truncated=fields["truncated"],
        action_layout=layout,
    )
