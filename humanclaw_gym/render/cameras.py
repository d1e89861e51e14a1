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
  chest, returned as a :class:`CutawayCamera`: a vertical *cutaway plane*
  :data:`EXO_CUTAWAY_BEHIND_M` behind the pelvis removes the scenery (walls, furniture,
  small objects) on the camera's side of it, so a wall behind the humanoid does not hide
  it. Floors, rugs, stairs and platforms (:data:`UNCUT_CATEGORIES`) and the humanoid are
  never cut. A plain near plane cannot do this: seen from above, the foot of a
  wall just behind the body is as far from the camera as the floor there, so only a cut
  that knows which objects are floors keeps the floor and drops the wall.
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
    "EGO_FAR_M",
    "EGO_FOV_Y_DEG",
    "EGO_NEAR_M",
    "EGO_PITCH_DOWN_DEG",
    "EXO_BEHIND_M",
    "EXO_CUTAWAY_BEHIND_M",
    "EXO_FOV_Y_DEG",
    "EXO_HEIGHT_ABOVE_PELVIS_M",
    "UNCUT_CATEGORIES",
    "CutawayCamera",
    "body_asset_ego_camera",
    "ego_camera",
    "exo_camera",
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
#: The exo cutaway plane is this far behind the pelvis (clear of the back and the arms).
EXO_CUTAWAY_BEHIND_M = 0.45
#: A body asset's ego camera sits this far ahead of the eyes along the head's forward axis
#: (the reference release's head placement).
BODY_ASSET_EGO_FORWARD_M = 0.02
#: ...and looks along ``(1 - m) * forward + m * down`` of the head (about 33.7 degrees down).
BODY_ASSET_EGO_PITCH_MIX = 0.4
#: Scene categories a cutaway never removes (what the body stands on).
UNCUT_CATEGORIES: frozenset[str] = frozenset({"floor", "rug", "stairs", "platform"})

_PELVIS = JOINT_INDEX["pelvis"]
_HEAD = JOINT_INDEX["head"]


@dataclass(frozen=True)
class CutawayCamera(Camera):
    """A :class:`Camera` with a cutaway plane for third-person views.

    ``cutaway_plane`` is ``(nx, ny, nz, d)``: scene objects whose category is not in
    :data:`UNCUT_CATEGORIES` are not drawn where ``n . x + d < 0`` (world point ``x``).
    The moderngl renderer clips them per pixel; the TinyRenderer fallback hides each such
    object whole when its bounding box lies entirely on the cut side, or reaches onto it
    and blocks a sight line from the camera to the humanoid. Renderers that know nothing
    of cutaways draw it as a plain camera. ``None`` disables the cut.
    """

    cutaway_plane: tuple[float, float, float, float] | None = None


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
) -> CutawayCamera:
    """A third-person camera behind and above the pelvis, looking at the chest.

    The body's heading is the pelvis' +Z projected on the floor, so the camera does not
    pitch or roll with the body; it stays level (up = world +Y).

    Args:
        link_poses: ``(24, 7)`` world poses of the humanoid's link frames.
        width, height: image size in pixels.
        fov_y_deg: vertical field of view.
        behind_m: horizontal distance behind the pelvis.
        above_m: height above the pelvis.
        cutaway: cut away the static scenery more than :data:`EXO_CUTAWAY_BEHIND_M`
            behind the pelvis (see :class:`CutawayCamera`); False draws everything.
        far_m: far clip plane.

    Returns:
        The exo camera (a :class:`CutawayCamera`).
    """
    poses = check_link_poses(link_poses)
    pelvis = poses[_PELVIS, :3]
    fwd = quat_xyzw_to_matrix(poses[_PELVIS, 3:7])[:, 2]
    heading = np.array([fwd[0], 0.0, fwd[2]])
    norm = np.linalg.norm(heading)
    heading = np.array([0.0, 0.0, 1.0]) if norm < 1e-6 else heading / norm
    target = pelvis + np.array([0.0, _EXO_TARGET_ABOVE_PELVIS_M, 0.0])
    position = pelvis - behind_m * heading + np.array([0.0, above_m, 0.0])
    forward = target - position
    plane = None
    if cutaway:
        cut_point = pelvis - EXO_CUTAWAY_BEHIND_M * heading
        plane = (
            float(heading[0]),
            0.0,
            float(heading[2]),
            float(-(heading[0] * cut_point[0] + heading[2] * cut_point[2])),
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
