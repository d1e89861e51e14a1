"""What a motion generator reads of the body it poses: :class:`MotionBody`.

The procedural synthesizer plans feet, pelvis and hands in metres and turns them into joint
rotations by inverse kinematics, and the learned generators' clean-up (:mod:`.footlock`)
does the same. Both need the posed body's proportions: where its joints are at rest (leg,
thigh and arm lengths, hip width), where its soles are (the standing pelvis height), how far
its pelvis reaches below the pelvis joint (how high it sits on a seat of a given height),
how its thighs lie over a seat's front edge and where its hands rest on them.

* :meth:`MotionBody.builtin` is the built-in skeleton's body
  (:mod:`humanclaw_gym.body.skeleton`): the arrays and primitive shapes the generators
  always used, so its motion is exactly what it was before bodies could differ.
* :meth:`MotionBody.from_asset` reads a body folder in the reference release's format
  (:class:`~humanclaw_gym.body.asset.BodyAsset`): rest joints from its link origins, foot
  boxes from the bounding boxes of its ankle and foot collision meshes (in their link frames),
  the seat and thigh geometry from its pelvis and thigh collision meshes (each collided as
  its convex hull, as both physics backends do), the hand-on-thigh height from its thigh
  meshes, and the rotation that turns its rest arm directions onto the built-in skeleton's
  (so the arm carriage rules mean the same pose; its rest arms hang lower than a T-pose).

Frames: link frames have the body frame's axes at rest (Y up, Z forward, X left); metres.
Nothing here imports a simulator; scipy (convex hulls) only in :meth:`from_asset`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from humanclaw_gym.body.skeleton import (
    JOINT_INDEX,
    JOINT_NAMES,
    NUM_JOINTS,
    PARENTS,
    REST_JOINTS_M,
    STANDING_PELVIS_HEIGHT_M,
    forward_kinematics,
    link_shapes,
)
from humanclaw_gym.rotations import rot_y

__all__ = [
    "ASSET_KNEE_BEND_RAD",
    "THIGH_TOP_SAMPLES",
    "ConvexPart",
    "MotionBody",
    "capsule_thigh_bottom_y",
]

_HIPS = (JOINT_INDEX["left_hip"], JOINT_INDEX["right_hip"])
_KNEES = (JOINT_INDEX["left_knee"], JOINT_INDEX["right_knee"])
_ANKLES = (JOINT_INDEX["left_ankle"], JOINT_INDEX["right_ankle"])
_TOES = (JOINT_INDEX["left_foot"], JOINT_INDEX["right_foot"])
_SHOULDERS = (JOINT_INDEX["left_shoulder"], JOINT_INDEX["right_shoulder"])
_ELBOWS = (JOINT_INDEX["left_elbow"], JOINT_INDEX["right_elbow"])
_WRISTS = (JOINT_INDEX["left_wrist"], JOINT_INDEX["right_wrist"])
_BOX_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
#: The least knee flexion the generators pose on a body asset (rad; see
#: :attr:`MotionBody.knee_bend_rad`).
ASSET_KNEE_BEND_RAD: float = math.radians(5.0)
#: Where along the thigh (hip 0, knee 1) the thigh's top is sampled for the resting hands
#: (the candidates of :func:`humanclaw_gym.motion._arms.hand_on_thigh`).
THIGH_TOP_SAMPLES = np.linspace(0.15, 0.7, 12)


@dataclass(frozen=True, eq=False)
class ConvexPart:
    """A convex collision shape as a point set with its hull's edges, link frame.

    Attributes:
        vertices: ``float64 (V, 3)`` hull vertices, metres.
        edges: ``int64 (E, 2)`` vertex pairs joined by a hull edge.
    """

    vertices: np.ndarray
    edges: np.ndarray

    @classmethod
    def of_points(cls, points: np.ndarray) -> ConvexPart:
        """The convex hull of ``points`` (``(N, 3)``, not all in one plane)."""
        from scipy.spatial import ConvexHull

        pts = np.asarray(points, dtype=np.float64)
        hull = ConvexHull(pts)
        index = np.unique(hull.simplices)
        remap = np.full(len(pts), -1, dtype=np.int64)
        remap[index] = np.arange(len(index))
        tri = remap[hull.simplices]
        edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
        edges = np.unique(np.sort(edges, axis=1), axis=0)
        verts = pts[index].copy()
        verts.setflags(write=False)
        edges.setflags(write=False)
        return cls(verts, edges)

    def placed(self, rot: np.ndarray, origin: np.ndarray) -> np.ndarray:
        """World vertices for the link frame's rotation ``(3, 3)`` and origin ``(3,)``."""
        return self.vertices @ np.asarray(rot).T + np.asarray(origin)

    def section(self, world: np.ndarray, coord: np.ndarray, level: float) -> np.ndarray:
        """Points of the hull's surface where ``coord`` (one value per vertex, linear in
        space) equals ``level``: the crossings of the hull's edges, ``(K, 3)`` (empty when
        the plane misses the hull)."""
        a, b = self.edges[:, 0], self.edges[:, 1]
        ca, cb = coord[a] - level, coord[b] - level
        cross = (ca * cb <= 0.0) & (ca != cb)
        if not np.any(cross):
            return np.zeros((0, 3))
        t = (ca[cross] / (ca[cross] - cb[cross]))[:, None]
        return world[a[cross]] + t * (world[b[cross]] - world[a[cross]])


