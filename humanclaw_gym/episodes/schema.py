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
* Instructions come from a template (:data:`INSTRUCTION_TEMPLATES`, or one of your own):
  ``"v1"`` (our generated splits) is ``"Find the <category>."`` with underscores written as
  spaces (``"Find the potted plant."``), and for interact categories (bed, couch, toilet)
  ``"Find the bed and sit on it."``; ``"touch"`` (episodes imported from the reference
  release) says what the reference instruction says, in our words: reach the target until
  the body touches it at zero distance, and for bed, couch and toilet, finally sit on it.
* Episodes imported from the reference release keep their whole original record in
  :attr:`Episode.reference` (:class:`ReferenceRecord`): ``init_offset`` and ``init_yaw`` in
  full, the goals' ``view_points``, ``scene_dataset_config`` and every other field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from humanclaw_gym.scenes.spec import INTERACT_CATEGORIES

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DIFFICULTY_LABELS",
    "EPISODE_SCHEMA",
    "MAX_COORD_M",
    "MAX_EPISODE_STEPS",
    "EPISODE_SCHEMAS_READ",
    "INSTRUCTION_TEMPLATES",
    "INSTRUCTION_VERSIONS",
    "Episode",
    "EpisodeFormatError",
    "EpisodeInfo",
    "Goal",
    "MAX_ID_CHARS",
    "InstructionTemplate",
    "ReferenceRecord",
    "check_id",
    "check_max_steps",
    "check_pose",
    "pose_dict",
    "reference_yaw_to_ours",
    "shown_id",
    "instruction_for",
    "yaw_to_quat_xyzw",
]

EPISODE_SCHEMA = "humanclaw_episodes_v2"
#: Shard schemas :func:`~humanclaw_gym.episodes.io.read_shard` accepts (v1 lacks
#: ``approach_points``; it reads as None).
EPISODE_SCHEMAS_READ: tuple[str, ...] = ("humanclaw_episodes_v1", EPISODE_SCHEMA)
DEFAULT_MAX_STEPS = 100
#: Most decision steps an episode may ask for.
MAX_EPISODE_STEPS = 10_000
#: Largest |coordinate| of a position an episode gives (start, goals, boxes, approach
#: points), metres: a home fits in 10 km. Where a start lies in its scene is checked when
#: the episode starts (:func:`humanclaw_gym.episodes.resolve.check_start`).
MAX_COORD_M = 10_000.0
#: Longest instruction text an episode may carry.
MAX_INSTRUCTION_CHARS = 4096
DIFFICULTY_LABELS: tuple[str, ...] = ("easy", "medium", "hard")
_YAW_TOL_RAD = 1e-3


class EpisodeFormatError(ValueError):
    """An episode shard or record is malformed; the message names the file and field."""


#: Longest ``episode_id`` / ``scene_id`` / ``object_category`` accepted: a run's episode
#: folder ``<scene>_ep<id>_<category>`` must stay within a file name's 255 bytes.
MAX_ID_CHARS: dict[str, int] = {"episode_id": 96, "scene_id": 96, "object_category": 48}
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHOWN_ID_CHARS = 60


