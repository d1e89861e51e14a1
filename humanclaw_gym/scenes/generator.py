"""Procedural homes: rooms, walls with doorways, recognisable furniture and small objects.

:func:`generate_scene` turns ``(scene_id, seed)`` into a :class:`SceneSpec`. It uses only
``numpy.random.default_rng(seed)`` and draws in a fixed order, so the same arguments give
the same bytes of :meth:`SceneSpec.to_json` on every run.

What a home contains:

* 2-6 rectangular rooms made by recursively splitting a rectangle. Every home has a
  bedroom and a bathroom; three or more rooms add a living room, four a kitchen or a
  hallway, five both, six a second bedroom. A two-room home is a studio: its bedroom also
  holds the couch and the TV. Rooms are 2.5-6.2 m a side.
* A floor slab per room (top at y = 0) and walls 0.1 m thick: every room owns the 0.05 m
  half of the wall on its side, painted in its own colour. Adjacent rooms are joined by
  doorways 1.0-1.3 m wide (with a lintel at 2.1 m) along a random spanning tree of the
  adjacency graph (plus sometimes a loop); outer walls are closed.
* Furniture where a person expects it, mostly with its back to a wall and its front (local
  +Z) facing the room: beds in bedrooms, toilets and vanities in bathrooms, couch + TV
  facing each other in living rooms, counters, fridges, tables and chairs in kitchens,
  plants, lamps, shelves, cabinets, wardrobes and rugs as distractors. Seats (bed, couch,
  toilet, chair) set ``seat_height_m`` and keep a clear zone of ``APPROACH_DEPTH_M`` in
  front; doorways keep a clear zone on both sides.
* Small dynamic objects (cups, books, boxes, balls, vases; 0.1-2 kg) on tables, counters
  and cabinets, plus a few on the floor.
* In about a third of the homes, a raised platform (2 steps of ``STAIR_RISE_M``) with a
  staircase of ``STAIR_RUN_M`` treads, holding a lamp, an ottoman and a book.

Every home contains at least one chair, bed, potted plant, toilet, TV and couch, and the
generator rejects (and re-draws) any furnishing in which a target's goal region or a door
is cut off from the main free space of the navigation grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from humanclaw_gym.scenes.spec import (
    STAIR_RISE_M,
    STAIR_RUN_M,
    TARGET_CATEGORIES,
    Part,
    Room,
    SceneObject,
    SceneSpec,
)

__all__ = [
    "APPROACH_DEPTH_M",
    "DOOR_HEIGHT_M",
    "DOOR_MIN_WIDTH_M",
    "GENERATOR_VERSION",
    "PLATFORM_STEPS",
    "WALL_HEIGHT_M",
    "WALL_THICKNESS_M",
    "SceneGenerationError",
    "generate_scene",
]

GENERATOR_VERSION = "humanclaw_procedural_v1"
WALL_THICKNESS_M = 0.1
WALL_HEIGHT_M = 2.5
DOOR_MIN_WIDTH_M = 1.0
DOOR_HEIGHT_M = 2.1
#: Depth of the clear floor zone kept in front of every seat.
APPROACH_DEPTH_M = 1.0
#: Height of a raised platform in stair steps.
PLATFORM_STEPS = 2

_HALF_WALL = 0.5 * WALL_THICKNESS_M
_GRID_M = 0.05  # room corners and door edges snap to this
_DOOR_MARGIN_M = 0.3  # doorway edge to the nearest wall corner
_DOOR_ZONE_DEPTH_M = 1.1
_WALL_GAP_M = 0.03  # furniture back to wall face
_OBJ_GAP_M = 0.06  # between furniture footprints
_MIN_SIDE_M = {"living_room": 3.4, "bedroom": 3.2, "kitchen": 2.8, "hallway": 2.5, "bathroom": 2.5}
_MAX_SIDE_M = 6.2
_AREA_M2 = {
    "living_room": (16.0, 27.0),
    "bedroom": (11.0, 17.0),
    "kitchen": (9.0, 14.0),
    "hallway": (6.5, 10.0),
    "bathroom": (6.3, 10.5),
}
_STUDIO_AREA_M2 = {"bedroom": (17.0, 24.0), "bathroom": (9.5, 12.0)}
_STUDIO_MIN_SIDE_M = 3.7
_LAYOUT_ATTEMPTS = 200
_PLATFORM_PROBABILITY = 0.38  # some attempts do not fit: about a third of homes get one
_AREA_SLACK = 0.3  # a guillotine cut may change a side's area share by this fraction
_FURNISH_ATTEMPTS = 30

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


# ---------------------------------------------------------------------------------------
# furniture builders (object frame: origin on the floor, front = +Z)
# ---------------------------------------------------------------------------------------
@dataclass
class _Item:
    stem: str
    category: str
    parts: list[Part]
    seat_height_m: float | None = None
    surfaces: list[tuple[float, float, float, float, float]] = field(default_factory=list)
    dynamic: bool = False
    mass_kg: float = 0.0

    def local_rect(self) -> Rect:
        x0 = z0 = math.inf
        x1 = z1 = -math.inf
        for p in self.parts:
            h = p.local_half_extents()
            x0, x1 = min(x0, p.offset[0] - h[0]), max(x1, p.offset[0] + h[0])
            z0, z1 = min(z0, p.offset[2] - h[2]), max(z1, p.offset[2] + h[2])
        return (x0, z0, x1, z1)

    def height(self) -> float:
        return max(p.offset[1] + p.local_half_extents()[1] for p in self.parts)

    def bottom(self) -> float:
        return min(p.offset[1] - p.local_half_extents()[1] for p in self.parts)


def _surface_top(item: _Item, lx: float, lz: float, nominal: float) -> float:
    """Height of the highest part top under local point (lx, lz) that is not above the
    nominal surface (so rounding of part sizes never leaves a gap)."""
    best = None
    for p in item.parts:
        h = p.local_half_extents()
        top = p.offset[1] + h[1]
        if (
            abs(lx - p.offset[0]) <= h[0]
            and abs(lz - p.offset[2]) <= h[2]
            and top <= nominal + 0.005
        ):
            best = top if best is None else max(best, top)
    return float(nominal if best is None else best)


def _legs(
    hw: float,
    hd: float,
    height: float,
    color,
    inset: float = 0.04,
    half: float = 0.022,
    material="wood",
) -> list[Part]:
    return [
        _box(
            sx * (hw - inset),
            height / 2,
            sz * (hd - inset),
            half,
            height / 2,
            half,
            color,
            material,
        )
        for sx in (-1, 1)
        for sz in (-1, 1)
    ]


def _bed(rng: np.random.Generator, double: bool) -> _Item:
    width = _u(rng, 1.35, 1.8) if double else _u(rng, 0.92, 1.05)
    length = _u(rng, 1.95, 2.12)
    frame_h = _u(rng, 0.22, 0.32)
    mattress_t = _u(rng, 0.18, 0.24)
    blanket_t = 0.03
    head_t = 0.06
    head_h = _u(rng, 0.9, 1.25)
    wood = _color(rng, _pick(rng, _WOODS))
    blanket = _color(rng, _pick(rng, _FABRICS))
    head_fabric = rng.random() < 0.4
    head_color = _color(rng, _pick(rng, _FABRICS)) if head_fabric else wood
    body = length - head_t
    zc = head_t / 2
    seat = frame_h + mattress_t + blanket_t
    parts = [
        _box(0, frame_h / 2, zc, width / 2, frame_h / 2, body / 2, wood, "wood"),
        _box(
            0,
            frame_h + mattress_t / 2,
            zc,
            width / 2 - 0.03,
            mattress_t / 2,
            body / 2 - 0.03,
            _color(rng, _WHITE, 0.03),
            "fabric",
        ),
        _box(
            0,
            head_h / 2,
            -length / 2 + head_t / 2,
            width / 2 + 0.02,
            head_h / 2,
            head_t / 2,
            head_color,
            "fabric" if head_fabric else "wood",
        ),
    ]
    b0, b1 = -length / 2 + head_t + 0.5, length / 2 - 0.02
    parts.append(
        _box(
            0,
            frame_h + mattress_t + blanket_t / 2,
            (b0 + b1) / 2,
            width / 2 - 0.01,
            blanket_t / 2,
            (b1 - b0) / 2,
            blanket,
            "fabric",
        )
    )
    n_pillows = 2 if double else 1
    pw = min(0.3, (width - 0.2) / (2 * n_pillows))
    for i in range(n_pillows):
        x = 0.0 if n_pillows == 1 else (-width / 4 if i == 0 else width / 4)
        parts.append(
            _box(
                x,
                frame_h + mattress_t + 0.06,
                -length / 2 + head_t + 0.24,
                pw,
                0.06,
                0.16,
                _color(rng, _WHITE, 0.05),
                "fabric",
            )
        )
    return _Item("bed", "bed", parts, seat_height_m=_r(seat))


def _couch(rng: np.random.Generator) -> _Item:
    width = _u(rng, 1.6, 2.3)
    depth = _u(rng, 0.84, 0.95)
    seat = _u(rng, 0.42, 0.48)
    leg_h, cushion_t = 0.08, 0.12
    arm_w = _u(rng, 0.12, 0.2)
    arm_h = seat + _u(rng, 0.14, 0.2)
    back_h = _u(rng, 0.8, 0.92)
    back_d = _u(rng, 0.18, 0.24)
    fabric = _color(rng, _pick(rng, _FABRICS))
    cushion = _color(rng, fabric, 0.05)
    leg = _color(rng, _pick(rng, _WOODS))
    base_top = seat - cushion_t
    parts = _legs(width / 2, depth / 2, leg_h, leg, inset=0.06, half=0.025)
    parts.append(
        _box(
            0,
            (leg_h + base_top) / 2,
            0,
            width / 2,
            (base_top - leg_h) / 2,
            depth / 2,
            fabric,
            "fabric",
        )
    )
    inner = width - 2 * arm_w
    parts.append(
        _box(
            0,
            (base_top + back_h) / 2,
            -depth / 2 + back_d / 2,
            inner / 2,
            (back_h - base_top) / 2,
            back_d / 2,
            fabric,
            "fabric",
        )
    )
    for sx in (-1, 1):
        parts.append(
            _box(
                sx * (width / 2 - arm_w / 2),
                (leg_h + arm_h) / 2,
                0,
                arm_w / 2,
                (arm_h - leg_h) / 2,
                depth / 2,
                fabric,
                "fabric",
            )
        )
    n = 2 if inner < 1.5 else 3
    cw = inner / n
    seat_d = depth - back_d
    for i in range(n):
        x = -inner / 2 + cw * (i + 0.5)
        parts.append(
            _box(
                x,
                base_top + cushion_t / 2,
                -depth / 2 + back_d + seat_d / 2,
                cw / 2 - 0.01,
                cushion_t / 2,
                seat_d / 2,
                cushion,
                "fabric",
            )
        )
        parts.append(
            _box(
                x,
                seat + 0.18,
                -depth / 2 + back_d + 0.07,
                cw / 2 - 0.02,
                0.18,
                0.07,
                cushion,
                "fabric",
            )
        )
    return _Item("couch", "couch", parts, seat_height_m=_r(seat))


def _toilet(rng: np.random.Generator) -> _Item:
    seat = _u(rng, 0.4, 0.44)
    white = _color(rng, _WHITE, 0.02)
    parts = [
        _cyl(0, 0.125, 0.0, 0.13, 0.125, white, "ceramic"),
        _box(0, (seat - 0.03) / 2, -0.19, 0.11, (seat - 0.03) / 2, 0.1, white, "ceramic"),
        _cyl(0, (0.2 + seat - 0.03) / 2, 0.05, 0.19, (seat - 0.03 - 0.2) / 2, white, "ceramic"),
        _cyl(0, seat - 0.015, 0.06, 0.2, 0.015, _color(rng, _WHITE, 0.03), "plastic"),
        _box(0, seat - 0.02 + 0.19, -0.25, 0.19, 0.19, 0.09, white, "ceramic"),
        _box(0, seat + 0.2, -0.145, 0.17, 0.19, 0.015, white, "plastic"),
    ]
    return _Item("toilet", "toilet", parts, seat_height_m=_r(seat))


def _chair(rng: np.random.Generator, style: str | None = None) -> _Item:
    style = style or ("armchair" if rng.random() < 0.35 else "dining")
    if style == "armchair":
        hw, hd = _u(rng, 0.36, 0.44), _u(rng, 0.36, 0.43)
        seat = _u(rng, 0.42, 0.47)
        fabric = _color(rng, _pick(rng, _FABRICS))
        leg = _color(rng, _pick(rng, _WOODS))
        arm_w = 0.1
        parts = _legs(hw, hd, 0.08, leg, inset=0.05)
        parts.append(
            _box(0, (0.08 + seat - 0.1) / 2, 0, hw, (seat - 0.1 - 0.08) / 2, hd, fabric, "fabric")
        )
        parts.append(
            _box(
                0,
                seat - 0.05,
                0.08,
                hw - arm_w,
                0.05,
                hd - 0.08,
                _color(rng, fabric, 0.05),
                "fabric",
            )
        )
        parts.append(
            _box(
                0,
                (seat - 0.1 + 0.85) / 2,
                -hd + 0.08,
                hw - arm_w,
                (0.85 - seat + 0.1) / 2,
                0.08,
                fabric,
                "fabric",
            )
        )
        for sx in (-1, 1):
            parts.append(
                _box(
                    sx * (hw - arm_w / 2),
                    (0.08 + seat + 0.18) / 2,
                    0,
                    arm_w / 2,
                    (seat + 0.18 - 0.08) / 2,
                    hd,
                    fabric,
                    "fabric",
                )
            )
        return _Item("chair", "chair", parts, seat_height_m=_r(seat))
    hw, hd = _u(rng, 0.21, 0.25), _u(rng, 0.21, 0.25)
    seat = _u(rng, 0.44, 0.48)
    t = 0.04
    wooden = rng.random() < 0.6
    frame = _color(rng, _pick(rng, _WOODS)) if wooden else _color(rng, _pick(rng, _PAINTS))
    material = "wood" if wooden else "plastic"
    back_h = _u(rng, 0.4, 0.5)
    parts = _legs(hw, hd, seat - t, frame, inset=0.03, half=0.02, material=material)
    parts.append(_box(0, seat - t / 2, 0, hw, t / 2, hd, frame, material))
    for sx in (-1, 1):
        parts.append(
            _box(
                sx * (hw - 0.03),
                seat + back_h / 2,
                -(hd - 0.03),
                0.02,
                back_h / 2,
                0.02,
                frame,
                material,
            )
        )
    parts.append(
        _box(0, seat + back_h - 0.12, -(hd - 0.03), hw - 0.02, 0.11, 0.015, frame, material)
    )
    if rng.random() < 0.5:
        parts.append(
            _box(
                0,
                seat + 0.012,
                0.01,
                hw - 0.03,
                0.012,
                hd - 0.04,
                _color(rng, _pick(rng, _FABRICS)),
                "fabric",
            )
        )
        seat += 0.024
    return _Item("chair", "chair", parts, seat_height_m=_r(seat))


def _tv(rng: np.random.Generator) -> _Item:
    screen_w = _u(rng, 0.9, 1.4)
    screen_h = screen_w * 0.57
    bezel = (0.08, 0.08, 0.09)
    parts: list[Part] = []
    if rng.random() < 0.7:
        cab_w = max(_u(rng, 1.1, 1.7), screen_w + 0.1)
        cab_d = _u(rng, 0.38, 0.45)
        cab_h = _u(rng, 0.42, 0.55)
        wood = _color(rng, _pick(rng, _WOODS + _PAINTS[:3]))
        parts.append(_box(0, cab_h / 2, 0, cab_w / 2, cab_h / 2, cab_d / 2, wood, "wood"))
        n = 2 if cab_w < 1.4 else 3
        for i in range(n):
            x = -cab_w / 2 + cab_w * (i + 0.5) / n
            parts.append(
                _box(
                    x,
                    cab_h / 2,
                    cab_d / 2 + 0.005,
                    cab_w / (2 * n) - 0.015,
                    cab_h / 2 - 0.03,
                    0.005,
                    _color(rng, wood, 0.06),
                    "wood",
                )
            )
        base = cab_h
        parts.append(_box(0, base + 0.01, 0, 0.2, 0.01, 0.11, bezel, "metal"))
        parts.append(_box(0, base + 0.06, -0.02, 0.035, 0.05, 0.02, bezel, "metal"))
        screen_y = base + 0.09 + screen_h / 2
    else:
        stand_h = _u(rng, 0.55, 0.75)
        parts.append(_box(0, 0.015, 0, 0.32, 0.015, 0.22, bezel, "metal"))
        parts.append(_box(0, stand_h / 2, -0.03, 0.035, stand_h / 2, 0.03, bezel, "metal"))
        screen_y = stand_h + screen_h / 2 - 0.05
    parts.append(_box(0, screen_y, -0.02, screen_w / 2, screen_h / 2, 0.03, bezel, "plastic"))
    parts.append(
        _box(0, screen_y, 0.013, screen_w / 2 - 0.02, screen_h / 2 - 0.02, 0.003, _SCREEN, "screen")
    )
    return _Item("tv", "tv", parts)


def _plant(rng: np.random.Generator) -> _Item:
    pot_r = _u(rng, 0.13, 0.22)
    pot_h = _u(rng, 0.25, 0.45)
    pot = _color(rng, _pick(rng, _POTS))
    green = _pick(rng, _GREENS)
    stem_h = _u(rng, 0.15, 0.7)
    parts = [
        _cyl(0, pot_h / 2, 0, pot_r, pot_h / 2, pot, "ceramic"),
        _cyl(0, pot_h - 0.02, 0, pot_r + 0.015, 0.02, _color(rng, pot, 0.05), "ceramic"),
        _cyl(0, pot_h + 0.003, 0, pot_r - 0.01, 0.006, (0.25, 0.17, 0.1), "soil"),
        _cyl(0, pot_h + stem_h / 2, 0, 0.02, stem_h / 2, (0.35, 0.25, 0.12), "wood"),
    ]
    n = int(rng.integers(3, 7))
    top = pot_h + stem_h
    big = _u(rng, 0.17, 0.26)
    parts.append(_sph(0, top + big * 0.6, 0, big, _color(rng, green, 0.05), "foliage"))
    for i in range(n):
        ang = 2 * math.pi * i / n + _u(rng, -0.3, 0.3)
        rad = _u(rng, 0.06, pot_r * 0.9)
        r_leaf = _u(rng, 0.1, 0.18)
        y = pot_h + stem_h * _u(rng, 0.45, 1.0) + r_leaf * 0.5
        parts.append(
            _sph(
                rad * math.cos(ang),
                y,
                rad * math.sin(ang),
                r_leaf,
                _color(rng, green, 0.07),
                "foliage",
            )
        )
    return _Item("potted_plant", "potted_plant", parts)


def _table(rng: np.random.Generator, kind: str) -> _Item:
    dims = {
        "dining": ((1.1, 1.7), (0.75, 0.95), (0.74, 0.77)),
        "desk": ((1.0, 1.4), (0.55, 0.7), (0.73, 0.76)),
        "coffee": ((0.8, 1.2), (0.5, 0.7), (0.38, 0.46)),
        "side": ((0.42, 0.58), (0.42, 0.58), (0.5, 0.62)),
    }[kind]
    w, d, h = (_u(rng, *dims[0]), _u(rng, *dims[1]), _u(rng, *dims[2]))
    t = 0.035
    wood = _color(rng, _pick(rng, _WOODS + _PAINTS[:2]))
    parts = [_box(0, h - t / 2, 0, w / 2, t / 2, d / 2, wood, "wood")]
    if kind == "side" and rng.random() < 0.5:
        parts.append(_cyl(0, (h - t) / 2, 0, 0.04, (h - t) / 2, wood, "wood"))
        parts.append(_cyl(0, 0.015, 0, min(w, d) / 2 - 0.04, 0.015, wood, "wood"))
    else:
        parts += _legs(w / 2, d / 2, h - t, _color(rng, wood, 0.05), inset=0.05, half=0.025)
    surf = (-w / 2 + 0.06, -d / 2 + 0.06, w / 2 - 0.06, d / 2 - 0.06, h)
    return _Item("table", "table", parts, surfaces=[surf])


def _cabinet(rng: np.random.Generator, kind: str) -> _Item:
    dims = {
        "nightstand": ((0.4, 0.55), (0.36, 0.44), (0.5, 0.6)),
        "sideboard": ((1.0, 1.6), (0.4, 0.5), (0.7, 0.9)),
        "shoe": ((0.8, 1.2), (0.32, 0.4), (0.8, 1.0)),
        "bath": ((0.5, 0.8), (0.35, 0.42), (0.8, 1.0)),
    }[kind]
    w, d, h = (_u(rng, *dims[0]), _u(rng, *dims[1]), _u(rng, *dims[2]))
    body = _color(rng, _pick(rng, _WOODS + _PAINTS))
    parts = [
        _box(0, h / 2 + 0.02, 0, w / 2, h / 2 - 0.02, d / 2, body, "wood"),
        _box(0, 0.02, 0, w / 2 - 0.03, 0.02, d / 2 - 0.03, (0.15, 0.13, 0.12), "wood"),
    ]
    rows = 2 if kind == "nightstand" else int(rng.integers(1, 3))
    cols = 1 if w < 0.7 else 2
    front = _color(rng, body, 0.07)
    for r_ in range(rows):
        y0 = 0.04 + (h - 0.04) * r_ / rows
        y1 = 0.04 + (h - 0.04) * (r_ + 1) / rows
        for c_ in range(cols):
            x0 = -w / 2 + w * c_ / cols
            x1 = -w / 2 + w * (c_ + 1) / cols
            parts.append(
                _box(
                    (x0 + x1) / 2,
                    (y0 + y1) / 2,
                    d / 2 + 0.005,
                    (x1 - x0) / 2 - 0.015,
                    (y1 - y0) / 2 - 0.015,
                    0.005,
                    front,
                    "wood",
                )
            )
            parts.append(
                _box(
                    (x0 + x1) / 2,
                    y1 - 0.06,
                    d / 2 + 0.014,
                    0.05,
                    0.008,
                    0.006,
                    (0.7, 0.7, 0.72),
                    "metal",
                )
            )
    surf = (-w / 2 + 0.05, -d / 2 + 0.05, w / 2 - 0.05, d / 2 - 0.05, h)
    return _Item("cabinet", "cabinet", parts, surfaces=[surf])


def _counter(rng: np.random.Generator, length: float) -> _Item:
    d, h = 0.62, 0.9
    body = _color(rng, _pick(rng, _PAINTS + _WOODS[:2]))
    top = _color(rng, _pick(rng, ((0.2, 0.2, 0.22), (0.85, 0.84, 0.8), (0.5, 0.45, 0.4))))
    parts = [
        _box(0, 0.05, -0.03, length / 2, 0.05, d / 2 - 0.03, (0.15, 0.14, 0.13), "wood"),
        _box(
            0, (0.1 + h - 0.04) / 2, 0, length / 2, (h - 0.04 - 0.1) / 2, d / 2 - 0.02, body, "wood"
        ),
        _box(0, h - 0.02, 0, length / 2, 0.02, d / 2, top, "stone"),
    ]
    n = max(1, int(length / 0.6))
    dw = length / n
    for i in range(n):
        x = -length / 2 + dw * (i + 0.5)
        parts.append(
            _box(
                x,
                (0.1 + h - 0.04) / 2,
                d / 2 - 0.015,
                dw / 2 - 0.012,
                (h - 0.14) / 2 - 0.012,
                0.005,
                _color(rng, body, 0.05),
                "wood",
            )
        )
        parts.append(
            _box(x, h - 0.14, d / 2 - 0.004, 0.06, 0.008, 0.006, (0.75, 0.75, 0.78), "metal")
        )
    # upper cabinets on the wall
    uh0, uh1 = 1.45, 2.15
    parts.append(
        _box(
            0,
            (uh0 + uh1) / 2,
            -d / 2 + 0.18,
            length / 2,
            (uh1 - uh0) / 2,
            0.18,
            _color(rng, body, 0.03),
            "wood",
        )
    )
    # sink and stove on the top
    sink_x = _u(rng, -length / 2 + 0.45, length / 2 - 0.45) if length > 1.2 else 0.0
    parts.append(_box(sink_x, h + 0.002, 0.02, 0.28, 0.002, 0.2, (0.6, 0.62, 0.65), "metal"))
    parts.append(
        _box(sink_x, h + 0.15, -d / 2 + 0.08, 0.015, 0.15, 0.015, (0.7, 0.7, 0.72), "metal")
    )
    surfaces = []
    stove = None
    if length >= 1.8:
        left_room = sink_x - (-length / 2)
        stove = sink_x + 0.6 if left_room < length / 2 else sink_x - 0.6
        stove = min(max(stove, -length / 2 + 0.32), length / 2 - 0.32)
        parts.append(_box(stove, h + 0.005, 0.0, 0.3, 0.005, 0.27, (0.08, 0.08, 0.09), "glass"))
        for bx in (-0.14, 0.14):
            for bz in (-0.12, 0.12):
                parts.append(
                    _cyl(stove + bx, h + 0.012, bz, 0.08, 0.002, (0.25, 0.25, 0.27), "metal")
                )
    # free stretches of the worktop for small objects
    blocked = sorted(
        [(sink_x - 0.32, sink_x + 0.32)]
        + ([(stove - 0.33, stove + 0.33)] if stove is not None else [])
    )
    x = -length / 2 + 0.05
    for b0, b1 in blocked + [(length / 2 - 0.05, length / 2)]:
        if b0 - x >= 0.3:
            surfaces.append((x, -d / 2 + 0.12, b0, d / 2 - 0.06, h))
        x = max(x, b1)
    return _Item("counter", "counter", parts, surfaces=surfaces)


def _fridge(rng: np.random.Generator) -> _Item:
    w, d, h = _u(rng, 0.6, 0.75), _u(rng, 0.62, 0.7), _u(rng, 1.7, 1.9)
    body = _color(rng, _pick(rng, ((0.92, 0.92, 0.92), (0.75, 0.76, 0.78), (0.2, 0.2, 0.22))))
    split = h * 0.62
    return _Item(
        "refrigerator",
        "refrigerator",
        [
            _box(0, h / 2, 0, w / 2, h / 2, d / 2, body, "metal"),
            _box(
                0,
                (split + h) / 2,
                d / 2 + 0.006,
                w / 2 - 0.01,
                (h - split) / 2 - 0.01,
                0.006,
                _color(rng, body, 0.03),
                "metal",
            ),
            _box(
                0,
                split / 2,
                d / 2 + 0.006,
                w / 2 - 0.01,
                split / 2 - 0.01,
                0.006,
                _color(rng, body, 0.03),
                "metal",
            ),
            _box(
                w / 2 - 0.07,
                split + 0.25,
                d / 2 + 0.03,
                0.012,
                0.15,
                0.02,
                (0.6, 0.6, 0.62),
                "metal",
            ),
            _box(
                w / 2 - 0.07,
                split - 0.25,
                d / 2 + 0.03,
                0.012,
                0.15,
                0.02,
                (0.6, 0.6, 0.62),
                "metal",
            ),
        ],
    )


def _shelf(rng: np.random.Generator) -> _Item:
    w, d, h = _u(rng, 0.6, 1.2), _u(rng, 0.28, 0.36), _u(rng, 1.2, 2.0)
    wood = _color(rng, _pick(rng, _WOODS + _PAINTS[:3]))
    t = 0.02
    parts = [
        _box(-w / 2 + t, h / 2, 0, t, h / 2, d / 2, wood, "wood"),
        _box(w / 2 - t, h / 2, 0, t, h / 2, d / 2, wood, "wood"),
        _box(
            0, h / 2, -d / 2 + 0.005, w / 2 - 2 * t, h / 2, 0.005, _color(rng, wood, 0.05), "wood"
        ),
    ]
    n = max(3, int(h / 0.38))
    for i in range(n + 1):
        y = 0.03 + (h - 0.05) * i / n
        parts.append(_box(0, y, 0, w / 2 - 2 * t, 0.012, d / 2, wood, "wood"))
        if i == n:
            break
        x = -w / 2 + 2 * t + 0.02
        while x < w / 2 - 2 * t - 0.06 and rng.random() < 0.88:
            bw = _u(rng, 0.02, 0.045)
            bh = _u(rng, 0.17, min(0.3, (h - 0.05) / n - 0.05))
            parts.append(
                _box(
                    x + bw,
                    y + 0.012 + bh / 2,
                    0.0,
                    bw,
                    bh / 2,
                    d / 2 - 0.05,
                    _color(rng, _pick(rng, _BRIGHT + _FABRICS), 0.06),
                    "paper",
                )
            )
            x += 2 * bw + 0.004
        # leave the rest of the board empty
    return _Item("shelf", "shelf", parts)


def _lamp(rng: np.random.Generator) -> _Item:
    h = _u(rng, 1.4, 1.7)
    shade_r = _u(rng, 0.17, 0.23)
    shade_h = _u(rng, 0.16, 0.22)
    metal = _color(rng, _pick(rng, ((0.15, 0.15, 0.16), (0.75, 0.65, 0.4), (0.8, 0.8, 0.82))))
    return _Item(
        "lamp",
        "lamp",
        [
            _cyl(0, 0.015, 0, 0.15, 0.015, metal, "metal"),
            _cyl(0, (h - shade_h) / 2, 0, 0.015, (h - shade_h) / 2, metal, "metal"),
            _cyl(
                0,
                h - shade_h / 2,
                0,
                shade_r,
                shade_h / 2,
                _color(rng, (0.95, 0.9, 0.78), 0.04),
                "fabric",
            ),
        ],
    )


def _wardrobe(rng: np.random.Generator) -> _Item:
    w, d, h = _u(rng, 0.9, 1.7), _u(rng, 0.55, 0.62), _u(rng, 1.9, 2.15)
    body = _color(rng, _pick(rng, _WOODS + _PAINTS[:2]))
    parts = [_box(0, h / 2, 0, w / 2, h / 2, d / 2, body, "wood")]
    n = 2 if w < 1.3 else 3
    for i in range(n):
        x = -w / 2 + w * (i + 0.5) / n
        parts.append(
            _box(
                x,
                h / 2,
                d / 2 + 0.006,
                w / (2 * n) - 0.01,
                h / 2 - 0.04,
                0.006,
                _color(rng, body, 0.06),
                "wood",
            )
        )
        hx = x + (w / (2 * n) - 0.06) * (1 if i % 2 == 0 else -1)
        parts.append(_box(hx, h * 0.5, d / 2 + 0.02, 0.01, 0.12, 0.012, (0.7, 0.7, 0.72), "metal"))
    return _Item("wardrobe", "wardrobe", parts)


def _vanity(rng: np.random.Generator) -> _Item:
    w, d, h = _u(rng, 0.6, 1.0), _u(rng, 0.45, 0.5), _u(rng, 0.82, 0.88)
    body = _color(rng, _pick(rng, _WOODS + _PAINTS))
    white = _color(rng, _WHITE, 0.02)
    parts = [
        _box(0, h / 2, 0, w / 2, h / 2, d / 2, body, "wood"),
        _box(0, h + 0.06, 0.02, min(0.3, w / 2 - 0.05), 0.06, 0.18, white, "ceramic"),
        _box(0, h + 0.2, -d / 2 + 0.05, 0.015, 0.08, 0.015, (0.75, 0.75, 0.78), "metal"),
        _box(0, 1.45, -d / 2 + 0.01, min(0.35, w / 2), 0.3, 0.01, (0.8, 0.85, 0.88), "glass"),
    ]
    return _Item("sink", "sink", parts)


def _bathtub(rng: np.random.Generator) -> _Item:
    length, w, h = _u(rng, 1.5, 1.7), _u(rng, 0.7, 0.78), _u(rng, 0.52, 0.58)
    white = _color(rng, _WHITE, 0.02)
    t = 0.06
    parts = [
        _box(0, 0.06, 0, length / 2, 0.06, w / 2, white, "ceramic"),
        _box(0, h / 2, -w / 2 + t / 2, length / 2, h / 2, t / 2, white, "ceramic"),
        _box(0, h / 2, w / 2 - t / 2, length / 2, h / 2, t / 2, white, "ceramic"),
        _box(-length / 2 + t / 2, h / 2, 0, t / 2, h / 2, w / 2 - t, white, "ceramic"),
        _box(length / 2 - t / 2, h / 2, 0, t / 2, h / 2, w / 2 - t, white, "ceramic"),
        _box(
            -length / 2 + 0.15,
            h + 0.12,
            -w / 2 + 0.04,
            0.015,
            0.12,
            0.015,
            (0.75, 0.75, 0.78),
            "metal",
        ),
    ]
    return _Item("bathtub", "bathtub", parts)


def _coat_rack(rng: np.random.Generator) -> _Item:
    h = _u(rng, 1.6, 1.8)
    wood = _color(rng, _pick(rng, _WOODS))
    parts = [
        _cyl(0, 0.02, 0, 0.2, 0.02, wood, "wood"),
        _cyl(0, h / 2, 0, 0.025, h / 2, wood, "wood"),
    ]
    for ang in (0.0, math.pi / 2, math.pi, 1.5 * math.pi):
        parts.append(_sph(0.1 * math.cos(ang), h - 0.12, 0.1 * math.sin(ang), 0.03, wood, "wood"))
    if rng.random() < 0.7:
        parts.append(
            _box(0.1, h - 0.45, 0.0, 0.05, 0.3, 0.16, _color(rng, _pick(rng, _FABRICS)), "fabric")
        )
    return _Item("coat_rack", "coat_rack", parts)


def _ottoman(rng: np.random.Generator) -> _Item:
    r = _u(rng, 0.22, 0.3)
    h = _u(rng, 0.35, 0.42)
    return _Item(
        "ottoman",
        "ottoman",
        [_cyl(0, h / 2, 0, r, h / 2, _color(rng, _pick(rng, _FABRICS)), "fabric")],
    )


def _rug(rng: np.random.Generator, w: float, d: float) -> _Item:
    color = _color(rng, _pick(rng, _FABRICS + ((0.75, 0.68, 0.55), (0.5, 0.2, 0.2))))
    parts = [_box(0, 0.005, 0, w / 2, 0.005, d / 2, color, "carpet")]
    if rng.random() < 0.6:
        parts.append(
            _box(
                0, 0.0075, 0, w / 2 - 0.12, 0.0025, d / 2 - 0.12, _color(rng, color, 0.12), "carpet"
            )
        )
    return _Item("rug", "rug", parts)


def _platform(rng: np.random.Generator, w: float, d: float) -> _Item:
    h = PLATFORM_STEPS * STAIR_RISE_M
    wood = _color(rng, _pick(rng, _WOODS))
    return _Item(
        "platform",
        "platform",
        [
            _box(
                0, (h - 0.02) / 2, 0, w / 2, (h - 0.02) / 2, d / 2, _color(rng, wood, 0.04), "wood"
            ),
            _box(0, h - 0.01, 0, w / 2, 0.01, d / 2, _color(rng, _pick(rng, _FABRICS)), "carpet"),
        ],
        surfaces=[(-w / 2 + 0.1, -d / 2 + 0.1, w / 2 - 0.1, d / 2 - 0.1, h)],
    )


def _stairs(rng: np.random.Generator, width: float) -> _Item:
    n = PLATFORM_STEPS - 1
    depth = n * STAIR_RUN_M
    wood = _color(rng, _pick(rng, _WOODS))
    parts = []
    for i in range(n):
        top = (i + 1) * STAIR_RISE_M
        # tread i spans local z from front (depth/2) backwards: step 1 is the outermost
        z1 = depth / 2 - i * STAIR_RUN_M
        z0 = -depth / 2
        parts.append(
            _box(0, top / 2, (z0 + z1) / 2, width / 2, top / 2, (z1 - z0) / 2, wood, "wood")
        )
    return _Item("stairs", "stairs", parts)


# small dynamic objects -----------------------------------------------------------------
def _small_object(rng: np.random.Generator, kind: str) -> _Item:
    color = _color(rng, _pick(rng, _BRIGHT + _POTS + _FABRICS), 0.05)
    if kind == "cup":
        r, hh = _u(rng, 0.035, 0.045), _u(rng, 0.045, 0.055)
        return _Item(
            "cup",
            "cup",
            [_cyl(0, hh, 0, r, hh, color, "ceramic")],
            dynamic=True,
            mass_kg=_r(_u(rng, 0.2, 0.35), 3),
        )
    if kind == "book":
        hx, hy, hz = _u(rng, 0.075, 0.1), _u(rng, 0.012, 0.025), _u(rng, 0.1, 0.13)
        return _Item(
            "book",
            "book",
            [_box(0, hy, 0, hx, hy, hz, color, "paper")],
            dynamic=True,
            mass_kg=_r(_u(rng, 0.3, 0.9), 3),
        )
    if kind == "box":
        h = _u(rng, 0.06, 0.14)
        return _Item(
            "box",
            "box",
            [
                _box(
                    0,
                    h,
                    0,
                    h * _u(rng, 0.9, 1.3),
                    h,
                    h * _u(rng, 0.9, 1.3),
                    _color(rng, (0.7, 0.55, 0.38), 0.05),
                    "cardboard",
                )
            ],
            dynamic=True,
            mass_kg=_r(_u(rng, 0.3, 2.0), 3),
        )
    if kind == "ball":
        r = _u(rng, 0.08, 0.12)
        return _Item(
            "ball",
            "ball",
            [_sph(0, r, 0, r, color, "rubber")],
            dynamic=True,
            mass_kg=_r(_u(rng, 0.2, 0.45), 3),
        )
    if kind == "vase":
        r, hh = _u(rng, 0.05, 0.08), _u(rng, 0.1, 0.15)
        return _Item(
            "vase",
            "vase",
            [_cyl(0, hh, 0, r, hh, color, "ceramic")],
            dynamic=True,
            mass_kg=_r(_u(rng, 0.6, 1.5), 3),
        )
    raise ValueError(f"unknown small object kind {kind!r}")


_TABLETOP_KINDS = ("cup", "book", "book", "vase", "box", "cup")
_FLOOR_KINDS = ("ball", "box", "box", "ball")


# ---------------------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------------------
@dataclass
class _Door:
    room_a: int
    room_b: int
    axis: str  # "x": on a line of constant x; "z": on a line of constant z
    line: float
    lo: float
    hi: float

    def center_xz(self) -> tuple[float, float]:
        mid = 0.5 * (self.lo + self.hi)
        return (self.line, mid) if self.axis == "x" else (mid, self.line)


def _room_types(n_rooms: int, rng: np.random.Generator) -> list[str]:
    if n_rooms == 2:
        return ["bedroom", "bathroom"]
    types = ["living_room", "bedroom", "bathroom"]
    if n_rooms == 4:
        types.append("kitchen" if rng.random() < 0.6 else "hallway")
    elif n_rooms >= 5:
        types += ["kitchen", "hallway"]
    if n_rooms == 6:
        types.append("bedroom")
    return types


def _split(
    rng: np.random.Generator, rect: Rect, items: list[tuple[int, float, float]]
) -> list[tuple[int, Rect]] | None:
    """Guillotine split of ``rect`` among ``items`` = (index, area, min side).

    Every two-way partition of the items along either axis whose children can hold their
    rooms (min side respected, single rooms within ``_MAX_SIDE_M``) is a candidate; one is
    drawn at random. Returns None when no candidate exists."""
    x0, z0, x1, z1 = rect
    w, d = x1 - x0, z1 - z0
    if len(items) == 1:
        lo, hi = min(w, d), max(w, d)
        if lo < items[0][2] - 1e-6 or hi > _MAX_SIDE_M + 1e-6:
            return None
        return [(items[0][0], rect)]
    total = sum(a for _, a, _ in items)
    options: list[tuple[Rect, list, Rect, list]] = []
    n = len(items)
    for mask in range(1, 2**n - 1):
        if not mask & 1:  # each partition once: item 0 always goes first
            continue
        first = [it for b, it in enumerate(items) if mask >> b & 1]
        second = [it for b, it in enumerate(items) if not mask >> b & 1]
        frac = sum(a for _, a, _ in first) / total
        need_a = max(m for _, _, m in first)
        need_b = max(m for _, _, m in second)
        for along_x in (True, False):
            start, length = (x0, w) if along_x else (z0, d)
            # the cut may move off the area fraction (within _AREA_SLACK) to respect the
            # minimum room sides on both sides of it
            lo_c = math.ceil((start + need_a) / _GRID_M - 1e-6) * _GRID_M
            hi_c = math.floor((start + length - need_b) / _GRID_M + 1e-6) * _GRID_M
            if lo_c > hi_c + 1e-9:
                continue
            cut = _r(min(max(_snap(start + frac * length), lo_c), hi_c))
            share = (cut - start) / length
            if abs(share - frac) > _AREA_SLACK * min(frac, 1.0 - frac):
                continue
            if along_x:
                ra, rb = (x0, z0, cut, z1), (cut, z0, x1, z1)
            else:
                ra, rb = (x0, z0, x1, cut), (x0, cut, x1, z1)
            for sub_rect, sub in ((ra, first), (rb, second)):
                sw, sd = sub_rect[2] - sub_rect[0], sub_rect[3] - sub_rect[1]
                need = max(m for _, _, m in sub)
                if min(sw, sd) < need - 1e-6:
                    break
                if len(sub) == 1 and max(sw, sd) > _MAX_SIDE_M + 1e-6:
                    break
            else:
                options.append((ra, first, rb, second))
                options.append((rb, second, ra, first))
    for _ in range(4):
        if not options:
            return None
        ra, first, rb, second = options.pop(int(rng.integers(len(options))))
        out_a = _split(rng, ra, first)
        if out_a is None:
            continue
        out_b = _split(rng, rb, second)
        if out_b is not None:
            return out_a + out_b
    return None


def _shared_edge(a: Rect, b: Rect) -> tuple[str, float, float, float] | None:
    for ax, (a_lo, a_hi, b_lo, b_hi, o) in {
        "x": (a[0], a[2], b[0], b[2], (1, 3)),
        "z": (a[1], a[3], b[1], b[3], (0, 2)),
    }.items():
        for line_a, line_b in ((a_hi, b_lo), (b_hi, a_lo)):
            if abs(line_a - line_b) < 1e-6:
                lo = max(a[o[0]], b[o[0]])
                hi = min(a[o[1]], b[o[1]])
                if hi - lo > 1e-6:
                    return ax, line_a, lo, hi
    return None


def _layout(rng: np.random.Generator, types: list[str]) -> tuple[list[Rect], list[_Door]]:
    studio = len(types) == 2
    for _ in range(_LAYOUT_ATTEMPTS):
        areas = []
        for t in types:
            lo, hi = _STUDIO_AREA_M2[t] if studio else _AREA_M2[t]
            areas.append(_u(rng, lo, hi))
        total = sum(areas)
        aspect = _u(rng, 1.35, 1.75) if studio else _u(rng, 1.0, 1.55)
        w = _snap(math.sqrt(total * aspect))
        d = _snap(total / w)
        if rng.random() < 0.5:
            w, d = d, w
        mins = [
            _STUDIO_MIN_SIDE_M if (studio and t == "bedroom") else _MIN_SIDE_M[t] for t in types
        ]
        placed = _split(rng, (0.0, 0.0, w, d), [(i, areas[i], mins[i]) for i in range(len(types))])
        if placed is None:
            continue
        rects: list[Rect] = [(0.0, 0.0, 0.0, 0.0)] * len(types)
        for idx, rect in placed:
            rects[idx] = rect
        doors = _connect(rng, types, rects)
        if doors is not None:
            return rects, doors
    raise SceneGenerationError(f"no valid room layout for room types {types}")


def _connect(rng: np.random.Generator, types: list[str], rects: list[Rect]) -> list[_Door] | None:
    n = len(rects)
    need = DOOR_MIN_WIDTH_M + 2 * _DOOR_MARGIN_M
    edges: dict[tuple[int, int], tuple[str, float, float, float]] = {}
    for i in range(n):
        for j in range(i + 1, n):
            e = _shared_edge(rects[i], rects[j])
            if e is not None and e[3] - e[2] >= need:
                edges[(i, j)] = e
    hub_order = ("hallway", "living_room", "bedroom", "kitchen", "bathroom")
    hub = min(range(n), key=lambda i: (hub_order.index(types[i]), i))
    in_tree = [hub]
    chosen: list[tuple[int, int]] = []
    bath_pref = {
        "hallway": 4.0,
        "bedroom": 2.5,
        "living_room": 1.0,
        "kitchen": 0.3,
        "bathroom": 0.0,
    }
    while len(in_tree) < n:
        cands: list[tuple[int, int]] = []
        weights: list[float] = []
        for i, j in edges:
            for u, v in ((i, j), (j, i)):
                if u in in_tree and v not in in_tree:
                    w = 3.0 if u == hub else 1.0
                    if types[u] == "bathroom":
                        w *= 0.02
                    if types[v] == "bathroom":
                        w *= bath_pref[types[u]]
                    if w > 0:
                        cands.append((u, v))
                        weights.append(w)
        if not cands:
            return None
        p = np.asarray(weights) / sum(weights)
        u, v = cands[int(rng.choice(len(cands), p=p))]
        chosen.append((min(u, v), max(u, v)))
        in_tree.append(v)
    extra = [e for e in edges if e not in chosen and "bathroom" not in (types[e[0]], types[e[1]])]
    if extra and rng.random() < 0.35:
        chosen.append(extra[int(rng.integers(len(extra)))])
    doors = []
    for i, j in chosen:
        axis, line, lo, hi = edges[(i, j)]
        # widths are multiples of 0.1 m so that door edges stay on the 0.05 m grid
        n_max = int(math.floor((min(1.3, hi - lo - 2 * _DOOR_MARGIN_M) + 1e-6) / 0.1))
        width = _r(0.1 * int(rng.integers(10, n_max + 1)))
        c_lo, c_hi = _snap(lo + _DOOR_MARGIN_M + width / 2), _snap(hi - _DOOR_MARGIN_M - width / 2)
        center = min(max(_snap(_u(rng, c_lo, c_hi)), c_lo), c_hi)
        doors.append(_Door(i, j, axis, _r(line), _r(center - width / 2), _r(center + width / 2)))
    return doors


# ---------------------------------------------------------------------------------------
# furnishing one room
# ---------------------------------------------------------------------------------------
@dataclass
class _Placed:
    item: _Item
    room: int
    x: float
    y: float
    z: float
    k: int
    rect: Rect
    yaw_rad: float | None = None  # overrides the quarter turn (small objects)


class _RoomPlanner:
    def __init__(
        self, index: int, rect: Rect, rng: np.random.Generator, keepouts: list[Rect]
    ) -> None:
        self.index = index
        self.rect = rect
        self.inner: Rect = (
            rect[0] + _HALF_WALL,
            rect[1] + _HALF_WALL,
            rect[2] - _HALF_WALL,
            rect[3] - _HALF_WALL,
        )
        self.rng = rng
        self.keepouts = list(keepouts)
        self.placed: list[_Placed] = []
        self.rugs: list[_Placed] = []
        self.extras: list[_Placed] = []  # items resting on supports
        self.has_platform = False

    @property
    def area(self) -> float:
        return (self.inner[2] - self.inner[0]) * (self.inner[3] - self.inner[1])

    def _zone(self, rect: Rect, k: int, width: float | None = None) -> Rect:
        fx, fz = _front_vec(k)
        if fz != 0:
            cx = 0.5 * (rect[0] + rect[2])
            half = 0.5 * max(rect[2] - rect[0], width or 1.0)
            z = rect[3] if fz > 0 else rect[1]
            z_far = z + fz * APPROACH_DEPTH_M
            return (cx - half, min(z, z_far), cx + half, max(z, z_far))
        cz = 0.5 * (rect[1] + rect[3])
        half = 0.5 * max(rect[3] - rect[1], width or 1.0)
        x = rect[2] if fx > 0 else rect[0]
        x_far = x + fx * APPROACH_DEPTH_M
        return (min(x, x_far), cz - half, max(x, x_far), cz + half)

    def fits(
        self,
        rect: Rect,
        zone: Rect | None = None,
        *,
        gap: float = _OBJ_GAP_M,
        keepouts: bool = True,
    ) -> bool:
        if not _inside(rect, self.inner, tol=1e-6):
            return False
        for p in self.placed:
            if _overlap(rect, p.rect, gap):
                return False
        for p in self.rugs:
            if _overlap(rect, p.rect, 0.02):
                return False
        if keepouts and any(_overlap(rect, ko, 0.0) for ko in self.keepouts):
            return False
        if zone is not None:
            if not _inside(zone, self.inner, tol=1e-6):
                return False
            if any(_overlap(zone, p.rect, 0.0) for p in self.placed):
                return False
        return True

    def _commit(
        self, item: _Item, x: float, z: float, k: int, rect: Rect, zone: Rect | None, y: float = 0.0
    ) -> _Placed:
        placed = _Placed(item, self.index, _r(x, 3), _r(y), _r(z, 3), k, rect)
        self.placed.append(placed)
        if zone is not None:
            self.keepouts.append(zone)
        return placed

    def _wall_position(
        self, item: _Item, side: str, along: float | None
    ) -> tuple[float, float, Rect] | None:
        k = _SIDE_QUARTER[side]
        o = _rotate_rect(item.local_rect(), k)
        ix0, iz0, ix1, iz1 = self.inner
        g = _WALL_GAP_M
        if side in ("south", "north"):
            z = iz0 + g - o[1] if side == "south" else iz1 - g - o[3]
            lo, hi = ix0 + g - o[0], ix1 - g - o[2]
            if hi < lo:
                return None
            x = _u(self.rng, lo, hi) if along is None else min(max(along, lo), hi)
        else:
            x = ix0 + g - o[0] if side == "west" else ix1 - g - o[2]
            lo, hi = iz0 + g - o[1], iz1 - g - o[3]
            if hi < lo:
                return None
            z = _u(self.rng, lo, hi) if along is None else min(max(along, lo), hi)
        x, z = _r(x, 3), _r(z, 3)
        return x, z, (x + o[0], z + o[1], x + o[2], z + o[3])

    def place_wall(
        self,
        item: _Item,
        sides: tuple[str, ...] | list[str] = _SIDES,
        *,
        along: float | None = None,
        jitter: float = 0.0,
        corner: bool = False,
        attempts: int = 25,
        seat: bool = False,
    ) -> _Placed | None:
        sides = list(sides)
        for _ in range(attempts):
            side = sides[int(self.rng.integers(len(sides)))]
            target = along
            if corner:
                target = -1e9 if self.rng.random() < 0.5 else 1e9
            elif along is not None and jitter > 0:
                target = along + _u(self.rng, -jitter, jitter)
            pos = self._wall_position(item, side, target)
            if pos is None:
                continue
            x, z, rect = pos
            k = _SIDE_QUARTER[side]
            zone = self._zone(rect, k) if seat else None
            if self.fits(rect, zone):
                return self._commit(item, x, z, k, rect, zone)
        return None

    def place_beside(
        self, item: _Item, anchor: _Placed, *, attempts: int = 4, seat: bool = False
    ) -> _Placed | None:
        side = {0: "south", 1: "west", 2: "north", 3: "east"}[anchor.k]
        o = _rotate_rect(item.local_rect(), anchor.k)
        for _ in range(attempts):
            left = self.rng.random() < 0.5
            if side in ("south", "north"):
                along = (
                    anchor.rect[0] - _OBJ_GAP_M - 0.01 - o[2]
                    if left
                    else anchor.rect[2] + _OBJ_GAP_M + 0.01 - o[0]
                )
            else:
                along = (
                    anchor.rect[1] - _OBJ_GAP_M - 0.01 - o[3]
                    if left
                    else anchor.rect[3] + _OBJ_GAP_M + 0.01 - o[1]
                )
            pos = self._wall_position(item, side, along)
            if pos is None:
                continue
            x, z, rect = pos
            if abs((x if side in ("south", "north") else z) - along) > 1e-3:
                continue
            zone = self._zone(rect, anchor.k) if seat else None
            if self.fits(rect, zone):
                return self._commit(item, x, z, anchor.k, rect, zone)
        return None

    def place_free(
        self, item: _Item, *, margin: float = 0.35, attempts: int = 25, seat: bool = False
    ) -> _Placed | None:
        ix0, iz0, ix1, iz1 = self.inner
        for _ in range(attempts):
            k = int(self.rng.integers(4))
            o = _rotate_rect(item.local_rect(), k)
            lo_x, hi_x = ix0 + margin - o[0], ix1 - margin - o[2]
            lo_z, hi_z = iz0 + margin - o[1], iz1 - margin - o[3]
            if hi_x < lo_x or hi_z < lo_z:
                return None
            x, z = _r(_u(self.rng, lo_x, hi_x), 3), _r(_u(self.rng, lo_z, hi_z), 3)
            rect = (x + o[0], z + o[1], x + o[2], z + o[3])
            zone = self._zone(rect, k) if seat else None
            if self.fits(rect, zone):
                return self._commit(item, x, z, k, rect, zone)
        return None

    def place_rug(self, *, kind: str = "room", attempts: int = 20) -> _Placed | None:
        """A rug on open floor: ``"room"`` (1.2-2.5 m), ``"runner"`` (hallway) or
        ``"mat"`` (bathroom)."""
        ix0, iz0, ix1, iz1 = self.inner
        for _ in range(attempts):
            if kind == "runner":
                w, d = _u(self.rng, 1.6, 2.6), _u(self.rng, 0.7, 0.9)
            elif kind == "mat":
                w, d = _u(self.rng, 0.6, 1.0), _u(self.rng, 0.4, 0.65)
            else:
                w, d = _u(self.rng, 1.2, 2.5), _u(self.rng, 0.9, 1.8)
            item = _rug(self.rng, w, d)
            k = int(self.rng.integers(2))
            o = _rotate_rect(item.local_rect(), k)
            lo_x, hi_x = ix0 + 0.15 - o[0], ix1 - 0.15 - o[2]
            lo_z, hi_z = iz0 + 0.15 - o[1], iz1 - 0.15 - o[3]
            if hi_x < lo_x or hi_z < lo_z:
                continue
            x, z = _r(_u(self.rng, lo_x, hi_x), 3), _r(_u(self.rng, lo_z, hi_z), 3)
            rect = (x + o[0], z + o[1], x + o[2], z + o[3])
            if self.fits(rect, gap=0.1, keepouts=False):
                placed = _Placed(item, self.index, x, 0.0, z, k, rect)
                self.rugs.append(placed)
                return placed
        return None

    def place_on(self, support: _Placed, item: _Item, *, attempts: int = 12) -> _Placed | None:
        """Put a small object on one of the support's surfaces (random yaw)."""
        if not support.item.surfaces:
            return None
        for _ in range(attempts):
            sx0, sz0, sx1, sz1, top = support.item.surfaces[
                int(self.rng.integers(len(support.item.surfaces)))
            ]
            lx0, lz0, lx1, lz1 = item.local_rect()
            reach = math.hypot(max(-lx0, lx1), max(-lz0, lz1))
            if sx1 - sx0 < 2 * reach or sz1 - sz0 < 2 * reach:
                continue
            lx = _u(self.rng, sx0 + reach, sx1 - reach)
            lz = _u(self.rng, sz0 + reach, sz1 - reach)
            c, s = _QUARTER_CS[support.k]
            x = support.x + c * lx + s * lz
            z = support.z - s * lx + c * lz
            rect = (x - reach, z - reach, x + reach, z + reach)
            if any(_overlap(rect, e.rect, 0.03) for e in self.extras):
                continue
            yaw = _r(_u(self.rng, -math.pi, math.pi), 4)
            top = _surface_top(support.item, lx, lz, top)
            placed = _Placed(
                item, self.index, _r(x, 3), _r(support.y + top, 4), _r(z, 3), 0, rect, yaw_rad=yaw
            )
            self.extras.append(placed)
            return placed
        return None


