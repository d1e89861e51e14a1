"""Rotation maths of the whole package (numpy only, float64, vectorised).

One module for every rotation representation the package uses:

* **quaternions** are ``(x, y, z, w)`` (pybullet's and the pose rows' order); ``quat_log``
  returns the shortest arc (the sign with ``w >= 0``), angles in ``[0, pi]``;
* **rotation vectors** (axis-angle) are ``angle * unit_axis`` with ``0 <= angle <= pi``;
* **matrices** act on column vectors (``world = R @ local``) and map a joint's own axes to
  its parent's (or the world's); ``rot_y(psi)`` turns the body's forward axis ``+Z`` to
  ``(sin psi, 0, cos psi)``;
* **poses** are ``(..., 7)`` rows ``[x, y, z, qx, qy, qz, qw]``.

All functions broadcast over leading axes and return fresh arrays. (The Motion Jerk metric
and the motion-anomaly tracker keep their own few lines of rotation arithmetic: they follow
the reference release's operation order, which must not change with this module.)
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "cap_rotvec",
    "matrix_from_rotvec",
    "matrix_to_quat_xyzw",
    "pose_to_matrix",
    "quat_conj",
    "quat_exp",
    "quat_log",
    "quat_mul",
    "quat_normalize",
    "quat_rotate",
    "quat_xyzw_to_matrix",
    "relative_angle",
    "rot_x",
    "rot_y",
    "rot_z",
    "rotvec_from_matrix",
    "wrap_angle",
    "yaw_of_matrix",
]

_SMALL = 1e-12


def quat_normalize(q: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)``."""
    q = np.asarray(q, dtype=np.float64)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_conj(q: np.ndarray) -> np.ndarray:
    """Conjugate (= inverse of a unit quaternion), ``(..., 4)``."""
    q = np.asarray(q, dtype=np.float64)
    return np.concatenate([-q[..., :3], q[..., 3:]], axis=-1)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` (apply ``b`` first, then ``a``), ``(..., 4)``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ax, ay, az, aw = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bx, by, bz, bw = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def quat_exp(rotvec: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` of rotation vectors ``(..., 3)``."""
    v = np.asarray(rotvec, dtype=np.float64)
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(half)/angle, with its limit 0.5 - angle^2/48 near zero.
    scale = np.where(
        angle > 1e-8, np.sin(half) / np.where(angle > 1e-8, angle, 1.0), 0.5 - angle * angle / 48.0
    )
    return np.concatenate([v * scale, np.cos(half)], axis=-1)


def quat_log(q: np.ndarray) -> np.ndarray:
    """Shortest-arc rotation vectors ``(..., 3)`` of quaternions ``(..., 4)`` (any sign)."""
    q = np.asarray(q, dtype=np.float64)
    sign = np.where(q[..., 3:] < 0.0, -1.0, 1.0)
    xyz = q[..., :3] * sign
    w = q[..., 3:] * sign
    s = np.linalg.norm(xyz, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, w)
    # angle / s, with its limit 2 / w near zero.
    scale = np.where(s > _SMALL, angle / np.where(s > _SMALL, s, 1.0), 2.0 / np.maximum(w, _SMALL))
    return xyz * scale


def cap_rotvec(rotvec: np.ndarray, max_angle_rad: float) -> np.ndarray:
    """Scale rotation vectors ``(..., 3)`` down so that no angle exceeds ``max_angle_rad``."""
    v = np.asarray(rotvec, dtype=np.float64)
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    factor = np.where(angle > max_angle_rad, max_angle_rad / np.where(angle > 0.0, angle, 1.0), 1.0)
    return v * factor


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``(..., 3)`` by unit quaternions ``(..., 4)``."""
    q = np.asarray(q, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    u = q[..., :3]
    t = 2.0 * _cross(u, v)
    return v + q[..., 3:] * t + _cross(u, t)


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.cross`` for ``(..., 3)`` arrays without its axis bookkeeping (much faster on
    the tiny arrays used here)."""
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], axis=-1)


def wrap_angle(angle_rad: np.ndarray | float) -> np.ndarray:
    """Wrap angles to ``[-pi, pi)``."""
    a = np.asarray(angle_rad, dtype=np.float64)
    return (a + np.pi) % (2.0 * np.pi) - np.pi


# Matrices of single angles already built (the generator asks for the same foot yaws and
# pitches many times per chunk): copies of the very same values are returned.
_SINGLE_CACHE: dict[tuple[int, float, bool], np.ndarray] = {}
_SINGLE_CACHE_MAX = 4096


def _single_axis_rotation(a: float, axis: int) -> np.ndarray:
    key = (axis, a, math.copysign(1.0, a) > 0.0)  # -0.0 == 0.0, but sin(-0.0) is -0.0
    cached = _SINGLE_CACHE.get(key)
    if cached is not None:
        return cached.copy()
    c, s = float(np.cos(a)), float(np.sin(a))
    if axis == 0:
        m = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    elif axis == 1:
        m = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    else:
        m = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    if len(_SINGLE_CACHE) >= _SINGLE_CACHE_MAX:
        _SINGLE_CACHE.clear()
    _SINGLE_CACHE[key] = m.copy()
    return m


def _axis_rotation(angle_rad: np.ndarray | float, axis: int) -> np.ndarray:
    if isinstance(angle_rad, (float, np.floating)) or (
        isinstance(angle_rad, np.ndarray) and angle_rad.ndim == 0
    ):  # one angle: the same values as below, without the broadcasting machinery
        return _single_axis_rotation(float(angle_rad), axis)
    a = np.asarray(angle_rad, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    m = np.zeros(a.shape + (3, 3))
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    m[..., axis, axis] = 1.0
    m[..., i, i] = c
    m[..., j, j] = c
    m[..., i, j] = -s
    m[..., j, i] = s
    return m


def rot_x(angle_rad: np.ndarray | float) -> np.ndarray:
    """Rotation about +X, ``(..., 3, 3)``. Positive angles turn +Y towards +Z."""
    return _axis_rotation(angle_rad, 0)


def rot_y(angle_rad: np.ndarray | float) -> np.ndarray:
    """Rotation about +Y, ``(..., 3, 3)``. Positive angles turn +Z towards +X (a left turn)."""
    return _axis_rotation(angle_rad, 1)


def rot_z(angle_rad: np.ndarray | float) -> np.ndarray:
    """Rotation about +Z, ``(..., 3, 3)``. Positive angles turn +X towards +Y."""
    return _axis_rotation(angle_rad, 2)


def matrix_from_rotvec(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula: axis-angle ``(..., 3)`` -> rotation matrices ``(..., 3, 3)``."""
    rv = np.asarray(rotvec, dtype=np.float64)
    theta = np.linalg.norm(rv, axis=-1)
    small = theta < 1e-8
    safe = np.where(small, 1.0, theta)
    # sin(t)/t and (1-cos(t))/t^2 with Taylor series near zero.
    a = np.where(small, 1.0 - theta**2 / 6.0, np.sin(theta) / safe)
    b = np.where(small, 0.5 - theta**2 / 24.0, (1.0 - np.cos(theta)) / safe**2)
    x, y, z = rv[..., 0], rv[..., 1], rv[..., 2]
    k = np.zeros(rv.shape[:-1] + (3, 3))
    k[..., 0, 1], k[..., 0, 2] = -z, y
    k[..., 1, 0], k[..., 1, 2] = z, -x
    k[..., 2, 0], k[..., 2, 1] = -y, x
    eye = np.broadcast_to(np.eye(3), k.shape)
    return eye + a[..., None, None] * k + b[..., None, None] * (k @ k)


def rotvec_from_matrix(m: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` -> axis-angle ``(..., 3)`` with norm in ``[0, pi]``."""
    q = _quat_wxyz_from_matrix(m)
    w = q[..., 0]
    v = q[..., 1:]
    sin_half = np.linalg.norm(v, axis=-1)
    angle = 2.0 * np.arctan2(sin_half, w)
    small = sin_half < 1e-12
    scale = np.where(small, 2.0, angle / np.where(small, 1.0, sin_half))
    return v * scale[..., None]


def relative_angle(m_a: np.ndarray, m_b: np.ndarray) -> np.ndarray:
    """Angle (rad, ``[0, pi]``) of the rotation taking ``m_a`` to ``m_b``."""
    rel = np.swapaxes(np.asarray(m_a, dtype=np.float64), -1, -2) @ np.asarray(m_b, np.float64)
    return np.linalg.norm(rotvec_from_matrix(rel), axis=-1)


def yaw_of_matrix(m: np.ndarray) -> np.ndarray:
    """Yaw (rad) of the rotated forward axis ``m @ +Z`` projected on the floor."""
    m = np.asarray(m, dtype=np.float64)
    return np.arctan2(m[..., 0, 2], m[..., 2, 2])


def _quat_wxyz_from_matrix(m: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` as ``(w, x, y, z)`` with ``w >= 0`` (Shepperd's method)."""
    m = np.asarray(m, dtype=np.float64)
    tr = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    diag = np.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], axis=-1)
    choice = np.argmax(np.concatenate([tr[..., None], diag], axis=-1), axis=-1)
    q = np.empty(m.shape[:-2] + (4,))
    # case 0: trace largest
    s0 = np.sqrt(np.maximum(1.0 + tr, 1e-300)) * 2.0
    q0 = np.stack(
        [
            0.25 * s0,
            (m[..., 2, 1] - m[..., 1, 2]) / s0,
            (m[..., 0, 2] - m[..., 2, 0]) / s0,
            (m[..., 1, 0] - m[..., 0, 1]) / s0,
        ],
        axis=-1,
    )
    s1 = np.sqrt(np.maximum(1.0 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2], 1e-300)) * 2.0
    q1 = np.stack(
        [
            (m[..., 2, 1] - m[..., 1, 2]) / s1,
            0.25 * s1,
            (m[..., 0, 1] + m[..., 1, 0]) / s1,
            (m[..., 0, 2] + m[..., 2, 0]) / s1,
        ],
        axis=-1,
    )
    s2 = np.sqrt(np.maximum(1.0 + m[..., 1, 1] - m[..., 0, 0] - m[..., 2, 2], 1e-300)) * 2.0
    q2 = np.stack(
        [
            (m[..., 0, 2] - m[..., 2, 0]) / s2,
            (m[..., 0, 1] + m[..., 1, 0]) / s2,
            0.25 * s2,
            (m[..., 1, 2] + m[..., 2, 1]) / s2,
        ],
        axis=-1,
    )
    s3 = np.sqrt(np.maximum(1.0 + m[..., 2, 2] - m[..., 0, 0] - m[..., 1, 1], 1e-300)) * 2.0
    q3 = np.stack(
        [
            (m[..., 1, 0] - m[..., 0, 1]) / s3,
            (m[..., 0, 2] + m[..., 2, 0]) / s3,
            (m[..., 1, 2] + m[..., 2, 1]) / s3,
            0.25 * s3,
        ],
        axis=-1,
    )
    q[...] = q0
    for idx, cand in ((1, q1), (2, q2), (3, q3)):
        q = np.where((choice == idx)[..., None], cand, q)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0.0, -q, q)


