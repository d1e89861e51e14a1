"""Furniture: object shapes, and placing them in the rooms of a home.

* Builders (``_bed``, ``_couch``, ``_chair`` ...) return an :class:`_Item` in the object
  frame (origin on the floor, front = local +Z) with its parts, seat height and support
  surfaces; small dynamic objects come from :func:`_small_object`.
* :class:`_RoomPlanner` places items in one room: against a wall, beside another item, on
  free floor, rugs, and small objects on support surfaces; seats keep a clear zone of
  ``APPROACH_DEPTH_M`` in front, doorways keep their zones clear.
* :func:`_furnish` fills one room by type; :func:`_furnish_home` furnishes every room,
  makes sure every target category is present and adds rugs and small objects.

All draws come from the generator's single ``numpy.random.Generator``, in a fixed order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from humanclaw_gym.scenes._build import (
    _BRIGHT,
    _FABRICS,
    _GREENS,
    _OPPOSITE,
    _PAINTS,
    _POTS,
    _QUARTER_CS,
    _SCREEN,
    _SIDE_QUARTER,
    _SIDES,
    _WHITE,
    _WOODS,
    Rect,
    _box,
    _color,
    _cyl,
    _front_vec,
    _inside,
    _overlap,
    _pick,
    _r,
    _rotate_rect,
    _snap,
    _sph,
    _u,
)
from humanclaw_gym.scenes.layout import _HALF_WALL, _Door, _door_keepouts
from humanclaw_gym.scenes.spec import STAIR_RISE_M, STAIR_RUN_M, TARGET_CATEGORIES, Part

__all__ = ["APPROACH_DEPTH_M", "PLATFORM_STEPS"]

#: Depth of the clear floor zone kept in front of every seat.
APPROACH_DEPTH_M = 1.0
#: Height of a raised platform in stair steps.
PLATFORM_STEPS = 2

_WALL_GAP_M = 0.03  # furniture back to wall face
_OBJ_GAP_M = 0.06  # between furniture footprints


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
        # the rim stands 4 mm above the pot's top (a flush top would z-fight with it)
        _cyl(0, pot_h - 0.016, 0, pot_r + 0.015, 0.02, _color(rng, pot, 0.05), "ceramic"),
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
        # boards end at the back panel's front (flush backs would z-fight)
        parts.append(_box(0, y, 0.005, w / 2 - 2 * t, 0.012, d / 2 - 0.005, wood, "wood"))
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
        # the inner panel stands 3 mm above the border (a flush top z-fights: stripes)
        parts.append(
            _box(0, 0.009, 0, w / 2 - 0.12, 0.004, d / 2 - 0.12, _color(rng, color, 0.12), "carpet")
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
# furnishing a home
# ---------------------------------------------------------------------------------------
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
