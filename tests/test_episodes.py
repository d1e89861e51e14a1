"""Episodes: schema, shipped splits, reachability, regeneration, upstream format, errors, CLI."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from humanclaw_gym.episodes import (
    Episode,
    EpisodeFormatError,
    get_episode,
    habitat_quat_to_yaw,
    instruction_for,
    load_scene,
    load_split,
    read_shard,
    write_shard,
    yaw_to_quat_xyzw,
)
from humanclaw_gym.episodes.difficulty import difficulty_label, route_stats
from humanclaw_gym.episodes.generate import (
    MIN_START_GEODESIC_M,
    VAL_NUM_EPISODES,
    VAL_NUM_INTERACT,
    VAL_NUM_SCENES,
    scene_files,
    val_category_plan,
    val_scene_id,
)
from humanclaw_gym.episodes.io import assets_dir, gzip_bytes, read_scene_file
from humanclaw_gym.scenes.navgrid import NavGrid
from humanclaw_gym.scenes.spec import INTERACT_CATEGORIES, TARGET_CATEGORIES


@pytest.fixture(scope="module")
def val() -> list[Episode]:
    return load_split("val")


# -- schema ------------------------------------------------------------------------------
def test_instruction_strings() -> None:
    assert instruction_for("potted_plant") == "Find the potted plant."
    assert instruction_for("tv") == "Find the tv."
    assert instruction_for("bed") == "Find the bed and sit on it."
    assert instruction_for("couch") == "Find the couch and sit on it."
    with pytest.raises(ValueError, match="version"):
        instruction_for("bed", version="v9")


def test_episode_round_trip_and_rotation_check(val: list[Episode]) -> None:
    ep = val[0]
    assert Episode.from_dict(json.loads(json.dumps(ep.to_dict()))) == ep
    assert ep.info["geodesic_distance"] == ep.info.geodesic_distance
    bad = ep.to_dict()
    bad["start_rotation"] = list(yaw_to_quat_xyzw(ep.start_yaw_rad + 0.5))
    with pytest.raises(EpisodeFormatError, match="start_rotation"):
        Episode.from_dict(bad)
    bad = ep.to_dict()
    bad["info"]["difficulty"] = "brutal"
    with pytest.raises(EpisodeFormatError, match="difficulty"):
        Episode.from_dict(bad)


# -- shipped splits ----------------------------------------------------------------------
def test_val_counts(val: list[Episode]) -> None:
    assert len(val) == VAL_NUM_EPISODES == 1218
    assert len({e.scene_id for e in val}) == VAL_NUM_SCENES == 41
    assert sum(e.interact for e in val) == VAL_NUM_INTERACT == 597
    assert {e.object_category for e in val} == set(TARGET_CATEGORIES)
    assert all(e.interact == (e.object_category in INTERACT_CATEGORIES) for e in val)
    assert len({e.episode_id for e in val}) == len(val)
    assert all(e.max_steps == 100 for e in val)
    assert all(e.instruction == instruction_for(e.object_category) for e in val)
    assert {e.scene_id for e in val} == {val_scene_id(i) for i in range(41)}
    plan = val_category_plan()
    assert sum(sum(p.values()) for p in plan) == 1218
    assert sorted({sum(p.values()) for p in plan}) == [29, 30]
    labels = Counter(e.info.difficulty for e in val)
    assert set(labels) == {"easy", "medium", "hard"}
    assert min(labels.values()) >= 0.15 * len(val)


def test_val100_is_subset(val: list[Episode]) -> None:
    sub = load_split("val100")
    assert len(sub) == 100
    scenes = Counter(e.scene_id for e in sub)
    assert len(scenes) == 5 and set(scenes.values()) == {20}
    by_id = {e.episode_id: e for e in val}
    assert all(by_id[e.episode_id] == e for e in sub)
    assert load_split("val100") == sub  # stable


def test_get_episode(val: list[Episode]) -> None:
    ep = get_episode("val", val[17].episode_id)
    assert ep == val[17]
    with pytest.raises(KeyError, match="no episode"):
        get_episode("val", "nope")
    with pytest.raises(KeyError, match="unknown split"):
        load_split("test_split_that_does_not_exist")


def _check_scene_episodes(scene_id: str, episodes: list[Episode]) -> None:
    scene = load_scene(scene_id)
    grid = NavGrid.from_scene(scene)
    for ep in episodes:
        x, y, z = ep.start_position
        assert y == 0.0
        assert grid.is_free(x, z), ep.episode_id
        objs = scene.objects_of(ep.object_category)
        assert {g.object_id for g in ep.goals} == {o.object_id for o in objs}
        for goal in ep.goals:
            obj = scene.object_by_id(goal.object_id)
            lo, hi = obj.aabb()
            assert goal.aabb_min == pytest.approx(tuple(lo), abs=1e-4)
            assert goal.aabb_max == pytest.approx(tuple(hi), abs=1e-4)
            assert math.isfinite(grid.geodesic_distance((x, z), obj)), (
                f"{ep.episode_id}: {obj.name} unreachable"
            )
            if obj.seat_height_m is not None:
                assert goal.approach_pose is not None and goal.seat_height_m == obj.seat_height_m
        geo = grid.geodesic_distance((x, z), list(objs))
        assert geo >= MIN_START_GEODESIC_M - 1e-6
        assert ep.info.geodesic_distance == pytest.approx(geo, abs=1e-3)
        stats = route_stats(grid, (x, z), list(objs))
        assert stats is not None
        assert ep.info.choice_points == stats.choice_points
        assert ep.info.difficulty == difficulty_label(
            stats.geodesic_distance, stats.choice_points, stats.obstacle_density
        )
        assert ep.info.euclidean_distance <= ep.info.geodesic_distance + 1e-6


def test_starts_free_and_goals_reachable_fast(val: list[Episode]) -> None:
    for sid in ("hc_val_000", "hc_val_017", "hc_val_040"):
        _check_scene_episodes(sid, [e for e in val if e.scene_id == sid])


@pytest.mark.slow
def test_starts_free_and_goals_reachable_all(val: list[Episode]) -> None:
    for i in range(VAL_NUM_SCENES):
        sid = val_scene_id(i)
        _check_scene_episodes(sid, [e for e in val if e.scene_id == sid])


def test_shipped_scene_and_shard_regenerate_byte_identically() -> None:
    root = assets_dir()
    scene, scene_gz, episodes, shard = scene_files(7)
    assert (root / "scenes" / "hc_val_007.json.gz").read_bytes() == scene_gz
    assert (root / "splits" / "val" / "hc_val_007.json.gz").read_bytes() == shard
    index = json.loads((root / "scenes" / "index.json").read_text())
    assert index["scenes"]["hc_val_007"]["content_sha256"] == scene.content_hash()


@pytest.mark.slow
def test_all_shipped_files_regenerate_byte_identically() -> None:
    from humanclaw_gym.episodes.generate import build_val_files

    built = build_val_files()
    root = assets_dir()
    for rel, data in built.files.items():
        assert (root / rel).read_bytes() == data, rel


def test_nearest_difficulty_takes_the_first_exact_or_nearest_and_stops_drawing() -> None:
    from types import SimpleNamespace

    from humanclaw_gym.episodes.difficulty import nearest_difficulty

    def stats(label: str) -> SimpleNamespace:  # what the choice reads of a RouteStats
        return SimpleNamespace(difficulty=label)

    drawn: list[str] = []

    def draws(labels):
        for k, label in enumerate(labels):
            drawn.append(label)
            yield stats(label), k

    picked = nearest_difficulty(2, draws(["easy", "medium", "medium", "hard", "easy"]))
    assert picked is not None and picked[1] == 3 and drawn == ["easy", "medium", "medium", "hard"]
    picked = nearest_difficulty(2, draws(["easy", "medium", "medium"]))
    assert picked is not None and picked[1] == 1  # the first of the nearest
    assert nearest_difficulty(0, iter(())) is None


def test_gzip_is_deterministic() -> None:
    a = gzip_bytes(b"hello" * 100)
    assert a == gzip_bytes(b"hello" * 100)
    assert a[4:8] == b"\x00\x00\x00\x00"  # mtime 0
    assert not a[3] & 0x08  # no file name


def test_scene_hash_is_verified(tmp_path: Path) -> None:
    src = assets_dir() / "scenes" / "hc_val_001.json.gz"
    good = json.loads((assets_dir() / "scenes" / "index.json").read_text())["scenes"]["hc_val_001"][
        "content_sha256"
    ]
    assert read_scene_file(src, good).scene_id == "hc_val_001"
    text = gzip.decompress(src.read_bytes()).replace(b'"hc_val_001"', b'"hc_val_999"')
    bad = tmp_path / "hc_val_001.json.gz"
    bad.write_bytes(gzip_bytes(text))
    with pytest.raises(EpisodeFormatError, match="SHA-256"):
        read_scene_file(bad, good)


# -- other split sources -----------------------------------------------------------------
def test_split_dir_without_index_and_id_list(tmp_path: Path, val: list[Episode]) -> None:
    eps = [e for e in val if e.scene_id == "hc_val_002"]
    write_shard(tmp_path / "d" / "hc_val_002.json.gz", "hc_val_002", eps)
    assert load_split(tmp_path / "d") == eps
    assert read_shard(tmp_path / "d" / "hc_val_002.json.gz") == eps
    ids = [val[3].episode_id, val[900].episode_id]
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    assert [e.episode_id for e in load_split(tmp_path / "ids.json")] == ids
    (tmp_path / "bad_ids.json").write_text(json.dumps(["hc_val_000_999"]))
    with pytest.raises(EpisodeFormatError, match="not in split"):
        load_split(tmp_path / "bad_ids.json")


def test_index_hash_mismatch_is_detected(tmp_path: Path) -> None:
    copy = tmp_path / "val"
    shutil.copytree(assets_dir() / "splits" / "val", copy)
    shard = copy / "hc_val_004.json.gz"
    eps = read_shard(shard)
    write_shard(shard, "hc_val_004", eps[:-1])
    with pytest.raises(EpisodeFormatError, match="hc_val_004.json.gz.*SHA-256"):
        load_split(copy)


@pytest.mark.parametrize("loader", ["val", "imagegoal_val100"])
def test_index_entries_must_name_files_in_the_split_folder(tmp_path: Path, loader: str) -> None:
    """Both split readers share one index check: an entry leaving the folder is refused."""
    from humanclaw_gym.episodes.imagegoal import load_imagegoal_split

    copy = tmp_path / "split"
    shutil.copytree(assets_dir() / "splits" / loader, copy)
    index = json.loads((copy / "index.json").read_text())
    first = index["scenes"][0]["file"]
    (tmp_path / first).write_bytes((copy / first).read_bytes())
    index["scenes"][0]["file"] = f"../{first}"
    (copy / "index.json").write_text(json.dumps(index))
    load = load_split if loader == "val" else load_imagegoal_split
    with pytest.raises(EpisodeFormatError, match=r"scenes\[0\]\.file .* must be a file name"):
        load(copy)


def test_start_pose_checks_name_the_field(val: list[Episode]) -> None:
    """The pose check shared with image-goal records: bounded, finite, no bool yaw."""
    for field, value, message in (
        ("start_position", [1e5, 0.0, 0.0], r"Episode\.start_position .* out of range"),
        ("start_yaw_rad", True, r"Episode\.start_yaw_rad must be a finite number"),
        ("start_yaw_rad", "north", r"Episode\.start_yaw_rad must be a number"),
        ("max_steps", 10_001, r"Episode\.max_steps must be an int in \[1, 10000\]"),
    ):
        bad = val[0].to_dict()
        bad[field] = value
        with pytest.raises(EpisodeFormatError, match=message):
            Episode.from_dict(bad)


def _write_gz(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_habitat_objectnav_shard_loads(tmp_path: Path) -> None:
    theta = 0.7  # Habitat agent rotated by theta about +Y, looking along its local -Z
    q = [0.0, math.sin(theta / 2), 0.0, math.cos(theta / 2)]
    scene_path = "data/scene_datasets/hssd-hab/scenes/102344049.scene_instance.json"
    doc = {
        "episodes": [
            {
                "episode_id": "0",
                "scene_id": scene_path,
                "scene_dataset_config": "data/scene_datasets/hssd-hab/hssd-hab.scene_dataset_config.json",
                "start_position": [1.5, 0.1, -2.0],
                "start_rotation": q,
                "info": {
                    "geodesic_distance": 4.2,
                    "euclidean_distance": 3.1,
                    "closest_goal_object_id": "7",
                },
                "goals": [],
                "start_room": None,
                "shortest_paths": None,
                "object_category": "sofa",
            },
            {
                "episode_id": "1",
                "scene_id": scene_path,
                "start_position": [0.0, 0.1, 0.0],
                "start_rotation": [0.0, 0.0, 0.0, 1.0],
                "info": {"geodesic_distance": 2.0},
                "goals": [],
                "object_category": "chair",
            },
        ],
        "goals_by_category": {
            "102344049.scene_instance.json_sofa": [
                {
                    "position": [3.0, 0.4, -1.0],
                    "radius": None,
                    "object_id": 7,
                    "object_name": "sofa_7",
                    "object_category": "sofa",
                    "view_points": [
                        {
                            "agent_state": {"position": [2.5, 0.1, -0.5], "rotation": [0, 0, 0, 1]},
                            "iou": 0.4,
                        },
                        {"agent_state": {"position": [3.5, 0.1, -0.4]}, "iou": 0.2},
                    ],
                },
                {
                    "position": [5.0, 0.4, 2.0],
                    "radius": None,
                    "object_id": "12",
                    "object_name": None,
                    "object_category": "sofa",
                    "view_points": [],
                },
            ],
            "102344049.scene_instance.json_chair": [
                {
                    "position": [1.0, 0.4, 1.0],
                    "object_id": "a1b2",
                    "object_name": "chair_x",
                    "object_category": "chair",
                    "view_points": [],
                }
            ],
        },
        "category_to_task_category_id": {"chair": 0, "sofa": 5},
        "category_to_scene_annotation_category_id": {"chair": 0, "sofa": 5},
    }
    _write_gz(tmp_path / "hab" / "102344049.json.gz", doc)
    eps = load_split(tmp_path / "hab")
    assert len(eps) == 2
    ep = eps[0]
    assert ep.episode_id == "102344049_0" and ep.scene_id == "102344049"
    assert (
        ep.object_category == "couch"
        and ep.interact
        and ep.instruction == instruction_for("couch", True, "touch")
    )
    assert [g.object_id for g in ep.goals] == [7, 12]
    assert ep.goals[0].aabb_min is None and ep.goals[0].category == "couch"
    # view points are kept as the goal's approach points; none (empty list) reads as None
    assert ep.goals[0].approach_points == ((2.5, 0.1, -0.5), (3.5, 0.1, -0.4))
    assert ep.goals[1].approach_points is None
    round_trip = Episode.from_dict(json.loads(json.dumps(ep.to_dict())))
    assert round_trip == ep
    assert ep.start_position == (1.5, 0.1, -2.0)
    # the facing direction is preserved: Habitat forward R(q)(0,0,-1) = (-sin t, 0, -cos t)
    ours = (math.sin(ep.start_yaw_rad), math.cos(ep.start_yaw_rad))
    assert ours == pytest.approx((-math.sin(theta), -math.cos(theta)))
    assert ep.start_yaw_rad == pytest.approx(theta - math.pi)
    assert ep.start_rotation == pytest.approx(yaw_to_quat_xyzw(ep.start_yaw_rad))
    assert ep.info.geodesic_distance == 4.2 and ep.info.difficulty is None
    assert eps[1].object_category == "chair" and not eps[1].interact
    assert eps[1].goals[0].object_id == "a1b2"
    assert eps[1].start_yaw_rad == pytest.approx(-math.pi)  # identity: Habitat looks along -Z
    assert habitat_quat_to_yaw([0, 1, 0, 0]) == pytest.approx(
        0.0
    )  # turned half round: looks along +Z


def test_corrupt_and_invalid_shards_raise_clear_errors(tmp_path: Path, val: list[Episode]) -> None:
    garbage = tmp_path / "g" / "broken.json.gz"
    garbage.parent.mkdir()
    garbage.write_bytes(b"\x1f\x8b\x08\x00 this is not gzip at all")
    with pytest.raises(EpisodeFormatError, match=r"broken\.json\.gz.*gzip"):
        load_split(garbage.parent)

    good = val[0].to_dict()
    missing = dict(good)
    del missing["start_position"]
    path = _write_gz(
        tmp_path / "m" / "s.json.gz",
        {"schema": "humanclaw_episodes_v1", "scene_id": "x", "episodes": [missing]},
    )
    with pytest.raises(EpisodeFormatError, match=r"s\.json\.gz.*start_position"):
        read_shard(path)

    path = _write_gz(
        tmp_path / "w" / "s.json.gz", {"schema": "humanclaw_episodes_v9", "episodes": [good]}
    )
    with pytest.raises(EpisodeFormatError, match=r"s\.json\.gz.*schema.*humanclaw_episodes_v2"):
        read_shard(path)

    bad_points = json.loads(json.dumps(good))
    bad_points["goals"][0]["approach_points"] = [[1.0, 0.0]]
    path = _write_gz(
        tmp_path / "p" / "s.json.gz", {"schema": "humanclaw_episodes_v2", "episodes": [bad_points]}
    )
    with pytest.raises(EpisodeFormatError, match=r"goals\[0\].*approach_points\[0\]"):
        read_shard(path)

    hab_bad = {
        "episodes": [
            {
                "scene_id": "a.glb",
                "start_position": [0, 0, 0],
                "start_rotation": [0, 0, 0, 1],
                "object_category": "bed",
                "goals": [{"position": [1, 0, 1], "object_id": 3, "view_points": [{"iou": 1}]}],
            }
        ]
    }
    path = _write_gz(tmp_path / "hv" / "s.json.gz", hab_bad)
    with pytest.raises(EpisodeFormatError, match=r"view_points\[0\].*position"):
        read_shard(path)

    path = tmp_path / "j" / "s.json.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(b"{not json"))
    with pytest.raises(EpisodeFormatError, match="not valid JSON"):
        read_shard(path)

    bad_goal = json.loads(json.dumps(good))
    del bad_goal["goals"][0]["position"]
    path = _write_gz(
        tmp_path / "b" / "s.json.gz", {"schema": "humanclaw_episodes_v1", "episodes": [bad_goal]}
    )
    with pytest.raises(EpisodeFormatError, match=r"goals\[0\].*position"):
        read_shard(path)

    hab = {
        "episodes": [
            {
                "scene_id": "a.glb",
                "start_position": [0, 0, 0],
                "start_rotation": [0, 0, 0, 1],
                "object_category": "bed",
            }
        ]
    }
    path = _write_gz(tmp_path / "h" / "s.json.gz", hab)
    with pytest.raises(EpisodeFormatError, match="no goals"):
        read_shard(path)


def test_version_1_shards_still_read(tmp_path: Path, val: list[Episode]) -> None:
    old = val[0].to_dict()
    for g in old["goals"]:
        del g["approach_points"]
    path = _write_gz(
        tmp_path / "v1" / "s.json.gz",
        {"schema": "humanclaw_episodes_v1", "scene_id": val[0].scene_id, "episodes": [old]},
    )
    (ep,) = read_shard(path)
    assert all(g.approach_points is None for g in ep.goals)
    assert replace(ep, goals=val[0].goals) == val[0]


def test_episode_ids_and_positions_are_rounded(val: list[Episode]) -> None:
    ep = replace(val[0])
    assert ep.episode_id.startswith(ep.scene_id + "_")
    assert all(round(v, 4) == v for v in ep.start_position)


# -- CLI ---------------------------------------------------------------------------------
def test_cli_episodes(capsys: pytest.CaptureFixture[str]) -> None:
    from humanclaw_gym.cli.episodes_cmd import main

    assert main(["--split", "val100"]) == 0
    out = capsys.readouterr().out
    assert "split val100: 100 episodes in 5 scenes" in out
    assert "total" in out and "couch" in out and "medium" in out
    assert main(["--split", "val", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_episodes"] == 1218 and data["num_interact"] == 597 and data["num_scenes"] == 41
    assert sum(v["episodes"] for v in data["by_scene"].values()) == 1218
    assert main(["--split", "no_such_split"]) == 2


def test_cli_scenes_render_map_and_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], val: list[Episode]
) -> None:
    from PIL import Image

    from humanclaw_gym.cli.scenes_cmd import main

    out = tmp_path / "map.png"
    assert main(["render-map", "--scene", "hc_val_000", "--out", str(out)]) == 0
    assert out.is_file() and Image.open(out).size[0] > 200
    ep = next(e for e in val if e.scene_id == "hc_val_001" and e.interact)
    out2 = tmp_path / "ep.png"
    assert main(["render-map", "--episode", ep.episode_id, "--out", str(out2)]) == 0
    assert out2.is_file()
    assert (
        main(
            ["render-map", "--scene", "hc_val_000", "--episode", ep.episode_id, "--out", str(out2)]
        )
        == 2
    )
    capsys.readouterr()
    assert main(["show", "--scene", "hc_val_000"]) == 0
    text = capsys.readouterr().out
    assert "living_room" in text and "toilet" in text
    assert main(["show", "--scene", "hc_val_000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(TARGET_CATEGORIES) <= set(data["targets"])
    assert main(["show", "--scene", "nowhere"]) == 2


def test_cli_dispatch_via_console_entry(tmp_path: Path) -> None:
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "episodes", "--split", "val100", "--no-by-scene"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "100 episodes" in res.stdout