def matrix_to_quat_xyzw(matrix: np.ndarray) -> np.ndarray:
    """Quaternions ``(x, y, z, w)`` (with ``w >= 0``) from rotation matrices ``(..., 3, 3)``."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.shape[-2:] != (3, 3):
        raise ValueError(f"matrix must have shape (..., 3, 3), got {m.shape}")
    return _quat_wxyz_from_matrix(m)[..., [1, 2, 3, 0]]


def quat_xyzw_to_matrix(quat_xyzw: np.ndarray) -> np.ndarray:
    """Rotation matrices from quaternions.

    Args:
        quat_xyzw: ``(..., 4)`` quaternions ``(x, y, z, w)``; normalised here (zero-length
            quaternions raise).

    Returns:
        ``float64 (..., 3, 3)`` rotation matrices.
    """
    q = np.asarray(quat_xyzw, dtype=np.float64)
    if q.shape[-1] != 4:
        raise ValueError(f"quat_xyzw must have 4 values in its last axis, got shape {q.shape}")
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm < 1e-12):
        raise ValueError("quat_xyzw contains a zero-length quaternion")
    x, y, z, w = np.moveaxis(q / norm, -1, 0)
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1.0 - 2.0 * (y * y + z * z)
    m[..., 0, 1] = 2.0 * (x * y - z * w)
    m[..., 0, 2] = 2.0 * (x * z + y * w)
    m[..., 1, 0] = 2.0 * (x * y + z * w)
    m[..., 1, 1] = 1.0 - 2.0 * (x * x + z * z)
    m[..., 1, 2] = 2.0 * (y * z - x * w)
    m[..., 2, 0] = 2.0 * (x * z - y * w)
    m[..., 2, 1] = 2.0 * (y * z + x * w)
    m[..., 2, 2] = 1.0 - 2.0 * (x * x + y * y)
    return m


def pose_to_matrix(pose_7: np.ndarray) -> np.ndarray:
    """``(..., 7)`` poses ``[x, y, z, qx, qy, qz, qw]`` -> ``(..., 4, 4)`` homogeneous matrices."""
    pose = np.asarray(pose_7, dtype=np.float64)
    if pose.shape[-1] != 7:
        raise ValueError(f"pose must have 7 values in its last axis, got shape {pose.shape}")
    out = np.zeros(pose.shape[:-1] + (4, 4))
    out[..., :3, :3] = quat_xyzw_to_matrix(pose[..., 3:7])
    out[..., :3, 3] = pose[..., :3]
    out[..., 3, 3] = 1.0
    return out
