"""A 2-D navigation grid over the floor plane (x/z) of a :class:`SceneSpec`.

The grid is the planner's view of a home with all static furniture present:

* A part *blocks* when its vertical extent overlaps the body band ``0.03 .. 1.9 m`` above
  the floor. Floors, rugs (top <= 0.02 m) and door lintels (above 1.9 m) do not block;
  walls, furniture, stairs and raised platforms do. Dynamic objects are ignored: the body
  can push them. Cells outside every room are blocked.
* A cell is blocked when its square overlaps a blocking footprint (exact for the
  axis-aligned geometry the generator builds, conservative otherwise).
* ``free`` cells are those whose centre is at least ``clearance_m`` (the humanoid's
  radius) plus half a cell away from any blocked cell centre: a body centred in a free
  cell does not touch furniture.
* The *goal region* of a target object is its set of **approach points**: free cells from
  which a standing body can touch the object, i.e. whose x/z distance to the object's AABB
  is at most ``clearance_m + GOAL_MARGIN_M`` (body radius plus reach), with nothing fixed
  between body and box (the x/z segment from the cell centre to the nearest point of the
  box crosses no footprint of a fixed part in the body band) and a clear line of sight
  from the eyes (``EYE_HEIGHT_M`` above the cell centre) to the box (the nearest point, the
  centre or the top centre of the AABB is visible past every fixed part). A target behind a
  wall therefore has no goal region on the wall's other side, however close.

Paths are shortest paths on the 8-connected graph of free cells (edge cost = centre
distance, ``sqrt(2) * cell_m`` on diagonals; a diagonal move needs both side cells free).
Distance fields are computed with one multi-source Dijkstra from a goal set and cached, so
repeated queries against the same goals (an oracle planning every step) cost a lookup.

Grid indexing: ``array[iz, ix]``; cell ``(iz, ix)`` has its centre at
``origin_xz + ((ix + 0.5) * cell_m, (iz + 0.5) * cell_m)``. Rendered as an image, +x points
right and +z points down (the view from above, looking down -Y).
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import ndimage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from humanclaw_gym.scenes.solids import Solids
from humanclaw_gym.scenes.spec import SceneObject, SceneSpec

__all__ = [
    "APPROACH_OFFSET_M",
    "BLOCK_BAND_M",
    "EYE_HEIGHT_M",
    "GOAL_MARGIN_M",
    "NavGrid",
    "NavGridError",
    "approach_pose",
    "path_length_m",
    "seat_front_extent_m",
]

#: Vertical band (metres above the floor) in which geometry blocks the body.
BLOCK_BAND_M: tuple[float, float] = (0.03, 1.9)
#: A goal region reaches ``clearance_m + GOAL_MARGIN_M`` from the object's x/z AABB: the
#: body's radius plus the reach of a hand or a foot.
GOAL_MARGIN_M = 0.25
#: Eye height of the standing body above the floor, metres (line-of-sight checks).
EYE_HEIGHT_M = 1.6
#: The approach pose of a seat stands this far in front of the seat's front edge.
APPROACH_OFFSET_M = 0.17

_MAX_CACHED_FIELDS = 64
_EPS = 1e-9

GoalSpec = SceneObject | Sequence[SceneObject] | np.ndarray


class NavGridError(ValueError):
    """A navigation query is invalid (bad argument, no free cell, not a seat)."""


def path_length_m(path: np.ndarray) -> float:
    """Length of a polyline ``(K, 2)`` in metres (0 for fewer than two points)."""
    path = np.asarray(path, dtype=np.float64)
    if len(path) < 2:
        return 0.0
    return float(np.sum(np.linalg.norm(np.diff(path, axis=0), axis=1)))


def seat_front_extent_m(obj: SceneObject) -> float:
    """Distance from the object's origin to its front face along local +Z, metres."""
    front = -math.inf
    for part in obj.parts:
        front = max(front, part.offset[2] + float(part.local_half_extents()[2]))
    return front


