"""Where the env's cameras sit: ego (on the head), exo (third person) and top-down.

Pure functions of the humanoid's link poses (``float64 (24, 7)``, rows
``[x, y, z, qx, qy, qz, qw]`` of each joint frame, :func:`body.skeleton.link_shapes`
convention) or of a :class:`~humanclaw_gym.scenes.spec.SceneSpec`; they return
:class:`~humanclaw_gym.backends.protocols.Camera` records that either render backend takes.

Choices (see ``docs/rendering.md``):

* **Ego**: the eye point :data:`~humanclaw_gym.body.skeleton.EYE_OFFSET_IN_HEAD_M` in the
  head link frame, looking along the head's +Z pitched down by
  :data:`EGO_PITCH_DOWN_DEG` (20 degrees) with a 90 degree vertical field of view. At eye
  height (about 1.6 m) that shows the floor from about 0.75 m ahead of the feet up to 25
  degrees above the horizon, so both the free floor ahead and furniture (beds, couches,
  tables at 0.4-0.9 m) are in view; looking straight ahead would spend half of the image
  on walls and ceiling height.
* **Exo**: behind the pelvis along the body's floor heading, above it, looking at the
  chest; as the body sits down (its hips flex) the camera swings round to the body's side,
  so a sit is seen in profile, with the seat. Given the scene, it comes in from walls and
  tall furniture between it and the chest (at least :data:`EXO_MIN_DISTANCE_M` away) and
  takes the body's freer side. It is a :class:`CutawayCamera`: a vertical *cutaway plane*
  :data:`EXO_CUTAWAY_BEHIND_M` from the pelvis towards the camera removes the scenery on
  the camera's side of it (walls are cut through; furniture and small objects are removed
  whole when their centre lies on that side, so no slivers remain; anything within
  :data:`EXO_KEEP_NEAR_M` of the pelvis, such as the seat it sits on, is never cut), so a
  wall behind the humanoid does not hide it. Floors, rugs, stairs and platforms
  (:data:`UNCUT_CATEGORIES`) and the humanoid are never cut. A plain near plane cannot do
  this: seen from above, the foot of a wall just behind the body is as far from the camera
  as the floor there, so only a cut that knows which objects are floors keeps the floor
  and drops the wall.
* **Top-down**: above the centre of the scene looking straight down, image right = world
  +X, image up = world -Z.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from humanclaw_gym.backends.protocols import Camera
from humanclaw_gym.body.skeleton import EYE_OFFSET_IN_HEAD_M, JOINT_INDEX
from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX
from humanclaw_gym.render.transforms import check_link_poses
from humanclaw_gym.rotations import quat_xyzw_to_matrix

__all__ = [
    "BODY_ASSET_EGO_FORWARD_M",
    "BODY_ASSET_EGO_PITCH_MIX",
    "CUT_THROUGH_CATEGORIES",
    "EGO_FAR_M",
    "EGO_FOV_Y_DEG",
    "EGO_NEAR_M",
    "EGO_PITCH_DOWN_DEG",
    "EXO_BEHIND_M",
    "EXO_CUTAWAY_BEHIND_M",
    "EXO_FOV_Y_DEG",
    "EXO_HEIGHT_ABOVE_PELVIS_M",
    "EXO_KEEP_NEAR_M",
    "EXO_MIN_DISTANCE_M",
    "EXO_SIDE_HIP_FLEX_DEG",
    "UNCUT_CATEGORIES",
    "CutawayCamera",
    "body_asset_ego_camera",
    "cut_away_whole",
    "ego_camera",
    "exo_camera",
    "seated_share",
    "top_down_camera",
]

#: Vertical field of view of the ego camera (square image: horizontal is the same).
EGO_FOV_Y_DEG = 90.0
#: How far the ego camera looks below the head's forward axis.
EGO_PITCH_DOWN_DEG = 20.0
#: Near and far clip planes of the ego camera (metres); depth images lie in this range.
EGO_NEAR_M = 0.05
EGO_FAR_M = 50.0
#: Exo camera placement relative to the pelvis (along the body's floor heading).
EXO_BEHIND_M = 2.2
EXO_HEIGHT_ABOVE_PELVIS_M = 1.6
EXO_FOV_Y_DEG = 60.0
#: The exo camera looks at this point above the pelvis (the chest).
_EXO_TARGET_ABOVE_PELVIS_M = 0.3
#: The exo cutaway plane is this far from the pelvis towards the camera (clear of the back
#: and the arms).
EXO_CUTAWAY_BEHIND_M = 0.45
#: A body asset's ego camera sits this far ahead of the eyes along the head's forward axis
#: (the reference release's head placement).
BODY_ASSET_EGO_FORWARD_M = 0.02
#: ...and looks along ``(1 - m) * forward + m * down`` of the head (about 33.7 degrees down).
BODY_ASSET_EGO_PITCH_MIX = 0.4
#: Scene categories a cutaway never removes (what the body stands on).
UNCUT_CATEGORIES: frozenset[str] = frozenset({"floor", "rug", "stairs", "platform"})
#: Scene categories a cutaway cuts through (long walls; an imported home's stage); every
#: other cuttable object is removed whole or kept whole (:func:`cut_away_whole`).
CUT_THROUGH_CATEGORIES: frozenset[str] = frozenset({"wall", "stage"})
#: Scene objects whose footprint comes this close to the pelvis (x/z, metres) are never cut
#: away: what the body sits on or stands against stays in the picture.
EXO_KEEP_NEAR_M = 0.35
#: Mean hip flexion (degrees) over which the exo camera swings from behind the body to its
#: side: a body sitting down is seen in profile.
EXO_SIDE_HIP_FLEX_DEG = (20.0, 60.0)
#: With a scene the exo camera comes in from walls and tall furniture between it and the
#: chest, to this far from them, but never nearer the pelvis than EXO_MIN_DISTANCE_M.
EXO_MIN_DISTANCE_M = 1.0
_EXO_WALL_MARGIN_M = 0.3
_EXO_RAY_STEP_M = 0.1

_PELVIS = JOINT_INDEX["pelvis"]
_HEAD = JOINT_INDEX["head"]
_HIPS = (JOINT_INDEX["left_hip"], JOINT_INDEX["right_hip"])
_KNEES = (JOINT_INDEX["left_knee"], JOINT_INDEX["right_knee"])


@dataclass(frozen=True)
class CutawayCamera(Camera):
    """A :class:`Camera` with a cutaway plane for third-person views.

    ``cutaway_plane`` is ``(nx, ny, nz, d)``; ``n . x + d < 0`` is the cut side (world
    point ``x``). Objects whose category is in :data:`UNCUT_CATEGORIES` are never cut. Walls
    (:data:`CUT_THROUGH_CATEGORIES`) are cut through: not drawn on the cut side (moderngl
    clips them per pixel; the TinyRenderer fallback hides such an object whole when its
    bounding box lies entirely on the cut side, or reaches onto it and blocks a sight line
    from the camera to the humanoid). Every other object is removed whole when the centre
    of its bounding box lies on the cut side and its footprint is more than
    :data:`EXO_KEEP_NEAR_M` from the pelvis (:func:`cut_away_whole`), so a cut leaves no
    slivers and never takes the seat the body sits on. Renderers that know nothing of
    cutaways draw it as a plain camera. ``None`` disables the cut.
    """

    cutaway_plane: tuple[float, float, float, float] | None = None


def cut_away_whole(
    plane: np.ndarray | None,
    centres: np.ndarray,
    lo_xz: np.ndarray,
    hi_xz: np.ndarray,
    pelvis: np.ndarray | None,
) -> np.ndarray:
    """Which objects that a cutaway removes whole (not :data:`CUT_THROUGH_CATEGORIES`) it
    removes for this image, ``bool (O,)``: those whose bounding-box centre lies on the cut
    side of ``plane`` and whose x/z box (``lo_xz``, ``hi_xz``, ``(O, 2)``) is more than
    :data:`EXO_KEEP_NEAR_M` from the pelvis (``None``: no body drawn, nothing is kept)."""
    centres = np.asarray(centres, dtype=np.float64).reshape(-1, 3)
    if plane is None or len(centres) == 0:
        return np.zeros(len(centres), dtype=bool)
    plane = np.asarray(plane, dtype=np.float64)
    hide = centres @ plane[:3] + plane[3] < 0.0
    if pelvis is not None:
        p = np.asarray(pelvis, dtype=np.float64)[[0, 2]]
        gap = np.maximum(np.maximum(lo_xz - p, p - hi_xz), 0.0)
        hide &= np.hypot(gap[:, 0], gap[:, 1]) > EXO_KEEP_NEAR_M
    return hide


def _tuple3(v: np.ndarray) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


def ego_camera(
    link_poses: np.ndarray,
    width: int = EGO_SIZE_PX,
    height: int = EGO_SIZE_PX,
    fov_y_deg: float = EGO_FOV_Y_DEG,
    pitch_down_deg: float = EGO_PITCH_DOWN_DEG,
    near_m: float = EGO_NEAR_M,
    far_m: float = EGO_FAR_M,
) -> Camera:
    """The egocentric camera on the head.

    Args:
        link_poses: ``(24, 7)`` world poses of the humanoid's link frames.
        width, height: image size in pixels.
        fov_y_deg: vertical field of view.
        pitch_down_deg: rotation of the view axis below the head's forward (+Z) axis,
            about the head's +X axis.
        near_m, far_m: clip planes.

    Returns:
        A camera at the eye point, moving and turning with the head.
    """
    poses = check_link_poses(link_poses)
    rot = quat_xyzw_to_matrix(poses[_HEAD, 3:7])
    eye = poses[_HEAD, :3] + rot @ np.asarray(EYE_OFFSET_IN_HEAD_M)
    pitch = math.radians(pitch_down_deg)
    forward_local = np.array([0.0, -math.sin(pitch), math.cos(pitch)])
    up_local = np.array([0.0, math.cos(pitch), math.sin(pitch)])
    return Camera(
        position=_tuple3(eye),
        forward=_tuple3(rot @ forward_local),
        up=_tuple3(rot @ up_local),
        fov_y_deg=float(fov_y_deg),
        width=int(width),
        height=int(height),
        near_m=float(near_m),
        far_m=float(far_m),
    )


def seated_share(link_poses: np.ndarray) -> float:
    """How far the body has sat down, from its link poses: 0 with the hips' mean flexion (the
    thighs' forward swing in the pelvis frame) at most ``EXO_SIDE_HIP_FLEX_DEG[0]``, 1 from
    ``EXO_SIDE_HIP_FLEX_DEG[1]``, smooth (minimum-jerk) between."""
    poses = check_link_poses(link_poses)
    rot = quat_xyzw_to_matrix(poses[_PELVIS, 3:7])
    flex = 0.0
    for hip, knee in zip(_HIPS, _KNEES, strict=True):
        thigh = rot.T @ (poses[knee, :3] - poses[hip, :3])
        flex += 0.5 * math.degrees(math.atan2(thigh[2], -thigh[1]))
    lo, hi = EXO_SIDE_HIP_FLEX_DEG
    u = min(max((flex - lo) / (hi - lo), 0.0), 1.0)
    return u**3 * (10.0 - 15.0 * u + 6.0 * u * u)


def _exo_blockers(scene: object):
    """The scene's static parts that can stand between the exo camera and the body (every
    category but :data:`UNCUT_CATEGORIES`), as :class:`~humanclaw_gym.scenes.solids.Solids`,
    cached per scene content."""
    from humanclaw_gym.scenes.solids import Solids

    if not hasattr(scene, "objects"):  # a stand-in without geometry: nothing to avoid
        return None
    key = scene.content_hash()  # type: ignore[attr-defined]
    hit = _BLOCKERS.get(key)
    if hit is None:
        hit = Solids.from_scene(
            scene,  # type: ignore[arg-type]
            keep=lambda o: not o.dynamic and o.category not in UNCUT_CATEGORIES,
        )
        if len(_BLOCKERS) >= 8:
            _BLOCKERS.pop(next(iter(_BLOCKERS)))
        _BLOCKERS[key] = hit
    return hit


_BLOCKERS: dict[str, object] = {}


def _free_distance(solids, pelvis: np.ndarray, start: np.ndarray, direction: np.ndarray,
                   rise_per_m: float, longest: float) -> float:  # fmt: skip
    """How far (horizontally, metres) the segment from ``start`` along the horizontal unit
    ``direction``, rising ``rise_per_m``, stays clear of ``solids`` (parts near the pelvis
    excluded), up to ``longest``."""
    near = solids.footprint_distance(pelvis[[0, 2]][None])[0] <= EXO_KEEP_NEAR_M
    far = solids.subset(~near)
    steps = np.arange(1, int(math.ceil(longest / _EXO_RAY_STEP_M)) + 1) * _EXO_RAY_STEP_M
    steps = np.minimum(steps, longest)
    ends = (
        start
        + steps[:, None] * direction
        + (steps * rise_per_m)[:, None] * np.array([0.0, 1.0, 0.0])
    )
    blocked = far.segments_hit(np.repeat(start[None], len(ends), axis=0), ends)
    if not blocked.any():
        return float(longest)
    k = int(np.argmax(blocked))
    return float(steps[k - 1]) if k > 0 else 0.0


def body_asset_ego_camera(
    body: object,
    link_poses: np.ndarray,
    width: int = EGO_SIZE_PX,
    height: int = EGO_SIZE_PX,
    fov_y_deg: float = EGO_FOV_Y_DEG,
    near_m: float = EGO_NEAR_M,
    far_m: float = EGO_FAR_M,
) -> Camera:
    """The egocentric camera of a body asset, placed as the reference release places it on
    its SMPL-X body: at the midpoint of the ``left_eye_smplhf`` and ``right_eye_smplhf`` link
    origins (the ``head`` link origin when the body has no eyes) moved
    :data:`BODY_ASSET_EGO_FORWARD_M` along the head's forward (+Z) axis, looking along
    ``0.6 * forward + 0.4 * down`` of the head (:data:`BODY_ASSET_EGO_PITCH_MIX`), its up
    the head's +Y, 90 degrees field of view.

    Args:
        body: the :class:`~humanclaw_gym.body.asset.BodyAsset` (its link names).
        link_poses: ``(L, 7)`` world poses of the body's link frames.
        width, height, fov_y_deg, near_m, far_m: as :func:`ego_camera`.

    Raises:
        ValueError: the body has no ``head`` link, or the poses do not fit it.
    """
    poses = np.asarray(link_poses, dtype=np.float64)
    index = body.link_index  # type: ignore[attr-defined]
    head = index("head")
    if head is None or poses.ndim != 2 or poses.shape[1] != 7 or head >= len(poses):
        raise ValueError(
            f"body asset ego camera: needs a 'head' link and (L, 7) poses, got {poses.shape}"
        )
    if not np.all(np.isfinite(poses)):
        raise ValueError("body asset ego camera: link poses must be finite")
    rot = quat_xyzw_to_matrix(poses[head, 3:7])
    eyes = [index(n) for n in ("left_eye_smplhf", "right_eye_smplhf")]
    if all(e is not None for e in eyes):
        centre = 0.5 * (poses[eyes[0], :3] + poses[eyes[1], :3])
    else:
        centre = poses[head, :3]
    forward, up = rot[:, 2], rot[:, 1]
    mix = BODY_ASSET_EGO_PITCH_MIX
    look = (1.0 - mix) * forward - mix * up
    look = look / np.linalg.norm(look)
    cam_up = up - float(up @ look) * look
    return Camera(
        position=_tuple3(centre + BODY_ASSET_EGO_FORWARD_M * forward),
        forward=_tuple3(look),
        up=_tuple3(cam_up / np.linalg.norm(cam_up)),
        fov_y_deg=float(fov_y_deg),
        width=int(width),
        height=int(height),
        near_m=float(near_m),
        far_m=float(far_m),
    )


def exo_camera(
    link_poses: np.ndarray,
    width: int = EXO_SIZE_PX,
    height: int = EXO_SIZE_PX,
    fov_y_deg: float = EXO_FOV_Y_DEG,
    behind_m: float = EXO_BEHIND_M,
    above_m: float = EXO_HEIGHT_ABOVE_PELVIS_M,
    cutaway: bool = True,
    far_m: float = 50.0,
    scene: object | None = None,
) -> CutawayCamera:
    """A third-person camera behind (or, as the body sits, beside) and above the pelvis,
    looking at the chest.

    The body's heading is the pelvis' +Z projected on the floor, so the camera does not
    pitch or roll with the body; it stays level (up = world +Y). Its direction from the
    body turns from straight behind to the body's side by :func:`seated_share` (a quarter
    turn once the body sits), so a sit is seen in profile.

    Args:
        link_poses: ``(24, 7)`` world poses of the humanoid's link frames.
        width, height: image size in pixels.
        fov_y_deg: vertical field of view.
        behind_m: horizontal distance from the pelvis.
        above_m: height above the pelvis.
        cutaway: cut away the static scenery more than :data:`EXO_CUTAWAY_BEHIND_M`
            towards the camera from the pelvis (see :class:`CutawayCamera`); False draws
            everything.
        far_m: far clip plane.
        scene: the :class:`~humanclaw_gym.scenes.spec.SceneSpec` drawn (optional): the
            camera then turns to the body's side with more free room (left when the two
            are within 0.3 m) and comes in from walls and tall furniture between it and the
            chest, to ``_EXO_WALL_MARGIN_M`` from them but at least
            :data:`EXO_MIN_DISTANCE_M` from the pelvis. Without it: the left side, at
            ``behind_m``.

    Returns:
        The exo camera (a :class:`CutawayCamera`).
    """
    poses = check_link_poses(link_poses)
    pelvis = poses[_PELVIS, :3]
    fwd = quat_xyzw_to_matrix(poses[_PELVIS, 3:7])[:, 2]
    heading = np.array([fwd[0], 0.0, fwd[2]])
    norm = np.linalg.norm(heading)
    heading = np.array([0.0, 0.0, 1.0]) if norm < 1e-6 else heading / norm
    left = np.array([heading[2], 0.0, -heading[0]])  # the body's +X
    target = pelvis + np.array([0.0, _EXO_TARGET_ABOVE_PELVIS_M, 0.0])
    rise = (above_m - _EXO_TARGET_ABOVE_PELVIS_M) / max(behind_m, 1e-6)
    solids = _exo_blockers(scene) if scene is not None else None
    side = left
    if solids is not None and len(solids):
        room = [_free_distance(solids, pelvis, target, d, rise, behind_m) for d in (left, -left)]
        side = left if room[0] >= room[1] - 0.3 else -left
    turn = 0.5 * math.pi * seated_share(poses)
    away = math.cos(turn) * -heading + math.sin(turn) * side  # from the body to the camera
    distance = float(behind_m)
    if solids is not None and len(solids):
        free = _free_distance(solids, pelvis, target, away, rise, behind_m)
        if free < behind_m:
            distance = max(free - _EXO_WALL_MARGIN_M, EXO_MIN_DISTANCE_M)
    position = pelvis + distance * away + np.array([0.0, above_m, 0.0])
    forward = target - position
    plane = None
    if cutaway:
        cut_point = pelvis + EXO_CUTAWAY_BEHIND_M * away
        plane = (
            float(-away[0]),
            0.0,
            float(-away[2]),
            float(away[0] * cut_point[0] + away[2] * cut_point[2]),
        )
    return CutawayCamera(
        position=_tuple3(position),
        forward=_tuple3(forward / np.linalg.norm(forward)),
        up=(0.0, 1.0, 0.0),
        fov_y_deg=float(fov_y_deg),
        width=int(width),
        height=int(height),
        near_m=0.05,
        far_m=float(far_m),
        cutaway_plane=plane,
    )


def top_down_camera(
    scene: object,
    width: int = EXO_SIZE_PX,
    height: int = EXO_SIZE_PX,
    fov_y_deg: float = 50.0,
    margin_m: float = 0.5,
) -> Camera:
    """A camera above the scene centre looking straight down (image up = world -Z).

    Args:
        scene: a :class:`~humanclaw_gym.scenes.spec.SceneSpec` (anything with ``bounds()``).
        width, height: image size in pixels.
        fov_y_deg: vertical field of view; the height is chosen so the whole footprint
            plus ``margin_m`` fits.
        margin_m: free border around the scene footprint.

    Returns:
        The top-down camera.
    """
    lo, hi = (np.asarray(v, dtype=np.float64) for v in scene.bounds())  # type: ignore[attr-defined]
    centre = 0.5 * (lo + hi)
    half_x = 0.5 * (hi[0] - lo[0]) + margin_m
    half_z = 0.5 * (hi[2] - lo[2]) + margin_m
    tan_y = math.tan(math.radians(fov_y_deg) * 0.5)
    tan_x = tan_y * width / height
    distance = max(half_z / tan_y, half_x / tan_x)
    position = np.array([centre[0], hi[1] + distance, centre[2]])
    return Camera(
        position=_tuple3(position),
        forward=(0.0, -1.0, 0.0),
        up=(0.0, 0.0, -1.0),
        fov_y_deg=float(fov_y_deg),
        width=int(width),
        height=int(height),
        near_m=0.05,
        far_m=float(distance + (hi[1] - lo[1]) + 10.0),
    )
