"""The parts of a scene as arrays, for exact geometric queries without a simulator.

:class:`Solids` holds every part of a :class:`SceneSpec` (or a subset) in world
coordinates: boxes are oriented boxes (the object's yaw), cylinders stand upright, spheres
are spheres, exactly as physics and rendering build them. Three vectorised queries serve
the navigation grid (approach points) and the episode generator (spawns):

* :meth:`Solids.footprint_distance`: x/z distance from points to each part's floor
  footprint (rotated rectangle or disc);
* :meth:`Solids.segments_cross_footprints`: does the x/z segment ``a -> b`` cross any
  footprint (a vertical "curtain" test over the parts' whole heights);
* :meth:`Solids.segments_hit`: does the 3-D segment ``a -> b`` pass through any part
  (line of sight).

Segment tests ignore contact within ``tol_m`` (1 mm) of a surface, so a segment that
grazes a face or ends on it does not count as blocked. Units: metres, world Y up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from humanclaw_gym.scenes.spec import SceneObject, SceneSpec

__all__ = ["BOX", "CYLINDER", "SPHERE", "Solids"]

BOX, CYLINDER, SPHERE = 0, 1, 2
_KIND = {"box": BOX, "cylinder": CYLINDER, "sphere": SPHERE}
_TOL_M = 1e-3
_CHUNK = 4096


@dataclass(frozen=True)
class Solids:
    """Parts as parallel arrays (``M`` parts).

    Attributes:
        object_id: ``int64 (M,)`` owning object.
        kind: ``int8 (M,)``: :data:`BOX`, :data:`CYLINDER` or :data:`SPHERE`.
        center: ``(M, 3)`` world centre.
        cos / sin: ``(M,)`` cosine and sine of the owning object's yaw.
        half: ``(M, 3)`` half extents in the part frame (cylinder ``(r, h, r)``, sphere
            ``(r, r, r)``).
        y0 / y1: ``(M,)`` world bottom and top.
    """

    object_id: np.ndarray
    kind: np.ndarray
    center: np.ndarray
    cos: np.ndarray
    sin: np.ndarray
    half: np.ndarray
    y0: np.ndarray
    y1: np.ndarray

    @classmethod
    def from_scene(
        cls, scene: SceneSpec, keep: Callable[[SceneObject], bool] | None = None
    ) -> Solids:
        """Every part of the objects of ``scene`` for which ``keep(obj)`` is true (all when
        None)."""
        ids, kinds, centers, coss, sins, halves = [], [], [], [], [], []
        for obj in scene.objects:
            if keep is not None and not keep(obj):
                continue
            c, s = float(np.cos(obj.yaw_rad)), float(np.sin(obj.yaw_rad))
            for part in obj.parts:
                ids.append(obj.object_id)
                kinds.append(_KIND[part.shape])
                centers.append(obj.part_world_center(part))
                coss.append(c)
                sins.append(s)
                halves.append(part.local_half_extents())
        center = np.asarray(centers, dtype=np.float64).reshape(-1, 3)
        half = np.asarray(halves, dtype=np.float64).reshape(-1, 3)
        return cls(
            object_id=np.asarray(ids, dtype=np.int64),
            kind=np.asarray(kinds, dtype=np.int8),
            center=center,
            cos=np.asarray(coss, dtype=np.float64),
            sin=np.asarray(sins, dtype=np.float64),
            half=half,
            y0=center[:, 1] - half[:, 1],
            y1=center[:, 1] + half[:, 1],
        )

    def __len__(self) -> int:
        return len(self.object_id)

    def subset(self, mask: np.ndarray) -> Solids:
        """The parts where ``mask`` (bool ``(M,)``) is true."""
        m = np.asarray(mask, dtype=bool)
        return Solids(
            self.object_id[m],
            self.kind[m],
            self.center[m],
            self.cos[m],
            self.sin[m],
            self.half[m],
            self.y0[m],
            self.y1[m],
        )

    def near_xz(self, lo_xz: np.ndarray, hi_xz: np.ndarray, margin_m: float) -> Solids:
        """Parts whose x/z bounding box comes within ``margin_m`` of the rectangle."""
        reach = self.xz_reach()
        lo = np.asarray(lo_xz, dtype=np.float64) - margin_m
        hi = np.asarray(hi_xz, dtype=np.float64) + margin_m
        c = self.center[:, [0, 2]]
        keep = np.all((c + reach >= lo) & (c - reach <= hi), axis=1)
        return self.subset(keep)

    def xz_reach(self) -> np.ndarray:
        """``(M, 2)`` half size of each footprint's axis-aligned x/z box."""
        ac, as_ = np.abs(self.cos), np.abs(self.sin)
        hx, hz = self.half[:, 0], self.half[:, 2]
        box = np.stack([ac * hx + as_ * hz, as_ * hx + ac * hz], axis=1)
        round_ = np.stack([hx, hx], axis=1)
        return np.where((self.kind == BOX)[:, None], box, round_)

    # -- local frames --------------------------------------------------------------------
    def _local_xz(self, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(N, M)`` local x and z of world x/z points ``(N, 2)``."""
        dx = pts[:, 0:1] - self.center[None, :, 0]
        dz = pts[:, 1:2] - self.center[None, :, 2]
        c, s = self.cos[None, :], self.sin[None, :]
        return c * dx - s * dz, s * dx + c * dz

    # -- queries ---------------------------------------------------------------------------
    def footprint_distance(self, points_xz: np.ndarray) -> np.ndarray:
        """``(N, M)`` x/z distance from each point to each part's footprint (0 inside)."""
        pts = np.asarray(points_xz, dtype=np.float64).reshape(-1, 2)
        lx, lz = self._local_xz(pts)
        hx, hz = self.half[None, :, 0], self.half[None, :, 2]
        ex = np.maximum(np.abs(lx) - hx, 0.0)
        ez = np.maximum(np.abs(lz) - hz, 0.0)
        rect = np.hypot(ex, ez)
        disc = np.maximum(np.hypot(lx, lz) - hx, 0.0)
        return np.where((self.kind == BOX)[None, :], rect, disc)

    def segments_cross_footprints(
        self, a_xz: np.ndarray, b_xz: np.ndarray, tol_m: float = _TOL_M
    ) -> np.ndarray:
        """``bool (N,)``: the x/z segment ``a[i] -> b[i]`` crosses some part's footprint
        (shrunk by ``tol_m``)."""
        a = np.asarray(a_xz, dtype=np.float64).reshape(-1, 2)
        b = np.asarray(b_xz, dtype=np.float64).reshape(-1, 2)
        out = np.zeros(len(a), dtype=bool)
        if len(self) == 0 or len(a) == 0:
            return out
        for start in range(0, len(a), _CHUNK):
            sl = slice(start, start + _CHUNK)
            la_x, la_z = self._local_xz(a[sl])
            lb_x, lb_z = self._local_xz(b[sl])
            hx = np.maximum(self.half[None, :, 0] - tol_m, 0.0)
            hz = np.maximum(self.half[None, :, 2] - tol_m, 0.0)
            t0 = np.zeros(la_x.shape)
            t1 = np.ones(la_x.shape)
            t0, t1 = _slab(la_x, lb_x - la_x, hx, t0, t1)
            t0, t1 = _slab(la_z, lb_z - la_z, hz, t0, t1)
            hit_box = t0 <= t1
            hit_round = _segment_point_distance(la_x, la_z, lb_x, lb_z) < hx
            hit = np.where((self.kind == BOX)[None, :], hit_box, hit_round)
            out[sl] = hit.any(axis=1)
        return out

    def segments_hit(self, a: np.ndarray, b: np.ndarray, tol_m: float = _TOL_M) -> np.ndarray:
        """``bool (N,)``: the 3-D segment ``a[i] -> b[i]`` passes through some part (shrunk
        by ``tol_m``)."""
        a = np.asarray(a, dtype=np.float64).reshape(-1, 3)
        b = np.asarray(b, dtype=np.float64).reshape(-1, 3)
        out = np.zeros(len(a), dtype=bool)
        if len(self) == 0 or len(a) == 0:
            return out
        for start in range(0, len(a), _CHUNK):
            sl = slice(start, start + _CHUNK)
            la_x, la_z = self._local_xz(a[sl][:, [0, 2]])
            lb_x, lb_z = self._local_xz(b[sl][:, [0, 2]])
            la_y = a[sl][:, 1:2] - self.center[None, :, 1]
            lb_y = b[sl][:, 1:2] - self.center[None, :, 1]
            hx = np.maximum(self.half[None, :, 0] - tol_m, 0.0)
            hy = np.maximum(self.half[None, :, 1] - tol_m, 0.0)
            hz = np.maximum(self.half[None, :, 2] - tol_m, 0.0)
            dx, dy, dz = lb_x - la_x, lb_y - la_y, lb_z - la_z
            t0 = np.zeros(la_x.shape)
            t1 = np.ones(la_x.shape)
            t0, t1 = _slab(la_y, dy, hy, t0, t1)  # boxes and cylinders share the y slab
            b0, b1 = _slab(la_x, dx, hx, t0, t1)
            b0, b1 = _slab(la_z, dz, hz, b0, b1)
            hit_box = b0 <= b1
            c0, c1 = _disc_interval(la_x, la_z, dx, dz, hx, t0, t1)
            hit_cyl = c0 <= c1
            hit_sph = _segment_point_distance_3d(la_x, la_y, la_z, dx, dy, dz) < hx
            kind = self.kind[None, :]
            hit = np.where(kind == BOX, hit_box, np.where(kind == CYLINDER, hit_cyl, hit_sph))
            out[sl] = hit.any(axis=1)
        return out


def _slab(
    p: np.ndarray, d: np.ndarray, h: np.ndarray, t0: np.ndarray, t1: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Clip the parameter interval ``[t0, t1]`` of ``p + t d`` to ``|.| <= h`` (an empty
    interval comes back with ``t0 > t1``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d
        ta = (-h - p) * inv
        tb = (h - p) * inv
    parallel = np.abs(d) < 1e-12
    lo = np.where(parallel, np.where(np.abs(p) <= h, -np.inf, np.inf), np.minimum(ta, tb))
    hi = np.where(parallel, np.where(np.abs(p) <= h, np.inf, -np.inf), np.maximum(ta, tb))
    return np.maximum(t0, lo), np.minimum(t1, hi)


def _disc_interval(
    px: np.ndarray,
    pz: np.ndarray,
    dx: np.ndarray,
    dz: np.ndarray,
    r: np.ndarray,
    t0: np.ndarray,
    t1: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Clip ``[t0, t1]`` to where ``(px, pz) + t (dx, dz)`` lies inside the disc of radius
    ``r`` about the origin."""
    a = dx * dx + dz * dz
    b = 2.0 * (px * dx + pz * dz)
    c = px * px + pz * pz - r * r
    flat = a < 1e-12
    disc = b * b - 4.0 * a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(np.maximum(disc, 0.0))
        lo = (-b - root) / (2.0 * a)
        hi = (-b + root) / (2.0 * a)
    lo = np.where(flat, np.where(c <= 0.0, -np.inf, np.inf), np.where(disc < 0, np.inf, lo))
    hi = np.where(flat, np.where(c <= 0.0, np.inf, -np.inf), np.where(disc < 0, -np.inf, hi))
    return np.maximum(t0, lo), np.minimum(t1, hi)


def _segment_point_distance(ax: np.ndarray, az: np.ndarray, bx: np.ndarray, bz: np.ndarray):
    """Distance from the origin to the x/z segment a-b (elementwise)."""
    dx, dz = bx - ax, bz - az
    den = dx * dx + dz * dz
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(den > 1e-12, -(ax * dx + az * dz) / den, 0.0)
    t = np.clip(t, 0.0, 1.0)
    return np.hypot(ax + t * dx, az + t * dz)


def _segment_point_distance_3d(ax, ay, az, dx, dy, dz):
    """Distance from the origin to the segment ``a + t d``, ``t in [0, 1]`` (elementwise)."""
    den = dx * dx + dy * dy + dz * dz
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(den > 1e-12, -(ax * dx + ay * dy + az * dz) / den, 0.0)
    t = np.clip(t, 0.0, 1.0)
    return np.sqrt((ax + t * dx) ** 2 + (ay + t * dy) ** 2 + (az + t * dz) ** 2)
