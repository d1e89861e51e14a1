"""SceneSpec: the versioned, simulator-independent description of one indoor home.

A scene is a set of rooms and a flat list of objects. Every object (floor slabs, walls,
furniture, small movable things, stairs) is a rigid body made of primitive *parts*; the
parts are both its exact collision geometry and its visual geometry, so physics, rendering,
the navigation grid and the metrics all see the same shapes.

Frames and units: world Y up, metres, radians. An object's frame is placed at
``position`` and rotated by ``yaw_rad`` about +Y. At yaw 0 an object's *front* (the side a
person faces it from, or sits down from) is its local +Z. Part offsets are in the object
frame. Object ids are unique positive integers (0 is reserved for the humanoid) and are
the instance ids of the semantic render.

Part shapes (``size`` meaning):

* ``"box"``: ``(half_x, half_y, half_z)`` half extents.
* ``"cylinder"``: ``(radius, half_height, 0)``, axis along the object's local +Y.
* ``"sphere"``: ``(radius, 0, 0)``.
* ``"mesh"``: a triangle mesh asset (scanned or authored homes, e.g. HSSD) placed by its
  :class:`MeshRef`; ``size`` holds the half extents and ``offset`` the centre of the
  asset's bounding box after scaling, a box turned by ``mesh.rotation`` (so bounds, the
  navigation grid of primitive scenes and the metrics' AABBs see the same box Habitat's
  ``get_transformed_bb`` gives). The geometry itself is read from ``mesh.asset`` (and
  ``mesh.collision_asset``) by :mod:`humanclaw_gym.scenes.meshes`.

The JSON form carries ``"schema": "humanclaw_scene_v1"``; :meth:`SceneSpec.from_json`
refuses other schemas and malformed fields with a message naming the field.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "INTERACT_CATEGORIES",
    "MESH_FRAME_FRONT",
    "MESH_FRAME_UP",
    "PART_SHAPES",
    "SCENE_SCHEMA",
    "STAIR_RISE_M",
    "STAIR_RUN_M",
    "TARGET_CATEGORIES",
    "MeshRef",
    "ObjectSource",
    "Part",
    "Room",
    "SceneObject",
    "SceneSpec",
    "SceneSpecError",
]

SCENE_SCHEMA = "humanclaw_scene_v1"
TARGET_CATEGORIES: tuple[str, ...] = ("chair", "bed", "potted_plant", "toilet", "tv", "couch")
INTERACT_CATEGORIES: tuple[str, ...] = ("bed", "couch", "toilet")
PART_SHAPES: tuple[str, ...] = ("box", "cylinder", "sphere", "mesh")
#: The canonical frame of a mesh asset (Habitat's convention): up is +Y, front is -Z.
MESH_FRAME_UP: tuple[float, float, float] = (0.0, 1.0, 0.0)
MESH_FRAME_FRONT: tuple[float, float, float] = (0.0, 0.0, -1.0)
ROOM_TYPES: tuple[str, ...] = ("bedroom", "living_room", "bathroom", "kitchen", "hallway")

#: Geometry of every stair step the generator builds; the climb skills move exactly one step.
STAIR_RISE_M = 0.15
STAIR_RUN_M = 0.32


class SceneSpecError(ValueError):
    """A scene description is malformed; the message names the field."""


def _floats(value: Any, n: int, where: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise SceneSpecError(f"{where} must be {n} numbers, got {value!r}") from exc
    if len(out) != n:
        raise SceneSpecError(f"{where} must have {n} numbers, got {len(out)}")
    if not all(math.isfinite(v) for v in out):
        raise SceneSpecError(f"{where} must be finite, got {out}")
    return out


def _quat_matrix(q: tuple[float, float, float, float]) -> np.ndarray:
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


@dataclass(frozen=True)
class MeshRef:
    """Where a ``"mesh"`` part's triangles come from and how they are placed.

    A vertex ``v`` of the asset file is first turned into the canonical asset frame (the
    rotation that maps the asset's declared ``up`` to +Y and ``front`` to -Z: the one place
    an axis convention is converted), then placed in the object frame::

        v_object = origin + R(rotation) @ (scale * v_canonical)

    Attributes:
        asset: path of the render mesh (a ``.glb``), absolute.
        collision_asset: path of the collision mesh; None uses ``asset``.
        rotation: ``(x, y, z, w)`` unit quaternion, canonical asset frame to object frame.
        scale: per-axis scale in the canonical asset frame (> 0).
        origin: object-frame position of the canonical asset's origin, metres.
        up / front: the asset file's own up and front axes (unit, perpendicular).
        sha256 / collision_sha256: SHA-256 of the files' bytes when the scene was built
            (None: not recorded); part of the scene's content hash, and checked when the
            meshes are read, so a changed file is reported rather than drawn.
    """

    asset: str
    collision_asset: str | None = None
    rotation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    up: tuple[float, float, float] = MESH_FRAME_UP
    front: tuple[float, float, float] = MESH_FRAME_FRONT
    sha256: str | None = None
    collision_sha256: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.asset, str) or not self.asset:
            raise SceneSpecError(f"MeshRef.asset must be a non-empty path, got {self.asset!r}")
        if self.collision_asset is not None and (
            not isinstance(self.collision_asset, str) or not self.collision_asset
        ):
            raise SceneSpecError(
                f"MeshRef.collision_asset must be None or a path, got {self.collision_asset!r}"
            )
        q = _floats(self.rotation, 4, "MeshRef.rotation")
        norm = math.sqrt(sum(v * v for v in q))
        if abs(norm - 1.0) > 1e-3:
            raise SceneSpecError(f"MeshRef.rotation must be a unit quaternion, got {q}")
        object.__setattr__(self, "rotation", tuple(v / norm for v in q))
        scale = _floats(self.scale, 3, "MeshRef.scale")
        if any(v <= 0.0 for v in scale):
            raise SceneSpecError(f"MeshRef.scale must be > 0 on every axis, got {scale}")
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "origin", _floats(self.origin, 3, "MeshRef.origin"))
        up = np.asarray(_floats(self.up, 3, "MeshRef.up"))
        front = np.asarray(_floats(self.front, 3, "MeshRef.front"))
        if abs(np.linalg.norm(up) - 1.0) > 1e-3 or abs(np.linalg.norm(front) - 1.0) > 1e-3:
            raise SceneSpecError(
                f"MeshRef.up {tuple(up)} and MeshRef.front {tuple(front)} must be unit vectors"
            )
        if abs(float(up @ front)) > 1e-3:
            raise SceneSpecError(
                f"MeshRef.up {tuple(up)} and MeshRef.front {tuple(front)} must be perpendicular"
            )
        object.__setattr__(self, "up", tuple(float(v) for v in up))
        object.__setattr__(self, "front", tuple(float(v) for v in front))

    def rotation_matrix(self) -> np.ndarray:
        """``(3, 3)`` rotation canonical asset frame -> object frame."""
        return _quat_matrix(self.rotation)

    def frame_matrix(self) -> np.ndarray:
        """``(3, 3)`` rotation asset file frame -> canonical frame (``up`` -> +Y,
        ``front`` -> -Z)."""
        up = np.asarray(self.up)
        front = np.asarray(self.front)
        src = np.stack([np.cross(up, -front), up, -front], axis=1)  # columns: x, y, z
        return src.T  # orthonormal: the inverse maps the asset axes onto x, y, z

    def to_dict(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "collision_asset": self.collision_asset,
            "rotation": list(self.rotation),
            "scale": list(self.scale),
            "origin": list(self.origin),
            "up": list(self.up),
            "front": list(self.front),
            "sha256": self.sha256,
            "collision_sha256": self.collision_sha256,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MeshRef:
        try:
            return cls(
                asset=d["asset"],
                collision_asset=d.get("collision_asset"),
                rotation=d.get("rotation", (0.0, 0.0, 0.0, 1.0)),
                scale=d.get("scale", (1.0, 1.0, 1.0)),
                origin=d.get("origin", (0.0, 0.0, 0.0)),
                up=d.get("up", MESH_FRAME_UP),
                front=d.get("front", MESH_FRAME_FRONT),
                sha256=d.get("sha256"),
                collision_sha256=d.get("collision_sha256"),
            )
        except KeyError as exc:
            raise SceneSpecError(f"MeshRef is missing field {exc.args[0]!r}") from exc


@dataclass(frozen=True)
class ObjectSource:
    """Where an object of an imported scene came from (kept for goal matching and reports).

    Attributes:
        template: the dataset's object template name (``"stages/<id>"`` for a stage).
        index: position in the scene instance's ``object_instances`` (Habitat's object
            index, used by episode goals); None for the stage.
        semantic_id: the object config's ``semantic_id`` (None when absent).
        friction / restitution: the config's coefficients (recorded; the physics applies
            the frame contract's values).
    """

    template: str
    index: int | None = None
    semantic_id: int | None = None
    friction: float | None = None
    restitution: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "index": self.index,
            "semantic_id": self.semantic_id,
            "friction": self.friction,
            "restitution": self.restitution,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ObjectSource:
        try:
            return cls(
                template=str(d["template"]),
                index=d.get("index"),
                semantic_id=d.get("semantic_id"),
                friction=d.get("friction"),
                restitution=d.get("restitution"),
            )
        except KeyError as exc:
            raise SceneSpecError(f"ObjectSource is missing field {exc.args[0]!r}") from exc


@dataclass(frozen=True)
class Part:
    """One primitive of an object (see module docstring for ``size``)."""

    shape: str
    size: tuple[float, float, float]
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    color: tuple[float, float, float] = (0.7, 0.7, 0.7)
    material: str = "plain"
    mesh: MeshRef | None = None

    def __post_init__(self) -> None:
        if self.shape not in PART_SHAPES:
            raise SceneSpecError(f"Part.shape must be one of {PART_SHAPES}, got {self.shape!r}")
        object.__setattr__(self, "size", _floats(self.size, 3, "Part.size"))
        object.__setattr__(self, "offset", _floats(self.offset, 3, "Part.offset"))
        object.__setattr__(self, "color", _floats(self.color, 3, "Part.color"))
        if (self.shape == "mesh") != (self.mesh is not None):
            raise SceneSpecError(
                f"Part.mesh must be a MeshRef exactly when Part.shape is 'mesh' (shape "
                f"{self.shape!r}, mesh {self.mesh!r})"
            )
        if self.mesh is not None and not isinstance(self.mesh, MeshRef):
            raise SceneSpecError(f"Part.mesh must be a MeshRef, got {type(self.mesh).__name__}")
        if self.shape == "mesh":
            if any(v < 0.0 for v in self.size):  # a flat mesh (one plane) has a zero extent
                raise SceneSpecError(f"Part.size of a mesh must be >= 0, got {self.size}")
        else:
            needed = {"box": 3, "cylinder": 2, "sphere": 1}[self.shape]
            if any(v <= 0.0 for v in self.size[:needed]):
                raise SceneSpecError(f"Part.size of a {self.shape} must be > 0, got {self.size}")
        if any(not 0.0 <= c <= 1.0 for c in self.color):
            raise SceneSpecError(f"Part.color must be in [0, 1], got {self.color}")

    def box_rotation(self) -> np.ndarray:
        """``(3, 3)`` rotation of this part's box in the object frame (identity except for
        mesh parts, whose box turns with the asset)."""
        return np.eye(3) if self.mesh is None else self.mesh.rotation_matrix()

    def local_half_extents(self) -> np.ndarray:
        """Half extents of this part's axis-aligned box in the object frame."""
        if self.shape == "box":
            return np.array(self.size)
        if self.shape == "mesh":
            return np.abs(self.box_rotation()) @ np.array(self.size)
        if self.shape == "cylinder":
            r, h, _ = self.size
            return np.array([r, h, r])
        r = self.size[0]
        return np.array([r, r, r])

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "shape": self.shape,
            "size": list(self.size),
            "offset": list(self.offset),
            "color": list(self.color),
            "material": self.material,
        }
        if self.mesh is not None:  # absent for primitives: their JSON stays byte-identical
            d["mesh"] = self.mesh.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Part:
        try:
            mesh = d.get("mesh")
            return cls(
                shape=d["shape"],
                size=d["size"],
                offset=d.get("offset", (0.0, 0.0, 0.0)),
                color=d.get("color", (0.7, 0.7, 0.7)),
                material=str(d.get("material", "plain")),
                mesh=None if mesh is None else MeshRef.from_dict(mesh),
            )
        except KeyError as exc:
            raise SceneSpecError(f"Part is missing field {exc.args[0]!r}") from exc