def _door_keepouts(rect: Rect, index: int, doors: list[_Door]) -> list[Rect]:
    zones = []
    for door in doors:
        if index not in (door.room_a, door.room_b):
            continue
        lo, hi = door.lo - 0.15, door.hi + 0.15
        if door.axis == "x":
            into = 1.0 if abs(door.line - rect[0]) < 1e-6 else -1.0
            far = door.line + into * _DOOR_ZONE_DEPTH_M
            zones.append((min(door.line, far), lo, max(door.line, far), hi))
        else:
            into = 1.0 if abs(door.line - rect[1]) < 1e-6 else -1.0
            far = door.line + into * _DOOR_ZONE_DEPTH_M
            zones.append((lo, min(door.line, far), hi, max(door.line, far)))
    return zones


def _opposite_side(p: _Placed) -> str:
    return _OPPOSITE[{0: "south", 1: "west", 2: "north", 3: "east"}[p.k]]


def _along_of(p: _Placed) -> float:
    return p.x if p.k in (0, 2) else p.z


def _place_tv_facing(
    pl: _RoomPlanner, rng: np.random.Generator, seat: _Placed | None
) -> _Placed | None:
    tv = _tv(rng)
    if seat is not None:
        placed = pl.place_wall(
            tv, [_opposite_side(seat)], along=_along_of(seat), jitter=0.3, attempts=12
        )
        if placed is not None:
            return placed
        # otherwise a side wall (still in view of the seat), never the seat's own wall
        own = _OPPOSITE[_opposite_side(seat)]
        placed = pl.place_wall(tv, [side for side in _SIDES if side != own], attempts=24)
        if placed is not None:
            return placed
    return pl.place_wall(tv, attempts=30)


