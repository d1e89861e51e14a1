"""Navigation grid: occupancy rules, free space, geodesic distances, paths, seats."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from humanclaw_gym.scenes.navgrid import (
    APPROACH_OFFSET_M,
    GOAL_MARGIN_M,
    NavGrid,
    NavGridError,
    approach_pose,
    path_length_m,
)
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec


def _wall_box(
    oid: int, x0: float, z0: float, x1: float, z1: float, y0: float = 0.0, y1: float = 2.5
) -> SceneObject:
    return SceneObject(
        oid,
        f"wall_{oid}",
        "wall",
        ((x0 + x1) / 2, 0.0, (z0 + z1) / 2),
        0.0,
        (Part("box", ((x1 - x0) / 2, (y1 - y0) / 2, (z1 - z0) / 2), (0.0, (y0 + y1) / 2, 0.0)),),
    )


def _box_obj(
    oid: int,
    category: str,
    x: float,
    z: float,
    hx: float,
    hz: float,
    y0: float = 0.0,
    y1: float = 0.8,
    **kw,
) -> SceneObject:
    return SceneObject(
        oid,
        f"{category}_{oid}",
        category,
        (x, y0, z),
        0.0,
        (Part("box", (hx, (y1 - y0) / 2, hz), (0.0, (y1 - y0) / 2, 0.0)),),
        **kw,
    )


def _room_scene(objects: list[SceneObject], size=(4.0, 3.0)) -> SceneSpec:
    w, d = size
    walls = [
        _wall_box(1, 0.0, 0.0, w, 0.05),
        _wall_box(2, 0.0, d - 0.05, w, d),
        _wall_box(3, 0.0, 0.05, 0.05, d - 0.05),
        _wall_box(4, w - 0.05, 0.05, w, d - 0.05),
    ]
    return SceneSpec(
        "test_room", (Room(0, "living_room", (0.0, 0.0), (w, d)),), tuple(walls + objects)
    )


def test_walls_block_and_interior_is_free() -> None:
    grid = NavGrid.from_scene(_room_scene([]))
    assert grid.blocked.dtype == bool and grid.free.shape == grid.blocked.shape
    assert grid.is_blocked(0.02, 1.5) and grid.is_blocked(-1.0, 1.5)  # wall, outside
    assert grid.is_free(2.0, 1.5)
    assert not grid.is_free(0.2, 1.5)  # within clearance of the wall
    assert grid.is_free(0.05 + 0.25 + 0.06, 1.5)
    assert grid.room_id_at(2.0, 1.5) == 0 and grid.room_id_at(-1.0, 0.0) is None


def test_band_rules_rug_lintel_dynamic_do_not_block() -> None:
    rug = _box_obj(10, "rug", 1.0, 1.5, 0.4, 0.4, 0.0, 0.01)
    lintel = _box_obj(11, "wall", 2.0, 1.5, 0.3, 0.3, 2.1, 2.5)
    ball = SceneObject(
        12,
        "ball_1",
        "ball",
        (3.0, 0.0, 1.5),
        0.0,
        (Part("sphere", (0.1, 0, 0), (0, 0.1, 0)),),
        dynamic=True,
        mass_kg=0.3,
    )
    table = _box_obj(13, "table", 3.0, 0.8, 0.2, 0.2, 0.0, 0.75)
    grid = NavGrid.from_scene(_room_scene([rug, lintel, ball, table]))
    assert not grid.is_blocked(1.0, 1.5)
    assert not grid.is_blocked(2.0, 1.5)
    assert not grid.is_blocked(3.0, 1.5)
    assert grid.is_blocked(3.0, 0.8)


def test_geodesic_matches_straight_line_in_open_room() -> None:
    grid = NavGrid.from_scene(_room_scene([], size=(6.0, 4.0)))
    goal = np.zeros(grid.shape, dtype=bool)
    iz, ix = grid.world_to_cell(5.0, 2.0)
    goal[iz, ix] = True
    d = grid.geodesic_distance((1.0, 2.0), goal)
    assert d == pytest.approx(4.0, abs=0.06)
    d_diag = grid.geodesic_distance((1.0, 1.0), goal)
    # 8-connected paths overestimate a general direction by at most ~8 %
    assert math.hypot(4.0, 1.0) - 0.06 <= d_diag <= 1.09 * math.hypot(4.0, 1.0)


def test_path_goes_around_obstacle_and_simplifies() -> None:
    block = _box_obj(10, "cabinet", 3.0, 1.25, 0.3, 1.2)  # wall-like block with a gap at high z
    grid = NavGrid.from_scene(_room_scene([block], size=(6.0, 4.0)))
    goal = np.zeros(grid.shape, dtype=bool)
    goal[grid.world_to_cell(5.0, 1.0)] = True
    path = grid.shortest_path((1.0, 1.0), goal)
    assert path.shape[1] == 2 and len(path) > 10
    assert np.allclose(path[0], (1.0, 1.0))
    for x, z in path[1:]:
        assert grid.is_free(x, z)
    assert path[:, 1].max() > 2.45 + 0.25  # had to detour round the block's end
    length = path_length_m(path)
    assert length == pytest.approx(grid.geodesic_distance((1.0, 1.0), goal), rel=0.02)
    simple = grid.simplify_path(path)
    assert 3 <= len(simple) < len(path)
    assert np.allclose(simple[0], path[0]) and np.allclose(simple[-1], path[-1])
    for a, b in zip(simple[:-1], simple[1:], strict=True):
        assert grid.line_of_sight(a, b)
    assert np.allclose(grid.shortest_path((1.0, 1.0), goal, simplify=True), simple)


def test_unreachable_goal_and_nearest_free() -> None:
    # a sealed box (walls all round) inside the room: its inside is not reachable
    inner = [
        _wall_box(20, 4.0, 1.0, 5.5, 1.05),
        _wall_box(21, 4.0, 2.95, 5.5, 3.0),
        _wall_box(22, 4.0, 1.05, 4.05, 2.95),
        _wall_box(23, 5.45, 1.05, 5.5, 2.95),
    ]
    grid = NavGrid.from_scene(_room_scene(inner, size=(6.0, 4.0)))
    goal = np.zeros(grid.shape, dtype=bool)
    goal[grid.world_to_cell(4.75, 2.0)] = True
    assert grid.free[grid.world_to_cell(4.75, 2.0)]
    assert math.isinf(grid.geodesic_distance((1.0, 2.0), goal))
    assert grid.shortest_path((1.0, 2.0), goal).shape == (0, 2)
    labels = grid.component_labels()
    assert labels[grid.world_to_cell(1.0, 2.0)] != labels[grid.world_to_cell(4.75, 2.0)]
    assert grid.main_component()[grid.world_to_cell(1.0, 2.0)]
    x, z = grid.nearest_free(0.02, 2.0)
    assert grid.is_free(x, z) and abs(z - 2.0) < 0.05 and 0.3 <= x <= 0.4
    # a start on an obstacle snaps to the nearest free cell
    goal2 = np.zeros(grid.shape, dtype=bool)
    goal2[grid.world_to_cell(2.0, 2.0)] = True
    assert math.isfinite(grid.geodesic_distance((0.02, 2.0), goal2))
    assert math.isinf(grid.geodesic_distance((0.02, 2.0), goal2, snap=False))


def test_goal_region_definition() -> None:
    table = _box_obj(10, "table", 3.0, 2.0, 0.4, 0.3)
    grid = NavGrid.from_scene(_room_scene([table], size=(6.0, 4.0)))
    region = grid.goal_region(table)
    assert region.any() and not (region & ~grid.free).any()
    dist = grid.aabb_distance_map(table)
    limit = grid.clearance_m + GOAL_MARGIN_M
    assert dist[region].max() <= limit + 1e-9
    assert not (grid.free & (dist <= limit) & ~region).any()
    # by id and as a list give the same mask
    assert np.array_equal(grid.goal_region(10), region)
    assert np.array_equal(grid.goal_region([table]), region)
    # objects as goals: distances reach 0 inside the region
    field = grid.distance_field(table)
    assert np.all(field[region] == 0.0)
    with pytest.raises(NavGridError, match="unknown goal object"):
        grid.goal_region(999)


def test_approach_pose_faces_away_from_seat() -> None:
    # chair against the east wall, facing -X (yaw -pi/2): seat front edge at x = 3.6 - 0.25
    chair = SceneObject(
        10,
        "chair_1",
        "chair",
        (3.6, 0.0, 1.5),
        -math.pi / 2,
        (
            Part("box", (0.25, 0.02, 0.25), (0.0, 0.43, 0.0)),
            Part("box", (0.25, 0.2, 0.02), (0.0, 0.65, -0.23)),
        ),
        seat_height_m=0.45,
    )
    grid = NavGrid.from_scene(_room_scene([chair], size=(4.0, 3.0)))
    x, z, yaw = grid.approach_pose(chair)
    assert x == pytest.approx(3.6 - 0.25 - APPROACH_OFFSET_M)
    assert z == pytest.approx(1.5)
    assert yaw == pytest.approx(-math.pi / 2)
    # facing away from the seat: the seat is behind the body
    forward = np.array([math.sin(yaw), math.cos(yaw)])
    to_seat = np.array([3.6 - x, 1.5 - z])
    assert forward @ to_seat < 0
    assert approach_pose(chair) == pytest.approx((x, z, yaw))
    table = _box_obj(11, "table", 1.0, 1.0, 0.2, 0.2)
    with pytest.raises(NavGridError, match="not sittable"):
        approach_pose(table)


def test_bad_arguments() -> None:
    scene = _room_scene([])
    with pytest.raises(NavGridError, match="cell_m"):
        NavGrid.from_scene(scene, cell_m=0.0)
    with pytest.raises(NavGridError, match="clearance_m"):
        NavGrid.from_scene(scene, clearance_m=-0.1)
    grid = NavGrid.from_scene(scene)
    with pytest.raises(NavGridError, match="grid shape"):
        grid.distance_field(np.zeros((3, 3), dtype=bool))


def test_to_image() -> None:
    grid = NavGrid.from_scene(_room_scene([_box_obj(10, "table", 2.0, 1.5, 0.3, 0.3)]))
    img = grid.to_image()
    assert img.dtype == np.uint8 and img.shape == grid.shape + (3,)
    iz, ix = grid.world_to_cell(2.0, 1.5)
    assert tuple(img[iz, ix]) == (70, 70, 70)
    iz, ix = grid.world_to_cell(3.3, 2.3)
    assert tuple(img[iz, ix]) == (255, 255, 255)


def _cluttered_home(size_m: float = 10.0) -> SceneSpec:
    rng = np.random.default_rng(5)
    objs = []
    for k in range(40):
        x, z = rng.uniform(1.0, size_m - 1.0, size=2)
        objs.append(
            _box_obj(
                10 + k,
                "cabinet",
                float(x),
                float(z),
                float(rng.uniform(0.1, 0.4)),
                float(rng.uniform(0.1, 0.4)),
            )
        )
    return _room_scene(objs, size=(size_m, size_m))


def test_query_speed_on_10m_home() -> None:
    grid = NavGrid.from_scene(_cluttered_home())
    assert grid.shape[0] >= 200 and grid.shape[1] >= 200
    starts = np.argwhere(grid.main_component())
    best = math.inf
    for k in range(3):
        goal = np.zeros(grid.shape, dtype=bool)
        gz, gx = starts[(k + 1) * len(starts) // 5]
        goal[gz, gx] = True
        sz, sx = starts[len(starts) // 7]
        start = grid.cell_center(sz, sx)
        t0 = time.perf_counter()
        d = grid.geodesic_distance(start, goal)
        path = grid.shortest_path(start, goal, simplify=True)
        best = min(best, time.perf_counter() - t0)
        assert math.isfinite(d) and len(path) >= 2
    assert best < 0.2, f"first geodesic query + path took {best:.3f} s"
    # a repeated query against the same goals is a cache lookup
    t0 = time.perf_counter()
    for _ in range(50):
        grid.geodesic_distance(start, goal)
    assert (time.perf_counter() - t0) / 50 < 0.005


def test_generated_scene_grid_is_consistent() -> None:
    from humanclaw_gym.scenes.generator import generate_scene

    scene = generate_scene("nav_probe", 42, min_rooms=4)
    grid = NavGrid.from_scene(scene)
    main = grid.main_component()
    assert main.sum() > 0.5 * grid.free.sum()
    for door in scene.metadata["doors"]:
        x, z = door["center_xz"]
        iz, ix = grid.world_to_cell(x, z)
        assert main[iz - 2 : iz + 3, ix - 2 : ix + 3].any()
    for obj in scene.objects:
        if obj.seat_height_m is not None:
            x, z, _ = grid.approach_pose(obj)
            assert not grid.is_blocked(x, z)


def _two_room_scene(objects: list[SceneObject]) -> SceneSpec:
    """Rooms x in [0, 3] and [3, 6] (z in [0, 3]) split by a wall at x = 2.95 .. 3.05 with a
    doorway at z in [2.0, 2.9]."""
    walls = [
        _wall_box(1, 0.0, 0.0, 6.0, 0.05),
        _wall_box(2, 0.0, 2.95, 6.0, 3.0),
        _wall_box(3, 0.0, 0.05, 0.05, 2.95),
        _wall_box(4, 5.95, 0.05, 6.0, 2.95),
        _wall_box(5, 2.95, 0.05, 3.05, 2.0),
        _wall_box(6, 2.95, 2.9, 3.05, 2.95),
    ]
    rooms = (
        Room(0, "living_room", (0.0, 0.0), (3.0, 3.0)),
        Room(1, "bathroom", (3.0, 0.0), (6.0, 3.0)),
    )
    return SceneSpec("two_rooms", rooms, tuple(walls + objects))


def test_goal_region_never_reaches_through_a_wall() -> None:
    # a chair against the partition, in the left room: the right room's free cells near the
    # wall are within body radius + reach (0.5 m) of its box, but the wall is between
    chair = _box_obj(10, "chair", 2.735, 0.8, 0.185, 0.25, 0.0, 0.9)
    grid = NavGrid.from_scene(_two_room_scene([chair]))
    near = grid.free & (grid.aabb_distance_map(chair) <= grid.clearance_m + GOAL_MARGIN_M)
    xs = grid.cell_centers_x()[None, :].repeat(grid.shape[0], axis=0)
    assert (near & (xs > 3.05)).any(), "the old distance-only region reached through the wall"
    region = grid.goal_region(chair)
    assert region.any()
    assert not (region & (xs > 2.95)).any()
    assert np.array_equal(region, near & (xs < 2.95))
    # the route from the right room goes through the doorway, not to the wall's back
    start = (4.0, 0.8)
    path = grid.shortest_path(start, chair)
    assert len(path) and path[-1][0] < 2.95
    assert grid.geodesic_distance(start, chair) > 2.0  # around by the door at z >= 2.0
    assert not region.flags.writeable


def test_goal_region_needs_nothing_fixed_between_body_and_box() -> None:
    # a plant with a long low bench right behind it (x 2.2 .. 2.25): cells beyond the bench
    # are within 0.5 m of the plant's box, but the bench is between body and plant
    plant = _box_obj(10, "potted_plant", 2.0, 1.5, 0.15, 0.15, 0.0, 1.0)
    bench = _box_obj(11, "table", 2.225, 1.5, 0.025, 0.9, 0.0, 0.5)
    grid = NavGrid.from_scene(_room_scene([plant, bench], size=(6.0, 3.0)))
    near = grid.free & (grid.aabb_distance_map(plant) <= grid.clearance_m + GOAL_MARGIN_M)
    xs = grid.cell_centers_x()[None, :].repeat(grid.shape[0], axis=0)
    beyond = near & (xs > 2.25)
    assert beyond.any()
    region = grid.goal_region(plant)
    assert region.any() and not (region & beyond).any()
    # the bench itself is never its own obstacle
    assert (grid.goal_region(bench) & (xs > 2.25)).any()
    # a movable object in between does not count (the body can push it)
    ball = SceneObject(
        12, "ball_1", "ball", (2.225, 0.0, 1.5), 0.0,
        (Part("box", (0.025, 0.25, 0.9), (0, 0.25, 0)),), dynamic=True, mass_kg=0.3,
    )  # fmt: skip
    grid2 = NavGrid.from_scene(_room_scene([plant, ball], size=(6.0, 3.0)))
    assert (grid2.goal_region(plant) & (xs > 2.25)).any()


def test_solids_queries_are_exact() -> None:
    from humanclaw_gym.scenes.solids import Solids

    box = SceneObject(1, "b", "table", (1.0, 0.0, 1.0), math.pi / 4,
                      (Part("box", (0.5, 0.5, 0.1), (0.0, 0.5, 0.0)),))  # fmt: skip
    cyl = SceneObject(2, "c", "lamp", (4.0, 0.0, 1.0), 0.0,
                      (Part("cylinder", (0.2, 0.4, 0.0), (0.0, 0.4, 0.0)),))  # fmt: skip
    sph = SceneObject(3, "s", "ball", (6.0, 0.0, 1.0), 0.0,
                      (Part("sphere", (0.3, 0.0, 0.0), (0.0, 1.0, 0.0)),))  # fmt: skip
    scene = SceneSpec("solids", (Room(0, "living_room", (0.0, 0.0), (8.0, 3.0)),), (box, cyl, sph))
    s = Solids.from_scene(scene)
    assert len(s) == 3 and s.y0.tolist() == pytest.approx([0.0, 0.0, 0.7])
    d = s.footprint_distance(np.array([[1.0, 1.0], [4.5, 1.0], [6.0, 2.0]]))
    assert d[0, 0] == 0.0 and d[1, 1] == pytest.approx(0.3) and d[2, 2] == pytest.approx(0.7)
    # the rotated box: its long axis runs along (cos 45, -sin 45); a point 0.2 m off its
    # face along the short axis
    n = np.array([math.sin(math.pi / 4), math.cos(math.pi / 4)])
    assert s.footprint_distance((np.array([1.0, 1.0]) + 0.3 * n)[None])[0, 0] == pytest.approx(0.2)
    # x/z segments: through the box, past the cylinder, ending on the sphere's rim
    a = np.array([[0.0, 1.0], [3.0, 1.25], [5.0, 1.0]])
    b = np.array([[2.0, 1.0], [5.0, 1.25], [5.7, 1.0]])
    assert s.segments_cross_footprints(a, b).tolist() == [True, False, False]
    assert s.segments_cross_footprints(np.array([[3.0, 1.1]]), np.array([[5.0, 1.1]]))[0]
    # 3-D: over the box (above its top), through the cylinder, under the sphere
    a3 = np.array([[0.0, 1.1, 1.0], [3.0, 0.5, 1.0], [5.0, 0.5, 1.0], [3.0, 0.9, 1.0]])
    b3 = np.array([[2.0, 1.1, 1.0], [5.0, 0.5, 1.0], [7.0, 0.5, 1.0], [5.0, 0.9, 1.0]])
    assert s.segments_hit(a3, b3).tolist() == [False, True, False, False]
    assert s.segments_hit(np.array([[5.0, 1.0, 1.0]]), np.array([[7.0, 1.0, 1.0]]))[0]


def test_preferred_clearance_keeps_paths_off_walls_and_still_passes_narrow_gaps() -> None:
    # start and goal 0.3 m off the south wall's face: the shortest path runs along the wall
    # at that distance; with a preferred clearance of 0.45 m it bends into the room
    grid = NavGrid.from_scene(_room_scene([]), clearance_m=0.25)
    start, goal = (0.5, 0.35), (3.5, 0.35)
    goal_mask = np.zeros(grid.shape, dtype=bool)
    goal_mask[grid.world_to_cell(*goal)] = True
    plain = grid.shortest_path(start, goal_mask)
    view = grid.with_preferred_clearance(0.45)
    preferred = view.shortest_path(start, goal_mask)
    off_wall = lambda path: float(np.max(path[:, 1])) - 0.05  # noqa: E731  (wall face z = 0.05)
    assert off_wall(plain) < 0.35  # grazes the wall all the way
    assert off_wall(preferred) >= 0.4  # bends away from it in the middle
    assert path_length_m(preferred) < 1.5 * path_length_m(plain)
    # the free space is the grid's own; the view's distances are costs, the grid's metres
    assert np.array_equal(view.free, grid.free)
    assert view.geodesic_distance(start, goal_mask) > grid.geodesic_distance(start, goal_mask)
    # a 0.6 m wide corridor leaves room only for the hard clearance: still passable
    narrow = [_wall_box(20, 0.05, 0.9, 3.4, 0.95), _wall_box(21, 0.6, 1.55, 3.95, 1.6)]
    corridor = NavGrid.from_scene(_room_scene(narrow), clearance_m=0.25)
    mask = np.zeros(corridor.shape, dtype=bool)
    mask[corridor.world_to_cell(0.4, 0.4)] = True
    path = corridor.with_preferred_clearance(0.45).shortest_path((3.6, 2.5), mask)
    assert len(path) > 0
    assert corridor.with_preferred_clearance(0.45).geodesic_distance((3.6, 2.5), mask) < math.inf
    with pytest.raises(NavGridError, match="preferred_m"):
        grid.with_preferred_clearance(0.2)
    with pytest.raises(NavGridError, match="weight"):
        grid.with_preferred_clearance(0.5, weight=-1.0)
