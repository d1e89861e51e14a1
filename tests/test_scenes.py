"""Procedural homes: determinism, JSON round trip, layout rules, furniture, shipped scenes."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from humanclaw_gym.episodes import load_scene
from humanclaw_gym.episodes.generate import (
    VAL_NUM_SCENES,
    generate_named_scene,
    training_scene_seed,
    val_scene_id,
    val_scene_seed,
)
from humanclaw_gym.scenes.generator import (
    APPROACH_DEPTH_M,
    DOOR_MIN_WIDTH_M,
    PLATFORM_STEPS,
    WALL_HEIGHT_M,
    generate_scene,
)
from humanclaw_gym.scenes.navgrid import approach_pose
from humanclaw_gym.scenes.spec import (
    INTERACT_CATEGORIES,
    STAIR_RISE_M,
    STAIR_RUN_M,
    TARGET_CATEGORIES,
    SceneSpec,
)

_SEEDS = (0, 1, 2, 3, 7, 11, 19, 57, 123, 404)
_SITTABLE = ("bed", "couch", "toilet", "chair")


@pytest.fixture(scope="module")
def scenes() -> list[SceneSpec]:
    out = [generate_scene(f"probe_{s}", s) for s in _SEEDS]
    out += [generate_named_scene(val_scene_id(i)) for i in (0, 5)]
    return out


def _rests_on(a, b) -> bool:
    return a.aabb()[0][1] >= b.aabb()[1][1] - 1e-3


def test_same_seed_same_bytes_different_seed_differs() -> None:
    a = generate_scene("det", 1234)
    b = generate_scene("det", 1234)
    assert a.to_json() == b.to_json()
    assert a.content_hash() == b.content_hash()
    c = generate_scene("det", 1235)
    assert c.to_json() != a.to_json()


def test_json_round_trip(scenes: list[SceneSpec]) -> None:
    for scene in scenes[:4]:
        text = scene.to_json()
        back = SceneSpec.from_json(text)
        assert back == scene
        assert back.to_json() == text


def test_room_layout_rules(scenes: list[SceneSpec]) -> None:
    for scene in scenes:
        n = len(scene.rooms)
        assert 2 <= n <= 6
        types = Counter(r.room_type for r in scene.rooms)
        assert types["bedroom"] >= 1 and types["bathroom"] == 1
        assert all(
            k == "bedroom" or v == 1 for k, v in types.items()
        )  # distinct, except a second bedroom
        for room in scene.rooms:
            w = room.max_xz[0] - room.min_xz[0]
            d = room.max_xz[1] - room.min_xz[1]
            assert 2.5 - 1e-6 <= min(w, d) and max(w, d) <= 6.2 + 1e-6
        # rooms tile a rectangle without overlaps
        for r1, r2 in itertools.combinations(scene.rooms, 2):
            ox = min(r1.max_xz[0], r2.max_xz[0]) - max(r1.min_xz[0], r2.min_xz[0])
            oz = min(r1.max_xz[1], r2.max_xz[1]) - max(r1.min_xz[1], r2.min_xz[1])
            assert ox <= 1e-6 or oz <= 1e-6
        doors = scene.metadata["doors"]
        assert all(d["width_m"] >= DOOR_MIN_WIDTH_M - 1e-9 for d in doors)
        # the doors connect every room
        reached = {0}
        for _ in range(n):
            for d in doors:
                a, b = d["rooms"]
                if a in reached or b in reached:
                    reached |= {a, b}
        assert reached == set(range(n))


def test_floors_and_walls(scenes: list[SceneSpec]) -> None:
    for scene in scenes:
        floors = scene.objects_of("floor")
        assert len(floors) == len(scene.rooms)
        for f in floors:
            assert f.aabb()[1][1] == pytest.approx(0.0)
        walls = scene.objects_of("wall")
        assert len(walls) == 4 * len(scene.rooms)
        for w in walls:
            lo, hi = w.aabb()
            assert hi[1] == pytest.approx(WALL_HEIGHT_M)
            thin = min(hi[0] - lo[0], hi[2] - lo[2])
            assert thin in (pytest.approx(0.05), pytest.approx(0.1))
        # outer boundary closed: every outer-wall line is fully covered
        lo = np.min([r.min_xz for r in scene.rooms], axis=0)
        hi = np.max([r.max_xz for r in scene.rooms], axis=0)
        from humanclaw_gym.scenes.navgrid import NavGrid

        grid = NavGrid.from_scene(scene)
        for x in np.arange(lo[0] + 0.1, hi[0] - 0.1, 0.05):
            assert grid.is_blocked(x, lo[1] + 0.02) and grid.is_blocked(x, hi[1] - 0.02)
        for z in np.arange(lo[1] + 0.1, hi[1] - 0.1, 0.05):
            assert grid.is_blocked(lo[0] + 0.02, z) and grid.is_blocked(hi[0] - 0.02, z)


def _part_boxes(obj) -> list[tuple[np.ndarray, np.ndarray]]:
    rot = np.abs(obj.rotation())
    out = []
    for part in obj.parts:
        c = obj.part_world_center(part)
        h = rot @ part.local_half_extents() if part.shape == "box" else part.local_half_extents()
        out.append((c - h, c + h))
    return out


def _parts_intersect(a, b, tol: float = 1e-3) -> bool:
    for alo, ahi in _part_boxes(a):
        for blo, bhi in _part_boxes(b):
            if np.all(np.minimum(ahi, bhi) - np.maximum(alo, blo) > tol):
                return True
    return False


def test_no_overlapping_objects(scenes: list[SceneSpec]) -> None:
    """Static objects never overlap in x/z unless one rests on top of the other; a small
    dynamic object may overlap another footprint only without touching its parts (a cup
    on a counter under the wall cabinets)."""
    for scene in scenes:
        objs = [o for o in scene.objects if o.category != "floor"]
        boxes = {o.object_id: o.aabb() for o in objs}
        for a, b in itertools.combinations(objs, 2):
            (alo, ahi), (blo, bhi) = boxes[a.object_id], boxes[b.object_id]
            ox = min(ahi[0], bhi[0]) - max(alo[0], blo[0])
            oz = min(ahi[2], bhi[2]) - max(alo[2], blo[2])
            if ox <= 1e-3 or oz <= 1e-3 or _rests_on(a, b) or _rests_on(b, a):
                continue
            if (a.dynamic or b.dynamic) and not _parts_intersect(a, b):
                continue
            pytest.fail(
                f"{scene.scene_id}: {a.name} overlaps {b.name} in x/z ({ox:.3f} x {oz:.3f} m)"
            )


def test_small_objects_rest_on_a_surface(scenes: list[SceneSpec]) -> None:
    """Every dynamic object's bottom touches the floor or the top of a part right below it."""
    for scene in scenes:
        static = [o for o in scene.objects if not o.dynamic and o.category not in ("floor", "wall")]
        for obj in scene.dynamic_objects:
            lo, hi = obj.aabb()
            if abs(lo[1]) < 1e-4:
                continue
            cx, cz = (lo[0] + hi[0]) / 2, (lo[2] + hi[2]) / 2
            tops = [
                phi[1]
                for other in static
                for plo, phi in _part_boxes(other)
                if plo[0] <= cx <= phi[0] and plo[2] <= cz <= phi[2] and phi[1] <= lo[1] + 1e-4
            ]
            assert tops and max(tops) == pytest.approx(lo[1], abs=1e-4), (
                f"{scene.scene_id}: {obj.name} floats at {lo[1]:.3f} m"
            )


