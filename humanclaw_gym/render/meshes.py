"""Unit triangle meshes of the primitive shapes (numpy only).

Every mesh is centred at the origin with outward normals and counter-clockwise front faces
(seen from outside), so back-face culling is safe:

* ``box``: the cube ``[-1, 1]^3`` (scale by the half extents);
* ``cylinder``: radius 1, axis along +Y from ``y = -1`` to ``y = 1`` (scale by
  ``(radius, half_height, radius)``), flat-shaded caps, smooth side;
* ``sphere``: radius 1, smooth (a UV sphere).

A capsule is drawn as one cylinder plus two spheres.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

__all__ = ["MESH_KINDS", "unit_mesh"]

MESH_KINDS: tuple[str, ...] = ("box", "cylinder", "sphere")

_CYLINDER_SEGMENTS = 32
_SPHERE_RINGS = 14
_SPHERE_SEGMENTS = 28


def _orient_outward(positions: np.ndarray, normals: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Flip triangles whose winding disagrees with their vertices' outward normals."""
    tri = indices.reshape(-1, 3).copy()
    a, b, c = positions[tri[:, 0]], positions[tri[:, 1]], positions[tri[:, 2]]
    face_n = np.cross(b - a, c - a)
    ref = normals[tri[:, 0]] + normals[tri[:, 1]] + normals[tri[:, 2]]
    flip = np.einsum("ij,ij->i", face_n, ref) < 0.0
    tri[flip] = tri[flip][:, [0, 2, 1]]
    return tri.reshape(-1)


def _box() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos, nrm, idx = [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3)
            n[axis] = sign
            u = np.zeros(3)
            u[(axis + 1) % 3] = 1.0
            v = np.cross(n, u)
            base = len(pos)
            for du, dv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                pos.append(n + du * u + dv * v)
                nrm.append(n)
            idx += [base, base + 1, base + 2, base, base + 2, base + 3]
    return np.array(pos), np.array(nrm), np.array(idx)


def _cylinder() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_seg = _CYLINDER_SEGMENTS
    angles = np.linspace(0.0, 2.0 * math.pi, n_seg, endpoint=False)
    ring = np.stack([np.cos(angles), np.zeros(n_seg), np.sin(angles)], axis=1)
    pos, nrm, idx = [], [], []
    # side: two rings with radial normals.
    for y in (-1.0, 1.0):
        for p in ring:
            pos.append(p + [0.0, y, 0.0])
            nrm.append(p)
    for i in range(n_seg):
        j = (i + 1) % n_seg
        lo_i, lo_j, hi_i, hi_j = i, j, n_seg + i, n_seg + j
        idx += [lo_i, hi_i, hi_j, lo_i, hi_j, lo_j]
    # caps: a centre vertex and a ring each, flat normals.
    for y in (-1.0, 1.0):
        centre = len(pos)
        pos.append([0.0, y, 0.0])
        nrm.append([0.0, y, 0.0])
        for p in ring:
            pos.append(p + [0.0, y, 0.0])
            nrm.append([0.0, y, 0.0])
        for i in range(n_seg):
            idx += [centre, centre + 1 + i, centre + 1 + (i + 1) % n_seg]
    return np.array(pos, dtype=np.float64), np.array(nrm, dtype=np.float64), np.array(idx)


def _sphere() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rings, segs = _SPHERE_RINGS, _SPHERE_SEGMENTS
    pos = []
    for r in range(rings + 1):
        theta = math.pi * r / rings
        for s in range(segs + 1):
            phi = 2.0 * math.pi * s / segs
            pos.append(
                [math.sin(theta) * math.cos(phi), math.cos(theta), math.sin(theta) * math.sin(phi)]
            )
    idx = []
    row = segs + 1
    for r in range(rings):
        for s in range(segs):
            a, b = r * row + s, r * row + s + 1
            c, d = (r + 1) * row + s, (r + 1) * row + s + 1
            if r > 0:
                idx += [a, c, b]
            if r < rings - 1:
                idx += [b, c, d]
    p = np.array(pos, dtype=np.float64)
    return p, p.copy(), np.array(idx)


@cache
def unit_mesh(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The unit mesh of a primitive.

    Args:
        kind: ``"box"``, ``"cylinder"`` or ``"sphere"``.

    Returns:
        ``vertices float32 (V, 6)`` (position xyz, normal xyz) and ``indices int32 (3T,)``
        with counter-clockwise outward-facing triangles.
    """
    builders = {"box": _box, "cylinder": _cylinder, "sphere": _sphere}
    if kind not in builders:
        raise ValueError(f"mesh kind must be one of {MESH_KINDS}, got {kind!r}")
    positions, normals, indices = builders[kind]()
    indices = _orient_outward(positions, normals, indices)
    vertices = np.concatenate([positions, normals], axis=1).astype(np.float32)
    vertices.setflags(write=False)
    indices = indices.astype(np.int32)
    indices.setflags(write=False)
    return vertices, indices