def _furnish(
    pl: _RoomPlanner, room_type: str, rng: np.random.Generator, studio: bool, platform: bool
) -> bool:
    """Place the furniture of one room; False when a required piece does not fit.

    With ``platform``, a raised nook is tried first."""
    if platform:
        pl.has_platform = _place_platform(pl, rng) is not None
    if room_type == "living_room":
        couch = pl.place_wall(_couch(rng), attempts=40, seat=True)
        if couch is None or _place_tv_facing(pl, rng, couch) is None:
            return False
        if rng.random() < 0.55:
            pl.place_beside(_table(rng, "side"), couch)
        if rng.random() < 0.75:
            pl.place_wall(_chair(rng, "armchair" if rng.random() < 0.6 else "dining"), seat=True)
        for _ in range(int(rng.integers(1, 3))):
            pl.place_wall(_plant(rng), corner=True, attempts=10)
        if rng.random() < 0.6:
            pl.place_wall(_lamp(rng), corner=True, attempts=10)
        if rng.random() < 0.6:
            pl.place_wall(_shelf(rng))
        if rng.random() < 0.3:
            pl.place_wall(_cabinet(rng, "sideboard"))
        if rng.random() < 0.4:
            pl.place_free(_table(rng, "coffee"), margin=0.6)
        return True
    if room_type == "bedroom":
        bed = pl.place_wall(_bed(rng, double=studio or rng.random() < 0.7), attempts=40, seat=True)
        if bed is None:
            return False
        if rng.random() < 0.85:
            for _ in range(1 if rng.random() < 0.5 else 2):
                pl.place_beside(_cabinet(rng, "nightstand"), bed)
        if rng.random() < 0.8:
            pl.place_wall(_wardrobe(rng))
        if studio:
            couch = pl.place_wall(_couch(rng), attempts=40, seat=True)
            if couch is None or _place_tv_facing(pl, rng, couch) is None:
                return False
        elif rng.random() < 0.25:
            _place_tv_facing(pl, rng, bed)
        if studio or rng.random() < 0.45:
            desk = pl.place_wall(_table(rng, "desk"))
            if desk is not None:
                pl.place_beside(_chair(rng, "dining"), desk, attempts=6, seat=True)
        if rng.random() < 0.6:
            pl.place_wall(_plant(rng), corner=True, attempts=10)
        if rng.random() < 0.4:
            pl.place_wall(_lamp(rng), corner=True, attempts=10)
        if rng.random() < 0.35:
            pl.place_wall(_shelf(rng))
        return True
    if room_type == "bathroom":
        if pl.place_wall(_toilet(rng), attempts=40, seat=True) is None:
            return False
        if rng.random() < 0.95:
            pl.place_wall(_vanity(rng))
        if rng.random() < 0.5:
            pl.place_wall(_bathtub(rng), corner=True, attempts=12)
        if rng.random() < 0.3:
            pl.place_wall(_cabinet(rng, "bath"))
        if rng.random() < 0.3:
            pl.place_wall(_plant(rng), corner=True, attempts=10)
        return True
    if room_type == "kitchen":
        longest = max(pl.inner[2] - pl.inner[0], pl.inner[3] - pl.inner[1])
        counter = None
        for frac in (1.0, 0.8, 0.6, 0.45):
            length = _snap(min(longest - 0.3, _u(rng, 1.8, 3.2)) * frac)
            if length < 1.0:
                break
            counter = pl.place_wall(_counter(rng, length), attempts=12)
            if counter is not None:
                break
        if counter is None:
            return False
        if rng.random() < 0.9:
            if pl.place_beside(_fridge(rng), counter) is None:
                pl.place_wall(_fridge(rng))
        if rng.random() < 0.85:
            table = pl.place_free(_table(rng, "dining"), margin=0.5)
            if table is None:
                pl.place_wall(_table(rng, "dining"))
        for _ in range(int(rng.integers(1, 3))):
            pl.place_wall(_chair(rng, "dining"), seat=True)
        if rng.random() < 0.5:
            pl.place_wall(_plant(rng), corner=True, attempts=10)
        if rng.random() < 0.3:
            pl.place_wall(_cabinet(rng, "sideboard"))
        return True
    if room_type == "hallway":
        if rng.random() < 0.75:
            pl.place_wall(_cabinet(rng, "shoe"))
        if rng.random() < 0.7:
            pl.place_wall(_plant(rng), corner=True, attempts=10)
        if rng.random() < 0.5:
            pl.place_wall(_chair(rng, "dining"), seat=True)
        if rng.random() < 0.5:
            pl.place_wall(_coat_rack(rng), corner=True, attempts=10)
        if rng.random() < 0.35:
            pl.place_wall(_lamp(rng), corner=True, attempts=10)
        if rng.random() < 0.4:
            pl.place_wall(_shelf(rng))
        return True
    raise ValueError(f"unknown room type {room_type!r}")


