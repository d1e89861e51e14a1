"""Camera maths shared by both render backends (numpy only, no GL); the quaternion and
pose conversions it re-exports live in :mod:`humanclaw_gym.rotations`.

Conventions: world Y up, metres; quaternions are ``(x, y, z, w)``; matrices act on column
vectors (``world = R @ local``). The camera follows OpenGL: in eye space it looks down -Z
with +Y up and +X right, and the projection maps the view frustum to the clip cube
``[-1, 1]^3``. Pixel coordinates put row 0 at the top of the image and pixel ``(col, row)``
covers ``[col, col + 1) x [row, row + 1)``, so a pixel's centre is at ``+0.5``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from humanclaw_gym.backends.protocols import Camera
from humanclaw_gym.rotations import matrix_to_quat_xyzw, pose_to_matrix, quat_xyzw_to_matrix

__all__ = [
    "camera_basis",
    "check_link_poses",
    "check_object_poses",
    "cutaway_plane_of",
    "depth_from_window",
    "matrix_to_quat_xyzw",
    "pose_to_matrix",
    "project_points",
    "projection_matrix",
    "quat_xyzw_to_matrix",
    "validate_camera",
    "view_matrix",
]


def validate_camera(camera: Camera, max_size: int = 4096) -> None:
    """Raise ``ValueError`` naming the field if ``camera`` cannot be rendered."""
    if not isinstance(camera, Camera):
        raise TypeError(f"camera must be a humanclaw_gym Camera, got {type(camera).__name__}")
    for name in ("width", "height"):
        value = getattr(camera, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"Camera.{name} must be an int, got {value!r}")
        if not 1 <= value <= max_size:
            raise ValueError(f"Camera.{name} must be in [1, {max_size}] pixels, got {value}")
    if not 0.0 < camera.fov_y_deg < 180.0:
        raise ValueError(f"Camera.fov_y_deg must be in (0, 180) degrees, got {camera.fov_y_deg}")
    if not 0.0 < camera.near_m < camera.far_m:
        raise ValueError(
            f"Camera.near_m and far_m must satisfy 0 < near_m < far_m, got "
            f"near_m={camera.near_m}, far_m={camera.far_m}"
        )
    for name in ("position", "forward", "up"):
        vec = np.asarray(getattr(camera, name), dtype=np.float64)
        if vec.shape != (3,) or not np.all(np.isfinite(vec)):
            raise ValueError(
                f"Camera.{name} must be 3 finite numbers, got {getattr(camera, name)!r}"
            )
    camera_basis(camera)  # raises on degenerate forward/up
    cutaway_plane_of(camera)


def cutaway_plane_of(camera: Camera) -> np.ndarray | None:
    """The camera's cutaway plane ``(nx, ny, nz, d)`` with a unit normal, or None.

    Cameras without a ``cutaway_plane`` attribute (plain :class:`Camera`) have none; see
    :class:`humanclaw_gym.render.cameras.CutawayCamera`.
    """
    plane = getattr(camera, "cutaway_plane", None)
    if plane is None:
        return None
    arr = np.asarray(plane, dtype=np.float64)
    if arr.shape != (4,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"Camera.cutaway_plane must be 4 finite numbers, got {plane!r}")
    norm = float(np.linalg.norm(arr[:3]))
    if norm < 1e-9:
        raise ValueError(f"Camera.cutaway_plane needs a non-zero normal, got {plane!r}")
    return arr / norm


def camera_basis(camera: Camera) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthonormal ``(right, up, forward)`` world vectors of the camera.

    ``up`` is ``camera.up`` made orthogonal to ``forward``; raises ``ValueError`` when
    ``forward`` is zero or parallel to ``up``.
    """
    f = np.asarray(camera.forward, dtype=np.float64)
    u = np.asarray(camera.up, dtype=np.float64)
    fn = np.linalg.norm(f)
    if fn < 1e-12:
        raise ValueError(f"Camera.forward must not be zero, got {camera.forward}")
    f = f / fn
    r = np.cross(f, u)
    rn = np.linalg.norm(r)
    if rn < 1e-9 * max(np.linalg.norm(u), 1e-300) or rn < 1e-12:
        raise ValueError(f"Camera.forward {camera.forward} and Camera.up {camera.up} are parallel")
    r = r / rn
    return r, np.cross(r, f), f


def view_matrix(camera: Camera) -> np.ndarray:
    """World -> eye ``float64 (4, 4)`` matrix (OpenGL: the camera looks down eye -Z)."""
    r, u, f = camera_basis(camera)
    eye = np.asarray(camera.position, dtype=np.float64)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = r, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def projection_matrix(camera: Camera) -> np.ndarray:
    """Eye -> clip ``float64 (4, 4)`` perspective matrix from ``fov_y_deg``, the
    ``width / height`` aspect and the near/far planes (OpenGL depth range [-1, 1])."""
    t = 1.0 / math.tan(math.radians(camera.fov_y_deg) * 0.5)
    aspect = camera.width / camera.height
    n, f = camera.near_m, camera.far_m
    m = np.zeros((4, 4))
    m[0, 0] = t / aspect
    m[1, 1] = t
    m[2, 2] = (f + n) / (n - f)
    m[2, 3] = 2.0 * f * n / (n - f)
    m[3, 2] = -1.0
    return m


