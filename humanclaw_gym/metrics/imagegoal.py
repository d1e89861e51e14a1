"""Scoring image-goal navigation: success, SPL and the path the body walked.

* **Success** (SR): the episode ended with the policy's Stop and the pelvis then lies
  within the episode's success radius (1 m) of the goal position, measured on the floor
  plane (x/z). An episode cut by the step limit never succeeds.
* **SPL** (success weighted by path length, Anderson et al. 2018): ``S * l / max(p, l)``
  with ``S`` the success (0 or 1), ``l`` the shortest collision-free route from the start
  to the goal position on the scene's navigation grid (the episode's
  ``info.geodesic_distance``) and ``p`` the length of the path the pelvis walked.
* **Path length**: the pelvis x/z position after every decision (the reset pose first),
  summed segment by segment; so the sway of a stride within one 0.5 s chunk does not
  count, the route between decisions does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["path_length_m", "spl", "stop_success"]


def _finite(value: float, name: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number of metres, got {value!r}")
    out = float(value)
    if not math.isfinite(out) or out < minimum:
        raise ValueError(f"{name} must be a finite number of metres >= {minimum:g}, got {value!r}")
    return out


def path_length_m(points_xz: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Length (m) of the polyline through ``points_xz`` ``(K, 2)`` (0 for fewer than two).

    Raises:
        ValueError: not ``(K, 2)`` finite numbers.
    """
    pts = np.asarray(points_xz, dtype=np.float64)
    if pts.size == 0:
        return 0.0
    if pts.ndim != 2 or pts.shape[1] != 2 or not np.all(np.isfinite(pts)):
        raise ValueError(f"points_xz must be finite (K, 2) x/z positions, got shape {pts.shape}")
    return float(np.sum(np.hypot(*np.diff(pts, axis=0).T))) if len(pts) > 1 else 0.0


def stop_success(
    stopped: bool, pelvis_xz: Sequence[float], goal_xz: Sequence[float], radius_m: float
) -> tuple[bool, float]:
    """``(success, distance_m)``: the x/z distance of the pelvis to the goal and whether
    the episode succeeded (``stopped`` by the policy's Stop, within ``radius_m``)."""
    radius = _finite(radius_m, "radius_m")
    p = np.asarray(pelvis_xz, dtype=np.float64)
    g = np.asarray(goal_xz, dtype=np.float64)
    if (
        p.shape != (2,)
        or g.shape != (2,)
        or not (np.all(np.isfinite(p)) and np.all(np.isfinite(g)))
    ):
        raise ValueError(f"pelvis_xz and goal_xz must be 2 finite numbers, got {p!r}, {g!r}")
    distance = float(math.hypot(*(p - g)))
    return bool(stopped) and distance <= radius, distance


def spl(success: bool, shortest_m: float, path_m: float) -> float:
    """``S * l / max(p, l)`` (see the module docstring).

    Raises:
        ValueError: ``shortest_m`` not > 0 or ``path_m`` not >= 0 (finite metres).
    """
    shortest = _finite(shortest_m, "shortest_m")
    if shortest <= 0.0:
        raise ValueError(f"shortest_m must be > 0 m, got {shortest_m!r}")
    path = _finite(path_m, "path_m")
    return shortest / max(path, shortest) if success else 0.0
