"""Upstream episodes on an imported scene: goals matched to the scene's objects.

An upstream (Habitat ObjectNav / HumanClaw) goal names its target by ``object_name``
(``"<template>_:<instance>"``) and ``object_id`` (the object's index in the scene
instance), with the centre ``position`` of its box; our scenes number objects themselves
(:mod:`humanclaw_gym.scenes.hssd.scene`) and the metrics, the oracle and the privileged
view need goals that carry *our* object ids, boxes, seat heights and approach points.
:func:`resolve_episode` finds, for each goal, in this order:

1. the objects whose template is the ``object_name``'s (the part before ``":"``, trailing
   ``"_"`` removed), the nearest to ``position`` on the floor plane when several (the
   reference release's own rule);
2. else the object with source index ``object_id``;
3. else the nearest object of the episode's category within 0.5 m of ``position``.

A goal that matches nothing raises :class:`EpisodeFormatError` naming the episode, the goal
and the scene. Before any of that, :func:`check_start` refuses a start that is not in the
scene: outside its box or off its floors (``humanclaw run`` makes the same check with each
scene's :func:`start_limits` before any episode runs, where the scene is cheap to read:
:func:`humanclaw_gym.evaluation.batch.check_episode_starts`). Resolved goals get the object's world box (:meth:`SceneObject.aabb`), its
seat height and, for bed / couch / toilet, an approach pose: on the navigation grid of the
object's floor (:mod:`humanclaw_gym.scenes.meshgrid`), the first free side of the object
in the order front, left, right, back, at the standard offset in front of that side; the
side's free cell nearest to it (within 0.3 m) when the point itself is not free; the
goal's nearest free ``approach_points`` (an upstream goal's Habitat view points) as a last
resort. Results are cached per episode and scene.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from humanclaw_gym.episodes.schema import Episode, EpisodeFormatError, Goal
from humanclaw_gym.scenes.spec import INTERACT_CATEGORIES, SceneObject, SceneSpec

__all__ = [
    "START_MARGIN_M",
    "StartLimits",
    "approach_pose_on_grid",
    "check_start",
    "needs_resolution",
    "resolve_episode",
    "start_limits",
]

#: How far a start may lie outside the scene's box (x, z) and from its floors (y), metres.
START_MARGIN_M = 0.5
_MATCH_RADIUS_M = 0.5
_SNAP_RADIUS_M = 0.3
_cache: OrderedDict[tuple[str, str, int], Episode] = OrderedDict()
_MAX_CACHED = 256


def needs_resolution(scene: SceneSpec) -> bool:
    """True for scenes built from a dataset (objects carry a source record); scenes of
    other origins (generated homes, test doubles without objects) never need it."""
    return any(getattr(o, "source", None) is not None for o in getattr(scene, "objects", ()))


def _template_of(name: str | None) -> str | None:
    if not name:
        return None
    return str(name).split(":", 1)[0].rstrip("_") or None


def _xz_distance(obj: SceneObject, position: tuple[float, float, float]) -> float:
    lo, hi = obj.aabb()
    c = 0.5 * (lo + hi)
    return math.hypot(float(c[0] - position[0]), float(c[2] - position[2]))


def _match(goal: Goal, category: str, scene: SceneSpec) -> SceneObject | None:
    objs = [o for o in scene.objects if o.source is not None]
    template = _template_of(goal.object_name)
    if template is not None:
        hits = [o for o in objs if o.source.template == template]  # type: ignore[union-attr]
        if hits:
            return min(hits, key=lambda o: _xz_distance(o, goal.position))
    oid = goal.object_id
    if isinstance(oid, str) and oid.isdigit():
        oid = int(oid)
    if isinstance(oid, int):
        for o in objs:
            if o.source.index == oid:  # type: ignore[union-attr]
                return o
    near = [
        o
        for o in objs
        if o.category == category and _xz_distance(o, goal.position) <= _MATCH_RADIUS_M
    ]
    return min(near, key=lambda o: _xz_distance(o, goal.position)) if near else None


def approach_pose_on_grid(
    obj: SceneObject, grid: Any, view_points: tuple[tuple[float, ...], ...] | None = None
) -> tuple[float, float, float] | None:
    """Where to stand before sitting on ``obj`` (see the module docstring), or None.

    Returns:
        ``(x_m, z_m, yaw_rad)`` with the yaw facing away from the object.
    """
    from humanclaw_gym.scenes.navgrid import APPROACH_OFFSET_M

    rot = obj.rotation()
    halves = np.array([p.local_half_extents() for p in obj.parts])
    offsets = np.array([p.offset for p in obj.parts])
    lo, hi = (offsets - halves).min(axis=0), (offsets + halves).max(axis=0)
    centre = 0.5 * (lo + hi)
    sides = (  # (local outward direction, distance from the centre to that face)
        (np.array([0.0, 0.0, 1.0]), hi[2] - centre[2]),  # front
        (np.array([1.0, 0.0, 0.0]), hi[0] - centre[0]),
        (np.array([-1.0, 0.0, 0.0]), centre[0] - lo[0]),
        (np.array([0.0, 0.0, -1.0]), centre[2] - lo[2]),
    )
    snapped: list[tuple[float, float, float]] = []
    for local_dir, extent in sides:
        d = rot @ local_dir
        p = np.asarray(obj.position) + rot @ centre + d * (extent + APPROACH_OFFSET_M)
        yaw = math.atan2(float(d[0]), float(d[2]))
        if grid.is_free(float(p[0]), float(p[2])):
            return float(p[0]), float(p[2]), yaw
        fx, fz = grid.nearest_free(float(p[0]), float(p[2]))
        if math.hypot(fx - p[0], fz - p[2]) <= _SNAP_RADIUS_M:
            snapped.append((float(fx), float(fz), yaw))
    if snapped:
        return snapped[0]
    if view_points:
        c = np.asarray(obj.position) + rot @ centre
        free = [v for v in view_points if grid.is_free(v[0], v[2])]
        if free:
            v = min(free, key=lambda q: math.hypot(q[0] - c[0], q[2] - c[2]))
            return float(v[0]), float(v[2]), math.atan2(float(v[0] - c[0]), float(v[2] - c[2]))
    return None


def _floor_heights(scene: SceneSpec) -> list[float]:
    """The scene's floor heights: a dataset scene's measured ``floor_levels_m``, else its
    rooms' floors (none for a scene that records neither)."""
    metadata = getattr(scene, "metadata", None)
    levels = metadata.get("floor_levels_m") if isinstance(metadata, Mapping) else None
    if isinstance(levels, list) and levels:
        return [float(v) for v in levels]
    return sorted({float(room.floor_y) for room in getattr(scene, "rooms", ())})


