"""Small vectorised quaternion helpers for the physics backend (xyzw order, numpy only).

Every function works on arrays of shape ``(..., 4)`` (quaternions) or ``(..., 3)``
(rotation vectors = axis * angle, radians). ``quat_log`` returns the *shortest arc*: a
quaternion and its negation are the same rotation, and the sign with ``w >= 0`` is used,
so the returned angle is always in ``[0, pi]``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "cap_rotvec",
    "quat_conj",
    "quat_exp",
    "quat_log",
    "quat_mul",
    "quat_normalize",
    "quat_rotate",
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