def shown_id(value: Any) -> str:
    """``repr(value)`` cut to a readable length for an error message."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 1000 else "<int>"
    if len(text) <= _SHOWN_ID_CHARS:
        return text
    return f"{text[:_SHOWN_ID_CHARS]}... ({len(text)} characters)"


def check_id(value: Any, field: str) -> str:
    """Check an id that becomes part of a file name (episode, scene, category).

    Allowed: ASCII letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit,
    at most :data:`MAX_ID_CHARS` characters; so no ``/``, ``..``, hidden or option-like names.

    Raises:
        EpisodeFormatError: naming the field, the (clipped) value and what is allowed.
    """
    limit = MAX_ID_CHARS.get(field, 96)
    if not isinstance(value, str) or not value:
        raise EpisodeFormatError(f"{field} must be a non-empty string, got {shown_id(value)}")
    if len(value) > limit or not _ID_RE.fullmatch(value):
        raise EpisodeFormatError(
            f"{field} {shown_id(value)} is not allowed: it becomes part of a file name, so it must have "
            f"1..{limit} characters A-Z a-z 0-9 . _ - and start with a letter or digit"
        )
    return value


@dataclass(frozen=True)
class InstructionTemplate:
    """How an episode's instruction is written.

    Attributes:
        find: the instruction of every episode; ``{noun}`` is the target's name.
        sit: appended (after a space) for interact episodes (bed, couch, toilet); may use
            ``{noun}``; empty when ``interact_find`` already says everything.
        interact_find: replaces ``find`` for interact episodes when given.
        nouns: spoken names per category, ``((category, name), ...)`` (default: the
            category with ``_`` read as a space).
    """

    find: str
    sit: str = ""
    interact_find: str | None = None
    nouns: tuple[tuple[str, str], ...] = ()

    def noun(self, category: str) -> str:
        return dict(self.nouns).get(category, category.replace("_", " "))

    def render(self, category: str, interact: bool) -> str:
        noun = self.noun(category)
        if not interact:
            return self.find.format(noun=noun)
        head = (self.interact_find or self.find).format(noun=noun)
        return f"{head} {self.sit.format(noun=noun)}" if self.sit else head


#: The shipped instruction templates by name.
INSTRUCTION_TEMPLATES: dict[str, InstructionTemplate] = {
    # our generated splits
    "v1": InstructionTemplate(
        find="Find the {noun}.", interact_find="Find the {noun} and sit on it."
    ),
    # what the reference release's instruction asks, in our words
    "touch": InstructionTemplate(
        find="Find the {noun} and go right up to it, until your body touches it at zero distance.",
        sit="Once you are there, finally sit down on the {noun}.",
        nouns=(("tv", "TV"),),
    ),
}

#: Names of the shipped templates.
INSTRUCTION_VERSIONS: tuple[str, ...] = tuple(INSTRUCTION_TEMPLATES)


def instruction_for(
    category: str,
    interact: bool | None = None,
    version: str | InstructionTemplate = "v1",
) -> str:
    """The instruction text of an episode.

    Args:
        category: target category, e.g. ``"potted_plant"``.
        interact: the episode ends with sitting on the target; default:
            ``category in INTERACT_CATEGORIES``.
        version: a name of :data:`INSTRUCTION_TEMPLATES` (``"v1"``, ``"touch"``) or an
            :class:`InstructionTemplate` of your own.

    Returns:
        e.g. ``"Find the potted plant."`` / ``"Find the bed and sit on it."`` (``"v1"``).
    """
    if isinstance(version, InstructionTemplate):
        template = version
    elif version in INSTRUCTION_TEMPLATES:
        template = INSTRUCTION_TEMPLATES[version]
    else:
        raise ValueError(
            f"instruction version must be one of {INSTRUCTION_VERSIONS} or an "
            f"InstructionTemplate, got {version!r}"
        )
    if interact is None:
        interact = category in INTERACT_CATEGORIES
    return template.render(category, bool(interact))


def reference_yaw_to_ours(init_yaw_deg: float) -> float:
    """Our ``start_yaw_rad`` of the reference release's ``init_yaw``.

    The reference's ``init_yaw`` (degrees) is the heading of the Habitat forward vector
    (the agent's local -Z rotated by ``start_rotation``), ``atan2(f_x, f_z)``, minus 180
    degrees, wrapped to (-180, 180]. Our yaw is that heading itself (yaw 0 faces +Z), so
    ``yaw = radians(init_yaw) + pi``, wrapped to ``[-pi, pi)``: ``init_yaw = 0`` is our yaw
    ``-pi`` (facing -Z) and ``init_yaw = 90`` our ``-pi/2`` (facing -X).
    """
    try:
        value = float(init_yaw_deg)
    except (TypeError, ValueError):
        raise EpisodeFormatError(
            f"init_yaw must be a number, got {shown_id(init_yaw_deg)}"
        ) from None
    if not math.isfinite(value):
        raise EpisodeFormatError(f"init_yaw must be a finite number, got {shown_id(init_yaw_deg)}")
    return _wrap(math.radians(value) + math.pi)


@dataclass(frozen=True)
class ReferenceRecord:
    """The original record of an episode imported from the reference release, kept whole.

    Attributes:
        json: canonical JSON of ``{"episode": <the shard's episode record, every field as
            written>, "view_points": {<goal object id>: [<view point>, ...]},
            "scene_dataset_config": <path or null>}``.
    """

    json: str

    @classmethod
    def build(
        cls,
        episode: Mapping[str, Any],
        view_points: Mapping[str, Sequence[Any]],
        scene_dataset_config: str | None,
    ) -> ReferenceRecord:
        doc = {
            "episode": dict(episode),
            "view_points": {str(k): list(v) for k, v in view_points.items()},
            "scene_dataset_config": scene_dataset_config,
        }
        try:
            text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise EpisodeFormatError(f"reference record is not plain JSON: {exc}") from None
        return cls(text)

    @cached_property
    def data(self) -> dict[str, Any]:
        return json.loads(self.json)

    @property
    def episode(self) -> dict[str, Any]:
        """The shard's episode record as written."""
        return self.data["episode"]

    @property
    def episode_id(self) -> str:
        """The reference's own (per-scene) episode id."""
        return str(self.episode.get("episode_id"))

    @property
    def init_offset(self) -> tuple[float, ...]:
        """``init_offset`` as written, or the reference's default ``(-x, z, 0)`` of
        ``start_position`` (its motion runner's frame) when the record has none."""
        raw = self.episode.get("init_offset")
        if raw is None:
            x, _, z = (float(v) for v in self.episode["start_position"])
            return (-x, z, 0.0)
        return tuple(float(v) for v in raw)

    @property
    def init_yaw_deg(self) -> float | None:
        """``init_yaw`` as written (degrees), or None when the record has none."""
        raw = self.episode.get("init_yaw")
        return None if raw is None else float(raw)

    @property
    def view_points(self) -> dict[str, list[Any]]:
        """The goals' view points by goal object id, as written."""
        return self.data["view_points"]

    @property
    def scene_dataset_config(self) -> str | None:
        return self.data["scene_dataset_config"]


def yaw_to_quat_xyzw(yaw_rad: float) -> tuple[float, float, float, float]:
    """Quaternion ``(x, y, z, w)`` of a rotation by ``yaw_rad`` about +Y."""
    h = 0.5 * float(yaw_rad)
    return (0.0, math.sin(h), 0.0, math.cos(h))


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def _vec(value: Any, n: int, where: str, optional: bool = False) -> tuple[float, ...] | None:
    if value is None and optional:
        return None
    if isinstance(value, (str, bytes, Mapping)):
        raise EpisodeFormatError(f"{where} must be a list of {n} numbers, got {shown_id(value)}")
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError, OverflowError):
        raise EpisodeFormatError(
            f"{where} must be a list of {n} numbers, got {shown_id(value)}"
        ) from None
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise EpisodeFormatError(f"{where} must be {n} finite numbers, got {shown_id(value)}")
    if any(abs(v) > MAX_COORD_M for v in out):
        raise EpisodeFormatError(
            f"{where} {shown_id(list(out))} is out of range: allowed values within "
            f"±{MAX_COORD_M:g} m"
        )
    return out