def test_every_scene_has_every_target(scenes: list[SceneSpec]) -> None:
    for scene in scenes:
        cats = {o.category for o in scene.objects}
        assert set(TARGET_CATEGORIES) <= cats, scene.scene_id


def test_furniture_rules(scenes: list[SceneSpec]) -> None:
    for scene in scenes:
        for obj in scene.objects:
            lo, hi = obj.aabb()
            assert obj.object_id >= 1
            if obj.category in _SITTABLE:
                assert obj.seat_height_m is not None and 0.35 <= obj.seat_height_m <= 0.6, obj.name
                x, z, yaw = approach_pose(obj)
                assert yaw == pytest.approx(obj.yaw_rad)
                room = scene.room_at(x, z)
                assert room is not None and room.room_id == obj.room_id
            else:
                assert obj.seat_height_m is None
            if obj.category in (
                "tv",
                "bed",
                "couch",
                "toilet",
                "chair",
                "potted_plant",
                "wardrobe",
                "table",
            ):
                assert lo[1] == pytest.approx(0.0, abs=1e-6), (
                    f"{obj.name} does not stand on the floor"
                )
            if obj.category == "rug":
                assert hi[1] <= 0.02 + 1e-9
            if obj.dynamic:
                assert 0.1 <= obj.mass_kg <= 2.0
                assert obj.category in ("cup", "book", "box", "ball", "vase")
            else:
                assert obj.mass_kg == 0.0
            for part in obj.parts:
                assert part.material
        assert scene.objects_of("tv")[0].aabb()[0][1] == pytest.approx(0.0)
        assert len(scene.dynamic_objects) >= 1


