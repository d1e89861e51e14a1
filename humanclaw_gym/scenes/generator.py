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

The work is split in three modules: :mod:`~humanclaw_gym.scenes.layout` (rooms, doorways,
floors and walls), :mod:`~humanclaw_gym.scenes.furniture` (object shapes and their
placement) and this one (the draw order, assembly into a :class:`SceneSpec` and the
navigation check).
"""

from __future__ import annotations

import numpy as np

from humanclaw_gym.scenes._build import _QUARTER_YAW, SceneGenerationError, _r
from humanclaw_gym.scenes.furniture import (
    APPROACH_DEPTH_M,
    PLATFORM_STEPS,
    _furnish_home,
    _Placed,
    _RoomPlanner,
)
from humanclaw_gym.scenes.layout import (
    DOOR_HEIGHT_M,
    DOOR_MIN_WIDTH_M,
    WALL_HEIGHT_M,
    WALL_THICKNESS_M,
    _Door,
    _layout,
    _room_types,
    _structure,
)
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES, SceneObject, SceneSpec

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

GENERATOR_VERSION = "humanclaw_procedural_v2"

_PLATFORM_PROBABILITY = 0.38  # some attempts do not fit: about a third of homes get one
_FURNISH_ATTEMPTS = 30


# ---------------------------------------------------------------------------------------
# assembly
# ---------------------------------------------------------------------------------------
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
