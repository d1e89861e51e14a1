"""Route statistics and the easy / medium / hard difficulty label of an episode.

The route is the shortest collision-free path from the start to the nearest target's goal
region on the :class:`~humanclaw_gym.scenes.navgrid.NavGrid` (all static furniture present).
Three statistics are binned, each to level 0 (easy), 1 (medium) or 2 (hard):

==================  ==========================================  ======  ======
statistic           definition                                  easy    hard
==================  ==========================================  ======  ======
geodesic distance   route length, metres                        < 3.0   >= 5.0
choice points       turns of the simplified route (heading      <= 1    >= 3
                    change >= 30 degrees) + rooms entered
obstacle density    mean fraction of blocked cells in a         < 0.05  >= 0.09
                    1.5 m x 1.5 m window along the route
                    (sampled every 0.25 m)
==================  ==========================================  ======  ======

Values between the two thresholds are medium. The label is the rounded mean of the three
levels (means are thirds, so no ties): ``DIFFICULTY_LABELS[round(mean)]``. The thresholds
sit near the terciles of routes from uniformly random starts in the validation homes
(measured once, then frozen; changing them changes the shipped split).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from humanclaw_gym.episodes.schema import DIFFICULTY_LABELS
from humanclaw_gym.scenes.navgrid import NavGrid, path_length_m
from humanclaw_gym.scenes.spec import SceneObject

__all__ = [
    "CHOICE_POINT_THRESHOLDS",
    "DENSITY_THRESHOLDS",
    "DENSITY_WINDOW_HALF_M",
    "GEODESIC_THRESHOLDS_M",
    "TURN_THRESHOLD_RAD",
    "RouteStats",
    "bin_level",
    "difficulty_label",
    "nearest_difficulty",
    "route_stats",
]

#: (easy below, hard at or above), metres.
GEODESIC_THRESHOLDS_M: tuple[float, float] = (3.0, 5.0)
#: (easy at or below, hard at or above), count.
CHOICE_POINT_THRESHOLDS: tuple[int, int] = (1, 3)
#: (easy below, hard at or above), fraction.
DENSITY_THRESHOLDS: tuple[float, float] = (0.05, 0.09)
#: A simplified-route vertex counts as a turn when the heading changes at least this much.
TURN_THRESHOLD_RAD = math.radians(30.0)
#: Half side of the square window of the obstacle density.
DENSITY_WINDOW_HALF_M = 0.75
_DENSITY_SAMPLE_M = 0.25


def bin_level(value: float, easy_below: float, hard_from: float) -> int:
    """0 when ``value < easy_below``, 2 when ``value >= hard_from``, else 1."""
    if value < easy_below:
        return 0
    if value >= hard_from:
        return 2
    return 1


def difficulty_label(geodesic_m: float, choice_points: int, obstacle_density: float) -> str:
    """``"easy"``, ``"medium"`` or ``"hard"`` from the three statistics (see module doc)."""
    levels = (
        bin_level(geodesic_m, *GEODESIC_THRESHOLDS_M),
        bin_level(choice_points, CHOICE_POINT_THRESHOLDS[0] + 1, CHOICE_POINT_THRESHOLDS[1]),
        bin_level(obstacle_density, *DENSITY_THRESHOLDS),
    )
    return DIFFICULTY_LABELS[int(round(sum(levels) / 3.0))]


@dataclass(frozen=True)
class RouteStats:
    """Statistics of the shortest route from a start to a goal set."""

    geodesic_distance: float
    choice_points: int
    turns: int
    rooms_entered: int
    obstacle_density: float
    path_xz: np.ndarray  # dense path, (K, 2)
    simplified_xz: np.ndarray  # (M, 2)

    @property
    def difficulty(self) -> str:
        return difficulty_label(self.geodesic_distance, self.choice_points, self.obstacle_density)


def _count_turns(simplified: np.ndarray) -> int:
    if len(simplified) < 3:
        return 0
    seg = np.diff(simplified, axis=0)
    seg = seg[np.linalg.norm(seg, axis=1) > 1e-9]
    heading = np.arctan2(seg[:, 0], seg[:, 1])
    change = np.abs((np.diff(heading) + math.pi) % (2 * math.pi) - math.pi)
    return int(np.sum(change >= TURN_THRESHOLD_RAD - 1e-9))


def _rooms_entered(grid: NavGrid, path: np.ndarray) -> int:
    ix = np.floor((path[:, 0] - grid.origin_xz[0]) / grid.cell_m).astype(int)
    iz = np.floor((path[:, 1] - grid.origin_xz[1]) / grid.cell_m).astype(int)
    nz, nx = grid.shape
    ok = (ix >= 0) & (iz >= 0) & (ix < nx) & (iz < nz)
    rooms = grid.room_index[iz[ok], ix[ok]]
    rooms = rooms[rooms >= 0]
    if len(rooms) == 0:
        return 0
    return int(np.sum(rooms[1:] != rooms[:-1]))


def _resample(path: np.ndarray, step_m: float) -> np.ndarray:
    if len(path) < 2:
        return path
    seg = np.linalg.norm(np.diff(path, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    targets = np.arange(0.0, s[-1] + 1e-9, step_m)
    x = np.interp(targets, s, path[:, 0])
    z = np.interp(targets, s, path[:, 1])
    return np.stack([x, z], axis=1)


def route_stats(
    grid: NavGrid,
    start_xz: Sequence[float],
    goals: SceneObject | Sequence[SceneObject] | np.ndarray,
) -> RouteStats | None:
    """Shortest-route statistics from ``start_xz`` to ``goals`` (None when unreachable).

    Args:
        grid: the scene's navigation grid.
        start_xz: world ``(x, z)``.
        goals: anything :meth:`NavGrid.distance_field` accepts.
    """
    path = grid.shortest_path(start_xz, goals)
    if len(path) == 0:
        return None
    geodesic = grid.geodesic_distance(start_xz, goals)
    simplified = grid.simplify_path(path)
    turns = _count_turns(simplified)
    rooms = _rooms_entered(grid, path)
    samples = _resample(path, _DENSITY_SAMPLE_M)
    density = (
        float(np.mean(grid.blocked_fraction_near(samples, DENSITY_WINDOW_HALF_M)))
        if len(samples)
        else 0.0
    )
    if not math.isfinite(geodesic):
        geodesic = path_length_m(path)
    return RouteStats(
        geodesic_distance=float(geodesic),
        choice_points=turns + rooms,
        turns=turns,
        rooms_entered=rooms,
        obstacle_density=density,
        path_xz=path,
        simplified_xz=simplified,
    )


_T = TypeVar("_T")


def nearest_difficulty(
    want: int, candidates: Iterable[tuple[RouteStats, _T]]
) -> tuple[RouteStats, _T] | None:
    """The split generators' difficulty balance: of ``(stats, candidate)`` pairs, the first
    whose label is ``DIFFICULTY_LABELS[want]``, else the first of those nearest to it.

    ``candidates`` is read lazily and no further than the first exact match (so a
    generator drawing them from a random stream stops drawing there).

    Returns:
        The chosen pair, or None when there was no candidate.
    """
    best: tuple[int, RouteStats, _T] | None = None
    for stats, candidate in candidates:
        gap = abs(DIFFICULTY_LABELS.index(stats.difficulty) - want)
        if best is None or gap < best[0]:
            best = (gap, stats, candidate)
        if gap == 0:
            break
    return None if best is None else (best[1], best[2])
