"""Final-distance geometry for the Nav metrics: body points to world-axis-aligned boxes.

The body is represented by points (pelvis, articulated root and every humanoid link
origin, world frame, metres). The distance of a point to a box is the full 3-D Euclidean
distance to the nearest point of the solid box (0 inside it). The episode's final distance
is the minimum over all body points and all target instances.
"""

from __future__ import annotations

import numpy as np

__all__ = ["body_to_target_aabb_distance", "point_aabb_distance"]


def _points(points: np.ndarray, name: str = "points") -> np.ndarray:
    arr = np.asarray(points, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] < 1:
        raise ValueError(f"{name} must have shape (N, 3) with N >= 1, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _aabbs(aabbs: np.ndarray) -> np.ndarray:
    arr = np.asarray(aabbs, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[1:] != (2, 3) or arr.shape[0] < 1:
        raise ValueError(f"aabbs must have shape (K, 2, 3) with K >= 1, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("aabbs must be finite")
    bad = np.argwhere(arr[:, 0] > arr[:, 1])
    if bad.size:
        k, axis = (int(v) for v in bad[0])
        raise ValueError(
            f"aabbs[{k}] has min > max on axis {axis}: {arr[k, 0, axis]!r} > {arr[k, 1, axis]!r}"
        )
    return arr


def point_aabb_distance(
    points: np.ndarray, aabb_min: np.ndarray, aabb_max: np.ndarray
) -> np.ndarray:
    """Euclidean distance (m) from each point to one axis-aligned box.

    Args:
        points: ``(N, 3)`` world points, metres.
        aabb_min: ``(3,)`` lower corner of the box, metres.
        aabb_max: ``(3,)`` upper corner of the box, metres (``>= aabb_min`` per axis).

    Returns:
        ``float64 (N,)`` distances in metres; 0 for points inside or on the box.
    """
    pts = _points(points)
    lo = np.asarray(aabb_min, dtype=np.float64).reshape(-1)
    hi = np.asarray(aabb_max, dtype=np.float64).reshape(-1)
    if lo.shape != (3,) or hi.shape != (3,):
        raise ValueError(f"aabb_min and aabb_max must have shape (3,), got {lo.shape}, {hi.shape}")
    box = _aabbs(np.stack([lo, hi])[None])[0]
    gap = np.maximum(np.maximum(box[0] - pts, pts - box[1]), 0.0)
    return np.linalg.norm(gap, axis=1)


def body_to_target_aabb_distance(points: np.ndarray, aabbs: np.ndarray) -> float:
    """Minimum distance (m) from any body point to any target instance's box.

    Args:
        points: ``(N, 3)`` world body points (pelvis, root, link origins), metres.
        aabbs: ``(K, 2, 3)`` target instance boxes, ``aabbs[k, 0]`` the min corner and
            ``aabbs[k, 1]`` the max corner, metres.

    Returns:
        The smallest point-to-box distance over all points and boxes, metres.
    """
    pts = _points(points)
    boxes = _aabbs(aabbs)
    gap = np.maximum(
        np.maximum(boxes[None, :, 0, :] - pts[:, None, :], pts[:, None, :] - boxes[None, :, 1, :]),
        0.0,
    )
    return float(np.linalg.norm(gap, axis=2).min())
