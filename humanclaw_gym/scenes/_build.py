"""Shared building blocks of the procedural home generator.

Rounding and snapping, random draws, part constructors (object frame: origin on the floor,
front = +Z), axis-aligned rectangles on the floor plane, quarter turns, and the colour
palettes of floors, walls and furniture. Used by :mod:`~humanclaw_gym.scenes.layout`,
:mod:`~humanclaw_gym.scenes.furniture` and :mod:`~humanclaw_gym.scenes.generator`.
"""

from __future__ import annotations

import math

import numpy as np

from humanclaw_gym.scenes.spec import Part

_GRID_M = 0.05  # room corners and door edges snap to this

# Quarter turns: k -> yaw, (cos, sin). An object against the south wall (min z) faces +Z
# (k=0), west (min x) faces +X (k=1), north faces -Z (k=2), east faces -X (k=3).
_QUARTER_YAW = (0.0, math.pi / 2.0, math.pi, -math.pi / 2.0)
_QUARTER_CS = ((1, 0), (0, 1), (-1, 0), (0, -1))
_SIDE_QUARTER = {"south": 0, "west": 1, "north": 2, "east": 3}
_OPPOSITE = {"south": "north", "north": "south", "west": "east", "east": "west"}
_SIDES = ("south", "west", "north", "east")

Rect = tuple[float, float, float, float]  # x0, z0, x1, z1


class SceneGenerationError(RuntimeError):
    """The generator could not build a valid home for a seed (should not happen)."""


# ---------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------
def _r(v: float, nd: int = 4) -> float:
    out = round(float(v), nd)
    return 0.0 if out == 0.0 else out


def _snap(v: float) -> float:
    return _r(round(v / _GRID_M) * _GRID_M)


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _color(
    rng: np.random.Generator, base: tuple[float, float, float], jitter: float = 0.04
) -> tuple[float, float, float]:
    return tuple(
        round(min(1.0, max(0.0, b + float(rng.uniform(-jitter, jitter)))), 3) for b in base
    )  # type: ignore[return-value]


def _box(x, y, z, hx, hy, hz, color, material="plain") -> Part:
    return Part("box", (_r(hx), _r(hy), _r(hz)), (_r(x), _r(y), _r(z)), color, material)


def _cyl(x, y, z, radius, half_h, color, material="plain") -> Part:
    return Part("cylinder", (_r(radius), _r(half_h), 0.0), (_r(x), _r(y), _r(z)), color, material)


def _sph(x, y, z, radius, color, material="plain") -> Part:
    return Part("sphere", (_r(radius), 0.0, 0.0), (_r(x), _r(y), _r(z)), color, material)


def _overlap(a: Rect, b: Rect, gap: float = 0.0) -> bool:
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


def _inside(a: Rect, outer: Rect, tol: float = 1e-6) -> bool:
    return (
        a[0] >= outer[0] - tol
        and a[1] >= outer[1] - tol
        and a[2] <= outer[2] + tol
        and a[3] <= outer[3] + tol
    )


def _rotate_rect(rect: Rect, k: int) -> Rect:
    """Local x/z rect rotated by quarter turn ``k`` (same formula as SceneObject.rotation)."""
    c, s = _QUARTER_CS[k]
    xs, zs = [], []
    for lx in (rect[0], rect[2]):
        for lz in (rect[1], rect[3]):
            xs.append(c * lx + s * lz)
            zs.append(-s * lx + c * lz)
    return (min(xs), min(zs), max(xs), max(zs))


def _front_vec(k: int) -> tuple[int, int]:
    c, s = _QUARTER_CS[k]
    return s, c  # rotation of local +Z


# ---------------------------------------------------------------------------------------
# palettes
# ---------------------------------------------------------------------------------------
_WOODS = (
    (0.55, 0.38, 0.22),
    (0.68, 0.52, 0.34),
    (0.42, 0.28, 0.18),
    (0.78, 0.64, 0.46),
    (0.32, 0.22, 0.16),
)
_FABRICS = (
    (0.35, 0.42, 0.58),
    (0.55, 0.25, 0.22),
    (0.45, 0.5, 0.4),
    (0.6, 0.58, 0.55),
    (0.25, 0.27, 0.3),
    (0.72, 0.6, 0.42),
    (0.42, 0.3, 0.45),
)
_PAINTS = (
    (0.93, 0.93, 0.9),
    (0.85, 0.86, 0.84),
    (0.2, 0.22, 0.25),
    (0.62, 0.7, 0.62),
    (0.58, 0.66, 0.76),
)
_WALL_PAINTS = (
    (0.93, 0.91, 0.86),
    (0.78, 0.85, 0.9),
    (0.82, 0.88, 0.78),
    (0.9, 0.84, 0.72),
    (0.86, 0.86, 0.86),
    (0.92, 0.82, 0.8),
    (0.88, 0.9, 0.95),
)
_FLOORS = {
    "living_room": (("wood", _WOODS[:4]), ("carpet", ((0.55, 0.5, 0.45), (0.45, 0.48, 0.55)))),
    "bedroom": (
        ("carpet", ((0.6, 0.55, 0.5), (0.5, 0.5, 0.58), (0.62, 0.6, 0.52))),
        ("wood", _WOODS[:4]),
    ),
    "kitchen": (
        ("tile", ((0.85, 0.85, 0.82), (0.7, 0.72, 0.75), (0.8, 0.74, 0.66))),
        ("wood", _WOODS[1:4]),
    ),
    "hallway": (("wood", _WOODS[:4]), ("tile", ((0.78, 0.76, 0.72), (0.6, 0.6, 0.62)))),
    "bathroom": (("tile", ((0.92, 0.92, 0.9), (0.7, 0.78, 0.82), (0.55, 0.58, 0.6))),),
}
_WHITE = (0.95, 0.95, 0.94)
_SCREEN = (0.02, 0.02, 0.03)
_GREENS = (
    (0.18, 0.5, 0.2),
    (0.25, 0.6, 0.22),
    (0.14, 0.42, 0.24),
    (0.3, 0.55, 0.18),
    (0.2, 0.58, 0.35),
)
_POTS = ((0.72, 0.4, 0.25), (0.9, 0.9, 0.88), (0.3, 0.3, 0.32), (0.55, 0.6, 0.68), (0.8, 0.7, 0.55))
_BRIGHT = (
    (0.85, 0.2, 0.2),
    (0.2, 0.45, 0.85),
    (0.95, 0.75, 0.15),
    (0.2, 0.7, 0.35),
    (0.9, 0.5, 0.15),
    (0.6, 0.3, 0.7),
)
