"""Episode records: :class:`Episode`, :class:`Goal`, :class:`EpisodeInfo`.

Field names follow the Habitat ObjectNav episode layout (``episode_id``, ``scene_id``,
``start_position``, ``start_rotation``, ``object_category``, ``goals``, ``info``) so that
people who know that format can read a shard at a glance. Conventions are ours:

* ``start_position`` is ``[x, y, z]`` in metres, world Y up: the pelvis x/z and the floor
  height y under it (the body is spawned standing there).
* ``start_rotation`` is the quaternion ``[x, y, z, w]`` of a rotation by ``start_yaw_rad``
  about +Y, where yaw 0 faces +Z and yaw ``psi`` faces ``(sin psi, 0, cos psi)`` (the body
  convention of :mod:`humanclaw_gym.body.skeleton`). It is always ``[0, sin(psi/2), 0,
  cos(psi/2)]``; :meth:`Episode.from_dict` rejects a rotation that disagrees with the yaw.
* Instructions (version ``"v1"``): ``"Find the <category>."`` with underscores written as
  spaces (``"Find the potted plant."``); for interact categories (bed, couch, toilet) the
  sitting goal is appended: ``"Find the bed and sit on it."``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from humanclaw_gym.scenes.spec import INTERACT_CATEGORIES

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DIFFICULTY_LABELS",
    "EPISODE_SCHEMA",
    "INSTRUCTION_VERSIONS",
    "Episode",
    "EpisodeFormatError",
    "EpisodeInfo",
    "Goal",
    "instruction_for",
    "yaw_to_quat_xyzw",
]

EPISODE_SCHEMA = "humanclaw_episodes_v1"
DEFAULT_MAX_STEPS = 100
DIFFICULTY_LABELS: tuple[str, ...] = ("easy", "medium", "hard")
INSTRUCTION_VERSIONS: tuple[str, ...] = ("v1",)
_YAW_TOL_RAD = 1e-3


class EpisodeFormatError(ValueError):
    """An episode shard or record is malformed; the message names the file and field."""


def instruction_for(category: str, interact: bool | None = None, version: str = "v1") -> str:
    """The instruction text of an episode.

    Args:
        category: target category, e.g. ``"potted_plant"``.
        interact: append the sitting goal; default: ``category in INTERACT_CATEGORIES``.
        version: instruction version; only ``"v1"`` exists.

    Returns:
        ``"Find the potted plant."`` or ``"Find the bed and sit on it."``.
    """
    if version not in INSTRUCTION_VERSIONS:
        raise ValueError(
            f"instruction version must be one of {INSTRUCTION_VERSIONS}, got {version!r}"
        )
    if interact is None:
        interact = category in INTERACT_CATEGORIES
    noun = category.replace("_", " ")
    return f"Find the {noun} and sit on it." if interact else f"Find the {noun}."


def yaw_to_quat_xyzw(yaw_rad: float) -> tuple[float, float, float, float]:
    """Quaternion ``(x, y, z, w)`` of a rotation by ``yaw_rad`` about +Y."""
    h = 0.5 * float(yaw_rad)
    return (0.0, math.sin(h), 0.0, math.cos(h))


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def _vec(value: Any, n: int, where: str, optional: bool = False) -> tuple[float, ...] | None:
    if value is None and optional:
        return None
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise EpisodeFormatError(f"{where} must be a list of {n} numbers, got {value!r}") from exc
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise EpisodeFormatError(f"{where} must be {n} finite numbers, got {value!r}")
    return out


def _opt_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise EpisodeFormatError(f"{where} must be a number or null, got {value!r}") from exc
    if math.isnan(out):
        raise EpisodeFormatError(f"{where} must not be NaN")
    return out


def _require(d: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise EpisodeFormatError(f"{where} must be a JSON object, got {type(d).__name__}")
    if key not in d:
        raise EpisodeFormatError(f"{where} is missing field {key!r}")
    return d[key]


@dataclass(frozen=True)
class Goal:
    """One target instance of an episode.

    Attributes:
        object_id: the object's id in the scene (int for our scenes; upstream ids may be
            strings).
        object_name: readable name, e.g. ``"bed_1"`` (None when unknown).
        category: target category.
        position: centre of the object's world AABB ``[x, y, z]``, metres.
        aabb_min / aabb_max: world AABB corners (None for upstream goals without boxes;
            resolve them from the scene).
        seat_height_m: world height of the seat top for sittable objects.
        approach_pose: ``(x_m, z_m, yaw_rad)`` where to stand before sitting, facing away
            from the seat (None for non-sittables).
        view_points: upstream goals' ``view_points`` positions ``[x, y, z]`` (standing
            points from which the instance is seen on Habitat's navmesh); None otherwise.
    """

    object_id: int | str
    object_name: str | None
    category: str
    position: tuple[float, float, float]
    aabb_min: tuple[float, float, float] | None = None
    aabb_max: tuple[float, float, float] | None = None
    seat_height_m: float | None = None
    approach_pose: tuple[float, float, float] | None = None
    view_points: tuple[tuple[float, float, float], ...] | None = None

    def __post_init__(self) -> None:
        if self.view_points is not None:
            try:
                points = tuple(
                    _vec(p, 3, f"Goal.view_points[{i}]") for i, p in enumerate(self.view_points)
                )
            except TypeError:
                raise EpisodeFormatError(
                    f"Goal.view_points must be a list of [x, y, z], got {self.view_points!r}"
                ) from None
            object.__setattr__(self, "view_points", points)
        if isinstance(self.object_id, bool) or not isinstance(self.object_id, (int, str)):
            raise EpisodeFormatError(
                f"Goal.object_id must be an int or a string, got {self.object_id!r}"
            )
        if not isinstance(self.category, str) or not self.category:
            raise EpisodeFormatError(
                f"Goal.category must be a non-empty string, got {self.category!r}"
            )
        object.__setattr__(self, "position", _vec(self.position, 3, "Goal.position"))
        object.__setattr__(self, "aabb_min", _vec(self.aabb_min, 3, "Goal.aabb_min", optional=True))
        object.__setattr__(self, "aabb_max", _vec(self.aabb_max, 3, "Goal.aabb_max", optional=True))
        object.__setattr__(
            self, "approach_pose", _vec(self.approach_pose, 3, "Goal.approach_pose", optional=True)
        )
        object.__setattr__(
            self, "seat_height_m", _opt_float(self.seat_height_m, "Goal.seat_height_m")
        )
        if (self.aabb_min is None) != (self.aabb_max is None):
            raise EpisodeFormatError(
                "Goal.aabb_min and Goal.aabb_max must both be given or both be null"
            )
        if self.aabb_min is not None and any(
            a > b for a, b in zip(self.aabb_min, self.aabb_max, strict=True)
        ):  # type: ignore[arg-type]
            raise EpisodeFormatError(
                f"Goal.aabb_min {self.aabb_min} exceeds Goal.aabb_max {self.aabb_max}"
            )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "object_id": self.object_id,
            "object_name": self.object_name,
            "category": self.category,
            "position": list(self.position),
            "aabb_min": None if self.aabb_min is None else list(self.aabb_min),
            "aabb_max": None if self.aabb_max is None else list(self.aabb_max),
            "seat_height_m": self.seat_height_m,
            "approach_pose": None if self.approach_pose is None else list(self.approach_pose),
        }
        if self.view_points is not None:  # absent otherwise: shipped shards stay identical
            d["view_points"] = [list(p) for p in self.view_points]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "goal") -> Goal:
        try:
            return cls(
                object_id=_require(d, "object_id", where),
                object_name=d.get("object_name"),
                category=_require(d, "category", where),
                position=_require(d, "position", where),
                aabb_min=d.get("aabb_min"),
                aabb_max=d.get("aabb_max"),
                seat_height_m=d.get("seat_height_m"),
                approach_pose=d.get("approach_pose"),
                view_points=d.get("view_points"),
            )
        except EpisodeFormatError as exc:
            raise EpisodeFormatError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class EpisodeInfo:
    """Route statistics of an episode (all optional for upstream episodes).

    Attributes:
        geodesic_distance: shortest collision-free route from the start to the nearest
            target's goal region (free cells within ``clearance + 0.25 m`` of its AABB,
            where a body can stop next to it), metres.
        euclidean_distance: straight x/z distance from the start to the nearest cell of the
            same goal regions, metres (so ``euclidean <= geodesic``).
        difficulty: ``"easy"``, ``"medium"`` or ``"hard"`` (see
            :mod:`humanclaw_gym.episodes.difficulty`).
        choice_points: turns of the simplified route plus rooms entered.
        obstacle_density: mean fraction of blocked cells around the route.
        closest_goal_object_id: the target the shortest route ends at.

    ``info["geodesic_distance"]`` works as well as attribute access.
    """

    geodesic_distance: float | None = None
    euclidean_distance: float | None = None
    difficulty: str | None = None
    choice_points: int | None = None
    obstacle_density: float | None = None
    closest_goal_object_id: int | str | None = None

    def __post_init__(self) -> None:
        if self.difficulty is not None and self.difficulty not in DIFFICULTY_LABELS:
            raise EpisodeFormatError(
                f"info.difficulty must be one of {DIFFICULTY_LABELS} or null, got {self.difficulty!r}"
            )
        object.__setattr__(
            self, "geodesic_distance", _opt_float(self.geodesic_distance, "info.geodesic_distance")
        )
        object.__setattr__(
            self,
            "euclidean_distance",
            _opt_float(self.euclidean_distance, "info.euclidean_distance"),
        )
        object.__setattr__(
            self, "obstacle_density", _opt_float(self.obstacle_density, "info.obstacle_density")
        )
        if self.choice_points is not None:
            if (
                isinstance(self.choice_points, bool)
                or int(self.choice_points) != self.choice_points
                or self.choice_points < 0
            ):
                raise EpisodeFormatError(
                    f"info.choice_points must be a non-negative int or null, got {self.choice_points!r}"
                )
            object.__setattr__(self, "choice_points", int(self.choice_points))

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.keys() else default

    def keys(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.keys()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: str = "info") -> EpisodeInfo:
        if d is None:
            return cls()
        if not isinstance(d, Mapping):
            raise EpisodeFormatError(f"{where} must be a JSON object, got {type(d).__name__}")
        known = {k: d.get(k) for k in (f.name for f in fields(cls))}
        try:
            return cls(**known)
        except EpisodeFormatError as exc:
            raise EpisodeFormatError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Episode:
    """One find-navigate(-interact) episode.

    Attributes:
        episode_id: unique id within its split, e.g. ``"hc_val_003_012"``.
        scene_id: the scene (``load_scene(scene_id)``).
        start_position: ``[x, y, z]``: pelvis x/z and the floor height under it, metres.
        start_rotation: quaternion ``[x, y, z, w]`` about +Y (our convention: yaw 0 faces +Z).
        start_yaw_rad: the same rotation as a yaw, radians in ``[-pi, pi)``.
        object_category: target category.
        goals: every instance of the category in the scene.
        info: route statistics and difficulty.
        max_steps: decision-step limit (100).
        interact: True when the episode ends with sitting on the target (bed, couch, toilet).
        instruction: the task text (see :func:`instruction_for`).
    """

    episode_id: str
    scene_id: str
    start_position: tuple[float, float, float]
    start_rotation: tuple[float, float, float, float]
    start_yaw_rad: float
    object_category: str
    goals: tuple[Goal, ...]
    info: EpisodeInfo
    max_steps: int = DEFAULT_MAX_STEPS
    interact: bool = False
    instruction: str = ""

    def __post_init__(self) -> None:
        for name in ("episode_id", "scene_id", "object_category"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise EpisodeFormatError(
                    f"Episode.{name} must be a non-empty string, got {value!r}"
                )
        object.__setattr__(
            self, "start_position", _vec(self.start_position, 3, "Episode.start_position")
        )
        rot = _vec(self.start_rotation, 4, "Episode.start_rotation")
        object.__setattr__(self, "start_rotation", rot)
        yaw = _opt_float(self.start_yaw_rad, "Episode.start_yaw_rad")
        if yaw is None or not math.isfinite(yaw):
            raise EpisodeFormatError(
                f"Episode.start_yaw_rad must be a finite number, got {self.start_yaw_rad!r}"
            )
        object.__setattr__(self, "start_yaw_rad", yaw)
        assert rot is not None
        norm = math.sqrt(sum(v * v for v in rot))
        if abs(norm - 1.0) > 1e-3 or abs(rot[0]) > 1e-3 or abs(rot[2]) > 1e-3:
            raise EpisodeFormatError(
                f"Episode.start_rotation must be a unit quaternion about +Y [0, s, 0, c], got {list(rot)}"
            )
        rot_yaw = 2.0 * math.atan2(rot[1], rot[3])
        if abs(_wrap(rot_yaw - yaw)) > _YAW_TOL_RAD:
            raise EpisodeFormatError(
                f"Episode.start_rotation {list(rot)} (yaw {rot_yaw:.4f} rad) disagrees with start_yaw_rad {yaw:.4f} rad"
            )
        goals = tuple(self.goals)
        if not goals:
            raise EpisodeFormatError(f"episode {self.episode_id!r} has no goals")
        if not all(isinstance(g, Goal) for g in goals):
            raise EpisodeFormatError("Episode.goals must hold Goal records")
        object.__setattr__(self, "goals", goals)
        if not isinstance(self.info, EpisodeInfo):
            raise EpisodeFormatError("Episode.info must be an EpisodeInfo")
        if (
            isinstance(self.max_steps, bool)
            or not isinstance(self.max_steps, int)
            or self.max_steps < 1
        ):
            raise EpisodeFormatError(
                f"Episode.max_steps must be an int >= 1, got {self.max_steps!r}"
            )
        if not isinstance(self.interact, bool):
            raise EpisodeFormatError(f"Episode.interact must be a bool, got {self.interact!r}")
        if not self.instruction:
            object.__setattr__(
                self, "instruction", instruction_for(self.object_category, self.interact)
            )

    # -- conveniences --------------------------------------------------------------------
    @property
    def start_xz(self) -> tuple[float, float]:
        return (self.start_position[0], self.start_position[2])

    @property
    def goal_object_ids(self) -> tuple[int | str, ...]:
        return tuple(g.object_id for g in self.goals)

    @property
    def difficulty(self) -> str | None:
        return self.info.difficulty

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "scene_id": self.scene_id,
            "start_position": list(self.start_position),
            "start_rotation": list(self.start_rotation),
            "start_yaw_rad": self.start_yaw_rad,
            "object_category": self.object_category,
            "goals": [g.to_dict() for g in self.goals],
            "info": self.info.to_dict(),
            "max_steps": self.max_steps,
            "interact": self.interact,
            "instruction": self.instruction,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "episode") -> Episode:
        """Parse one record of our format; errors name ``where`` and the field."""
        eid = d.get("episode_id", "?") if isinstance(d, Mapping) else "?"
        here = f"{where} {eid!r}"
        goals_raw = _require(d, "goals", here)
        if not isinstance(goals_raw, list):
            raise EpisodeFormatError(
                f"{here}: field 'goals' must be a list, got {type(goals_raw).__name__}"
            )
        goals = tuple(Goal.from_dict(g, f"{here} goals[{i}]") for i, g in enumerate(goals_raw))
        try:
            return cls(
                episode_id=_require(d, "episode_id", here),
                scene_id=_require(d, "scene_id", here),
                start_position=_require(d, "start_position", here),
                start_rotation=_require(d, "start_rotation", here),
                start_yaw_rad=_require(d, "start_yaw_rad", here),
                object_category=_require(d, "object_category", here),
                goals=goals,
                info=EpisodeInfo.from_dict(d.get("info"), f"{here} info"),
                max_steps=_require(d, "max_steps", here),
                interact=_require(d, "interact", here),
                instruction=_require(d, "instruction", here),
            )
        except EpisodeFormatError as exc:
            msg = str(exc)
            raise EpisodeFormatError(msg if msg.startswith(here) else f"{here}: {msg}") from None