def _place_platform(pl: _RoomPlanner, rng: np.random.Generator) -> list[_Placed] | None:
    """A raised nook against a wall with stairs in front and a few things on top."""
    for _ in range(40):
        w, d = _u(rng, 1.5, 2.2), _u(rng, 1.2, 1.6)
        platform = _platform(rng, w, d)
        stairs_w = _u(rng, 0.8, 1.0)
        stairs = _stairs(rng, stairs_w)
        side = _SIDES[int(rng.integers(4))]
        r = rng.random()
        pos = pl._wall_position(platform, side, -1e9 if r < 0.35 else (1e9 if r < 0.7 else None))
        if pos is None:
            continue
        x, z, rect = pos
        k = _SIDE_QUARTER[side]
        if not pl.fits(rect):
            continue
        # stairs: same facing, back face on the platform's front face
        c, s = _QUARTER_CS[k]
        lateral = _u(rng, -(w - stairs_w) / 2, (w - stairs_w) / 2)
        s_rect_local = stairs.local_rect()
        lz = d / 2 - s_rect_local[1]
        sx = _r(x + c * lateral + s * lz, 3)
        sz = _r(z - s * lateral + c * lz, 3)
        o = _rotate_rect(s_rect_local, k)
        s_rect = (sx + o[0], sz + o[1], sx + o[2], sz + o[3])
        zone = pl._zone(s_rect, k, width=stairs_w + 0.4)
        if not pl.fits(s_rect, zone, gap=0.0):
            continue
        if any(_overlap(s_rect, p.rect, _OBJ_GAP_M) for p in pl.placed):
            continue
        p_plat = pl._commit(platform, x, z, k, rect, None)
        p_stairs = pl._commit(stairs, sx, sz, k, s_rect, zone)
        out = [p_plat, p_stairs]
        h = PLATFORM_STEPS * STAIR_RISE_M
        # lamp in a back corner, ottoman in the middle (local platform frame)
        sign = _pick(rng, (-1, 1))
        for item, (lx, lz_) in (
            (_lamp(rng), (sign * (w / 2 - 0.3), -d / 2 + 0.3)),
            (_ottoman(rng), (-sign * _u(rng, 0.1, w / 2 - 0.35), _u(rng, -0.1, 0.2))),
        ):
            ox = _r(x + c * lx + s * lz_, 3)
            oz = _r(z - s * lx + c * lz_, 3)
            lr = _rotate_rect(item.local_rect(), k)
            out.append(
                _Placed(
                    item,
                    pl.index,
                    ox,
                    _r(h),
                    oz,
                    k,
                    (ox + lr[0], oz + lr[1], ox + lr[2], oz + lr[3]),
                )
            )
        pl.extras.extend(out[2:])
        book = pl.place_on(p_plat, _small_object(rng, "book"))
        if book is not None:
            if any(_overlap(book.rect, e.rect, 0.02) for e in out[2:]):
                pl.extras.remove(book)
            else:
                out.append(book)
        return out
    return None


