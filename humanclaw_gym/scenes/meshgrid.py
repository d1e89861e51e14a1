"""Navigation grids of triangle-mesh scenes (imported homes, e.g. HSSD), one per floor.

Procedural homes are rasterised from their primitive parts by
:meth:`~humanclaw_gym.scenes.navgrid.NavGrid.from_scene`; mesh scenes have no room
rectangles and can have several floors (upstream episodes start up to 5.7 m high), so
their grid is built here from the loaded collision geometry, for one floor level at a
time, and returned as the same :class:`~humanclaw_gym.scenes.navgrid.NavGrid` (paths,
distance fields, goal regions and line of sight work unchanged).

For a floor level ``y0`` (see :func:`floor_levels`),
every static triangle that reaches into ``y0 - 0.1 .. y0 + 1.9`` m is sampled on its
surface (points at most ``cell_m / 1.5`` apart). A cell is *floor* when an upward-facing
sample (normal y >= 0.7) lies within 0.1 m of ``y0``; its local floor height is the
highest such sample. A cell is *blocked* when it is not floor, or when any sample lies in
the body band ``local floor + 0.03 .. y0 + 1.9`` m above it (the band of the primitive
grid). Stairs therefore block both floors (the planners here do not climb), holes such as
stairwells have no floor, and dynamic objects are ignored (the body can push them). The
clearance inflation and graph are :class:`NavGrid`'s own.

This is our analogue of Habitat's navmesh, not a copy of it: Recast voxelises at its own
cell size and agent height/radius/step settings, so free space differs at the margins
(``docs/scenes.md`` reports how many of the episodes' Habitat view points are free here).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from humanclaw_gym.scenes.navgrid import BLOCK_BAND_M, NavGrid, NavGridError
from humanclaw_gym.scenes.spec import SceneObject, SceneSpec

__all__ = [
    "FLOOR_TOLERANCE_M",
    "MeshNavGrid",
    "floor_level_near",
    "floor_levels",
    "is_mesh_scene",
    "mesh_navgrid",
    "navigation_grid",
    "surface_samples",
]

#: How far (m) a walkable surface may lie from its floor level.
FLOOR_TOLERANCE_M = 0.1
#: Upward-facing surfaces of the stage with at least this area form a floor level.
_FLOOR_MIN_AREA_M2 = 2.0
_FLOOR_MERGE_M = 0.12
_UP_NORMAL_Y = 0.7
_MAX_CACHED = 8
_cache: OrderedDict[tuple, NavGrid] = OrderedDict()


def is_mesh_scene(scene: SceneSpec) -> bool:
    """True when any part of the scene is a mesh (its grid comes from this module)."""
    return any(part.shape == "mesh" for obj in scene.objects for part in obj.parts)


def floor_level_near(scene: SceneSpec, y: float | None) -> float:
    """The scene's floor level nearest to height ``y`` (the lowest for None).

    Raises:
        NavGridError: the scene has no floor level (no large upward-facing stage surface).
    """
    levels = list(scene.metadata.get("floor_levels_m", []) or [])
    if not levels:
        levels = floor_levels(scene)
    if not levels:
        raise NavGridError(
            f"scene {scene.scene_id!r} has no floor: no upward-facing stage surface of 2 m^2"
        )
    if y is None:
        return float(min(levels))
    return float(min(levels, key=lambda v: abs(v - float(y))))


def floor_levels(scene: SceneSpec, cell_m: float = 0.1) -> list[float]:
    """Heights of the scene's floors: upward-facing stage surfaces (seen from above or
    not) grouped by height (within 12 cm), each kept when it covers at least 2 m^2 after
    eroding its cells by one cell (so wall tops and stair treads, narrower than two cells,
    do not count). Ascending."""
    from scipy import ndimage

    from humanclaw_gym.scenes.meshes import object_triangles

    pts_all: list[np.ndarray] = []
    for obj in scene.objects:
        if obj.category != "stage":
            continue
        v, f = object_triangles(obj, collision=True)
        pts, ny = surface_samples(v, f, cell_m / 1.5)
        pts_all.append(pts[ny >= 0.9])
    if not pts_all or not sum(len(p) for p in pts_all):
        return []
    pts = np.concatenate(pts_all).astype(np.float64)
    pts = pts[np.argsort(pts[:, 1])]
    h = pts[:, 1]
    levels: list[float] = []
    start = 0
    for i in range(1, len(h) + 1):
        if i == len(h) or h[i] - h[i - 1] > _FLOOR_MERGE_M:
            group = pts[start:i]
            ix = np.floor(group[:, 0] / cell_m).astype(np.int64)
            iz = np.floor(group[:, 2] / cell_m).astype(np.int64)
            mask = np.zeros((iz.max() - iz.min() + 3, ix.max() - ix.min() + 3), dtype=bool)
            mask[iz - iz.min() + 1, ix - ix.min() + 1] = True
            area = ndimage.binary_erosion(mask).sum() * cell_m * cell_m
            if area >= _FLOOR_MIN_AREA_M2:
                levels.append(float(np.median(group[:, 1])))
            start = i
    return levels


def surface_samples(
    vertices: np.ndarray, faces: np.ndarray, spacing_m: float
) -> tuple[np.ndarray, np.ndarray]:
    """Points on triangles at most ``spacing_m`` apart (a barycentric lattice per
    triangle, vertices included) and the y component of each point's triangle normal.

    Returns:
        ``float32 (N, 3)`` points, ``float32 (N,)`` normal y.
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    if len(f) == 0:
        return np.zeros((0, 3), np.float32), np.zeros(0, np.float32)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    n = np.cross(b - a, c - a)
    length = np.linalg.norm(n, axis=1)
    ny = np.where(length > 1e-12, n[:, 1] / np.maximum(length, 1e-12), 0.0)
    edge = np.max(
        np.stack(
            [
                np.linalg.norm(b - a, axis=1),
                np.linalg.norm(c - b, axis=1),
                np.linalg.norm(a - c, axis=1),
            ]
        ),
        axis=0,
    )
    steps = np.maximum(np.ceil(edge / spacing_m).astype(np.int64), 1)
    points: list[np.ndarray] = []
    normals: list[np.ndarray] = []
    for k in np.unique(steps):
        sel = np.nonzero(steps == k)[0]
        i, j = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
        keep = i + j <= k
        u = (i[keep] / k).astype(np.float64)
        w = (j[keep] / k).astype(np.float64)
        chunk = max(1, 2_000_000 // len(u))
        for s in range(0, len(sel), chunk):
            idx = sel[s : s + chunk]
            p = (
                a[idx, None, :]
                + (b[idx] - a[idx])[:, None, :] * u[None, :, None]
                + (c[idx] - a[idx])[:, None, :] * w[None, :, None]
            )
            points.append(p.reshape(-1, 3).astype(np.float32))
            normals.append(np.repeat(ny[idx], len(u)).astype(np.float32))
    return np.concatenate(points), np.concatenate(normals)


def _static_triangles(scene: SceneSpec, y_lo: float, y_hi: float) -> tuple[np.ndarray, np.ndarray]:
    from humanclaw_gym.scenes.meshes import object_triangles

    verts: list[np.ndarray] = []
    faces: list[np.ndarray] = []
    base = 0
    for obj in scene.objects:
        if obj.dynamic:
            continue
        lo, hi = obj.aabb()
        if hi[1] < y_lo or lo[1] > y_hi:
            continue
        v, f = object_triangles(obj, collision=True)
        if len(f) == 0:
            continue
        tri_y = v[f][:, :, 1]
        keep = (tri_y.max(axis=1) >= y_lo) & (tri_y.min(axis=1) <= y_hi)
        if not keep.any():
            continue
        verts.append(v)
        faces.append(f[keep] + base)
        base += len(v)
    if not verts:
        return np.zeros((0, 3)), np.zeros((0, 3), np.int64)
    return np.concatenate(verts), np.concatenate(faces)


class MeshNavGrid(NavGrid):
    """A :class:`NavGrid` of one floor of a mesh scene (see the module docstring).

    Approach points (:meth:`NavGrid.goal_region`) are tested on the grid itself: a free
    cell near the object qualifies when the x/z segment from its centre to the nearest
    point of the object's box crosses no blocked cell outside that box (grown by one
    cell). Mesh scenes have no primitive parts for the exact body and eye-height sight
    tests of generated homes; the blocked cells hold everything of the static scene in the
    body band, walls included, so an approach point is never behind a wall.
    """

    def _approach_mask(self, obj: SceneObject, radius: float) -> np.ndarray:
        key = (obj.object_id, round(radius, 9))
        hit = self._approach.get(key)
        if hit is not None:
            return hit
        lo, hi = obj.aabb()
        cand = self.free & (self.aabb_distance_map(obj) <= radius + 1e-9)
        cells = np.argwhere(cand)
        mask = np.zeros(self.shape, dtype=bool)
        if len(cells):
            xz = self.cells_to_xz(cells)
            lo_xz, hi_xz = lo[[0, 2]] - self.cell_m, hi[[0, 2]] + self.cell_m
            q = np.clip(xz, lo[[0, 2]], hi[[0, 2]])
            n = max(int(math.ceil((radius + self.cell_m) / (self.cell_m / 3.0))), 2)
            t = np.linspace(0.0, 1.0, n)
            pts = xz[:, None, :] + t[None, :, None] * (q - xz)[:, None, :]
            own = np.all((pts >= lo_xz) & (pts <= hi_xz), axis=2)
            nz, nx = self.shape
            ix = np.clip(np.floor((pts[..., 0] - self.origin_xz[0]) / self.cell_m), 0, nx - 1)
            iz = np.clip(np.floor((pts[..., 1] - self.origin_xz[1]) / self.cell_m), 0, nz - 1)
            crossed = self.blocked[iz.astype(np.int64), ix.astype(np.int64)] & ~own
            ok = ~crossed.any(axis=1)
            mask[cells[ok, 0], cells[ok, 1]] = True
        mask.setflags(write=False)
        self._approach[key] = mask
        return mask


def mesh_navgrid(
    scene: SceneSpec,
    floor_y: float,
    cell_m: float = 0.05,
    clearance_m: float = 0.25,
    *,
    band_m: tuple[float, float] = BLOCK_BAND_M,
) -> NavGrid:
    """The navigation grid of one floor level of a mesh scene (see the module docstring).

    Args:
        scene: a scene with mesh parts.
        floor_y: the floor level, metres (e.g. from :func:`floor_level_near`).
        cell_m: cell edge, in ``[0.01, 0.5]``.
        clearance_m: body radius kept from obstacles, in ``[0, 1]``.
        band_m: the blocking band above the local floor / level.

    Raises:
        NavGridError: bad arguments, or no static geometry at that level.
    """
    if not 0.01 <= float(cell_m) <= 0.5:
        raise NavGridError(f"cell_m must be in [0.01, 0.5] m, got {cell_m!r}")
    if not 0.0 <= float(clearance_m) <= 1.0:
        raise NavGridError(f"clearance_m must be in [0, 1] m, got {clearance_m!r}")
    if not math.isfinite(float(floor_y)):
        raise NavGridError(f"floor_y must be finite, got {floor_y!r}")
    y0 = float(floor_y)
    key = (
        scene.scene_id,
        str(scene.metadata.get("scene_instance", "")),
        len(scene.objects),
        round(y0, 4),
        float(cell_m),
        float(clearance_m),
        tuple(band_m),
    )
    hit = _cache.get(key)
    if hit is not None and hit.scene is scene:
        _cache.move_to_end(key)
        return hit
    cell = float(cell_m)
    top = y0 + float(band_m[1])
    v, f = _static_triangles(scene, y0 - FLOOR_TOLERANCE_M, top)
    if len(f) == 0:
        raise NavGridError(f"scene {scene.scene_id!r} has no static geometry near floor {y0:.2f} m")
    pts, ny = surface_samples(v, f, cell / 1.5)
    inside = (pts[:, 1] >= y0 - FLOOR_TOLERANCE_M) & (pts[:, 1] <= top)
    pts, ny = pts[inside], ny[inside]
    lo = pts[:, [0, 2]].min(axis=0) - 0.2
    hi = pts[:, [0, 2]].max(axis=0) + 0.2
    origin = np.floor(lo / cell + 1e-6) * cell
    nx = int(math.ceil((hi[0] - origin[0]) / cell - 1e-6))
    nz = int(math.ceil((hi[1] - origin[1]) / cell - 1e-6))
    ix = np.clip(np.floor((pts[:, 0] - origin[0]) / cell).astype(np.int64), 0, nx - 1)
    iz = np.clip(np.floor((pts[:, 2] - origin[1]) / cell).astype(np.int64), 0, nz - 1)
    flat = iz * nx + ix
    floor_pt = (ny >= _UP_NORMAL_Y) & (np.abs(pts[:, 1] - y0) <= FLOOR_TOLERANCE_M)
    local = np.full(nz * nx, -np.inf)
    np.maximum.at(local, flat[floor_pt], pts[floor_pt, 1].astype(np.float64))
    has_floor = np.isfinite(local)
    obstacle = np.zeros(nz * nx, dtype=bool)
    above = pts[:, 1] > np.where(has_floor[flat], local[flat], y0) + float(band_m[0])
    obstacle[flat[above & (pts[:, 1] < top)]] = True
    blocked = (~has_floor | obstacle).reshape(nz, nx)
    grid = MeshNavGrid(
        scene=scene,
        origin_xz=(float(origin[0]), float(origin[1])),
        cell_m=cell,
        clearance_m=float(clearance_m),
        blocked=blocked,
        room_index=np.full((nz, nx), -1, dtype=np.int16),
    )
    grid.floor_y = y0
    _cache[key] = grid
    while len(_cache) > _MAX_CACHED:
        _cache.popitem(last=False)
    return grid


def navigation_grid(
    scene: SceneSpec,
    floor_y: float | None = None,
    cell_m: float = 0.05,
    clearance_m: float = 0.25,
) -> NavGrid:
    """The navigation grid a planner should use for ``scene``.

    Primitive scenes: :meth:`NavGrid.from_scene` (one floor). Mesh scenes: the grid of the
    floor level nearest ``floor_y`` (e.g. the episode's start height; None: the lowest).
    """
    if not is_mesh_scene(scene):
        return NavGrid.from_scene(scene, cell_m=cell_m, clearance_m=clearance_m)
    return mesh_navgrid(scene, floor_level_near(scene, floor_y), cell_m, clearance_m)