def _opt_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) and len(value) > 64:
        raise EpisodeFormatError(f"{where} must be a number or null, got {shown_id(value)}")
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise EpisodeFormatError(
            f"{where} must be a number or null, got {shown_id(value)}"
        ) from None
    if math.isnan(out):
        raise EpisodeFormatError(f"{where} must not be NaN")
    return out


def check_pose(
    position: Any, rotation: Any, yaw_rad: Any, name: str, owner: str = ""
) -> tuple[tuple[float, float, float], tuple[float, float, float, float], float]:
    """Check the pose fields ``<name>_position``, ``<name>_rotation`` and ``<name>_yaw_rad``
    of an episode record (e.g. ``name="start"``).

    The position is ``[x, y, z]`` within ±:data:`MAX_COORD_M` metres, the yaw a finite
    number of radians, and the rotation the unit quaternion ``[0, s, 0, c]`` about +Y of
    that yaw (within 1e-3 rad).

    Args:
        position / rotation / yaw_rad: the values as given.
        name: the fields' prefix (``"start"``, ``"goal"``).
        owner: what error messages put before the field names (``"Episode."``).

    Returns:
        ``(position, rotation, yaw_rad)`` as floats.

    Raises:
        EpisodeFormatError: naming the field and what is allowed.
    """
    where = f"{owner}{name}"
    pos = _vec(position, 3, f"{where}_position")
    rot = _vec(rotation, 4, f"{where}_rotation")
    if isinstance(yaw_rad, bool):
        raise EpisodeFormatError(f"{where}_yaw_rad must be a finite number, got {yaw_rad!r}")
    yaw = _opt_float(yaw_rad, f"{where}_yaw_rad")
    if yaw is None or not math.isfinite(yaw):
        raise EpisodeFormatError(
            f"{where}_yaw_rad must be a finite number, got {shown_id(yaw_rad)}"
        )
    assert pos is not None and rot is not None
    norm = math.sqrt(sum(v * v for v in rot))
    if abs(norm - 1.0) > 1e-3 or abs(rot[0]) > 1e-3 or abs(rot[2]) > 1e-3:
        raise EpisodeFormatError(
            f"{where}_rotation must be a unit quaternion about +Y [0, s, 0, c], got {list(rot)}"
        )
    rot_yaw = 2.0 * math.atan2(rot[1], rot[3])
    if abs(_wrap(rot_yaw - yaw)) > _YAW_TOL_RAD:
        raise EpisodeFormatError(
            f"{where}_rotation {list(rot)} (yaw {rot_yaw:.4f} rad) disagrees with "
            f"{name}_yaw_rad {yaw:.4f} rad"
        )
    return pos, rot, yaw  # type: ignore[return-value]