# ---------------------------------------------------------------------------------------
# assembly
# ---------------------------------------------------------------------------------------
def _structure(
    rng: np.random.Generator, types: list[str], rects: list[Rect], doors: list[_Door]
) -> tuple[list[Room], list[tuple[str, str, list[Part], tuple[float, float, float], int]]]:
    """Rooms plus (stem, category, parts, position, room) for floors and walls."""
    bx0 = min(r[0] for r in rects)
    bz0 = min(r[1] for r in rects)
    bx1 = max(r[2] for r in rects)
    bz1 = max(r[3] for r in rects)
    rooms = [
        Room(i, t, (r[0], r[1]), (r[2], r[3]))
        for i, (t, r) in enumerate(zip(types, rects, strict=True))
    ]
    wall_colors = [_WALL_PAINTS[int(i)] for i in rng.permutation(len(_WALL_PAINTS))]
    out = []
    floors = []
    for i, (t, r) in enumerate(zip(types, rects, strict=True)):
        material, palette = _FLOORS[t][int(rng.integers(len(_FLOORS[t])))]
        fcolor = _color(rng, _pick(rng, palette), 0.03)
        cx, cz = (r[0] + r[2]) / 2, (r[1] + r[3]) / 2
        floors.append(
            (
                "floor",
                "floor",
                [_box(0, -0.05, 0, (r[2] - r[0]) / 2, 0.05, (r[3] - r[1]) / 2, fcolor, material)],
                (_r(cx), 0.0, _r(cz)),
                i,
            )
        )
    out += floors
    for i, (t, r) in enumerate(zip(types, rects, strict=True)):
        base = wall_colors[i % len(wall_colors)]
        wcolor = _color(rng, base, 0.02)
        wmat = "tile" if t == "bathroom" else "plaster"
        x0, z0, x1, z1 = r
        for side in _SIDES:
            if side in ("south", "north"):
                line = z0 if side == "south" else z1
                outer = abs(line - (bz0 if side == "south" else bz1)) < 1e-6
                inward = 1.0 if side == "south" else -1.0
                span = (x0, x1)
                cuts = [
                    (d.lo, d.hi)
                    for d in doors
                    if d.axis == "z" and abs(d.line - line) < 1e-6 and i in (d.room_a, d.room_b)
                ]
            else:
                line = x0 if side == "west" else x1
                outer = abs(line - (bx0 if side == "west" else bx1)) < 1e-6
                inward = 1.0 if side == "west" else -1.0
                span = (z0 + _HALF_WALL, z1 - _HALF_WALL)
                cuts = [
                    (d.lo, d.hi)
                    for d in doors
                    if d.axis == "x" and abs(d.line - line) < 1e-6 and i in (d.room_a, d.room_b)
                ]
            t0 = line - (_HALF_WALL if outer else 0.0) if inward > 0 else line - _HALF_WALL
            t1 = line + _HALF_WALL if inward > 0 else line + (_HALF_WALL if outer else 0.0)
            segments = []
            cursor = span[0]
            for lo, hi in sorted(cuts):
                if lo - cursor > 1e-6:
                    segments.append((cursor, lo, 0.0, WALL_HEIGHT_M))
                segments.append((lo, hi, DOOR_HEIGHT_M, WALL_HEIGHT_M))
                cursor = hi
            if span[1] - cursor > 1e-6:
                segments.append((cursor, span[1], 0.0, WALL_HEIGHT_M))
            mid_a = 0.5 * (span[0] + span[1])
            mid_t = 0.5 * (t0 + t1)
            parts = []
            for a0, a1, y0, y1 in segments:
                ca, ha = 0.5 * (a0 + a1) - mid_a, 0.5 * (a1 - a0)
                hy, cy = 0.5 * (y1 - y0), 0.5 * (y0 + y1)
                ht = 0.5 * (t1 - t0)
                if side in ("south", "north"):
                    parts.append(_box(ca, cy, 0.0, ha, hy, ht, wcolor, wmat))
                else:
                    parts.append(_box(0.0, cy, ca, ht, hy, ha, wcolor, wmat))
            pos = (
                (_r(mid_a), 0.0, _r(mid_t))
                if side in ("south", "north")
                else (_r(mid_t), 0.0, _r(mid_a))
            )
            out.append(("wall", "wall", parts, pos, i))
    return rooms, out