@dataclass(frozen=True)
class StartLimits:
    """Where a scene lets an episode start (:func:`start_limits`), metres.

    Attributes:
        scene_id: the scene's id.
        x, z: the allowed range of ``start_position`` x and z, or None (a scene without
            objects: not checked).
        y: the allowed range of ``start_position`` y, or None (not checked).
        y_source: what ``y`` comes from, for the message.
    """

    scene_id: str
    x: tuple[float, float] | None
    z: tuple[float, float] | None
    y: tuple[float, float] | None
    y_source: str = ""


def start_limits(scene: SceneSpec) -> StartLimits:
    """The :class:`StartLimits` of ``scene``: x and z within :data:`START_MARGIN_M` of the
    box of its objects, y within that of its floors (from the lowest to the highest; a
    scene without floors on record: its objects' box, from below its bottom to its top). A
    scene with neither objects nor rooms has no limits. Computing them reads every
    object's box once: keep them when many episodes share a scene."""
    m = START_MARGIN_M
    lo = hi = None
    x = z = y = None
    if getattr(scene, "objects", ()):  # test doubles of a scene may have none
        lo, hi = scene.bounds()
        x = (float(lo[0]) - m, float(hi[0]) + m)
        z = (float(lo[2]) - m, float(hi[2]) + m)
    floors = _floor_heights(scene)
    what = ""
    if floors:
        y = (min(floors) - m, max(floors) + m)
        what = f"its floors ({', '.join(f'{f:.2f}' for f in floors[:6])} m)"
    elif lo is not None and hi is not None:
        y, what = (float(lo[1]) - m, float(hi[1])), "its objects' box"
    return StartLimits(str(getattr(scene, "scene_id", "?")), x, z, y, what)