def test_seat_approach_zone_is_clear(scenes: list[SceneSpec]) -> None:
    """Nothing static (but rugs) stands in the zone in front of a seat."""
    for scene in scenes:
        static = [o for o in scene.objects if not o.dynamic and o.category not in ("floor", "rug")]
        for seat in (o for o in scene.objects if o.category in _SITTABLE):
            lo, hi = seat.aabb()
            f = seat.front_direction()
            depth = APPROACH_DEPTH_M - 0.05
            if abs(f[0]) > 0.5:
                x0, x1 = (
                    (hi[0] + 0.01, hi[0] + depth) if f[0] > 0 else (lo[0] - depth, lo[0] - 0.01)
                )
                zone = (x0, lo[2] + 0.02, x1, hi[2] - 0.02)
            else:
                z0, z1 = (
                    (hi[2] + 0.01, hi[2] + depth) if f[2] > 0 else (lo[2] - depth, lo[2] - 0.01)
                )
                zone = (lo[0] + 0.02, z0, hi[0] - 0.02, z1)
            for other in static:
                if other.object_id == seat.object_id or _rests_on(other, seat):
                    continue
                olo, ohi = other.aabb()
                if olo[1] > 1.9:
                    continue
                if olo[0] < zone[2] and zone[0] < ohi[0] and olo[2] < zone[3] and zone[1] < ohi[2]:
                    pytest.fail(f"{scene.scene_id}: {other.name} stands in front of {seat.name}")


def test_platform_and_stairs_geometry() -> None:
    found = 0
    for i in range(VAL_NUM_SCENES):
        scene = load_scene(val_scene_id(i))
        if not scene.metadata["has_platform"]:
            continue
        found += 1
        (platform,) = scene.objects_of("platform")
        (stairs,) = scene.objects_of("stairs")
        assert platform.aabb()[1][1] == pytest.approx(PLATFORM_STEPS * STAIR_RISE_M)
        tops = sorted(p.offset[1] + p.size[1] for p in stairs.parts)
        assert tops == pytest.approx([STAIR_RISE_M * (k + 1) for k in range(PLATFORM_STEPS - 1)])
        n_treads = PLATFORM_STEPS - 1
        for part in stairs.parts:
            k = round((part.offset[1] + part.size[1]) / STAIR_RISE_M)  # 1 = lowest step
            # stacked full-height boxes: each exposes a tread of exactly one run
            assert 2 * part.size[2] == pytest.approx(STAIR_RUN_M * (n_treads - k + 1))
        # stairs touch the platform's front face and face the same way
        assert stairs.yaw_rad == pytest.approx(platform.yaw_rad)
        slo, shi = stairs.aabb()
        plo, phi = platform.aabb()
        gap = max(slo[0] - phi[0], plo[0] - shi[0], slo[2] - phi[2], plo[2] - shi[2])
        assert gap == pytest.approx(0.0, abs=2e-3)
    # about a third of the validation homes have a platform
    assert 0.2 * VAL_NUM_SCENES <= found <= 0.5 * VAL_NUM_SCENES


def test_val_scenes_have_all_targets_and_three_rooms() -> None:
    for i in range(VAL_NUM_SCENES):
        scene = load_scene(val_scene_id(i))
        assert scene.seed == val_scene_seed(i)
        assert len(scene.rooms) >= 3
        cats = Counter(o.category for o in scene.objects)
        for c in TARGET_CATEGORIES:
            assert cats[c] >= 1, f"{scene.scene_id} has no {c}"
        for c in INTERACT_CATEGORIES:
            assert all(o.seat_height_m is not None for o in scene.objects_of(c))


def test_seed_namespaces_and_training_scenes() -> None:
    val = {val_scene_seed(i) for i in range(1000)}
    train = {training_scene_seed(i) for i in range(100_000)}
    assert not val & train
    a = load_scene("hc_train_007")
    assert a.seed == training_scene_seed(7)
    assert a.to_json() == generate_named_scene("hc_train_007").to_json()
    with pytest.raises(ValueError):
        training_scene_seed(-1)
    with pytest.raises(ValueError):
        generate_named_scene("kitchen_1")


def test_generate_scene_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="seed"):
        generate_scene("x", -1)
    with pytest.raises(ValueError, match="scene_id"):
        generate_scene("", 1)
    with pytest.raises(ValueError, match="min_rooms"):
        generate_scene("x", 1, min_rooms=1)
    with pytest.raises(ValueError, match="max_rooms"):
        generate_scene("x", 1, min_rooms=4, max_rooms=3)


def test_room_count_range_is_respected() -> None:
    for seed in range(20):
        scene = generate_scene("rc", seed, min_rooms=3, max_rooms=4)
        assert 3 <= len(scene.rooms) <= 4
    two = generate_scene("studio", 5, min_rooms=2, max_rooms=2)
    assert [r.room_type for r in two.rooms] == ["bedroom", "bathroom"]
    assert {"couch", "tv", "bed", "chair"} <= {o.category for o in two.objects if o.room_id == 0}