def _furnish_home(
    rng: np.random.Generator,
    types: list[str],
    rects: list[Rect],
    doors: list[_Door],
    want_platform: bool,
) -> tuple[list[_RoomPlanner], bool] | None:
    studio = len(types) == 2
    planners = [_RoomPlanner(i, r, rng, _door_keepouts(r, i, doors)) for i, r in enumerate(rects)]
    host = -1
    if want_platform and not studio:
        hosts = [
            i
            for i, t in enumerate(types)
            if t in ("living_room", "bedroom", "hallway") and planners[i].area >= 9.0
        ]
        if hosts:
            host = hosts[int(rng.integers(len(hosts)))]
    for i, (pl, t) in enumerate(zip(planners, types, strict=True)):
        if not _furnish(pl, t, rng, studio, platform=i == host):
            return None
    has_platform = any(pl.has_platform for pl in planners)
    # every home holds every target category
    cats = {p.item.category for pl in planners for p in pl.placed}
    order = sorted(
        range(len(types)),
        key=lambda i: ("living_room", "kitchen", "hallway", "bedroom", "bathroom").index(types[i]),
    )
    for cat, build, kwargs in (
        ("chair", lambda: _chair(rng), {"seat": True}),
        ("potted_plant", lambda: _plant(rng), {"corner": True}),
    ):
        if cat in cats:
            continue
        for i in order:
            if types[i] == "bathroom":
                continue
            if planners[i].place_wall(build(), attempts=30, **kwargs) is not None:
                cats.add(cat)
                break
    if not set(TARGET_CATEGORIES) <= cats:
        return None
    # rugs, then small objects on supports and on the floor
    for pl, t in zip(planners, types, strict=True):
        p_rug = {
            "living_room": 0.7,
            "bedroom": 0.5,
            "bathroom": 0.6,
            "kitchen": 0.25,
            "hallway": 0.5,
        }[t]
        if rng.random() < p_rug:
            pl.place_rug(kind={"hallway": "runner", "bathroom": "mat"}.get(t, "room"))
    for pl in planners:
        for support in list(pl.placed):
            if (
                support.item.surfaces
                and support.item.category != "platform"
                and rng.random() < 0.65
            ):
                for _ in range(int(rng.integers(1, 4))):
                    pl.place_on(support, _small_object(rng, _pick(rng, _TABLETOP_KINDS)))
    for _ in range(int(rng.integers(1, 4))):
        pl = planners[int(rng.integers(len(planners)))]
        item = _small_object(rng, _pick(rng, _FLOOR_KINDS))
        pl.place_free(item, margin=0.3, attempts=15)
    return planners, has_platform


