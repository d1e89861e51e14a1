"""The replay bundle of one rollout: two NPZ files and a hashed JSON manifest.

A bundle directory holds exactly three files (see ``docs/replay.md`` for every array):

* ``trajectory_before.npz``: the generated (pre-physics) motion, the per-step action
  boundaries, the 5-frame seed history and the exact initial humanoid + object state;
* ``trajectory_after.npz``: the realized (post-physics) humanoid pose and every dynamic
  object's pose at each 30 Hz physics frame;
* ``replay_manifest.json``: schema ``"humanclaw_replay_v1"``, the episode record, scene id
  and content hash, the physics contract, backend names, the SHA-256 of both NPZ files,
  frame / step counts and how the episode ended.

Writing is atomic per file (temp file in the same directory + ``os.replace``) and the
manifest is written last, after any old manifest was removed first: a directory whose
manifest exists always names the NPZ files it was written with. Loading verifies the schema
and both hashes before any array is trusted.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym import fileio

__all__ = [
    "AFTER_FILE",
    "AFTER_KEYS",
    "BEFORE_FILE",
    "BEFORE_KEYS",
    "DEFAULT_PHYSICS_CONTRACT",
    "ENDED_BY",
    "MANIFEST_FILE",
    "REPLAY_SCHEMA",
    "ReplayBundle",
    "ReplayBundleError",
    "ReplayIntegrityError",
    "load_bundle",
    "sha256_file",
    "to_jsonable",
    "write_bundle",
    "write_json_atomic",
]

REPLAY_SCHEMA = "humanclaw_replay_v1"
BEFORE_FILE = "trajectory_before.npz"
AFTER_FILE = "trajectory_after.npz"
MANIFEST_FILE = "replay_manifest.json"
#: How an episode can end (``EndEvent.reason`` of the env).
ENDED_BY: tuple[str, ...] = ("stop", "truncated", "error", "abandoned")

#: Arrays of ``trajectory_before.npz`` (name -> description; shapes in docs/replay.md).
BEFORE_KEYS: tuple[str, ...] = (
    "generated",
    "step_start_frame",
    "step_index",
    "skill_id",
    "skill_text",
    "seed_history",
    "fps",
    "frames_per_step",
    "initial_realized",
    "initial_object_ids",
    "initial_object_poses",
)
#: Arrays ``trajectory_before.npz`` may hold: ``reset_frame`` ``(75,)``, the frame the physics
#: was reset to, written only when it is not ``seed_history[-1]``.
OPTIONAL_BEFORE_KEYS: tuple[str, ...] = ("reset_frame",)
#: Arrays of ``trajectory_after.npz``.
AFTER_KEYS: tuple[str, ...] = ("realized", "object_ids", "object_poses", "frame_step")

#: The half-physics frame contract as documented by the benchmark; recorded in the
#: manifest when the physics backend does not describe itself (no ``contract()``).
DEFAULT_PHYSICS_CONTRACT: dict[str, Any] = {
    "backend": "pybullet",
    "generated_fps": 30,
    "substeps_per_frame": 4,
    "substep_s": 1.0 / 120.0,
    "root_xz_velocity_write_substeps": [0, 2],
    "root_angular_velocity_write": "once, before substep 0",
    "root_vertical_velocity": "left to gravity and contacts",
    "drive_cap_deg_per_frame": 30.0,
    "drive_cap_shortest_arc": True,
    "pjsc_target": "uses the uncapped velocity",
    "pjsc_gains": {
        "default": 1.0,
        "left_shoulder": 0.03,
        "right_shoulder": 0.03,
        "left_wrist": 0.1,
        "right_wrist": 0.1,
        "left_ankle": 0.1,
        "right_ankle": 0.1,
    },
    "human_link_friction": 0.4,
    "scene_friction": 1.0,
    "restitution": 0.0,
    "collision_margin_m": 0.01,
    "gravity_m_s2": 9.8,
    "dynamic_object_gravity": "mass * gravity applied before every substep",
}


class ReplayBundleError(ValueError):
    """A replay bundle is missing, malformed or of an unknown schema."""


class ReplayIntegrityError(ReplayBundleError):
    """An NPZ file of a bundle does not have the SHA-256 its manifest recorded.

    Attributes:
        path: the offending file.
        expected: SHA-256 recorded in the manifest.
        actual: SHA-256 of the file on disk.
    """

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        self.path = Path(path)
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"replay file {self.path} failed its integrity check: the manifest records "
            f"sha256 {expected} but the file has sha256 {actual} (modified or truncated)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.expected, self.actual))


# ----------------------------------------------------------------------------------------
# small IO helpers
# ----------------------------------------------------------------------------------------
def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, paths, dataclass-like records to JSON values.

    Non-finite floats become ``None`` (strict JSON has no NaN/Infinity).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_jsonable(to_dict())
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    return str(value)


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically (temp file + ``os.replace``)."""
    return fileio.write_json_atomic(path, to_jsonable(data), ensure_ascii=False, allow_nan=False)


