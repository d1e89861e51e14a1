"""Approach points: every target of every val episode can be reached, touched and seen from
its approach points, and no approach point reaches its target through a wall."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from humanclaw_gym.episodes import Episode, load_scene, load_split
from humanclaw_gym.episodes.generate import APPROACH_POINT_SPACING_M
from humanclaw_gym.scenes.navgrid import EYE_HEIGHT_M, GOAL_MARGIN_M, NavGrid
from humanclaw_gym.scenes.solids import Solids
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES


@pytest.fixture(scope="module")
def val_by_scene() -> dict[str, list[Episode]]:
    out: dict[str, list[Episode]] = defaultdict(list)
    for ep in load_split("val"):
        out[ep.scene_id].append(ep)
    return out


def _sees(sight: Solids, eye: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``bool (N,)``: the eyes see the box's nearest point, centre or top centre."""
    centre = 0.5 * (lo + hi)
    seen = np.zeros(len(eye), dtype=bool)
    for target in (
        np.clip(eye, lo, hi),
        np.broadcast_to(centre, eye.shape),
        np.broadcast_to([centre[0], hi[1], centre[2]], eye.shape),
    ):
        seen |= ~sight.segments_hit(eye, target)
    return seen


def _check_scene(scene_id: str, episodes: list[Episode]) -> None:
    scene = load_scene(scene_id)
    grid = NavGrid.from_scene(scene)
    main = grid.main_component()
    walls = Solids.from_scene(scene, keep=lambda o: o.category == "wall")
    walls = walls.subset(walls.y0 < grid.floor_y + 1.9)  # door lintels are no wall to walk into
    static = Solids.from_scene(scene, keep=lambda o: not o.dynamic and o.category != "floor")
    static = static.subset(static.y1 > grid.floor_y + 0.03)
    radius = grid.clearance_m + GOAL_MARGIN_M
    # 1. every target instance of the scene has approach points reachable from the main
    #    region, and none of them reaches its box through a wall or without sight
    for obj in scene.objects:
        if obj.category not in TARGET_CATEGORIES:
            continue
        cells = grid.approach_cells(obj)
        assert (main[cells[:, 0], cells[:, 1]]).any(), f"{scene_id}: {obj.name} has none"
        lo, hi = obj.aabb()
        xz = grid.cells_to_xz(cells)
        assert np.all(grid.aabb_distance_map(obj)[cells[:, 0], cells[:, 1]] <= radius + 1e-9)
        q = np.clip(xz, lo[[0, 2]], hi[[0, 2]])
        through = walls.segments_cross_footprints(xz, q)
        assert not through.any(), (
            f"{scene_id}: {obj.name} reached through a wall from {xz[through][:3]}"
        )
        eye = np.column_stack([xz[:, 0], np.full(len(xz), grid.floor_y + EYE_HEIGHT_M), xz[:, 1]])
        others = static.subset(static.object_id != obj.object_id)
        blind = ~_sees(others, eye, lo, hi)
        assert not blind.any(), f"{scene_id}: {obj.name} not in sight from {xz[blind][:3]}"
    # 2. every episode's goals are all instances of its category, each with recorded
    #    approach points that are approach cells reachable from the start
    for ep in episodes:
        objs = scene.objects_of(ep.object_category)
        assert {g.object_id for g in ep.goals} == {o.object_id for o in objs}, ep.episode_id
        for goal in ep.goals:
            points = goal.approach_points
            assert points, f"{ep.episode_id}: {goal.object_name} has no approach point"
            pts = np.asarray(points)
            assert np.all(pts[:, 1] == grid.floor_y)
            region = grid.goal_region(int(goal.object_id)) & main
            for x, _, z in points:
                iz, ix = grid.world_to_cell(x, z)
                assert region[iz, ix], f"{ep.episode_id}: ({x}, {z}) is no approach cell"
            if len(pts) > 1:
                gaps = np.hypot(*(pts[:, None, [0, 2]] - pts[None, :, [0, 2]]).transpose(2, 0, 1))
                np.fill_diagonal(gaps, np.inf)
                assert gaps.min() >= APPROACH_POINT_SPACING_M - 1e-3


def test_hc_val_028_001_chair_is_approached_from_the_living_room() -> None:
    from humanclaw_gym.episodes import get_episode

    ep = get_episode("val", "hc_val_028_001")
    scene = load_scene(ep.scene_id)
    assert ep.object_category == "chair"
    for goal in ep.goals:
        obj = scene.object_by_id(int(goal.object_id))
        rooms = {scene.room_at(x, z).room_id for x, _, z in goal.approach_points}
        assert rooms == {obj.room_id}, (goal.object_name, rooms)
    chair = scene.object_by_id(int(ep.goals[0].object_id))
    assert scene.rooms[chair.room_id].room_type == "living_room"
    grid = NavGrid.from_scene(scene)
    region_rooms = {int(r) for r in grid.room_index[grid.goal_region(chair)]}
    assert region_rooms == {chair.room_id}


def test_approach_points_whole_val_split(val_by_scene: dict[str, list[Episode]]) -> None:
    """Every scene of val (about 6 s of CPU), including hc_val_028 (the chair against the
    bathroom wall) and hc_val_009 (regenerated: a plant's only goal cells were behind a
    wall)."""
    assert len(val_by_scene) == 41
    for sid in sorted(val_by_scene):
        _check_scene(sid, val_by_scene[sid])
