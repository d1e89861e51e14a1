"""Small vectorised rotation helpers for motion generation (numpy only, float64).

Conventions match :mod:`humanclaw_gym.body.skeleton`: rotation matrices map a joint's own
axes to its parent's (or the world's) axes; an axis-angle (rotation) vector is
``angle * unit_axis`` with ``0 <= angle <= pi``; ``rot_y(psi)`` turns the body's forward
axis ``+Z`` to ``(sin psi, 0, cos psi)``.

All functions broadcast over leading axes and return fresh arrays.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "matrix_from_rotvec",
    "relative_angle",
    "rot_x",
    "rot_y",
    "rot_z",
    "rotvec_from_matrix",
    "wrap_angle",
    "yaw_of_matrix",
]


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


def _quat_from_matrix(m: np.ndarray) -> np.ndarray:
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


def rotvec_from_matrix(m: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` -> axis-angle ``(..., 3)`` with norm in ``[0, pi]``."""
    q = _quat_from_matrix(m)
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