def check_start(episode: Any, scene: SceneSpec | StartLimits) -> None:
    """Refuse a start the scene does not hold: ``start_position`` x or z more than
    :data:`START_MARGIN_M` outside the box of the scene's objects, or y more than that
    below its lowest floor or above its highest (a scene without floors on record: its
    box). A scene with neither objects nor rooms is not checked.

    Args:
        episode: a record with ``episode_id`` and ``start_position``.
        scene: the scene, or its :func:`start_limits` (computed once per scene).

    Raises:
        EpisodeFormatError: naming the episode, the field, the scene and its extent.
    """
    limits = scene if isinstance(scene, StartLimits) else start_limits(scene)
    x, y, z = (float(v) for v in episode.start_position)
    where = (
        f"episode {episode.episode_id!r} start_position [{x:.6g}, {y:.6g}, {z:.6g}] "
        f"(scene {limits.scene_id!r})"
    )
    m = START_MARGIN_M
    if limits.x is not None and limits.z is not None:
        (x0, x1), (z0, z1) = limits.x, limits.z
        if not (x0 <= x <= x1 and z0 <= z <= z1):
            raise EpisodeFormatError(
                f"{where} lies outside the scene: allowed x in [{x0:.2f}, {x1:.2f}], z in "
                f"[{z0:.2f}, {z1:.2f}] (its objects' box and {m} m)"
            )
    if limits.y is not None:
        low, high = limits.y
        if not low <= y <= high:
            raise EpisodeFormatError(
                f"{where} is off the scene's floors: allowed y in [{low:.2f}, {high:.2f}] "
                f"({limits.y_source}, {m} m)"
            )


def resolve_episode(episode: Episode, scene: SceneSpec) -> Episode:
    """``episode`` with its goals matched to ``scene``'s objects (see the module
    docstring); episodes of generated scenes (no object sources) come back unchanged.

    Raises:
        EpisodeFormatError: the start is not in the scene (:func:`check_start`), or a
            goal matches no object of the scene.
    """
    check_start(episode, scene)
    if not needs_resolution(scene):
        return episode
    key = (episode.episode_id, scene.scene_id, id(scene))
    hit = _cache.get(key)
    if hit is not None:
        return hit
    goals: list[Goal] = []
    seen: set[int] = set()
    for i, goal in enumerate(episode.goals):
        obj = _match(goal, episode.object_category, scene)
        if obj is None:
            raise EpisodeFormatError(
                f"episode {episode.episode_id!r} goals[{i}] (object_id {goal.object_id!r}, "
                f"object_name {goal.object_name!r}, at {list(goal.position)}) matches no object "
                f"of scene {scene.scene_id!r} ({scene.metadata.get('scene_instance', '')}): "
                "is the scene dataset the one the episodes were made for?"
            )
        if obj.object_id in seen:
            continue
        seen.add(obj.object_id)
        lo, hi = obj.aabb()
        approach = None
        if episode.object_category in INTERACT_CATEGORIES:
            from humanclaw_gym.scenes.meshgrid import navigation_grid

            grid = navigation_grid(scene, float(lo[1]))
            approach = approach_pose_on_grid(obj, grid, goal.approach_points)
        goals.append(
            Goal(
                object_id=obj.object_id,
                object_name=goal.object_name or obj.name,
                category=episode.object_category,
                position=tuple(float(v) for v in 0.5 * (lo + hi)),
                aabb_min=tuple(float(v) for v in lo),
                aabb_max=tuple(float(v) for v in hi),
                seat_height_m=obj.seat_height_m,
                approach_pose=approach,
                approach_points=goal.approach_points,
            )
        )
    resolved = replace(episode, goals=tuple(goals))
    _cache[key] = resolved
    while len(_cache) > _MAX_CACHED:
        _cache.popitem(last=False)
    return resolved
