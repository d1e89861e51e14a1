"""Where the viewer's primitives go: pure numpy, no viser import.

The world frame of humanclaw-gym (Y up, metres, radians) is used unchanged in the viewer:
:class:`~humanclaw_gym.viewer.DebugViewer` tells viser that +Y is up
(``scene.set_up_direction("+y")``) instead of converting coordinates. The only
conversions happen here, at one boundary, and concern conventions rather than frames:

* quaternions: humanclaw-gym stores ``(x, y, z, w)``; viser takes ``(w, x, y, z)``
  (:func:`wxyz_from_xyzw`);
* cylinders: a scene part's cylinder axis is its object's local +Y, a viser cylinder's axis
  is its node's local +Z, so every cylinder part gets a fixed -90 degree turn about X
  (:data:`CYLINDER_Y_FROM_Z_WXYZ`);
* capsules: a body link capsule's axis is its shape's local +Z, like viser's meshes, so the
  mesh from :func:`capsule_mesh` is used as is;
* cameras: viser frustums look along local +Z with image rows along local +Y (down);
  :func:`frustum_wxyz` builds that rotation from a humanclaw camera's forward and up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "CYLINDER_Y_FROM_Z_WXYZ",
    "LinkPlacement",
    "PartPlacement",
    "asset_link_meshes",
    "asset_link_poses",
    "body_link_poses",
    "capsule_mesh",
    "frustum_wxyz",
    "link_placements",
    "object_frame_wxyz",
    "part_placements",
    "wxyz_from_matrix",
    "wxyz_from_xyzw",
]

#: Rotation (w, x, y, z) that turns a viser cylinder (axis +Z) into a scene cylinder
#: (axis +Y): -90 degrees about +X maps +Z onto +Y.
CYLINDER_Y_FROM_Z_WXYZ: tuple[float, float, float, float] = (
    math.cos(-math.pi / 4.0),
    math.sin(-math.pi / 4.0),
    0.0,
    0.0,
)


def wxyz_from_xyzw(quat_xyzw: np.ndarray) -> np.ndarray:
    """Reorder ``(..., 4)`` quaternions from ``(x, y, z, w)`` to viser's ``(w, x, y, z)``."""
    q = np.asarray(quat_xyzw, dtype=np.float64)
    if q.shape[-1] != 4:
        raise ValueError(f"quat_xyzw must have 4 values in its last axis, got shape {q.shape}")
    return np.concatenate([q[..., 3:4], q[..., 0:3]], axis=-1)


