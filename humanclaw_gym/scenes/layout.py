"""Home layout: room rectangles, doorways, floors and walls.

* Rooms come from a recursive guillotine split of one rectangle (:func:`_split`), sized by
  room type; adjacent rooms are joined by doorways along a random spanning tree of the
  adjacency graph, sometimes plus a loop (:func:`_connect`).
* :func:`_structure` turns the rectangles and doors into floor slabs and wall objects
  (every room owns the half of the wall on its side; doorways leave a lintel).
* :func:`_door_keepouts` gives the floor zones on both sides of a doorway that furniture
  must keep clear.

All draws come from the generator's single ``numpy.random.Generator``, in a fixed order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from humanclaw_gym.scenes._build import (
    _FLOORS,
    _GRID_M,
    _SIDES,
    _WALL_PAINTS,
    Rect,
    SceneGenerationError,
    _box,
    _color,
    _pick,
    _r,
    _snap,
    _u,
)
from humanclaw_gym.scenes.spec import Part, Room

__all__ = [
    "DOOR_HEIGHT_M",
    "DOOR_MIN_WIDTH_M",
    "WALL_HEIGHT_M",
    "WALL_THICKNESS_M",
]

WALL_THICKNESS_M = 0.1
WALL_HEIGHT_M = 2.5
DOOR_MIN_WIDTH_M = 1.0
DOOR_HEIGHT_M = 2.1

_HALF_WALL = 0.5 * WALL_THICKNESS_M
_DOOR_MARGIN_M = 0.3  # doorway edge to the nearest wall corner
_DOOR_ZONE_DEPTH_M = 1.1
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
_AREA_SLACK = 0.3  # a guillotine cut may change a side's area share by this fraction


# ---------------------------------------------------------------------------------------
# rooms and doors
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


# ---------------------------------------------------------------------------------------
# floors and walls
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