def pose_dict(
    name: str, position: Sequence[float], rotation: Sequence[float], yaw_rad: float
) -> dict[str, Any]:
    """The pose fields ``<name>_position``, ``<name>_rotation`` and ``<name>_yaw_rad`` of a
    record's JSON form (the inverse of :func:`check_pose`)."""
    return {
        f"{name}_position": list(position),
        f"{name}_rotation": list(rotation),
        f"{name}_yaw_rad": yaw_rad,
    }


def check_max_steps(value: Any, where: str = "max_steps") -> int:
    """An episode's decision-step limit: an int in ``[1, MAX_EPISODE_STEPS]``.

    Raises:
        EpisodeFormatError: naming ``where`` and what is allowed.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EPISODE_STEPS:
        raise EpisodeFormatError(
            f"{where} must be an int in [1, {MAX_EPISODE_STEPS}], got {shown_id(value)}"
        )
    return value


def _reference(value: Any, where: str) -> ReferenceRecord | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("episode"), Mapping):
        raise EpisodeFormatError(f"{where}: field 'reference' must be an object with 'episode'")
    view_points = value.get("view_points") or {}
    if not isinstance(view_points, Mapping):
        raise EpisodeFormatError(f"{where}: field 'reference.view_points' must be an object")
    return ReferenceRecord.build(value["episode"], view_points, value.get("scene_dataset_config"))


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
        approach_points: world ``[x, y, z]`` floor points (y = floor height) from which a
            standing body can touch the object: nothing fixed between body and box and a
            clear line of sight from the eyes (see
            :meth:`~humanclaw_gym.scenes.navgrid.NavGrid.goal_region`). Our episodes store a
            sample of them at least 0.25 m apart, nearest to the object first, all reachable
            from the start; upstream shards map their goals' ``view_points`` here. None when
            unknown (version 1 shards, upstream goals without view points).
    """

    object_id: int | str
    object_name: str | None
    category: str
    position: tuple[float, float, float]
    aabb_min: tuple[float, float, float] | None = None
    aabb_max: tuple[float, float, float] | None = None
    seat_height_m: float | None = None
    approach_pose: tuple[float, float, float] | None = None
    approach_points: tuple[tuple[float, float, float], ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.object_id, bool) or not isinstance(self.object_id, (int, str)):
            raise EpisodeFormatError(
                f"Goal.object_id must be an int or a string, got {shown_id(self.object_id)}"
            )
        if not isinstance(self.category, str) or not self.category:
            raise EpisodeFormatError(
                f"Goal.category must be a non-empty string, got {shown_id(self.category)}"
            )
        object.__setattr__(self, "position", _vec(self.position, 3, "Goal.position"))
        object.__setattr__(self, "aabb_min", _vec(self.aabb_min, 3, "Goal.aabb_min", optional=True))
        object.__setattr__(self, "aabb_max", _vec(self.aabb_max, 3, "Goal.aabb_max", optional=True))
        object.__setattr__(
            self, "approach_pose", _vec(self.approach_pose, 3, "Goal.approach_pose", optional=True)
        )
        seat = _opt_float(self.seat_height_m, "Goal.seat_height_m")
        if seat is not None and not abs(seat) <= MAX_COORD_M:
            raise EpisodeFormatError(
                f"Goal.seat_height_m {seat} is out of range: allowed within ±{MAX_COORD_M:g} m"
            )
        object.__setattr__(self, "seat_height_m", seat)
        if self.approach_points is not None:
            if isinstance(self.approach_points, (str, bytes)) or not hasattr(
                self.approach_points, "__iter__"
            ):
                raise EpisodeFormatError(
                    f"Goal.approach_points must be a list of [x, y, z] points or null, got {shown_id(self.approach_points)}"
                )
            object.__setattr__(
                self,
                "approach_points",
                tuple(
                    _vec(p, 3, f"Goal.approach_points[{i}]")  # type: ignore[misc]
                    for i, p in enumerate(self.approach_points)
                ),
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
        return {
            "object_id": self.object_id,
            "object_name": self.object_name,
            "category": self.category,
            "position": list(self.position),
            "aabb_min": None if self.aabb_min is None else list(self.aabb_min),
            "aabb_max": None if self.aabb_max is None else list(self.aabb_max),
            "seat_height_m": self.seat_height_m,
            "approach_pose": None if self.approach_pose is None else list(self.approach_pose),
            "approach_points": None
            if self.approach_points is None
            else [list(p) for p in self.approach_points],
        }

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
                approach_points=d.get("approach_points"),
            )
        except EpisodeFormatError as exc:
            raise EpisodeFormatError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class EpisodeInfo:
    """Route statistics of an episode (all optional for upstream episodes).

    Attributes:
        geodesic_distance: shortest collision-free route from the start to the nearest
            approach point of a target (free cells within ``clearance + 0.25 m`` of its
            AABB from which a standing body can touch and see it, never through a wall),
            metres.
        euclidean_distance: straight x/z distance from the start to the nearest approach
            point of the same targets, metres (so ``euclidean <= geodesic``).
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
                f"info.difficulty must be one of {DIFFICULTY_LABELS} or null, got {shown_id(self.difficulty)}"
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
            cp = self.choice_points
            if (
                isinstance(cp, bool)
                or not isinstance(cp, (int, float))
                or not math.isfinite(cp)
                or int(cp) != cp
                or cp < 0
            ):
                raise EpisodeFormatError(
                    f"info.choice_points must be a non-negative int or null, got {shown_id(cp)}"
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
        reference: the original record of an episode imported from the reference release
            (None for ours); written to and read from shards under ``"reference"``.
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
    reference: ReferenceRecord | None = None

    def __post_init__(self) -> None:
        for name in ("episode_id", "scene_id", "object_category"):
            check_id(getattr(self, name), name)
        pose = check_pose(
            self.start_position, self.start_rotation, self.start_yaw_rad, "start", "Episode."
        )
        for field, value in zip(
            ("start_position", "start_rotation", "start_yaw_rad"), pose, strict=True
        ):
            object.__setattr__(self, field, value)
        goals = tuple(self.goals)
        if not goals:
            raise EpisodeFormatError(f"episode {self.episode_id!r} has no goals")
        if not all(isinstance(g, Goal) for g in goals):
            raise EpisodeFormatError("Episode.goals must hold Goal records")
        object.__setattr__(self, "goals", goals)
        if not isinstance(self.info, EpisodeInfo):
            raise EpisodeFormatError("Episode.info must be an EpisodeInfo")
        check_max_steps(self.max_steps, "Episode.max_steps")
        if not isinstance(self.interact, bool):
            raise EpisodeFormatError(
                f"Episode.interact must be a bool, got {shown_id(self.interact)}"
            )
        if self.reference is not None and not isinstance(self.reference, ReferenceRecord):
            raise EpisodeFormatError("Episode.reference must be a ReferenceRecord or None")
        if not isinstance(self.instruction, str) or len(self.instruction) > MAX_INSTRUCTION_CHARS:
            raise EpisodeFormatError(
                f"Episode.instruction must be a string of at most {MAX_INSTRUCTION_CHARS} "
                f"characters, got {shown_id(self.instruction)}"
            )
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
            **pose_dict("start", self.start_position, self.start_rotation, self.start_yaw_rad),
            "object_category": self.object_category,
            "goals": [g.to_dict() for g in self.goals],
            "info": self.info.to_dict(),
            "max_steps": self.max_steps,
            "interact": self.interact,
            "instruction": self.instruction,
            **({} if self.reference is None else {"reference": self.reference.data}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "episode") -> Episode:
        """Parse one record of our format; errors name ``where`` and the field."""
        eid = d.get("episode_id", "?") if isinstance(d, Mapping) else "?"
        here = f"{where} {shown_id(eid)}"
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
                reference=_reference(d.get("reference"), here),
            )
        except EpisodeFormatError as exc:
            msg = str(exc)
            raise EpisodeFormatError(msg if msg.startswith(here) else f"{here}: {msg}") from None