def wxyz_from_matrix(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion ``(w, x, y, z)`` of a ``(3, 3)`` rotation matrix."""
    from humanclaw_gym.rotations import matrix_to_quat_xyzw

    return wxyz_from_xyzw(matrix_to_quat_xyzw(np.asarray(rotation, dtype=np.float64)))


def object_frame_wxyz(yaw_rad: float) -> tuple[float, float, float, float]:
    """Quaternion ``(w, x, y, z)`` of a rotation by ``yaw_rad`` about world +Y."""
    half = 0.5 * float(yaw_rad)
    return (math.cos(half), 0.0, math.sin(half), 0.0)


@dataclass(frozen=True)
class PartPlacement:
    """One scene part as a viser primitive, relative to its object's frame.

    Attributes:
        shape: ``"box"``, ``"cylinder"`` or ``"sphere"``.
        dimensions_m: box: full extents ``(x, y, z)``; cylinder: ``(radius, height, 0)``;
            sphere: ``(radius, 0, 0)``.
        position_m: part centre in the object frame.
        wxyz: part rotation in the object frame (identity except for cylinders).
        color: RGB in ``[0, 1]``.
        vertices / faces: a ``"mesh"`` part's render triangles in the object frame
            (``position_m`` and ``wxyz`` are then the identity), else None.
    """

    shape: str
    dimensions_m: tuple[float, float, float]
    position_m: tuple[float, float, float]
    wxyz: tuple[float, float, float, float]
    color: tuple[float, float, float]
    vertices: np.ndarray | None = field(default=None, compare=False)
    faces: np.ndarray | None = field(default=None, compare=False)


def part_placements(scene_object: object) -> list[PartPlacement]:
    """The parts of a :class:`~humanclaw_gym.scenes.spec.SceneObject` as viser primitives.

    Args:
        scene_object: a ``SceneObject`` (its ``parts`` are read).

    Returns:
        One placement per part, in the object's frame (place the object frame itself at
        ``position`` with :func:`object_frame_wxyz` of ``yaw_rad``).
    """
    out: list[PartPlacement] = []
    identity = (1.0, 0.0, 0.0, 0.0)
    for part in scene_object.parts:  # type: ignore[attr-defined]
        size = tuple(float(v) for v in part.size)
        if part.shape == "box":
            dims = (2.0 * size[0], 2.0 * size[1], 2.0 * size[2])
            wxyz = identity
        elif part.shape == "cylinder":
            dims = (size[0], 2.0 * size[1], 0.0)
            wxyz = CYLINDER_Y_FROM_Z_WXYZ
        elif part.shape == "sphere":
            dims = (size[0], 0.0, 0.0)
            wxyz = identity
        elif part.shape == "mesh":  # imported scenes: the render mesh, object frame
            from humanclaw_gym.scenes.meshes import load_part_mesh, place_vertices

            ref = part.mesh
            v, f = load_part_mesh(ref).triangles()
            out.append(
                PartPlacement(
                    shape="mesh",
                    dimensions_m=(2.0 * size[0], 2.0 * size[1], 2.0 * size[2]),  # type: ignore[arg-type]
                    position_m=(0.0, 0.0, 0.0),
                    wxyz=identity,
                    color=tuple(float(c) for c in part.color),  # type: ignore[arg-type]
                    vertices=place_vertices(v, ref).astype(np.float32),
                    faces=f.astype(np.uint32),
                )
            )
            continue
        else:
            raise ValueError(
                f"part shape {part.shape!r} of {getattr(scene_object, 'name', '?')!r} is not"
                " one of 'box', 'cylinder', 'sphere'"
            )
        out.append(
            PartPlacement(
                shape=part.shape,
                dimensions_m=dims,  # type: ignore[arg-type]
                position_m=tuple(float(v) for v in part.offset),  # type: ignore[arg-type]
                wxyz=wxyz,
                color=tuple(float(c) for c in part.color),  # type: ignore[arg-type]
            )
        )
    return out


@dataclass(frozen=True)
class LinkPlacement:
    """The primitive of one body link, relative to its link frame.

    Attributes:
        joint: joint index (``JOINT_NAMES`` order).
        kind: ``"capsule"``, ``"box"`` or ``"sphere"``.
        radius_m: capsule or sphere radius.
        half_length_m: half length of a capsule's cylindrical part.
        half_extents_m: half extents of a box.
        position_m: shape centre in the link frame.
        wxyz: shape rotation in the link frame (a capsule's axis is its local +Z).
    """

    joint: int
    kind: str
    radius_m: float
    half_length_m: float
    half_extents_m: tuple[float, float, float]
    position_m: tuple[float, float, float]
    wxyz: tuple[float, float, float, float]


def link_placements() -> list[LinkPlacement]:
    """One primitive per body link (24), from :func:`humanclaw_gym.body.link_shapes`."""
    from humanclaw_gym.body import link_shapes

    out = []
    for shape in link_shapes():
        qx, qy, qz, qw = shape.quat_xyzw
        out.append(
            LinkPlacement(
                joint=int(shape.joint),
                kind=shape.kind,
                radius_m=float(shape.radius),
                half_length_m=float(shape.half_length),
                half_extents_m=tuple(float(v) for v in shape.half_extents),  # type: ignore[arg-type]
                position_m=tuple(float(v) for v in shape.offset_m),  # type: ignore[arg-type]
                wxyz=(float(qw), float(qx), float(qy), float(qz)),
            )
        )
    return out


def body_link_poses(realized_frame: np.ndarray) -> np.ndarray:
    """World poses of the 24 link frames of a realized 75-D pose.

    Args:
        realized_frame: ``(75,)`` realized humanoid pose (world frame, Y up).

    Returns:
        ``float64 (24, 7)`` rows ``[x, y, z, qw, qx, qy, qz]``: viser's quaternion order.
    """
    from humanclaw_gym.replay.render import link_poses_from_frames

    frame = np.asarray(realized_frame, dtype=np.float64)
    if frame.shape != (75,) or not np.all(np.isfinite(frame)):
        raise ValueError(f"realized_frame must be a finite (75,) frame, got shape {frame.shape}")
    poses = link_poses_from_frames(frame)
    return np.concatenate([poses[:, :3], wxyz_from_xyzw(poses[:, 3:7])], axis=1)


def asset_link_meshes(asset: object) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """A body asset's visual meshes by link, each in its link frame, as the renderer draws
    them: ``(link index, vertices float64 (V, 3), faces int32 (F, 3))`` per link that has
    visual geometry (a link's parts merged into one mesh).

    Args:
        asset: a :class:`~humanclaw_gym.body.asset.BodyAsset`.
    """
    out = []
    for j, parts in enumerate(asset.visual):  # type: ignore[attr-defined]
        if not parts:
            continue
        verts, faces, count = [], [], 0
        for part in parts:
            verts.append(part.vertices)
            faces.append(part.faces + count)
            count += len(part.vertices)
        out.append((j, np.concatenate(verts), np.concatenate(faces).astype(np.int32)))
    return out


def asset_link_poses(asset: object, realized_frame: np.ndarray) -> np.ndarray:
    """World poses of a body asset's link frames for a realized 75-D pose (the poses physics
    reports for it, :meth:`~humanclaw_gym.body.asset.BodyAsset.link_poses_from_frame`).

    Returns:
        ``float64 (L, 7)`` rows ``[x, y, z, qw, qx, qy, qz]``: viser's quaternion order.
    """
    frame = np.asarray(realized_frame, dtype=np.float64)
    if frame.shape != (75,) or not np.all(np.isfinite(frame)):
        raise ValueError(f"realized_frame must be a finite (75,) frame, got shape {frame.shape}")
    poses = asset.link_poses_from_frame(frame)  # type: ignore[attr-defined]
    return np.concatenate([poses[:, :3], wxyz_from_xyzw(poses[:, 3:7])], axis=1)


def capsule_mesh(
    radius_m: float, half_length_m: float, segments: int = 12, rings: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """A closed capsule mesh centred at the origin with its axis along +Z.

    Args:
        radius_m: radius of the cylinder and the two hemispheres (> 0).
        half_length_m: half the distance between the hemisphere centres (>= 0).
        segments: vertices around the axis (>= 3).
        rings: latitude rings per hemisphere, equator excluded (>= 1).

    Returns:
        ``vertices float32 (V, 3)`` and counter-clockwise (outward) ``faces uint32 (F, 3)``.
    """
    if not radius_m > 0.0:
        raise ValueError(f"radius_m must be > 0, got {radius_m!r}")
    if not half_length_m >= 0.0:
        raise ValueError(f"half_length_m must be >= 0, got {half_length_m!r}")
    if segments < 3 or rings < 1:
        raise ValueError(f"segments must be >= 3 and rings >= 1, got {segments}, {rings}")
    # Latitudes from the north pole (pi/2) to the south pole (-pi/2); the equator appears
    # twice, once on each hemisphere, so the straight part is the band between them.
    north = [math.pi / 2.0 * (1.0 - k / (rings + 1)) for k in range(rings + 2)]
    rows: list[tuple[float, float]] = []  # (latitude, z shift)
    rows += [(lat, half_length_m) for lat in north]
    rows += [(-lat, -half_length_m) for lat in reversed(north)]
    azimuths = np.linspace(0.0, 2.0 * math.pi, segments, endpoint=False)
    vertices = []
    for lat, shift in rows:
        ring_r = radius_m * math.cos(lat)
        z = radius_m * math.sin(lat) + shift
        for a in azimuths:
            vertices.append((ring_r * math.cos(a), ring_r * math.sin(a), z))
    faces = []
    for r in range(len(rows) - 1):
        for s in range(segments):
            a = r * segments + s
            b = r * segments + (s + 1) % segments
            c = (r + 1) * segments + s
            d = (r + 1) * segments + (s + 1) % segments
            # Rows go from +Z down to -Z; this winding faces outward.
            faces.append((a, c, b))
            faces.append((b, c, d))
    return np.asarray(vertices, dtype=np.float32), np.asarray(faces, dtype=np.uint32)


def frustum_wxyz(forward: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Rotation ``(w, x, y, z)`` of a viser camera frustum looking along ``forward``.

    A viser frustum looks along its local +Z with image rows along local +Y (down) and
    columns along local +X (right).

    Args:
        forward: view direction in the world (need not be unit length).
        up: image-up direction in the world (not parallel to ``forward``).
    """
    f = np.asarray(forward, dtype=np.float64)
    u = np.asarray(up, dtype=np.float64)
    f = f / np.linalg.norm(f)
    down = -(u - np.dot(u, f) * f)
    norm = np.linalg.norm(down)
    if norm < 1e-9:
        raise ValueError("frustum_wxyz: up must not be parallel to forward")
    down /= norm
    right = np.cross(down, f)
    return wxyz_from_matrix(np.stack([right, down, f], axis=1))
