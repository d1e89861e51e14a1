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

The trackers of an image-goal ``metrics.json`` (task ``image_goal``, layout
``humanclaw_image_goal_metrics_v<N>``, ``N`` the highest ``since`` of its fields: 2, as the
shared trackers' fields come from the benchmark's second layout): the shared ``outcome``
(which episode, how it ended, steps), :class:`ImageGoalNavMetric` (``imagegoal_nav``:
success, SPL, distances, path, the route's difficulty) and the benchmark's Coll. %, Motion
Jerk and token-usage trackers, all started from an :class:`ImageGoalStart`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from humanclaw_gym.episodes.schema import DIFFICULTY_LABELS
from humanclaw_gym.metrics._checks import as_finite_float
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES
from humanclaw_gym.metrics.tracker import (
    DecisionRecord,
    EpisodeEnd,
    FrameRecord,
    check_start_fields,
)
from humanclaw_gym.registry import register_tracker

__all__ = [
    "IMAGEGOAL_NAV_SPEC",
    "ImageGoalNavMetric",
    "ImageGoalStart",
    "path_length_m",
    "spl",
    "stop_success",
]


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


# ---------------------------------------------------------------------------------------
# trackers
# ---------------------------------------------------------------------------------------
def _xz(value: Any, name: str) -> tuple[float, float]:
    pts = np.asarray(value, dtype=np.float64)
    if pts.shape != (2,) or not np.all(np.isfinite(pts)):
        raise ValueError(f"{name} must be 2 finite numbers (x, z) in metres, got {value!r}")
    return float(pts[0]), float(pts[1])


@dataclass(frozen=True, eq=False)
class ImageGoalStart:
    """What the image-goal trackers know when an episode starts (validated when made).

    Attributes:
        episode_id / scene_id: identifiers (non-empty).
        start_xz / goal_xz: the start and goal positions on the floor plane, metres.
        success_distance_m: the success radius, metres (> 0).
        geodesic_distance_m: shortest route from the start to the goal, metres (> 0; the
            SPL denominator).
        difficulty: the episode's difficulty label, or None.
        dynamic_ids / floor_height_m / initial_penetration_m / rules / floor_source /
        rollout_index / object_handles / link_names: as in
            :class:`~humanclaw_gym.metrics.tracker.EpisodeStart` (what the shared
            Coll. % and Motion Jerk trackers read).
    """

    episode_id: str
    scene_id: str
    start_xz: tuple[float, float]
    goal_xz: tuple[float, float]
    success_distance_m: float
    geodesic_distance_m: float
    dynamic_ids: Sequence[int]
    floor_height_m: float
    initial_penetration_m: float
    difficulty: str | None = None
    rules: str = DEFAULT_METRIC_RULES
    floor_source: str = "spawn_raycast"
    rollout_index: int = 0
    object_handles: Mapping[int, str] | None = None
    link_names: Sequence[str] | None = None

    def __post_init__(self) -> None:
        check_start_fields(self)
        object.__setattr__(self, "start_xz", _xz(self.start_xz, "start_xz"))
        object.__setattr__(self, "goal_xz", _xz(self.goal_xz, "goal_xz"))
        for name in ("success_distance_m", "geodesic_distance_m"):
            value = as_finite_float(getattr(self, name), name)
            if value <= 0.0:
                raise ValueError(f"{name} must be > 0 m, got {getattr(self, name)!r}")
            object.__setattr__(self, name, value)


#: Success, SPL and the distances behind them.
IMAGEGOAL_NAV_SPEC = MetricSpec(
    name="imagegoal_nav",
    fields=(
        MetricField(
            "success",
            "bool",
            "stopped with the pelvis within success_distance_m of the goal (x/z)",
            aggregate="SR: share of episodes, percent",
        ),
        MetricField(
            "spl",
            "number",
            "success weighted by path length, S * l / max(p, l)",
            minimum=0.0,
            maximum=1.0,
            aggregate="SPL: mean over episodes, percent",
        ),
        MetricField(
            "distance_to_goal_m",
            "number",
            "pelvis to goal position at the end, floor plane",
            unit="m",
            minimum=0.0,
            aggregate="mean over episodes",
        ),
        MetricField("success_distance_m", "number", "the success radius", unit="m", minimum=0.0),
        MetricField(
            "geodesic_distance_m",
            "number",
            "shortest route from the start to the goal on the navigation grid (l)",
            unit="m",
            minimum=0.0,
        ),
        MetricField(
            "path_length_m",
            "number",
            "pelvis path, x/z positions after every decision (p)",
            unit="m",
            minimum=0.0,
            aggregate="mean over episodes",
        ),
        MetricField(
            "difficulty",
            "str",
            "difficulty label of the route",
            choices=DIFFICULTY_LABELS,
            nullable=True,
        ),
    ),
    columns=(
        Column("SR", "sr_pct", "main", ".1f", Reduce("share", "success", scale=100.0), 1),
        Column("SPL", "spl_pct", "main", ".1f", Reduce("mean", "spl", scale=100.0), 2),
        Column(
            "dist. to goal (m)",
            "distance_to_goal_m",
            "main",
            ".2f",
            Reduce("mean", "distance_to_goal_m"),
            3,
        ),
    ),
)


@register_tracker("imagegoal_nav", description="image-goal success, SPL, distances, path")
class ImageGoalNavMetric:
    """Tracker of image-goal success and SPL (:data:`IMAGEGOAL_NAV_SPEC`): the pelvis x/z
    after every motion decision (the last realized frame of its chunk) makes the path; the
    last one is the final position."""

    spec: ClassVar[MetricSpec] = IMAGEGOAL_NAV_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {}

    def on_reset(self, start: ImageGoalStart) -> None:
        self._start = start
        self._points: list[tuple[float, float]] = [start.start_xz]

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        if frame.last_in_chunk:
            self._points.append((float(frame.realized[0]), float(frame.realized[2])))

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        start = self._start
        path = path_length_m(self._points)
        success, distance = stop_success(
            end.active_stop, self._points[-1], start.goal_xz, start.success_distance_m
        )
        return {
            "success": success,
            "spl": spl(success, start.geodesic_distance_m, path),
            "distance_to_goal_m": distance,
            "success_distance_m": start.success_distance_m,
            "geodesic_distance_m": start.geodesic_distance_m,
            "path_length_m": path,
            "difficulty": start.difficulty,
        }