def depth_from_window(window_depth: np.ndarray, camera: Camera) -> np.ndarray:
    """Metric depth from a depth buffer of :func:`projection_matrix`'s projection.

    Args:
        window_depth: ``(H, W)`` window depths in ``[0, 1]`` (OpenGL: NDC z mapped to
            ``[0, 1]``; 1 where nothing was drawn).
        camera: the camera the buffer was rendered with (its near and far planes).

    Returns:
        ``float32 (H, W)``: distance along the viewing axis in metres (eye-space z, the
        quantity :func:`project_points` returns), in ``[near_m, far_m]``; ``far_m`` where
        nothing was drawn. The inverse of the perspective depth mapping, evaluated in
        float64; the final clip to ``[near_m, far_m]`` only removes rounding.
    """
    n, f = float(camera.near_m), float(camera.far_m)
    z_ndc = 2.0 * np.asarray(window_depth, dtype=np.float64) - 1.0
    depth = 2.0 * f * n / (f + n - z_ndc * (f - n))
    return np.clip(depth, n, f).astype(np.float32)


def project_points(camera: Camera, points_world: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Project world points into the image.

    Args:
        camera: the camera.
        points_world: ``(N, 3)`` world points (metres).

    Returns:
        ``pixels (N, 2)`` as float ``(col, row)`` (row 0 = top; the centre of pixel
        ``(c, r)`` is ``(c + 0.5, r + 0.5)``) and ``depth_m (N,)``, the distance along the
        viewing axis (negative behind the camera, where the pixel values are meaningless).
    """
    pts = np.atleast_2d(np.asarray(points_world, dtype=np.float64))
    if pts.shape[-1] != 3:
        raise ValueError(f"points_world must have shape (N, 3), got {pts.shape}")
    homo = np.concatenate([pts, np.ones((pts.shape[0], 1))], axis=1)
    eye = homo @ view_matrix(camera).T
    clip = eye @ projection_matrix(camera).T
    w = clip[:, 3:4]
    safe_w = np.where(np.abs(w) < 1e-12, 1e-12, w)
    ndc = clip[:, :2] / safe_w
    col = (ndc[:, 0] + 1.0) * 0.5 * camera.width
    row = (1.0 - ndc[:, 1]) * 0.5 * camera.height
    return np.stack([col, row], axis=1), -eye[:, 2]


def _check_quats(quats: np.ndarray, name: str) -> None:
    norms = np.linalg.norm(quats, axis=-1)
    bad = np.nonzero(norms < 1e-9)[0]
    if len(bad):
        raise ValueError(f"{name} row {int(bad[0])} has a zero-length quaternion")


def check_link_poses(link_poses: np.ndarray) -> np.ndarray:
    """Validate humanoid link poses: ``float64 (24, 7)``, finite, non-zero quaternions.

    Returns:
        The poses as a ``float64`` array.
    """
    poses = np.asarray(link_poses, dtype=np.float64)
    if poses.shape != (24, 7):
        raise ValueError(f"link_poses must have shape (24, 7), got {poses.shape}")
    if not np.all(np.isfinite(poses)):
        raise ValueError("link_poses must be finite")
    _check_quats(poses[:, 3:7], "link_poses")
    return poses


def check_object_poses(
    object_ids: Sequence[int],
    poses: np.ndarray,
    dynamic_ids: Collection[int],
    scene_id: str,
) -> tuple[list[int], np.ndarray]:
    """Validate a ``set_object_poses`` call before anything is changed.

    Args:
        object_ids: ids of the objects to move.
        poses: ``(M, 7)`` world poses, rows aligned with ``object_ids``.
        dynamic_ids: ids of the scene's dynamic objects (the only movable ones).
        scene_id: for the error message.

    Returns:
        ``(ids as ints, poses float64 (M, 7))``.
    """
    ids = [int(i) for i in object_ids]
    raw = np.asarray(poses, dtype=np.float64)
    arr = np.zeros((0, 7)) if not ids and raw.size == 0 else raw
    if arr.shape != (len(ids), 7):
        raise ValueError(
            f"poses must have shape ({len(ids)}, 7) to match object_ids, got {raw.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("poses must be finite")
    _check_quats(arr[:, 3:7], "poses")
    for oid in ids:
        if oid not in dynamic_ids:
            raise ValueError(
                f"object_ids contains {oid}, which is not a dynamic object of scene "
                f"{scene_id!r} (dynamic ids: {sorted(dynamic_ids)})"
            )
    return ids, arr
