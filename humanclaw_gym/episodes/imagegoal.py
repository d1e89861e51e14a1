"""Image-goal episodes: records, shards and splits of the ``image_goal`` task.

An image-goal episode starts the body standing at a start pose and shows it, besides its
ego image, the ego image a person standing at the *goal pose* would see (rendered at
reset with the same camera). The episode succeeds when the body stops with its pelvis
within :attr:`ImageGoalEpisode.success_distance_m` (1 m) of the goal position, measured on
the floor plane (x/z).

Conventions are those of :mod:`humanclaw_gym.episodes.schema`: positions are ``[x, y, z]``
in metres, world Y up, ``y`` the floor height under the pelvis; rotations are quaternions
``[x, y, z, w]`` about +Y that agree with the yaw (yaw 0 faces +Z, ``psi`` faces
``(sin psi, 0, cos psi)``). ``info`` is an :class:`~humanclaw_gym.episodes.schema.
EpisodeInfo`: ``geodesic_distance`` is the shortest collision-free route from the start to
the goal position on the scene's navigation grid (the SPL denominator),
``euclidean_distance`` the straight x/z distance between them.

On-disk layout (package data under ``humanclaw_gym/assets/splits/<split>/``)::

    index.json             {"schema": "humanclaw_imagegoal_split_index_v1", counts,
                            generator settings, one entry per shard with its SHA-256}
    <scene_id>.json.gz     {"schema": "humanclaw_imagegoal_episodes_v1", "scene_id",
                            "episodes": [...]}

Shards are written like the find-navigate-interact ones (canonical JSON, deterministic
gzip), so a regeneration is byte-identical. The shipped split ``imagegoal_val100`` is
made by ``scripts/generate_imagegoal_split.py``
(:mod:`humanclaw_gym.episodes.imagegoal_generate`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from humanclaw_gym.episodes.io import (
    assets_dir,
    read_json_gz,
    read_split_index,
    refuse_duplicate_ids,
    shard_bytes,
)
from humanclaw_gym.episodes.schema import (
    DEFAULT_MAX_STEPS,
    EpisodeFormatError,
    EpisodeInfo,
    check_id,
    check_max_steps,
    check_pose,
    pose_dict,
    shown_id,
)

__all__ = [
    "IMAGEGOAL_EPISODE_SCHEMA",
    "IMAGEGOAL_INSTRUCTION",
    "IMAGEGOAL_SPLITS",
    "IMAGEGOAL_SPLIT_INDEX_SCHEMA",
    "SUCCESS_DISTANCE_M",
    "ImageGoalEpisode",
    "imagegoal_shard_bytes",
    "load_imagegoal_split",
    "read_imagegoal_shard",
]

IMAGEGOAL_EPISODE_SCHEMA = "humanclaw_imagegoal_episodes_v1"
IMAGEGOAL_SPLIT_INDEX_SCHEMA = "humanclaw_imagegoal_split_index_v1"
#: The episode succeeds when the body stops with its pelvis this close to the goal (x/z).
SUCCESS_DISTANCE_M = 1.0
#: The instruction of every shipped image-goal episode.
IMAGEGOAL_INSTRUCTION = (
    "Go to the place where the goal picture was taken and stop there. The goal picture is "
    "what you would see standing at that place."
)
#: The shipped image-goal splits (directories under ``assets/splits``).
IMAGEGOAL_SPLITS: tuple[str, ...] = ("imagegoal_val100",)


@dataclass(frozen=True)
class ImageGoalEpisode:
    """One image-goal navigation episode.

    Attributes:
        episode_id: unique id within its split, e.g. ``"ig_val_003_000"``.
        scene_id: the scene (``load_scene(scene_id)``).
        start_position: ``[x, y, z]``: pelvis x/z and the floor height under it, metres.
        start_rotation / start_yaw_rad: the start heading (quaternion about +Y and yaw).
        goal_position: ``[x, y, z]``: the goal's pelvis x/z and the floor height there.
        goal_rotation / goal_yaw_rad: the heading of the goal view.
        info: route statistics from the start to the goal position (``geodesic_distance``
            is the SPL denominator), difficulty.
        success_distance_m: success radius around the goal position (x/z), metres.
        max_steps: decision-step limit.
        instruction: the task text (``info["instruction"]``).
    """

    episode_id: str
    scene_id: str
    start_position: tuple[float, float, float]
    start_rotation: tuple[float, float, float, float]
    start_yaw_rad: float
    goal_position: tuple[float, float, float]
    goal_rotation: tuple[float, float, float, float]
    goal_yaw_rad: float
    info: EpisodeInfo
    success_distance_m: float = SUCCESS_DISTANCE_M
    max_steps: int = DEFAULT_MAX_STEPS
    instruction: str = IMAGEGOAL_INSTRUCTION

    def __post_init__(self) -> None:
        for name in ("episode_id", "scene_id"):
            check_id(getattr(self, name), name)
        put = object.__setattr__
        for prefix in ("start", "goal"):
            fields = (f"{prefix}_position", f"{prefix}_rotation", f"{prefix}_yaw_rad")
            pose = check_pose(*(getattr(self, f) for f in fields), prefix)
            for field, value in zip(fields, pose, strict=True):
                put(self, field, value)
        if not isinstance(self.info, EpisodeInfo):
            raise EpisodeFormatError("info must be an EpisodeInfo")
        radius = self.success_distance_m
        if (
            isinstance(radius, bool)
            or not isinstance(radius, (int, float))
            or not math.isfinite(radius)
            or radius <= 0.0
        ):
            raise EpisodeFormatError(
                f"success_distance_m must be a finite number of metres > 0, got {radius!r}"
            )
        put(self, "success_distance_m", float(radius))
        check_max_steps(self.max_steps)
        if not isinstance(self.instruction, str) or not self.instruction.strip():
            raise EpisodeFormatError(
                f"instruction must be a non-empty string, got {self.instruction!r}"
            )

    # -- conveniences --------------------------------------------------------------------
    @property
    def start_xz(self) -> tuple[float, float]:
        return (self.start_position[0], self.start_position[2])

    @property
    def goal_xz(self) -> tuple[float, float]:
        return (self.goal_position[0], self.goal_position[2])

    @property
    def difficulty(self) -> str | None:
        return self.info.difficulty

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "scene_id": self.scene_id,
            **pose_dict("start", self.start_position, self.start_rotation, self.start_yaw_rad),
            **pose_dict("goal", self.goal_position, self.goal_rotation, self.goal_yaw_rad),
            "info": self.info.to_dict(),
            "success_distance_m": self.success_distance_m,
            "max_steps": self.max_steps,
            "instruction": self.instruction,
        }

    _FIELDS = (
        "episode_id",
        "scene_id",
        "start_position",
        "start_rotation",
        "start_yaw_rad",
        "goal_position",
        "goal_rotation",
        "goal_yaw_rad",
        "success_distance_m",
        "max_steps",
        "instruction",
    )

    @classmethod
    def from_dict(cls, d: Any, where: str = "episode") -> ImageGoalEpisode:
        """Parse one record; errors name ``where``, the episode and the field."""
        if not isinstance(d, Mapping):
            raise EpisodeFormatError(f"{where} must be a JSON object, got {type(d).__name__}")
        here = f"{where} {shown_id(d.get('episode_id', '?'))}"
        missing = [k for k in (*cls._FIELDS, "info") if k not in d]
        if missing:
            raise EpisodeFormatError(f"{here} is missing field {missing[0]!r}")
        unknown = sorted(set(d) - {*cls._FIELDS, "info"})
        if unknown:
            raise EpisodeFormatError(
                f"{here} has unknown field {unknown[0]!r}; allowed: "
                f"{', '.join((*cls._FIELDS, 'info'))}"
            )
        try:
            return cls(
                info=EpisodeInfo.from_dict(d["info"], "info"),
                **{k: d[k] for k in cls._FIELDS},
            )
        except EpisodeFormatError as exc:
            raise EpisodeFormatError(f"{here}: {exc}") from None


# ---------------------------------------------------------------------------------------
# shards and splits
# ---------------------------------------------------------------------------------------
def imagegoal_shard_bytes(scene_id: str, episodes: Sequence[ImageGoalEpisode]) -> bytes:
    """The gzip bytes of one image-goal shard (canonical JSON, deterministic gzip)."""
    return shard_bytes(scene_id, episodes, schema=IMAGEGOAL_EPISODE_SCHEMA)


def _episodes_of(doc: Any, where: str) -> list[ImageGoalEpisode]:
    if not isinstance(doc, dict):
        raise EpisodeFormatError(
            f"{where}: a shard must be a JSON object, got {type(doc).__name__}"
        )
    if doc.get("schema") != IMAGEGOAL_EPISODE_SCHEMA:
        raise EpisodeFormatError(
            f"{where}: field 'schema' must be {IMAGEGOAL_EPISODE_SCHEMA!r}, got "
            f"{doc.get('schema')!r}"
        )
    raw = doc.get("episodes")
    if not isinstance(raw, list):
        raise EpisodeFormatError(f"{where}: field 'episodes' must be a list")
    out = [ImageGoalEpisode.from_dict(e, f"{where}: episodes[{i}]") for i, e in enumerate(raw)]
    scene_id = doc.get("scene_id")
    for ep in out:
        if ep.scene_id != scene_id:
            raise EpisodeFormatError(
                f"{where}: episode {ep.episode_id!r} has scene_id {ep.scene_id!r} but the "
                f"shard's scene_id is {scene_id!r}"
            )
    return out


def read_imagegoal_shard(path: str | os.PathLike[str]) -> list[ImageGoalEpisode]:
    """The episodes of one image-goal shard file."""
    return _episodes_of(read_json_gz(path), str(path))


def _split_dir(split: str | os.PathLike[str]) -> Path:
    if isinstance(split, str) and not any(c in split for c in "/\\"):
        shipped = assets_dir() / "splits" / split
        if (shipped / "index.json").is_file():
            return shipped.resolve()
        if not Path(split).exists():
            raise EpisodeFormatError(
                f"unknown image-goal split {shown_id(split)}; allowed: a shipped split "
                f"({', '.join(IMAGEGOAL_SPLITS)}) or a split directory holding an index.json "
                f"of schema {IMAGEGOAL_SPLIT_INDEX_SCHEMA!r}"
            )
    path = Path(split).expanduser().resolve()
    if not (path / "index.json").is_file():
        raise EpisodeFormatError(
            f"{path}: an image-goal split is a directory holding index.json "
            f"({IMAGEGOAL_SPLIT_INDEX_SCHEMA!r}) and its shards"
        )
    return path


def _stamp(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Names, sizes and modification times of a split folder's files (the cache key: a
    file changed in place is read again)."""
    out = []
    for path in sorted(directory.iterdir()):
        st = path.stat()
        out.append((path.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


@lru_cache(maxsize=8)
def _load_dir(
    directory: Path, stamp: tuple[tuple[str, int, int], ...]
) -> tuple[ImageGoalEpisode, ...]:
    del stamp  # the cache key only
    index, shards = read_split_index(directory, IMAGEGOAL_SPLIT_INDEX_SCHEMA)
    episodes: list[ImageGoalEpisode] = []
    for shard in shards:
        episodes += read_imagegoal_shard(shard)
    refuse_duplicate_ids(directory, episodes)
    count = index.get("num_episodes")
    if count is not None and count != len(episodes):
        raise EpisodeFormatError(
            f"{directory / 'index.json'}: num_episodes is {count!r} but the shards hold "
            f"{len(episodes)}"
        )
    return tuple(episodes)


def load_imagegoal_split(
    split: str | os.PathLike[str] = "imagegoal_val100",
) -> list[ImageGoalEpisode]:
    """The episodes of an image-goal split.

    Args:
        split: a shipped split name (``"imagegoal_val100"``) or a split directory (an
            ``index.json`` of schema ``humanclaw_imagegoal_split_index_v1`` whose shard
            hashes are verified, and the shards).

    Returns:
        A new list of the (immutable, shared) records, in index order.

    Raises:
        EpisodeFormatError: an unknown split or a malformed / changed file, naming it.
    """
    directory = _split_dir(split)
    return list(_load_dir(directory, _stamp(directory)))