def _write_npz_atomic(path: Path, arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Write a compressed NPZ atomically; returns ``{"sha256", "bytes"}`` of the written file."""
    with fileio.atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **{k: np.asarray(v) for k, v in arrays.items()})
        info = {"sha256": sha256_file(tmp), "bytes": tmp.stat().st_size}
    return info


# ----------------------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------------------
def write_bundle(
    directory: str | os.PathLike[str],
    before: Mapping[str, np.ndarray],
    after: Mapping[str, np.ndarray],
    manifest: Mapping[str, Any],
) -> Path:
    """Write a replay bundle into ``directory`` (created if needed).

    Order: remove an old manifest, write ``trajectory_before.npz``, then
    ``trajectory_after.npz``, then the manifest with both files' SHA-256 (each atomically).

    Args:
        directory: the bundle directory.
        before: the arrays of :data:`BEFORE_KEYS` (validated here).
        after: the arrays of :data:`AFTER_KEYS` (validated here).
        manifest: manifest fields; ``schema`` and ``files`` are filled in here.

    Returns:
        The manifest path.
    """
    directory = Path(directory)
    _check_arrays(before, after, where=str(directory))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST_FILE).unlink(missing_ok=True)
    files = {
        BEFORE_FILE: _write_npz_atomic(directory / BEFORE_FILE, before),
        AFTER_FILE: _write_npz_atomic(directory / AFTER_FILE, after),
    }
    data = {"schema": REPLAY_SCHEMA, **{k: v for k, v in manifest.items() if k != "schema"}}
    data["files"] = files
    return write_json_atomic(directory / MANIFEST_FILE, data)


# ----------------------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayBundle:
    """A loaded, hash-verified replay bundle (all arrays float64 / int64 unless noted).

    Attributes:
        directory: where the bundle was loaded from.
        manifest: the parsed ``replay_manifest.json``.
        generated: ``(G, 75)`` generated 75-D frames of every motion step, concatenated.
        step_start_frame: ``(N,)`` row of ``generated`` where motion step ``k`` starts.
        step_index: ``(N,)`` decision step index (0-based) of motion step ``k``.
        skill_id: ``(N,)`` skill id (0..7) of motion step ``k``.
        skill_text: ``(N,)`` unicode text form of the SkillCall, e.g. ``"Turn<left><30>"``.
        seed_history: ``(5, 75)`` standing seed history.
        fps: generated / physics frame rate (30.0).
        frames_per_step: frames per motion step (15).
        initial_realized: ``(75,)`` realized humanoid pose right after reset.
        initial_object_ids: ``(M,)`` dynamic object ids at reset.
        initial_object_poses: ``(M, 7)`` dynamic object poses at reset.
        realized: ``(F, 75)`` realized humanoid pose after each physics frame.
        object_ids: ``(M,)`` dynamic object ids, the row order of ``object_poses``.
        object_poses: ``(F, M, 7)`` dynamic object poses after each physics frame.
        frame_step: ``(F,)`` decision step index each realized frame belongs to.
        reset_frame: ``(75,)`` the frame the physics was reset to: ``seed_history[-1]``
            unless the bundle records another (a body asset lifted onto the floor, the
            reference release's spawn).
    """

    directory: Path
    manifest: dict[str, Any]
    generated: np.ndarray
    step_start_frame: np.ndarray
    step_index: np.ndarray
    skill_id: np.ndarray
    skill_text: np.ndarray
    seed_history: np.ndarray
    fps: float
    frames_per_step: int
    initial_realized: np.ndarray
    initial_object_ids: np.ndarray
    initial_object_poses: np.ndarray
    realized: np.ndarray
    object_ids: np.ndarray
    object_poses: np.ndarray
    frame_step: np.ndarray
    reset_frame: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.reset_frame is None:
            object.__setattr__(self, "reset_frame", self.seed_history[-1])

    @property
    def scene_id(self) -> str:
        return str(self.manifest["scene_id"])

    @property
    def episode_id(self) -> str:
        return str(self.manifest["episode_id"])

    @property
    def scene_content_hash(self) -> str:
        return str(self.manifest["scene_content_hash"])

    @property
    def task(self) -> dict[str, Any]:
        """The task the episode was played on, ``{"id", "version"}`` (a manifest written
        before tasks were recorded: the benchmark's ``find_nav_interact``, version 1)."""
        return dict(self.manifest.get("task") or _DEFAULT_TASK)

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete", False))

    @property
    def ended_by(self) -> str:
        return str(self.manifest.get("ended_by"))

    @property
    def num_frames(self) -> int:
        """Number of realized physics frames ``F`` (the reset state is not counted)."""
        return int(self.realized.shape[0])


def _load_npz(
    path: Path, keys: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in keys if k not in data.files]
            if missing:
                raise ReplayBundleError(f"replay file {path} lacks arrays {missing}")
            return {k: data[k] for k in (*keys, *optional) if k in data.files}
    except ReplayBundleError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ReplayBundleError(f"replay file {path} is not a readable NPZ archive: {exc}") from exc


def _check_shape(name: str, array: np.ndarray, shape: tuple[int | None, ...], where: str) -> None:
    ok = array.ndim == len(shape) and all(
        s is None or s == a for s, a in zip(shape, array.shape, strict=False)
    )
    if not ok:
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ReplayBundleError(f"{where}: array {name!r} has shape {array.shape}, expected {want}")


def _check_arrays(before: Mapping[str, Any], after: Mapping[str, Any], where: str) -> None:
    missing = [k for k in BEFORE_KEYS if k not in before] + [
        k for k in AFTER_KEYS if k not in after
    ]
    if missing:
        raise ReplayBundleError(f"{where}: replay arrays {missing} are missing")
    b = {k: np.asarray(before[k]) for k in BEFORE_KEYS}
    a = {k: np.asarray(after[k]) for k in AFTER_KEYS}
    _check_shape("generated", b["generated"], (None, 75), where)
    n = b["step_start_frame"].shape[0] if b["step_start_frame"].ndim == 1 else -1
    for key in ("step_start_frame", "step_index", "skill_id", "skill_text"):
        _check_shape(key, b[key], (n,), where)
    _check_shape("seed_history", b["seed_history"], (5, 75), where)
    _check_shape("fps", b["fps"], (), where)
    _check_shape("frames_per_step", b["frames_per_step"], (), where)
    _check_shape("initial_realized", b["initial_realized"], (75,), where)
    if "reset_frame" in before:
        _check_shape("reset_frame", np.asarray(before["reset_frame"]), (75,), where)
    m = b["initial_object_ids"].shape[0] if b["initial_object_ids"].ndim == 1 else -1
    _check_shape("initial_object_ids", b["initial_object_ids"], (m,), where)
    _check_shape("initial_object_poses", b["initial_object_poses"], (m, 7), where)
    f = a["realized"].shape[0] if a["realized"].ndim == 2 else -1
    _check_shape("realized", a["realized"], (f, 75), where)
    _check_shape("object_ids", a["object_ids"], (m,), where)
    _check_shape("object_poses", a["object_poses"], (f, m, 7), where)
    _check_shape("frame_step", a["frame_step"], (f,), where)
    if f > b["generated"].shape[0]:
        raise ReplayBundleError(
            f"{where}: {f} realized frames but only {b['generated'].shape[0]} generated frames"
        )
    if not np.array_equal(a["object_ids"], b["initial_object_ids"]):
        raise ReplayBundleError(f"{where}: object_ids of the two trajectories differ")
    starts = b["step_start_frame"]
    if n > 0 and (
        np.any(np.diff(starts) <= 0) or starts[0] < 0 or starts[-1] >= b["generated"].shape[0]
    ):
        raise ReplayBundleError(
            f"{where}: step_start_frame must increase strictly within 0..{b['generated'].shape[0] - 1},"
            f" got {starts.tolist()}"
        )


def _manifest_int(manifest: Mapping[str, Any], key: str, where: str) -> int:
    value = manifest.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReplayBundleError(f"{where}: field {key!r}={value!r} must be an integer >= 0")
    return value


#: The task of a manifest that records none (written before tasks were recorded).
_DEFAULT_TASK = {"id": "find_nav_interact", "version": 1}


def _check_manifest(
    manifest: Mapping[str, Any],
    before: Mapping[str, np.ndarray],
    after: Mapping[str, np.ndarray],
    where: str,
) -> None:
    """Check the manifest's counts, ending and identity against the arrays (see the
    manifest table of docs/replay.md); the arrays' shapes are already consistent."""
    for key in ("episode_id", "scene_id"):
        if not isinstance(manifest.get(key), str):
            raise ReplayBundleError(f"{where}: field {key!r} must be a string")
    episode = manifest.get("episode")
    if not isinstance(episode, Mapping):
        raise ReplayBundleError(f"{where}: field 'episode' must be the episode record (an object)")
    for key in ("episode_id", "scene_id"):
        if key in episode and str(episode[key]) != manifest[key]:
            raise ReplayBundleError(
                f"{where}: episode.{key}={episode[key]!r} differs from {key}={manifest[key]!r}"
            )
    if "episode_id" not in episode:
        raise ReplayBundleError(f"{where}: episode.episode_id is missing")
    task = manifest.get("task")
    if task is not None and not (
        isinstance(task, Mapping)
        and isinstance(task.get("id"), str)
        and task["id"]
        and isinstance(task.get("version"), int)
        and not isinstance(task.get("version"), bool)
        and task["version"] >= 1
    ):
        raise ReplayBundleError(
            f"{where}: field 'task'={task!r} is invalid: allowed {{'id': str, 'version': int >= 1}}"
        )
    n_generated = int(before["generated"].shape[0])
    n_realized = int(after["realized"].shape[0])
    n_motion = int(before["step_start_frame"].shape[0])
    expected = {
        "frames": n_realized,
        "generated_frames": n_generated,
        "video_frames": 1 + n_realized,
        "motion_steps": n_motion,
    }
    for key, actual in expected.items():
        value = _manifest_int(manifest, key, where)
        if value != actual:
            raise ReplayBundleError(
                f"{where}: field {key!r}={value} but the trajectories hold {actual}"
            )
    ended_by = manifest.get("ended_by")
    if ended_by not in ENDED_BY:
        raise ReplayBundleError(
            f"{where}: field 'ended_by'={ended_by!r} is invalid: allowed one of {ENDED_BY}"
        )
    complete = manifest.get("complete")
    if not isinstance(complete, bool):
        raise ReplayBundleError(f"{where}: field 'complete'={complete!r} must be true or false")
    should_be = ended_by in ("stop", "truncated") and n_realized == n_generated
    if complete != should_be:
        raise ReplayBundleError(
            f"{where}: field 'complete'={complete} contradicts the bundle: ended_by="
            f"{ended_by!r} with {n_realized} of {n_generated} generated frames realized "
            "(complete means Stop or the step limit with every generated frame realized)"
        )
    # Every decision but a final Stop makes one motion step; a native error may strike
    # after the failing decision's motion was generated and before the step was counted.
    steps = _manifest_int(manifest, "steps", where)
    allowed_steps = {
        "stop": (n_motion + 1,),
        "truncated": (n_motion,),
        "abandoned": (n_motion,),
        "error": (max(n_motion - 1, 0), n_motion),
    }[ended_by]
    if steps not in allowed_steps:
        raise ReplayBundleError(
            f"{where}: field 'steps'={steps} does not fit {n_motion} motion step(s) of an "
            f"episode ended by {ended_by!r}: allowed {' or '.join(map(str, allowed_steps))}"
        )
    step_index = before["step_index"]
    if n_motion and (
        step_index[0] < 0 or np.any(np.diff(step_index) <= 0) or step_index[-1] > steps
    ):
        raise ReplayBundleError(
            f"{where}: step_index must increase strictly within 0..{steps}, got "
            f"{step_index.tolist()[:20]}"
        )
    if n_realized:
        owner = np.searchsorted(before["step_start_frame"], np.arange(n_realized), side="right")
        if owner[0] < 1 or not np.array_equal(after["frame_step"], step_index[owner - 1]):
            raise ReplayBundleError(
                f"{where}: frame_step does not match the motion steps the frames belong to"
            )


def load_bundle(directory: str | os.PathLike[str], verify: bool = True) -> ReplayBundle:
    """Load and verify the replay bundle in ``directory``.

    Args:
        directory: a rollout directory holding the three bundle files.
        verify: check both NPZ files against the SHA-256 in the manifest (default; only
            turn off to inspect a bundle that is known to be damaged).

    Returns:
        The bundle.

    Raises:
        ReplayBundleError: a missing file, unknown schema, unreadable NPZ, an array of the
            wrong shape (the message names the file and the array), or a manifest whose
            counts (``frames``, ``generated_frames``, ``video_frames``, ``motion_steps``,
            ``steps``), ``ended_by``, ``complete`` or ``episode.episode_id`` contradict the
            arrays or each other (the message names the field).
        ReplayIntegrityError: an NPZ file's SHA-256 differs from the manifest's.
    """
    directory = Path(directory)
    manifest_path = directory / MANIFEST_FILE
    if not manifest_path.is_file():
        raise ReplayBundleError(
            f"{directory} has no {MANIFEST_FILE}: not a (finished) replay bundle"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # invalid JSON or UTF-8, too deep
        raise ReplayBundleError(f"{manifest_path} is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise ReplayBundleError(f"{manifest_path} must hold a JSON object")
    schema = manifest.get("schema")
    if schema != REPLAY_SCHEMA:
        raise ReplayBundleError(
            f"{manifest_path}: schema must be {REPLAY_SCHEMA!r}, got {schema!r}"
        )
    for key in ("scene_id", "episode_id", "scene_content_hash", "files"):
        if key not in manifest:
            raise ReplayBundleError(f"{manifest_path} lacks field {key!r}")
    files = manifest["files"]
    for name in (BEFORE_FILE, AFTER_FILE):
        path = directory / name
        if not path.is_file():
            raise ReplayBundleError(f"replay file {path} is missing")
        entry = files.get(name) if isinstance(files, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise ReplayBundleError(f"{manifest_path}: files[{name!r}].sha256 is missing")
        if verify:
            actual = sha256_file(path)
            if actual != entry["sha256"]:
                raise ReplayIntegrityError(path, entry["sha256"], actual)
    before = _load_npz(directory / BEFORE_FILE, BEFORE_KEYS, OPTIONAL_BEFORE_KEYS)
    after = _load_npz(directory / AFTER_FILE, AFTER_KEYS)
    _check_arrays(before, after, where=str(directory))
    _check_manifest(manifest, before, after, where=str(manifest_path))
    return ReplayBundle(
        directory=directory,
        manifest=manifest,
        generated=before["generated"].astype(np.float64, copy=False),
        step_start_frame=before["step_start_frame"].astype(np.int64, copy=False),
        step_index=before["step_index"].astype(np.int64, copy=False),
        skill_id=before["skill_id"].astype(np.int64, copy=False),
        skill_text=before["skill_text"].astype(str, copy=False),
        seed_history=before["seed_history"].astype(np.float64, copy=False),
        fps=float(before["fps"]),
        frames_per_step=int(before["frames_per_step"]),
        initial_realized=before["initial_realized"].astype(np.float64, copy=False),
        initial_object_ids=before["initial_object_ids"].astype(np.int64, copy=False),
        initial_object_poses=before["initial_object_poses"].astype(np.float64, copy=False),
        realized=after["realized"].astype(np.float64, copy=False),
        object_ids=after["object_ids"].astype(np.int64, copy=False),
        object_poses=after["object_poses"].astype(np.float64, copy=False),
        frame_step=after["frame_step"].astype(np.int64, copy=False),
        reset_frame=None
        if "reset_frame" not in before
        else before["reset_frame"].astype(np.float64, copy=False),
    )