def test_generation_is_quick() -> None:
    import time

    t0 = time.perf_counter()
    for seed in range(5):
        generate_scene("speed", 500 + seed)
    assert (time.perf_counter() - t0) / 5 < 1.0


def test_sittable_fronts_face_open_floor(scenes: list[SceneSpec]) -> None:
    for scene in scenes:
        for obj in scene.objects:
            if obj.category in _SITTABLE:
                x, z, _ = approach_pose(obj)
                room = scene.room_at(x, z)
                assert room is not None
                inner = 0.05 + 0.1
                assert room.min_xz[0] + inner <= x <= room.max_xz[0] - inner
                assert room.min_xz[1] + inner <= z <= room.max_xz[1] - inner
                assert math.isfinite(x) and math.isfinite(z)


def test_no_shipped_scene_has_z_fighting_faces() -> None:
    """Every shipped home (and the generator's test seeds) has no pair of coplanar,
    same-facing, overlapping faces that could draw differently (z-fighting stripes)."""
    from humanclaw_gym.scenes.faces import coplanar_overlaps

    found = {}
    for i in range(VAL_NUM_SCENES):
        scene = load_scene(val_scene_id(i))
        overlaps = coplanar_overlaps(scene)
        if overlaps:
            found[scene.scene_id] = overlaps[:3]
    assert found == {}


def test_coplanar_scan_finds_flush_decor_and_ignores_hidden_faces() -> None:
    """The scan reports a rug panel flush with the rug, a rim flush with its pot and two
    objects' flush tops, and none of: equal-looking parts of one object, bottoms standing
    on a floor, a panel 3 mm above the rug."""
    from humanclaw_gym.scenes.faces import coplanar_overlaps
    from humanclaw_gym.scenes.spec import Part, Room, SceneObject

    floor = SceneObject(1, "floor", "floor", (0.0, -0.05, 0.0), 0.0, (Part("box", (3, 0.05, 3)),))

    def scene(*objects):
        return SceneSpec("faces", (Room(0, "bedroom", (-3, -3), (3, 3)),), (floor, *objects))

    red, green = (0.8, 0.1, 0.1), (0.1, 0.8, 0.1)
    border = Part("box", (0.8, 0.005, 0.5), (0, 0.005, 0), red, "carpet")
    flush = Part("box", (0.6, 0.0025, 0.3), (0, 0.0075, 0), green, "carpet")
    raised = Part("box", (0.6, 0.004, 0.3), (0, 0.009, 0), green, "carpet")
    rug = SceneObject(2, "rug", "rug", (0.3, 0.0, 0.2), 0.5, (border, flush))
    (hit,) = coplanar_overlaps(scene(rug))
    assert {hit.a, hit.b} == {(2, 0), (2, 1)} and hit.area_m2 == pytest.approx(1.2 * 0.6)
    assert (
        coplanar_overlaps(scene(SceneObject(2, "rug", "rug", (0, 0, 0), 0.5, (border, raised))))
        == []
    )
    pot = SceneObject(3, "pot", "potted_plant", (0, 0, 0), 0.0, (
        Part("cylinder", (0.2, 0.15, 0), (0, 0.15, 0), red),
        Part("cylinder", (0.215, 0.02, 0), (0, 0.28, 0), green),
    ))  # fmt: skip
    assert len(coplanar_overlaps(scene(pot))) == 1
    # two legs of one look standing on the floor, and a second object beside the first
    table = SceneObject(4, "table", "table", (0, 0, 0), 0.0, (
        Part("box", (0.5, 0.02, 0.3), (0, 0.72, 0), red),
        Part("box", (0.02, 0.36, 0.02), (0.4, 0.36, 0.2), red),
        Part("box", (0.02, 0.36, 0.02), (0.4, 0.36, 0.2), red),
    ))  # fmt: skip
    stairs = SceneObject(5, "stairs", "stairs", (0.3, 0.0, 0.0), 0.0,
                         (Part("box", (0.3, 0.075, 0.2), (0, 0.075, 0), green),))  # fmt: skip
    assert coplanar_overlaps(scene(table, stairs)) == []  # bottoms on the floor are backed
    cabinet = SceneObject(6, "box", "cabinet", (0.55, 0.0, 0.0), 0.0,
                            (Part("box", (0.3, 0.37, 0.2), (0, 0.37, 0), green),))  # fmt: skip
    (hit,) = coplanar_overlaps(scene(table, cabinet))  # flush tops of two objects
    assert {hit.a[0], hit.b[0]} == {4, 6}