@dataclass(frozen=True, eq=False)
class MotionBody:
    """The proportions of a posed body (see the module docstring); build it with
    :meth:`builtin` or :meth:`from_asset`.

    Attributes:
        name: the body's name (``"builtin"`` for the built-in skeleton).
        rest_joints_m: ``float64 (24, 3)`` pelvis-relative rest centres of the 75-D frame's
            joints (a body without hand joints gets them at the built-in offset from its
            wrists).
        ankle_corners, toe_corners: ``float64 (2, 8, 3)`` (left, right): the 8 corners of
            each foot's heel-to-ball box in the ankle joint frame and of its toe box in the
            foot (toe) joint frame.
        standing_pelvis_height_m: pelvis joint above the lowest sole point at rest.
        forearm_radius_m: how far the forearm's surface lies from its bone (the resting
            wrist joint is this much above the thigh's top, plus a clearance).
        pelvis: the pelvis's collision geometry as one convex part, or None for the
            built-in capsule (its formula is kept exactly).
        thighs: the left and right thigh's collision geometry, or None (built-in capsules).
        thigh_top_m: ``(2, 12)`` how far the top of each thigh lies from its bone (hip to
            knee joint) at :data:`THIGH_TOP_SAMPLES`, measured in the thigh's forward
            direction (up when seated); None: the built-in capsule's radius everywhere.
        arm_align: per side ``(shoulder, elbow)`` rotations turning the body's rest upper
            arm and forearm directions onto the built-in skeleton's (``shoulder @ upper =
            built-in direction``, ``elbow @ forearm`` likewise); None for the built-in.
        knee_bend_rad: the least knee flexion the generators pose (0: the leg straightens
            fully). A body asset keeps ``ASSET_KNEE_BEND_RAD``: the release's bodies weigh
            125 kg as written, and a straight knee carrying that weight bent backwards by
            10-12 degrees in both physics backends.
    """

    name: str
    rest_joints_m: np.ndarray
    ankle_corners: np.ndarray
    toe_corners: np.ndarray
    standing_pelvis_height_m: float
    forearm_radius_m: float
    pelvis: ConvexPart | None = None
    thighs: tuple[ConvexPart, ConvexPart] | None = None
    thigh_top_m: np.ndarray | None = None
    arm_align: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None
    knee_bend_rad: float = 0.0
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # ---- construction -----------------------------------------------------------------
    @staticmethod
    @lru_cache(maxsize=1)
    def builtin() -> MotionBody:
        """The built-in skeleton's body (one shared instance)."""
        ankle_c, toe_c = _builtin_foot_corners()
        return MotionBody(
            name="builtin",
            rest_joints_m=REST_JOINTS_M,
            ankle_corners=ankle_c,
            toe_corners=toe_c,
            standing_pelvis_height_m=STANDING_PELVIS_HEIGHT_M,
            forearm_radius_m=float(link_shapes()[_ELBOWS[0]].radius),
        )

    @classmethod
    def from_asset(cls, asset: Any) -> MotionBody:
        """The proportions of a :class:`~humanclaw_gym.body.asset.BodyAsset`.

        Raises:
            ValueError: the body lacks a link the motion poses (one of the 22 body joints
                ``pelvis`` ... ``right_wrist``) or the collision geometry of its pelvis,
                thighs, ankles or feet (one line naming the body folder and the link).
        """
        where = f"body asset {asset.path}"
        rest_links = asset.rest_link_origins_m
        rest = np.empty((NUM_JOINTS, 3))
        for j, name in enumerate(JOINT_NAMES):
            k = asset.link_index(name)
            if k is not None:
                rest[j] = rest_links[k]
            elif name.endswith("_hand"):  # the release's bodies carry the hands on the wrists
                rest[j] = rest[PARENTS[j]] + (REST_JOINTS_M[j] - REST_JOINTS_M[PARENTS[j]])
            else:
                raise ValueError(f"{where}: no link {name!r}; the motion poses all 22 body joints")
        rest.setflags(write=False)

        def points(joint: int) -> np.ndarray:
            name = JOINT_NAMES[joint]
            parts = asset.collision[asset.link_index(name)]
            if not parts:
                raise ValueError(
                    f"{where}: link {name!r} has no collision geometry; the motion places "
                    "it on floors and seats"
                )
            return np.concatenate([p.vertices for p in parts])

        boxes = []
        for joints in (_ANKLES, _TOES):
            rows = []
            for j in joints:
                pts = points(j)
                lo, hi = pts.min(axis=0), pts.max(axis=0)
                rows.append(0.5 * (lo + hi) + _BOX_SIGNS * 0.5 * (hi - lo))
            arr = np.stack(rows)
            arr.setflags(write=False)
            boxes.append(arr)
        ankle_c, toe_c = boxes
        sole = min(
            min(float(rest[_ANKLES[s], 1] + ankle_c[s, :, 1].min()) for s in (0, 1)),
            min(float(rest[_TOES[s], 1] + toe_c[s, :, 1].min()) for s in (0, 1)),
        )
        thighs = tuple(ConvexPart.of_points(points(j)) for j in _HIPS)
        tops = np.stack(
            [_thigh_top_profile(thighs[s], rest[_KNEES[s]] - rest[_HIPS[s]]) for s in (0, 1)]
        )
        tops.setflags(write=False)
        align = tuple(
            (
                _turn_onto(
                    rest[_ELBOWS[s]] - rest[_SHOULDERS[s]],
                    REST_JOINTS_M[_ELBOWS[s]] - REST_JOINTS_M[_SHOULDERS[s]],
                ),
                _turn_onto(
                    rest[_WRISTS[s]] - rest[_ELBOWS[s]],
                    REST_JOINTS_M[_WRISTS[s]] - REST_JOINTS_M[_ELBOWS[s]],
                ),
            )
            for s in (0, 1)
        )
        return cls(
            name=str(asset.name),
            rest_joints_m=rest,
            ankle_corners=ankle_c,
            toe_corners=toe_c,
            standing_pelvis_height_m=-sole,
            forearm_radius_m=_bone_radius(points(_ELBOWS[0]), rest[_WRISTS[0]] - rest[_ELBOWS[0]]),
            pelvis=ConvexPart.of_points(points(0)),
            thighs=(thighs[0], thighs[1]),
            thigh_top_m=tops,
            arm_align=align,
            knee_bend_rad=ASSET_KNEE_BEND_RAD,
        )

    @property
    def is_builtin(self) -> bool:
        """Whether this is the built-in skeleton's body (primitive shapes)."""
        return self.pelvis is None

    # ---- kinematics -------------------------------------------------------------------
    def forward_kinematics(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World joint positions ``(..., 24, 3)`` and global rotations ``(..., 24, 3, 3)``
        of ``(..., 75)`` frames on this body."""
        if self.is_builtin:
            return forward_kinematics(frames)
        return forward_kinematics(frames, self.rest_joints_m)

    def bone(self, child: int) -> np.ndarray:
        """The rest vector from joint ``child``'s parent to it, ``(3,)``."""
        return self.rest_joints_m[child] - self.rest_joints_m[PARENTS[child]]

    # ---- the seat ---------------------------------------------------------------------
    def pelvis_bottom_below_joint(self, pitch_rad: float, roll_rad: float = 0.0) -> float:
        """How far the pelvis's lowest point lies below the pelvis joint when the pelvis is
        pitched forward by ``pitch_rad`` (about the body's left axis) and rolled by
        ``roll_rad`` (about its forward axis, after the pitch), metres."""
        if self.is_builtin:
            if roll_rad != 0.0:
                raise ValueError("the built-in pelvis capsule sits without roll")
            shape = link_shapes()[0]
            # The capsule lies along the body's X axis, so its lowest point is one radius
            # below its centre for any pitch about X; the centre itself moves with the pitch.
            _, cy, cz = shape.offset_m
            centre_y = cy * np.cos(pitch_rad) - cz * np.sin(pitch_rad)
            return float(shape.radius - centre_y)
        rot = _pitch_roll(pitch_rad, roll_rad)
        assert self.pelvis is not None
        return float(-(self.pelvis.vertices @ rot[1]).min())

    def thigh_bottom_y(
        self,
        side: int,
        hip: np.ndarray,
        thigh_rot: np.ndarray,
        knee: np.ndarray,
        pelvis: np.ndarray,
        yaw_rad: float,
        ahead_m: float,
    ) -> float:
        """Height of the underside of thigh ``side`` where it crosses the vertical plane
        ``ahead_m`` in front of ``pelvis`` along the heading ``yaw_rad`` (the plane clamped
        to the thigh's extent). ``hip``/``knee``: its joints, ``thigh_rot``: its global
        rotation (the hip joint's)."""
        if self.thighs is None:
            return capsule_thigh_bottom_y(
                hip, knee, pelvis, yaw_rad, ahead_m, float(link_shapes()[_HIPS[side]].radius)
            )
        part = self.thighs[side]
        world = part.placed(thigh_rot, hip)
        fwd = self._forward(world, pelvis, yaw_rad)
        level = float(np.clip(ahead_m, fwd.min(), fwd.max()))
        cut = part.section(world, fwd, level)
        return float(cut[:, 1].min()) if len(cut) else float(world[:, 1].min())

    def thigh_lowest_behind(
        self,
        side: int,
        hip: np.ndarray,
        thigh_rot: np.ndarray,
        pelvis: np.ndarray,
        yaw_rad: float,
        ahead_m: float,
    ) -> float:
        """Lowest point of thigh ``side`` at or behind the vertical plane ``ahead_m`` in
        front of ``pelvis`` (over a seat whose front edge is there); +inf when the whole
        thigh lies in front of it."""
        if self.thighs is None:
            raise ValueError("the built-in thighs are not searched (their capsules sit higher)")
        part = self.thighs[side]
        world = part.placed(thigh_rot, hip)
        fwd = self._forward(world, pelvis, yaw_rad)
        low = world[fwd <= ahead_m, 1]
        cut = part.section(world, fwd, ahead_m)
        candidates = np.concatenate([low, cut[:, 1]])
        return float(candidates.min()) if len(candidates) else math.inf

    @staticmethod
    def _forward(world: np.ndarray, pelvis: np.ndarray, yaw_rad: float) -> np.ndarray:
        heading = rot_y(-float(yaw_rad))[2]  # the heading's row: forward coordinate
        return (world - np.asarray(pelvis)) @ heading

    # ---- hands on thighs and arm carriage ---------------------------------------------
    def thigh_top(self, side: int, u: float) -> float:
        """How far the top of thigh ``side`` lies from its bone at ``u`` (hip 0, knee 1)."""
        if self.thigh_top_m is None:
            return float(link_shapes()[_HIPS[side]].radius)
        return float(np.interp(u, THIGH_TOP_SAMPLES, self.thigh_top_m[side]))

    def arm_locals(
        self, shoulder: np.ndarray, elbow: np.ndarray, side: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """This body's shoulder and elbow local rotations for the built-in skeleton's
        ``(shoulder, elbow)`` rotations (``(..., 3, 3)``): the same upper-arm and forearm
        directions (the built-in body's are returned as they are)."""
        if self.arm_align is None:
            return shoulder, elbow
        r_s, r_e = self.arm_align[side]
        return shoulder @ r_s, r_s.T @ elbow @ r_e

    def arm_vectors(self, side: int) -> tuple[np.ndarray, np.ndarray]:
        """``(upper arm, forearm)`` rest vectors of arm ``side`` as :meth:`arm_locals`
        turns them (the built-in directions, this body's lengths)."""
        upper = self.bone(_ELBOWS[side])
        fore = self.bone(_WRISTS[side])
        if self.arm_align is None:
            return upper, fore
        r_s, r_e = self.arm_align[side]
        return r_s @ upper, r_e @ fore


def _builtin_foot_corners() -> tuple[np.ndarray, np.ndarray]:
    """Corners of the built-in skeleton's foot boxes (heel-to-ball box in the ankle frame,
    toe box in the foot frame), ``(2, 8, 3)`` each (left, right)."""
    shapes = link_shapes()
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    out = []
    for pick in (0, 1):
        rows = []
        for joints in zip(_ANKLES, _TOES, strict=True):
            shape = shapes[joints[pick]]
            if shape.kind != "box" or shape.quat_xyzw != (0.0, 0.0, 0.0, 1.0):
                raise ValueError("foot links are expected to be axis-aligned boxes")
            rows.append(np.asarray(shape.offset_m) + signs * np.asarray(shape.half_extents))
        arr = np.stack(rows)
        arr.setflags(write=False)
        out.append(arr)
    return out[0], out[1]


def capsule_thigh_bottom_y(
    hip: np.ndarray,
    knee: np.ndarray,
    pelvis: np.ndarray,
    yaw_rad: float,
    ahead_m: float,
    radius_m: float,
) -> float:
    """Height of the underside of a thigh capsule of radius ``radius_m`` ``ahead_m`` in
    front of the pelvis joint.

    The thigh runs from ``hip`` to ``knee`` (world points); "in front" is measured along the
    heading ``yaw_rad`` from ``pelvis``, and clamped to the thigh's extent.
    """
    heading = rot_y(-float(yaw_rad))
    f_hip = float((heading @ (np.asarray(hip) - pelvis))[2])
    f_knee = float((heading @ (np.asarray(knee) - pelvis))[2])
    run = max(f_knee - f_hip, 1e-6)
    u = float(np.clip((ahead_m - f_hip) / run, 0.0, 1.0))
    axis_y = float(hip[1] + u * (knee[1] - hip[1]))
    slope = float(np.arctan2(hip[1] - knee[1], run))
    return axis_y - radius_m / max(float(np.cos(slope)), 0.5)


def _pitch_roll(pitch_rad: float, roll_rad: float) -> np.ndarray:
    from humanclaw_gym.rotations import rot_x, rot_z

    return rot_x(pitch_rad) @ rot_z(roll_rad)


def _turn_onto(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation taking direction ``a`` onto direction ``b``."""
    from humanclaw_gym.rotations import matrix_from_rotvec

    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    axis = np.cross(a, b)
    s = float(np.linalg.norm(axis))
    if s < 1e-12:
        return np.eye(3)
    return matrix_from_rotvec(axis / s * math.atan2(s, float(a @ b)))


def _bone_radius(points: np.ndarray, bone: np.ndarray) -> float:
    """The median distance of a link's collision points from its bone's line (m)."""
    d = bone / np.linalg.norm(bone)
    along = points @ d
    perp = points - along[:, None] * d
    return float(np.median(np.linalg.norm(perp, axis=1)))


def _thigh_top_profile(part: ConvexPart, bone: np.ndarray) -> np.ndarray:
    """How far the thigh's hull reaches from the bone in the thigh's forward direction
    (the link's +Z made perpendicular to the bone) at each of :data:`THIGH_TOP_SAMPLES`."""
    d = bone / np.linalg.norm(bone)
    front = np.array([0.0, 0.0, 1.0]) - d[2] * d
    front /= np.linalg.norm(front)
    along = part.vertices @ d
    length = float(np.linalg.norm(bone))
    out = []
    for u in THIGH_TOP_SAMPLES:
        cut = part.section(part.vertices, along, float(u) * length)
        if len(cut) == 0:
            raise ValueError("the thigh's collision geometry does not span its bone")
        out.append(float((cut @ front).max()))
    return np.array(out)
