"""Flat faces of a scene's parts, and the pairs of them that would z-fight.

Two faces *z-fight* when they lie in the same plane, face the same way and overlap: a
renderer then draws both at the same depth, and which one wins a pixel changes with the
camera pose (regular stripes that move from frame to frame). A rug's inner panel whose
top is flush with the rug's top was the typical case. Such a pair is harmless, and not
reported, when

* both faces draw the same pixels: parts of one static object with the same colour and
  material (same depth, same shading, same world-anchored pattern, same instance id); or
* the overlap is *backed*: covered by faces of other parts that face the opposite way in
  the same plane (two bottoms standing on a floor's top), so a solid hides it from every
  camera outside the solids.

:func:`flat_faces` lists the planar faces of every box (six rectangles, turned with the
object's yaw) and every cylinder (its two discs, as the 32-gons the renderers draw);
spheres have none, and mesh parts (imported homes) are not scanned.
:func:`coplanar_overlaps` returns every other pair of faces of different parts that face
the same way, lie within ``plane_tol_m`` of one plane and overlap by more than
``min_area_m2``. The shipped procedural homes have none (``tests/test_scenes.py`` scans
every one). Units: metres, world Y up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from humanclaw_gym.scenes.spec import SceneSpec

__all__ = ["CoplanarOverlap", "FlatFace", "coplanar_overlaps", "flat_faces"]

#: Faces closer than this along their common normal count as one plane (m). Depth buffers
#: resolve about 0.1 mm at 10 m with the cameras' 5 cm near plane; 1 mm leaves a margin.
PLANE_TOL_M = 1e-3
#: Overlaps smaller than this (m^2; 1 cm^2) are rounding, not a visible region.
MIN_OVERLAP_M2 = 1e-4
_DISC_SEGMENTS = 32  # the renderers' cylinder resolution


@dataclass(frozen=True)
class FlatFace:
    """One planar face: its outward unit normal, its plane offset ``normal . x``, its
    outline (world coordinates) and what it looks like (``look``: equal looks draw equal
    pixels)."""

    object_id: int
    part_index: int
    look: tuple
    normal: np.ndarray  # (3,)
    offset: float
    polygon: np.ndarray  # (K, 3)


@dataclass(frozen=True)
class CoplanarOverlap:
    """Two faces of different parts in one plane, facing the same way, overlapping."""

    a: tuple[int, int]  # (object id, part index)
    b: tuple[int, int]
    normal: tuple[float, float, float]
    offset_m: float
    gap_m: float
    area_m2: float


def _object_rotation(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def flat_faces(scene: SceneSpec) -> list[FlatFace]:
    """The planar faces of every box and cylinder part of ``scene``."""
    out: list[FlatFace] = []
    for obj in scene.objects:
        rot = _object_rotation(obj.yaw_rad)
        for k, part in enumerate(obj.parts):
            # a moving object's patterns are anchored to each part: no two parts look alike
            look = (obj.object_id, part.color, part.material, k if obj.dynamic else -1)
            centre = np.asarray(obj.part_world_center(part), dtype=np.float64)
            if part.shape == "box":
                half = np.asarray(part.size, dtype=np.float64)
                for axis in range(3):
                    u, v = (axis + 1) % 3, (axis + 2) % 3
                    for sign in (1.0, -1.0):
                        n = sign * rot[:, axis]
                        fc = centre + half[axis] * n
                        eu, ev = half[u] * rot[:, u], half[v] * rot[:, v]
                        corners = [fc - eu - ev, fc + eu - ev, fc + eu + ev, fc - eu + ev]
                        out.append(
                            FlatFace(obj.object_id, k, look, n, float(n @ fc), np.array(corners))
                        )
            elif part.shape == "cylinder":
                r, h = float(part.size[0]), float(part.size[1])
                ang = 2.0 * np.pi * np.arange(_DISC_SEGMENTS) / _DISC_SEGMENTS
                ring = np.stack([r * np.cos(ang), np.zeros_like(ang), r * np.sin(ang)], axis=1)
                for sign in (1.0, -1.0):
                    n = np.array([0.0, sign, 0.0])
                    fc = centre + h * n
                    out.append(FlatFace(obj.object_id, k, look, n, float(n @ fc), fc + ring))
    return out


def _plane_basis(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = np.cross(n, helper)
    u /= np.linalg.norm(u)
    return u, np.cross(n, u)


def _ccw(poly: np.ndarray) -> np.ndarray:
    x, y = poly[:, 0], poly[:, 1]
    area = 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))
    return poly if area >= 0.0 else poly[::-1]


def _area(poly: np.ndarray) -> float:
    if len(poly) < 3:
        return 0.0
    x, y = poly[:, 0], poly[:, 1]
    return abs(0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y)))


def _clip(subject: np.ndarray, clipper: np.ndarray) -> np.ndarray:
    """Sutherland-Hodgman: the part of convex polygon ``subject`` inside convex
    ``clipper`` (both counter-clockwise, ``(K, 2)``)."""
    out = subject
    for i in range(len(clipper)):
        if len(out) == 0:
            break
        a, b = clipper[i], clipper[(i + 1) % len(clipper)]
        edge = b - a

        def side(p: np.ndarray, a=a, edge=edge) -> float:
            return float(edge[0] * (p[1] - a[1]) - edge[1] * (p[0] - a[0]))

        res = []
        for j in range(len(out)):
            p, q = out[j], out[(j + 1) % len(out)]
            sp, sq = side(p), side(q)
            if sp >= 0.0:
                res.append(p)
            if (sp >= 0.0) != (sq >= 0.0):
                t = sp / (sp - sq)
                res.append(p + t * (q - p))
        out = np.array(res).reshape(-1, 2)
    return out


def coplanar_overlaps(
    scene: SceneSpec,
    plane_tol_m: float = PLANE_TOL_M,
    min_area_m2: float = MIN_OVERLAP_M2,
) -> list[CoplanarOverlap]:
    """Pairs of faces of different parts that would z-fight (see the module docstring)."""
    faces = flat_faces(scene)
    if not faces:
        return []
    normals = np.array([f.normal for f in faces])
    offsets = np.array([f.offset for f in faces])
    lo = np.array([f.polygon.min(axis=0) for f in faces])
    hi = np.array([f.polygon.max(axis=0) for f in faces])
    found: list[CoplanarOverlap] = []
    for i, fa in enumerate(faces):
        near = np.all(lo <= hi[i] + plane_tol_m, axis=1) & np.all(hi >= lo[i] - plane_tol_m, axis=1)
        same = (
            near & (normals @ fa.normal > 1.0 - 1e-9) & (np.abs(offsets - fa.offset) <= plane_tol_m)
        )
        same[: i + 1] = False
        if not same.any():
            continue
        backers = np.flatnonzero(
            near
            & (normals @ fa.normal < -1.0 + 1e-9)
            & (np.abs(offsets + fa.offset) <= plane_tol_m)
        )
        u, v = _plane_basis(fa.normal)

        def flat(face: FlatFace, u=u, v=v) -> np.ndarray:
            return _ccw(np.stack([face.polygon @ u, face.polygon @ v], axis=1))

        pa = flat(fa)
        for j in np.flatnonzero(same):
            fb = faces[j]
            if (fb.object_id, fb.part_index) == (fa.object_id, fa.part_index) or fb.look == fa.look:
                continue
            overlap = _clip(pa, flat(fb))
            area = _area(overlap)
            if area <= min_area_m2:
                continue
            hidden = sum(
                _area(_clip(overlap, flat(faces[k])))
                for k in backers
                if (faces[k].object_id, faces[k].part_index)
                not in ((fa.object_id, fa.part_index), (fb.object_id, fb.part_index))
            )
            if hidden >= area - min_area_m2:
                continue
            found.append(
                CoplanarOverlap(
                    a=(fa.object_id, fa.part_index),
                    b=(fb.object_id, fb.part_index),
                    normal=tuple(float(x) for x in fa.normal),  # type: ignore[arg-type]
                    offset_m=fa.offset,
                    gap_m=float(abs(fb.offset - fa.offset)),
                    area_m2=area,
                )
            )
    return found