@dataclass(frozen=True)
class SceneObject:
    """A rigid object of the scene.

    Attributes:
        object_id: unique id >= 1 (instance id in semantic images and contact rows).
        name: unique readable name, e.g. ``"bed_2"``.
        category: semantic category (a target category, or e.g. ``"wall"``, ``"floor"``,
            ``"table"``, ``"cabinet"``, ``"shelf"``, ``"lamp"``, ``"rug"``, ``"stairs"``,
            ``"platform"``, ``"cup"``, ``"book"``, ``"box"``).
        room_id: room the object stands in (None for walls shared by rooms).
        position: object frame origin in the world, metres.
        yaw_rad: rotation about +Y.
        parts: collision + visual primitives.
        dynamic: True for small movable objects (simulated with gravity); False for static.
        mass_kg: mass of a dynamic object (0 for static ones).
        seat_height_m: for sittable objects, world height of the seat surface.
        source: for objects of an imported scene dataset, where they came from.
    """

    object_id: int
    name: str
    category: str
    position: tuple[float, float, float]
    yaw_rad: float
    parts: tuple[Part, ...]
    room_id: int | None = None
    dynamic: bool = False
    mass_kg: float = 0.0
    seat_height_m: float | None = None
    source: ObjectSource | None = None

    def __post_init__(self) -> None:
        if self.source is not None and not isinstance(self.source, ObjectSource):
            raise SceneSpecError(
                f"SceneObject.source must be None or an ObjectSource, got {self.source!r}"
            )
        if (
            isinstance(self.object_id, bool)
            or not isinstance(self.object_id, int)
            or self.object_id < 1
        ):
            raise SceneSpecError(
                f"SceneObject.object_id must be an int >= 1, got {self.object_id!r}"
            )
        object.__setattr__(self, "position", _floats(self.position, 3, f"{self.name}.position"))
        object.__setattr__(self, "yaw_rad", _floats([self.yaw_rad], 1, f"{self.name}.yaw_rad")[0])
        parts = tuple(self.parts)
        if not parts:
            raise SceneSpecError(f"SceneObject {self.name!r} has no parts")
        object.__setattr__(self, "parts", parts)
        if self.dynamic and not self.mass_kg > 0.0:
            raise SceneSpecError(
                f"dynamic object {self.name!r} needs mass_kg > 0, got {self.mass_kg}"
            )
        if not self.dynamic and self.mass_kg != 0.0:
            raise SceneSpecError(
                f"static object {self.name!r} must have mass_kg 0, got {self.mass_kg}"
            )

    def rotation(self) -> np.ndarray:
        """Object-to-world rotation matrix (yaw about +Y), ``(3, 3)``."""
        c, s = math.cos(self.yaw_rad), math.sin(self.yaw_rad)
        return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])

    def quat_xyzw(self) -> tuple[float, float, float, float]:
        """Object-to-world rotation as a quaternion (x, y, z, w)."""
        h = 0.5 * self.yaw_rad
        return (0.0, math.sin(h), 0.0, math.cos(h))

    def part_world_center(self, part: Part) -> np.ndarray:
        return np.asarray(self.position) + self.rotation() @ np.asarray(part.offset)

    def aabb(self) -> tuple[np.ndarray, np.ndarray]:
        """World axis-aligned bounding box ``(min (3,), max (3,))`` of all parts (exact for
        boxes, cylinders and spheres under yaw rotation)."""
        rot = np.abs(self.rotation())
        lo = np.full(3, np.inf)
        hi = np.full(3, -np.inf)
        for part in self.parts:
            center = self.part_world_center(part)
            if part.shape == "box":
                half = rot @ part.local_half_extents()
            elif part.shape == "mesh":  # the turned box's corners, as Habitat bounds them
                half = np.abs(self.rotation() @ part.box_rotation()) @ np.asarray(part.size)
            else:  # cylinder axis stays vertical under yaw; sphere is isotropic
                half = part.local_half_extents()
            lo = np.minimum(lo, center - half)
            hi = np.maximum(hi, center + half)
        return lo, hi

    def front_direction(self) -> np.ndarray:
        """World unit vector of the object's front (local +Z), on the floor plane."""
        return self.rotation() @ np.array([0.0, 0.0, 1.0])

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "object_id": self.object_id,
            "name": self.name,
            "category": self.category,
            "room_id": self.room_id,
            "position": list(self.position),
            "yaw_rad": self.yaw_rad,
            "dynamic": self.dynamic,
            "mass_kg": self.mass_kg,
            "seat_height_m": self.seat_height_m,
            "parts": [p.to_dict() for p in self.parts],
        }
        if self.source is not None:  # absent for generated objects (byte-identical JSON)
            d["source"] = self.source.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SceneObject:
        try:
            seat = d.get("seat_height_m")
            return cls(
                object_id=d["object_id"],
                name=str(d["name"]),
                category=str(d["category"]),
                room_id=d.get("room_id"),
                position=d["position"],
                yaw_rad=d["yaw_rad"],
                parts=tuple(Part.from_dict(p) for p in d["parts"]),
                dynamic=bool(d.get("dynamic", False)),
                mass_kg=float(d.get("mass_kg", 0.0)),
                seat_height_m=None if seat is None else float(seat),
                source=None if d.get("source") is None else ObjectSource.from_dict(d["source"]),
            )
        except KeyError as exc:
            raise SceneSpecError(
                f"object {d.get('name', '?')!r} is missing field {exc.args[0]!r}"
            ) from exc


