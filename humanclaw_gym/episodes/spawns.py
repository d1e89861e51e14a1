"""Where an episode may start: room for the whole standing body and a view ahead.

The body spawns standing (the motion generator's standing pose, whose arm hang varies with
the episode's style seed). Its collision shapes stay within :data:`SPAWN_BODY_RADIUS_M` of
the pelvis axis (the hands hang 0.30-0.37 m out) and its feet within
:data:`SPAWN_FOOT_RADIUS_M`; ``tests/test_spawns.py`` checks these bounds against the body
model. A start ``(x, z)`` is *clear* when, for every part of every object except
the floor slabs (static and movable alike, since a box on the floor is as solid as a
wall at spawn time), the part's x/z footprint keeps

* at least :data:`SPAWN_FOOT_RADIUS_M` from the start if the part is a floor covering (top at
  most :data:`FLOOR_COVER_TOP_M` above the floor: rugs, mats), so no foot stands in it;
* at least :data:`SPAWN_BODY_RADIUS_M` otherwise, unless the part lies wholly above the
  head (bottom at least :data:`SPAWN_BODY_TOP_M` above the floor: door lintels).

Distances are exact point-to-footprint distances from the cell centre (rotated rectangles
and discs, :class:`~humanclaw_gym.scenes.solids.Solids`). A clear start therefore has no
contact at all at reset, so the reset-time penetration metric cannot flag it.

A start *faces a wall* when a fixed part crosses the eye-height line straight ahead within
:data:`SPAWN_VIEW_CLEAR_M` of the eyes (eyes :data:`EYE_FORWARD_M` in front of the pelvis,
``EYE_HEIGHT_M`` above the floor): a person would not begin nose to the wall, so such a yaw
is drawn again.
"""

from __future__ import annotations

import math

import numpy as np

from humanclaw_gym.scenes.navgrid import EYE_HEIGHT_M, NavGrid
from humanclaw_gym.scenes.solids import Solids
from humanclaw_gym.scenes.spec import SceneSpec

__all__ = [
    "EYE_FORWARD_M",
    "FLOOR_COVER_TOP_M",
    "SPAWN_BODY_RADIUS_M",
    "SPAWN_BODY_TOP_M",
    "SPAWN_FOOT_RADIUS_M",
    "SPAWN_VIEW_CLEAR_M",
    "SpawnChecker",
]

#: Clearance of the standing body from the pelvis axis, metres (the hands hang up to 0.37 m
#: out, depending on the arm style of the episode's motion seed; 3 cm margin).
SPAWN_BODY_RADIUS_M = 0.40
#: Clearance of the feet from floor coverings, metres (feet reach 0.22 m + margin).
SPAWN_FOOT_RADIUS_M = 0.25
#: Parts whose top is at most this far above the floor are floor coverings (metres).
FLOOR_COVER_TOP_M = 0.03
#: Parts whose bottom is at least this far above the floor are above the head (metres).
SPAWN_BODY_TOP_M = 1.8
#: Free view straight ahead at eye height, metres from the eyes.
SPAWN_VIEW_CLEAR_M = 0.5
#: The eyes are this far in front of the pelvis axis in the rest pose, metres.
EYE_FORWARD_M = 0.12


class SpawnChecker:
    """Spawn rules of one scene (see the module docstring).

    Args:
        scene: the home.
        grid: its navigation grid (cell centres are the candidate starts).
    """

    def __init__(self, scene: SceneSpec, grid: NavGrid) -> None:
        self.scene = scene
        self.grid = grid
        self.floor_y = grid.floor_y
        solids = Solids.from_scene(scene, keep=lambda o: o.category != "floor")
        rel_top = solids.y1 - self.floor_y
        rel_bottom = solids.y0 - self.floor_y
        relevant = rel_bottom < SPAWN_BODY_TOP_M
        self._solids = solids.subset(relevant)
        self._radius = np.where(
            rel_top[relevant] <= FLOOR_COVER_TOP_M, SPAWN_FOOT_RADIUS_M, SPAWN_BODY_RADIUS_M
        )
        self._view = Solids.from_scene(
            scene, keep=lambda o: not o.dynamic and o.category != "floor"
        )
        self._clear: np.ndarray | None = None

    def clear_mask(self) -> np.ndarray:
        """``bool (nz, nx)``: cells whose centre is a clear start (and free on the grid)."""
        if self._clear is not None:
            return self._clear
        grid = self.grid
        blocked = np.zeros(grid.shape, dtype=bool)
        xs, zs = grid.cell_centers_x(), grid.cell_centers_z()
        nz, nx = grid.shape
        reach = self._solids.xz_reach()
        for m in range(len(self._solids)):
            one = self._solids.subset(np.arange(len(self._solids)) == m)
            r = float(self._radius[m])
            cx, cz = self._solids.center[m, 0], self._solids.center[m, 2]
            ix0 = max(int(math.floor((cx - reach[m, 0] - r - grid.origin_xz[0]) / grid.cell_m)), 0)
            ix1 = min(int(math.ceil((cx + reach[m, 0] + r - grid.origin_xz[0]) / grid.cell_m)), nx)
            iz0 = max(int(math.floor((cz - reach[m, 1] - r - grid.origin_xz[1]) / grid.cell_m)), 0)
            iz1 = min(int(math.ceil((cz + reach[m, 1] + r - grid.origin_xz[1]) / grid.cell_m)), nz)
            if ix0 >= ix1 or iz0 >= iz1:
                continue
            gx, gz = np.meshgrid(xs[ix0:ix1], zs[iz0:iz1])
            pts = np.column_stack([gx.ravel(), gz.ravel()])
            near = one.footprint_distance(pts)[:, 0] < r
            blocked[iz0:iz1, ix0:ix1] |= near.reshape(gx.shape)
        clear = grid.free & ~blocked
        clear.setflags(write=False)
        self._clear = clear
        return clear

    def is_clear(self, x: float, z: float) -> bool:
        """True when the whole standing body at ``(x, z)`` touches nothing (exact check)."""
        d = self._solids.footprint_distance(np.array([[float(x), float(z)]]))[0]
        return bool(np.all(d >= self._radius))

    def faces_wall(self, x: float, z: float, yaw_rad: float) -> bool:
        """True when fixed geometry crosses the eye-height line straight ahead within
        :data:`SPAWN_VIEW_CLEAR_M` of the eyes."""
        fx, fz = math.sin(yaw_rad), math.cos(yaw_rad)
        y = self.floor_y + EYE_HEIGHT_M
        ex, ez = x + EYE_FORWARD_M * fx, z + EYE_FORWARD_M * fz
        a = np.array([[ex, y, ez]])
        b = np.array([[ex + SPAWN_VIEW_CLEAR_M * fx, y, ez + SPAWN_VIEW_CLEAR_M * fz]])
        return bool(self._view.segments_hit(a, b)[0])