def _to_objects(
    planners: list[_RoomPlanner], structure: list, start_id: int = 1
) -> list[SceneObject]:
    counters: dict[str, int] = {}
    objects: list[SceneObject] = []

    def name(stem: str) -> str:
        counters[stem] = counters.get(stem, 0) + 1
        return f"{stem}_{counters[stem]}"

    next_id = start_id
    for stem, category, parts, pos, room in structure:
        objects.append(
            SceneObject(next_id, name(stem), category, pos, 0.0, tuple(parts), room_id=room)
        )
        next_id += 1
    placed_all: list[_Placed] = []
    for pl in planners:
        placed_all += [p for p in pl.placed if not p.item.dynamic]
    for pl in planners:
        placed_all += pl.rugs
    for pl in planners:
        placed_all += [p for p in pl.extras if not p.item.dynamic]
    for pl in planners:
        placed_all += [p for p in pl.extras if p.item.dynamic] + [
            p for p in pl.placed if p.item.dynamic
        ]
    for p in placed_all:
        yaw = p.yaw_rad if p.yaw_rad is not None else _QUARTER_YAW[p.k]
        seat = None if p.item.seat_height_m is None else _r(p.y + p.item.seat_height_m)
        objects.append(
            SceneObject(
                next_id,
                name(p.item.stem),
                p.item.category,
                (p.x, p.y, p.z),
                yaw,
                tuple(p.item.parts),
                room_id=p.room,
                dynamic=p.item.dynamic,
                mass_kg=p.item.mass_kg if p.item.dynamic else 0.0,
                seat_height_m=seat,
            )
        )
        next_id += 1
    return objects