@dataclass(frozen=True)
class Room:
    """A rectangular room footprint on the floor plane (x/z), floor at ``floor_y``."""

    room_id: int
    room_type: str
    min_xz: tuple[float, float]
    max_xz: tuple[float, float]
    floor_y: float = 0.0

    def __post_init__(self) -> None:
        if self.room_type not in ROOM_TYPES:
            raise SceneSpecError(
                f"Room.room_type must be one of {ROOM_TYPES}, got {self.room_type!r}"
            )
        object.__setattr__(self, "min_xz", _floats(self.min_xz, 2, "Room.min_xz"))
        object.__setattr__(self, "max_xz", _floats(self.max_xz, 2, "Room.max_xz"))
        if not (self.min_xz[0] < self.max_xz[0] and self.min_xz[1] < self.max_xz[1]):
            raise SceneSpecError(
                f"Room {self.room_id} has an empty footprint {self.min_xz}..{self.max_xz}"
            )

    def contains_xz(self, x: float, z: float) -> bool:
        return self.min_xz[0] <= x <= self.max_xz[0] and self.min_xz[1] <= z <= self.max_xz[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "room_type": self.room_type,
            "min_xz": list(self.min_xz),
            "max_xz": list(self.max_xz),
            "floor_y": self.floor_y,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Room:
        try:
            return cls(
                room_id=int(d["room_id"]),
                room_type=str(d["room_type"]),
                min_xz=d["min_xz"],
                max_xz=d["max_xz"],
                floor_y=float(d.get("floor_y", 0.0)),
            )
        except KeyError as exc:
            raise SceneSpecError(f"room is missing field {exc.args[0]!r}") from exc


@dataclass(frozen=True)
class SceneSpec:
    """A whole home: rooms + objects, plus the seed and generator version that made it."""

    scene_id: str
    rooms: tuple[Room, ...]
    objects: tuple[SceneObject, ...]
    seed: int | None = None
    generator: str = "humanclaw_procedural_v1"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rooms", tuple(self.rooms))
        object.__setattr__(self, "objects", tuple(self.objects))
        ids = [o.object_id for o in self.objects]
        if len(set(ids)) != len(ids):
            raise SceneSpecError(f"scene {self.scene_id!r} has duplicate object ids")
        names = [o.name for o in self.objects]
        if len(set(names)) != len(names):
            raise SceneSpecError(f"scene {self.scene_id!r} has duplicate object names")

    # -- queries -----------------------------------------------------------------------
    def object_by_id(self, object_id: int) -> SceneObject:
        for obj in self.objects:
            if obj.object_id == object_id:
                return obj
        raise KeyError(f"scene {self.scene_id!r} has no object with id {object_id}")

    def objects_of(self, category: str) -> tuple[SceneObject, ...]:
        return tuple(o for o in self.objects if o.category == category)

    @property
    def dynamic_objects(self) -> tuple[SceneObject, ...]:
        return tuple(o for o in self.objects if o.dynamic)

    @property
    def static_objects(self) -> tuple[SceneObject, ...]:
        return tuple(o for o in self.objects if not o.dynamic)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """World AABB of the whole scene."""
        lows, highs = zip(*(o.aabb() for o in self.objects), strict=True)
        return np.min(lows, axis=0), np.max(highs, axis=0)

    def room_at(self, x: float, z: float) -> Room | None:
        for room in self.rooms:
            if room.contains_xz(x, z):
                return room
        return None

    # -- serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCENE_SCHEMA,
            "scene_id": self.scene_id,
            "seed": self.seed,
            "generator": self.generator,
            "metadata": dict(self.metadata),
            "rooms": [r.to_dict() for r in self.rooms],
            "objects": [o.to_dict() for o in self.objects],
        }

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, fixed separators): same scene, same bytes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON text."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SceneSpec:
        schema = d.get("schema")
        if schema != SCENE_SCHEMA:
            raise SceneSpecError(f"scene schema must be {SCENE_SCHEMA!r}, got {schema!r}")
        try:
            return cls(
                scene_id=str(d["scene_id"]),
                seed=d.get("seed"),
                generator=str(d.get("generator", "unknown")),
                metadata=dict(d.get("metadata", {})),
                rooms=tuple(Room.from_dict(r) for r in d["rooms"]),
                objects=tuple(SceneObject.from_dict(o) for o in d["objects"]),
            )
        except KeyError as exc:
            raise SceneSpecError(f"scene is missing field {exc.args[0]!r}") from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> SceneSpec:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # invalid JSON or UTF-8, too deep
            raise SceneSpecError(f"scene JSON is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise SceneSpecError("scene JSON must be an object")
        return cls.from_dict(data)


def iter_parts_world(obj: SceneObject) -> Iterable[tuple[Part, np.ndarray, np.ndarray]]:
    """Yield ``(part, world_center (3,), world_rotation (3,3))`` for every part of ``obj``."""
    rot = obj.rotation()
    for part in obj.parts:
        yield part, obj.part_world_center(part), rot