def approach_pose(
    obj: SceneObject, offset_m: float = APPROACH_OFFSET_M
) -> tuple[float, float, float]:
    """Where to stand before sitting down on a seat, purely geometric.

    Args:
        obj: a sittable object (``seat_height_m`` set); its front is local +Z.
        offset_m: distance in front of the seat's front edge.

    Returns:
        ``(x_m, z_m, yaw_rad)``: a floor point centred in front of the seat and a yaw that
        faces *away* from the seat (the object's own yaw), so that sitting down moves the
        pelvis backwards onto it.
    """
    if obj.seat_height_m is None:
        raise NavGridError(
            f"object {obj.name!r} (category {obj.category!r}) is not sittable: seat_height_m is None"
        )
    dist = seat_front_extent_m(obj) + float(offset_m)
    front = obj.front_direction()
    x = obj.position[0] + front[0] * dist
    z = obj.position[2] + front[2] * dist
    yaw = math.atan2(front[0], front[2])
    return float(x), float(z), float(yaw)


def _part_vertical_extent(center_y: float, part) -> tuple[float, float]:
    if part.shape == "box" or part.shape == "cylinder":
        half = part.size[1]
    else:
        half = part.size[0]
    return center_y - half, center_y + half


class NavGrid:
    """Occupancy grid, clearance-inflated free space and shortest paths of one scene.

    Build it with :meth:`from_scene`. Attributes (read-only by convention):

    Attributes:
        scene_id: id of the scene the grid was built from.
        cell_m: cell edge length, metres.
        clearance_m: body radius the free space keeps from obstacles, metres.
        origin_xz: world x/z of the grid's corner (cell ``(0, 0)``'s outer corner).
        blocked: ``bool (nz, nx)``, raw obstacles (no inflation).
        free: ``bool (nz, nx)``, cells a body centre may occupy.
        room_index: ``int16 (nz, nx)``, index into ``rooms`` of the room a cell lies in,
            -1 outside every room.
        rooms: the scene's rooms.
        floor_y: world height of the lowest room floor, metres.
        band_m: the blocking band above ``floor_y`` (see ``BLOCK_BAND_M``).
    """

    def __init__(
        self,
        *,
        scene: SceneSpec,
        origin_xz: tuple[float, float],
        cell_m: float,
        clearance_m: float,
        blocked: np.ndarray,
        room_index: np.ndarray,
        band_m: tuple[float, float] = BLOCK_BAND_M,
    ) -> None:
        self.scene = scene
        self.scene_id = scene.scene_id
        self.rooms = scene.rooms
        self.cell_m = float(cell_m)
        self.clearance_m = float(clearance_m)
        self.origin_xz = (float(origin_xz[0]), float(origin_xz[1]))
        self.blocked = np.asarray(blocked, dtype=bool)
        self.room_index = np.asarray(room_index, dtype=np.int16)
        dist_cells = ndimage.distance_transform_edt(~self.blocked)
        self.free = dist_cells * self.cell_m >= self.clearance_m + 0.5 * self.cell_m - _EPS
        self.free &= ~self.blocked
        for arr in (self.blocked, self.free, self.room_index):
            arr.setflags(write=False)
        self._objects = {o.object_id: o for o in scene.objects}
        self._node_of: np.ndarray | None = None
        self._cell_of: np.ndarray | None = None
        self._graph: csr_matrix | None = None
        self._labels: np.ndarray | None = None
        self._nearest_free_idx: np.ndarray | None = None
        self._blocked_integral: np.ndarray | None = None
        self._fields: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        # scenes without rooms (imported meshes) set their floor themselves (scenes.meshgrid)
        self.floor_y = float(min((r.floor_y for r in scene.rooms), default=0.0))
        self.band_m = (float(band_m[0]), float(band_m[1]))
        self._body_solids: Solids | None = None
        self._sight_solids: Solids | None = None
        self._approach: dict[tuple[int, float], np.ndarray] = {}
        self.preferred_clearance_m: float | None = None
        self._clearance_weight = 0.0

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_scene(
        cls,
        scene: SceneSpec,
        cell_m: float = 0.05,
        clearance_m: float = 0.25,
        *,
        band_m: tuple[float, float] = BLOCK_BAND_M,
    ) -> NavGrid:
        """Rasterise a scene.

        Args:
            scene: the home.
            cell_m: cell edge, metres, in ``[0.01, 0.5]``.
            clearance_m: body radius kept from obstacles, metres, in ``[0, 1]``.
            band_m: vertical band (above the floor) in which geometry blocks.

        Returns:
            The grid.
        """
        if not 0.01 <= float(cell_m) <= 0.5:
            raise NavGridError(f"cell_m must be in [0.01, 0.5] m, got {cell_m!r}")
        if not 0.0 <= float(clearance_m) <= 1.0:
            raise NavGridError(f"clearance_m must be in [0, 1] m, got {clearance_m!r}")
        if not scene.rooms:
            raise NavGridError(
                f"scene {scene.scene_id!r} has no rooms; a navigation grid needs room footprints"
            )
        cell = float(cell_m)
        lo = np.min([r.min_xz for r in scene.rooms], axis=0) - 0.2
        hi = np.max([r.max_xz for r in scene.rooms], axis=0) + 0.2
        origin = np.floor(lo / cell + 1e-6) * cell
        nx = int(math.ceil((hi[0] - origin[0]) / cell - 1e-6))
        nz = int(math.ceil((hi[1] - origin[1]) / cell - 1e-6))
        xs = origin[0] + (np.arange(nx) + 0.5) * cell
        zs = origin[1] + (np.arange(nz) + 0.5) * cell

        room_index = np.full((nz, nx), -1, dtype=np.int16)
        for i, room in enumerate(scene.rooms):
            ix = (xs >= room.min_xz[0]) & (xs <= room.max_xz[0])
            iz = (zs >= room.min_xz[1]) & (zs <= room.max_xz[1])
            sub = room_index[np.ix_(iz, ix)]
            sub[sub < 0] = i
            room_index[np.ix_(iz, ix)] = sub
        blocked = room_index < 0
        floor_y = float(min(r.floor_y for r in scene.rooms))
        band_lo, band_hi = floor_y + float(band_m[0]), floor_y + float(band_m[1])
        half_cell = 0.5 * cell - _EPS
        for obj in scene.objects:
            if obj.dynamic:
                continue
            c, s = math.cos(obj.yaw_rad), math.sin(obj.yaw_rad)
            for part in obj.parts:
                center = obj.part_world_center(part)
                y0, y1 = _part_vertical_extent(float(center[1]), part)
                if y1 <= band_lo or y0 >= band_hi:
                    continue
                if part.shape == "box":
                    hx, hz = part.size[0] + half_cell, part.size[2] + half_cell
                    reach = abs(c) * hx + abs(s) * hz, abs(s) * hx + abs(c) * hz
                else:
                    radius = part.size[0] + half_cell
                    reach = (radius, radius)
                ix0 = max(int(math.floor((center[0] - reach[0] - origin[0]) / cell)), 0)
                ix1 = min(int(math.ceil((center[0] + reach[0] - origin[0]) / cell)), nx)
                iz0 = max(int(math.floor((center[2] - reach[1] - origin[1]) / cell)), 0)
                iz1 = min(int(math.ceil((center[2] + reach[1] - origin[1]) / cell)), nz)
                if ix0 >= ix1 or iz0 >= iz1:
                    continue
                dx = xs[ix0:ix1][None, :] - center[0]
                dz = zs[iz0:iz1][:, None] - center[2]
                if part.shape == "box":
                    lx = c * dx - s * dz
                    lz = s * dx + c * dz
                    hit = (np.abs(lx) < hx) & (np.abs(lz) < hz)
                else:
                    hit = dx * dx + dz * dz < radius * radius
                blocked[iz0:iz1, ix0:ix1] |= hit
        return cls(
            scene=scene,
            origin_xz=(float(origin[0]), float(origin[1])),
            cell_m=cell,
            clearance_m=float(clearance_m),
            blocked=blocked,
            room_index=room_index,
            band_m=band_m,
        )

    # -- coordinates -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """``(nz, nx)``."""
        return self.blocked.shape  # type: ignore[return-value]

    def world_to_cell(self, x: float, z: float) -> tuple[int, int]:
        """Cell ``(iz, ix)`` containing world point ``(x, z)`` (may be out of bounds)."""
        ix = int(math.floor((float(x) - self.origin_xz[0]) / self.cell_m))
        iz = int(math.floor((float(z) - self.origin_xz[1]) / self.cell_m))
        return iz, ix

    def in_bounds(self, iz: int, ix: int) -> bool:
        nz, nx = self.shape
        return 0 <= iz < nz and 0 <= ix < nx

    def cell_center(self, iz: int, ix: int) -> tuple[float, float]:
        """World ``(x, z)`` of a cell centre."""
        return (
            self.origin_xz[0] + (ix + 0.5) * self.cell_m,
            self.origin_xz[1] + (iz + 0.5) * self.cell_m,
        )

    def cells_to_xz(self, cells: np.ndarray) -> np.ndarray:
        """``(K, 2)`` int cells ``(iz, ix)`` to ``(K, 2)`` world ``(x, z)`` centres."""
        cells = np.asarray(cells).reshape(-1, 2)
        x = self.origin_xz[0] + (cells[:, 1] + 0.5) * self.cell_m
        z = self.origin_xz[1] + (cells[:, 0] + 0.5) * self.cell_m
        return np.stack([x, z], axis=1)

    def cell_centers_x(self) -> np.ndarray:
        return self.origin_xz[0] + (np.arange(self.shape[1]) + 0.5) * self.cell_m

    def cell_centers_z(self) -> np.ndarray:
        return self.origin_xz[1] + (np.arange(self.shape[0]) + 0.5) * self.cell_m

    # -- point queries -----------------------------------------------------------------
    def is_free(self, x: float, z: float) -> bool:
        """True when a body centred at ``(x, z)`` keeps the clearance from all obstacles."""
        iz, ix = self.world_to_cell(x, z)
        return self.in_bounds(iz, ix) and bool(self.free[iz, ix])

    def is_blocked(self, x: float, z: float) -> bool:
        """True when ``(x, z)`` lies on a raw obstacle (no inflation) or outside the home."""
        iz, ix = self.world_to_cell(x, z)
        return not self.in_bounds(iz, ix) or bool(self.blocked[iz, ix])

    def room_id_at(self, x: float, z: float) -> int | None:
        """``room_id`` of the room containing ``(x, z)``, or None."""
        iz, ix = self.world_to_cell(x, z)
        if not self.in_bounds(iz, ix) or self.room_index[iz, ix] < 0:
            return None
        return self.rooms[int(self.room_index[iz, ix])].room_id

    def nearest_free(self, x: float, z: float) -> tuple[float, float]:
        """Centre of the free cell nearest to ``(x, z)`` (the point's own cell if free)."""
        if not self.free.any():
            raise NavGridError(f"scene {self.scene_id!r} has no free cell")
        if self._nearest_free_idx is None:
            _, idx = ndimage.distance_transform_edt(~self.free, return_indices=True)
            self._nearest_free_idx = idx
        nz, nx = self.shape
        iz, ix = self.world_to_cell(x, z)
        iz, ix = min(max(iz, 0), nz - 1), min(max(ix, 0), nx - 1)
        jz, jx = int(self._nearest_free_idx[0, iz, ix]), int(self._nearest_free_idx[1, iz, ix])
        return self.cell_center(jz, jx)

    def line_of_sight(self, a_xz: Sequence[float], b_xz: Sequence[float]) -> bool:
        """True when every point of segment a-b lies in free cells (sampled every cell/4)."""
        a = np.asarray(a_xz, dtype=np.float64)
        b = np.asarray(b_xz, dtype=np.float64)
        n = max(int(math.ceil(np.linalg.norm(b - a) / (0.25 * self.cell_m))), 1)
        t = np.linspace(0.0, 1.0, n + 1)[:, None]
        pts = a[None, :] + t * (b - a)[None, :]
        ix = np.floor((pts[:, 0] - self.origin_xz[0]) / self.cell_m).astype(int)
        iz = np.floor((pts[:, 1] - self.origin_xz[1]) / self.cell_m).astype(int)
        nz, nx = self.shape
        if (ix < 0).any() or (iz < 0).any() or (ix >= nx).any() or (iz >= nz).any():
            return False
        return bool(self.free[iz, ix].all())

    # -- connectivity ------------------------------------------------------------------
    def component_labels(self) -> np.ndarray:
        """``int32 (nz, nx)`` connected-component label of every free cell (0 = not free).

        Components are 4-connected, which equals the connectivity of the 8-connected graph
        (a diagonal move needs both side cells free)."""
        if self._labels is None:
            labels, _ = ndimage.label(self.free)
            labels.setflags(write=False)
            self._labels = labels
        return self._labels

    def main_component(self) -> np.ndarray:
        """``bool (nz, nx)``: the largest connected free region."""
        labels = self.component_labels()
        if labels.max() == 0:
            return np.zeros(self.shape, dtype=bool)
        counts = np.bincount(labels.ravel())
        counts[0] = 0
        return labels == int(np.argmax(counts))

    # -- goals -------------------------------------------------------------------------
    def _as_object(self, obj: SceneObject | int) -> SceneObject:
        if isinstance(obj, SceneObject):
            return obj
        if isinstance(obj, (int, np.integer)) and int(obj) in self._objects:
            return self._objects[int(obj)]
        raise NavGridError(f"unknown goal object {obj!r} in scene {self.scene_id!r}")

    def aabb_distance_map(self, obj: SceneObject | int) -> np.ndarray:
        """``(nz, nx)`` x/z distance from every cell centre to the object's world AABB."""
        obj = self._as_object(obj)
        lo, hi = obj.aabb()
        xs = self.cell_centers_x()
        zs = self.cell_centers_z()
        dx = np.maximum(np.maximum(lo[0] - xs, xs - hi[0]), 0.0)[None, :]
        dz = np.maximum(np.maximum(lo[2] - zs, zs - hi[2]), 0.0)[:, None]
        return np.sqrt(dx * dx + dz * dz)

    def goal_region(
        self, obj: SceneObject | int | Iterable[SceneObject | int], radius_m: float | None = None
    ) -> np.ndarray:
        """The approach points of the object(s): free cells from which a body can touch it.

        A free cell qualifies when its x/z distance to the object's AABB is at most
        ``radius_m``, the x/z segment from its centre to the nearest point of the AABB
        crosses no fixed part in the body band, and the eyes (``EYE_HEIGHT_M`` above the
        cell) see the AABB's nearest point, centre or top centre past every fixed part (see
        the module docstring). The target's own parts never block.

        Args:
            obj: one object (or id), or several (their regions are united).
            radius_m: maximum x/z distance from the object's AABB; default
                ``clearance_m + GOAL_MARGIN_M``.

        Returns:
            ``bool (nz, nx)`` mask (a read-only array when one object is given).
        """
        radius = self.clearance_m + GOAL_MARGIN_M if radius_m is None else float(radius_m)
        objs = [obj] if isinstance(obj, (SceneObject, int, np.integer)) else list(obj)
        if not objs:
            raise NavGridError("goal_region needs at least one object")
        if len(objs) == 1:
            return self._approach_mask(self._as_object(objs[0]), radius)
        mask = np.zeros(self.shape, dtype=bool)
        for o in objs:
            mask |= self._approach_mask(self._as_object(o), radius)
        return mask

    def approach_cells(self, obj: SceneObject | int, radius_m: float | None = None) -> np.ndarray:
        """``(K, 2)`` cells ``(iz, ix)`` of :meth:`goal_region` of one object, row-major."""
        return np.argwhere(self.goal_region(self._as_object(obj), radius_m))

    def _solids(self) -> tuple[Solids, Solids]:
        """(fixed parts in the body band, fixed parts above the floor covering height)."""
        if self._body_solids is None or self._sight_solids is None:
            band_lo, band_hi = self.floor_y + self.band_m[0], self.floor_y + self.band_m[1]
            static = Solids.from_scene(self.scene, keep=lambda o: not o.dynamic)
            above = static.y1 > band_lo
            self._sight_solids = static.subset(above)
            self._body_solids = static.subset(above & (static.y0 < band_hi))
        return self._body_solids, self._sight_solids

    def _approach_mask(self, obj: SceneObject, radius: float) -> np.ndarray:
        key = (obj.object_id, round(radius, 9))
        hit = self._approach.get(key)
        if hit is not None:
            return hit
        lo, hi = obj.aabb()
        cand = self.free & (self.aabb_distance_map(obj) <= radius + _EPS)
        cells = np.argwhere(cand)
        mask = np.zeros(self.shape, dtype=bool)
        if len(cells):
            xz = self.cells_to_xz(cells)
            body, sight = self._solids()
            lo_xz, hi_xz = lo[[0, 2]], hi[[0, 2]]
            body = body.near_xz(lo_xz, hi_xz, radius + self.cell_m)
            body = body.subset(body.object_id != obj.object_id)
            q = np.clip(xz, lo_xz, hi_xz)
            ok = ~body.segments_cross_footprints(xz, q)
            if ok.any():
                sight = sight.near_xz(lo_xz, hi_xz, radius + self.cell_m)
                sight = sight.subset(sight.object_id != obj.object_id)
                eye = np.column_stack(
                    [xz[ok, 0], np.full(int(ok.sum()), self.floor_y + EYE_HEIGHT_M), xz[ok, 1]]
                )
                centre = 0.5 * (lo + hi)
                seen = np.zeros(len(eye), dtype=bool)
                for target in (
                    np.clip(eye, lo, hi),
                    np.broadcast_to(centre, eye.shape),
                    np.broadcast_to([centre[0], hi[1], centre[2]], eye.shape),
                ):
                    todo = ~seen
                    if not todo.any():
                        break
                    seen[todo] = ~sight.segments_hit(eye[todo], target[todo])
                idx = np.flatnonzero(ok)[seen]
                mask[cells[idx, 0], cells[idx, 1]] = True
        mask.setflags(write=False)
        self._approach[key] = mask
        return mask

    def _goal_mask(self, goals: GoalSpec) -> np.ndarray:
        if isinstance(goals, np.ndarray) and goals.dtype == bool:
            if goals.shape != self.shape:
                raise NavGridError(
                    f"goal mask must have the grid shape {self.shape}, got {goals.shape}"
                )
            return goals & self.free
        if isinstance(goals, np.ndarray) and np.issubdtype(goals.dtype, np.integer):
            cells = goals.reshape(-1, 2)
            mask = np.zeros(self.shape, dtype=bool)
            ok = (
                (cells[:, 0] >= 0)
                & (cells[:, 0] < self.shape[0])
                & (cells[:, 1] >= 0)
                & (cells[:, 1] < self.shape[1])
            )
            mask[cells[ok, 0], cells[ok, 1]] = True
            return mask & self.free
        return self.goal_region(goals)  # type: ignore[arg-type]

    # -- graph search ------------------------------------------------------------------
    def with_preferred_clearance(self, preferred_m: float, weight: float = 2.0) -> NavGrid:
        """A view of this grid whose paths keep away from obstacles where they can.

        The free space is the same (``clearance_m`` stays the hard limit), but a step into
        a cell closer than ``preferred_m`` to an obstacle costs up to ``1 + weight`` times
        its length, growing linearly from ``preferred_m`` down to ``clearance_m``. Paths
        then run down the middle of rooms and doorways instead of grazing walls and
        furniture, and still pass where only ``clearance_m`` fits. Distances of the view
        (:meth:`geodesic_distance`, :meth:`distance_field`) are these costs, not metres; use
        the original grid for metres.

        Args:
            preferred_m: clearance paths keep where there is room, metres, > ``clearance_m``.
            weight: extra cost factor at the hard clearance, >= 0.
        """
        preferred, weight = float(preferred_m), float(weight)
        if not (math.isfinite(preferred) and preferred > self.clearance_m):
            raise NavGridError(
                f"preferred_m={preferred_m!r} is invalid: allowed a distance > clearance_m "
                f"({self.clearance_m:g} m)"
            )
        if not (math.isfinite(weight) and weight >= 0.0):
            raise NavGridError(f"weight={weight!r} is invalid: allowed a number >= 0")
        view = copy.copy(self)
        view.preferred_clearance_m = preferred
        view._clearance_weight = weight
        view._graph = None
        view._fields = OrderedDict()
        return view

    def _cell_cost_factor(self) -> np.ndarray:
        """``(nz, nx)`` multiplier of a step's length into each cell (1 without a
        preferred clearance)."""
        if self.preferred_clearance_m is None or self._clearance_weight == 0.0:
            return np.ones(self.shape)
        clearance = ndimage.distance_transform_edt(~self.blocked) * self.cell_m
        span = self.preferred_clearance_m - self.clearance_m
        shortfall = np.clip((self.preferred_clearance_m - clearance) / span, 0.0, 1.0)
        return 1.0 + self._clearance_weight * shortfall

    def _ensure_graph(self) -> None:
        if self._graph is not None:
            return
        nz, nx = self.shape
        free = self.free
        node_of = np.full((nz, nx), -1, dtype=np.int64)
        n = int(free.sum())
        node_of[free] = np.arange(n)
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        diag = math.sqrt(2.0) * self.cell_m
        factor = None if self.preferred_clearance_m is None else self._cell_cost_factor()
        for dz, dx, w in ((0, 1, self.cell_m), (1, 0, self.cell_m), (1, 1, diag), (1, -1, diag)):
            a = free[: nz - dz, max(0, -dx) : nx - max(0, dx)]
            b = free[dz:, max(0, dx) : nx + min(0, dx)]
            ok = a & b
            if dz and dx:
                side1 = free[dz:, max(0, -dx) : nx - max(0, dx)]  # (iz+1, ix)
                side2 = free[: nz - dz, max(0, dx) : nx + min(0, dx)]  # (iz, ix+dx)
                ok &= side1 & side2
            ia = node_of[: nz - dz, max(0, -dx) : nx - max(0, dx)][ok]
            ib = node_of[dz:, max(0, dx) : nx + min(0, dx)][ok]
            rows += [ia, ib]
            cols += [ib, ia]
            if factor is None:
                weights += [np.full(len(ia), w), np.full(len(ia), w)]
            else:  # a step costs its length times the mean factor of its two cells
                fa = factor[: nz - dz, max(0, -dx) : nx - max(0, dx)][ok]
                fb = factor[dz:, max(0, dx) : nx + min(0, dx)][ok]
                both = w * 0.5 * (fa + fb)
                weights += [both, both]
        data = np.concatenate(weights) if weights else np.zeros(0)
        graph = csr_matrix((data, (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
        self._node_of = node_of
        self._cell_of = np.argwhere(free)
        self._graph = graph

    def _field(self, goals: GoalSpec) -> tuple[np.ndarray, np.ndarray]:
        """(distance per node, predecessor per node) from the goal set, cached."""
        mask = self._goal_mask(goals)
        key = hashlib.sha1(np.packbits(mask).tobytes()).hexdigest()
        hit = self._fields.get(key)
        if hit is not None:
            self._fields.move_to_end(key)
            return hit
        self._ensure_graph()
        assert self._node_of is not None and self._graph is not None
        sources = self._node_of[mask]
        n = self._graph.shape[0]
        if len(sources) == 0:
            result = (np.full(n, np.inf), np.full(n, -9999, dtype=np.int64))
        else:
            dist, pred, _ = dijkstra(
                self._graph, directed=True, indices=sources, min_only=True, return_predecessors=True
            )
            result = (dist, pred.astype(np.int64))
        self._fields[key] = result
        if len(self._fields) > _MAX_CACHED_FIELDS:
            self._fields.popitem(last=False)
        return result

    def distance_field(self, goals: GoalSpec) -> np.ndarray:
        """``(nz, nx)`` geodesic distance (m) from every free cell to the goal set; inf
        where unreachable or not free.

        Args:
            goals: a SceneObject, a sequence of them (goal regions united), a bool mask of
                grid shape, or ``(K, 2)`` int cells ``(iz, ix)``.
        """
        dist, _ = self._field(goals)
        out = np.full(self.shape, np.inf)
        assert self._cell_of is not None
        out[self._cell_of[:, 0], self._cell_of[:, 1]] = dist
        return out

    def _start_cell(self, start_xz: Sequence[float], snap: bool) -> tuple[int, int] | None:
        x, z = float(start_xz[0]), float(start_xz[1])
        iz, ix = self.world_to_cell(x, z)
        if self.in_bounds(iz, ix) and self.free[iz, ix]:
            return iz, ix
        if not snap:
            return None
        fx, fz = self.nearest_free(x, z)
        return self.world_to_cell(fx, fz)

    def geodesic_distance(
        self, start_xz: Sequence[float], goals: GoalSpec, *, snap: bool = True
    ) -> float:
        """Shortest free-space distance (m) from a point to the goal set.

        Args:
            start_xz: world ``(x, z)``.
            goals: see :meth:`distance_field`.
            snap: when the start cell is not free, start from the nearest free cell and add
                the straight distance to it (False: return inf).

        Returns:
            Metres; ``inf`` when the goals cannot be reached.
        """
        cell = self._start_cell(start_xz, snap)
        if cell is None:
            return math.inf
        dist, _ = self._field(goals)
        assert self._node_of is not None
        d = float(dist[self._node_of[cell]])
        cx, cz = self.cell_center(*cell)
        offset = math.hypot(float(start_xz[0]) - cx, float(start_xz[1]) - cz)
        if offset > self.cell_m:
            d += offset
        return d

    def shortest_path_cells(
        self, start_xz: Sequence[float], goals: GoalSpec, *, snap: bool = True
    ) -> np.ndarray:
        """Cells ``(K, 2)`` ``(iz, ix)`` of a shortest path from the start cell to the
        nearest goal cell (empty when unreachable)."""
        cell = self._start_cell(start_xz, snap)
        if cell is None:
            return np.zeros((0, 2), dtype=np.int64)
        dist, pred = self._field(goals)
        assert self._node_of is not None and self._cell_of is not None
        node = int(self._node_of[cell])
        if not math.isfinite(dist[node]):
            return np.zeros((0, 2), dtype=np.int64)
        nodes = [node]
        while pred[node] >= 0:
            node = int(pred[node])
            nodes.append(node)
        return self._cell_of[np.asarray(nodes)]

    def shortest_path(
        self,
        start_xz: Sequence[float],
        goals: GoalSpec,
        *,
        simplify: bool = False,
        snap: bool = True,
    ) -> np.ndarray:
        """Waypoints ``(K, 2)`` world ``(x, z)`` from the start to the nearest goal cell.

        The first waypoint is the start point itself, then cell centres. ``simplify=True``
        prunes it with :meth:`simplify_path`. Returns an empty ``(0, 2)`` array when the
        goals cannot be reached.
        """
        cells = self.shortest_path_cells(start_xz, goals, snap=snap)
        if len(cells) == 0:
            return np.zeros((0, 2))
        centres = self.cells_to_xz(cells)
        start = np.array([[float(start_xz[0]), float(start_xz[1])]])
        path = np.concatenate([start, centres[1:]], axis=0) if len(centres) > 1 else start
        return self.simplify_path(path) if simplify else path

    def simplify_path(self, path: np.ndarray) -> np.ndarray:
        """Line-of-sight pruning ("string pulling"): from the current anchor, advance along
        the path while the straight segment from the anchor stays in free cells; keep the
        last visible point as the next anchor. The first and last points are always kept.
        Costs one segment check per input point."""
        path = np.asarray(path, dtype=np.float64).reshape(-1, 2)
        if len(path) <= 2:
            return path.copy()
        out = [path[0]]
        anchor = 0
        j = 1
        last = len(path) - 1
        while j < last:
            if self.line_of_sight(path[anchor], path[j + 1]):
                j += 1
                continue
            out.append(path[j])
            anchor = j
            j += 1
        out.append(path[last])
        return np.asarray(out)

    # -- path statistics ---------------------------------------------------------------
    def blocked_fraction_near(self, points_xz: np.ndarray, half_window_m: float) -> np.ndarray:
        """Fraction of raw-blocked cells in a square window (half side ``half_window_m``)
        around each point ``(K, 2)``; windows are clipped to the grid."""
        if self._blocked_integral is None:
            integral = np.zeros((self.shape[0] + 1, self.shape[1] + 1), dtype=np.int64)
            integral[1:, 1:] = np.cumsum(np.cumsum(self.blocked.astype(np.int64), axis=0), axis=1)
            self._blocked_integral = integral
        pts = np.asarray(points_xz, dtype=np.float64).reshape(-1, 2)
        r = int(round(half_window_m / self.cell_m))
        nz, nx = self.shape
        ix = np.floor((pts[:, 0] - self.origin_xz[0]) / self.cell_m).astype(int)
        iz = np.floor((pts[:, 1] - self.origin_xz[1]) / self.cell_m).astype(int)
        x0 = np.clip(ix - r, 0, nx)
        x1 = np.clip(ix + r + 1, 0, nx)
        z0 = np.clip(iz - r, 0, nz)
        z1 = np.clip(iz + r + 1, 0, nz)
        s = self._blocked_integral
        total = s[z1, x1] - s[z0, x1] - s[z1, x0] + s[z0, x0]
        area = np.maximum((x1 - x0) * (z1 - z0), 1)
        return total / area

    # -- seats ---------------------------------------------------------------------------
    def approach_pose(self, obj: SceneObject | int) -> tuple[float, float, float]:
        """``(x_m, z_m, yaw_rad)`` in front of a seat, facing away from it (see
        :func:`approach_pose`); raises when that point lies on an obstacle."""
        obj = self._as_object(obj)
        x, z, yaw = approach_pose(obj)
        if self.is_blocked(x, z):
            raise NavGridError(
                f"approach point ({x:.3f}, {z:.3f}) of {obj.name!r} lies on an obstacle"
            )
        return x, z, yaw

    # -- pictures ------------------------------------------------------------------------
    def to_image(self) -> np.ndarray:
        """``uint8 (nz, nx, 3)`` picture: free white, clearance margin light grey,
        obstacles dark grey, outside the home black (+x right, +z down)."""
        img = np.full(self.shape + (3,), 200, dtype=np.uint8)
        img[self.free] = 255
        img[self.blocked] = 70
        img[self.room_index < 0] = 0
        return img