def _validate_navigation(scene: SceneSpec, doors: list[_Door]) -> bool:
    from humanclaw_gym.scenes.navgrid import NavGrid, approach_pose

    grid = NavGrid.from_scene(scene)
    main = grid.main_component()
    if not main.any():
        return False
    for door in doors:
        x, z = door.center_xz()
        iz, ix = grid.world_to_cell(x, z)
        win = main[max(iz - 2, 0) : iz + 3, max(ix - 2, 0) : ix + 3]
        if not win.any():
            return False
    for obj in scene.objects:
        if obj.category in TARGET_CATEGORIES:
            if not (grid.goal_region(obj) & main).any():
                return False
            if obj.seat_height_m is not None:
                # the approach point is on open floor, next to the reachable free space
                x, z, _ = approach_pose(obj)
                if grid.is_blocked(x, z):
                    return False
                iz, ix = grid.world_to_cell(x, z)
                r = int(round(0.4 / grid.cell_m))
                if not main[max(iz - r, 0) : iz + r + 1, max(ix - r, 0) : ix + r + 1].any():
                    return False
    # each room keeps some walkable floor in the main component
    for i in range(len(scene.rooms)):
        if not (main & (grid.room_index == i)).any():
            return False
    return True


def generate_scene(
    scene_id: str, seed: int, *, min_rooms: int = 2, max_rooms: int = 6
) -> SceneSpec:
    """Generate one home deterministically.

    Args:
        scene_id: id stored in the spec (e.g. ``"hc_val_003"``).
        seed: seed of ``numpy.random.default_rng``; same seed, same bytes of ``to_json()``.
        min_rooms: fewest rooms, in ``[2, 6]``.
        max_rooms: most rooms, in ``[min_rooms, 6]``.

    Returns:
        The :class:`SceneSpec`; its ``metadata`` records the doors (``doors``: room pair,
        centre, width, axis), ``has_platform`` and ``num_rooms``.
    """
    if not isinstance(scene_id, str) or not scene_id:
        raise ValueError(f"scene_id must be a non-empty string, got {scene_id!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if not 2 <= int(min_rooms) <= 6:
        raise ValueError(f"min_rooms must be in [2, 6], got {min_rooms!r}")
    if not int(min_rooms) <= int(max_rooms) <= 6:
        raise ValueError(f"max_rooms must be in [min_rooms={min_rooms}, 6], got {max_rooms!r}")
    rng = np.random.default_rng(int(seed))
    n_rooms = int(rng.integers(int(min_rooms), int(max_rooms) + 1))
    types = _room_types(n_rooms, rng)
    want_platform = bool(rng.random() < _PLATFORM_PROBABILITY)
    for attempt in range(_FURNISH_ATTEMPTS):
        rects, doors = _layout(rng, types)
        rooms, structure = _structure(rng, types, rects, doors)
        for _ in range(4):
            # a home that keeps failing with a platform is built without one
            furnished = _furnish_home(
                rng, types, rects, doors, want_platform and attempt < _FURNISH_ATTEMPTS // 2
            )
            if furnished is None:
                continue
            planners, has_platform = furnished
            objects = _to_objects(planners, structure)
            metadata = {
                "num_rooms": n_rooms,
                "has_platform": has_platform,
                "wall_height_m": WALL_HEIGHT_M,
                "doors": [
                    {
                        "rooms": [d.room_a, d.room_b],
                        "axis": d.axis,
                        "center_xz": [_r(v) for v in d.center_xz()],
                        "width_m": _r(d.hi - d.lo),
                    }
                    for d in doors
                ],
            }
            scene = SceneSpec(
                scene_id=scene_id,
                rooms=tuple(rooms),
                objects=tuple(objects),
                seed=int(seed),
                generator=GENERATOR_VERSION,
                metadata=metadata,
            )
            if _validate_navigation(scene, doors):
                return scene
    raise SceneGenerationError(
        f"could not generate a valid home for scene {scene_id!r} (seed {seed})"
    )
