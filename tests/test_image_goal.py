"""Image-goal navigation: episode records, the shipped split, goal views, success and SPL,
the oracle's point goal and the PSV prompt."""

from __future__ import annotations

import gzip
import json
import math
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from humanclaw_gym.episodes import EpisodeFormatError, EpisodeInfo, load_scene
from humanclaw_gym.episodes.goal_view import (
    GENERATOR_MARGIN,
    GOAL_VIEW_THRESHOLDS,
    GoalViewStats,
    goal_view_problems,
    goal_view_stats,
)
from humanclaw_gym.episodes.imagegoal import (
    IMAGEGOAL_EPISODE_SCHEMA,
    IMAGEGOAL_SPLIT_INDEX_SCHEMA,
    SUCCESS_DISTANCE_M,
    ImageGoalEpisode,
    imagegoal_shard_bytes,
    load_imagegoal_split,
)
from humanclaw_gym.episodes.schema import yaw_to_quat_xyzw

SPLIT = "imagegoal_val100"


def _episode(**changes) -> ImageGoalEpisode:
    fields = dict(
        episode_id="ig_test_000",
        scene_id="hc_val_003",
        start_position=(1.0, 0.0, 2.0),
        start_rotation=yaw_to_quat_xyzw(0.5),
        start_yaw_rad=0.5,
        goal_position=(4.0, 0.0, 2.5),
        goal_rotation=yaw_to_quat_xyzw(-1.0),
        goal_yaw_rad=-1.0,
        info=EpisodeInfo(geodesic_distance=3.2, euclidean_distance=3.04),
    )
    fields.update(changes)
    return ImageGoalEpisode(**fields)


@pytest.fixture(scope="module")
def split() -> list[ImageGoalEpisode]:
    return load_imagegoal_split(SPLIT)


# ---- records ------------------------------------------------------------------------------


def test_record_round_trips_and_defaults():
    ep = _episode()
    assert ep.success_distance_m == SUCCESS_DISTANCE_M == 1.0
    assert ep.max_steps == 100 and ep.instruction
    assert ImageGoalEpisode.from_dict(json.loads(json.dumps(ep.to_dict()))) == ep
    assert ep.goal_xz == (4.0, 2.5) and ep.start_xz == (1.0, 2.0)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"goal_rotation": yaw_to_quat_xyzw(0.3)}, "goal_rotation"),
        ({"start_position": (1.0, float("nan"), 2.0)}, "start_position"),
        ({"goal_position": (1.0, 2.0)}, "goal_position"),
        ({"goal_yaw_rad": "north"}, "goal_yaw_rad"),
        ({"success_distance_m": 0.0}, "success_distance_m"),
        ({"max_steps": 0}, "max_steps"),
        ({"episode_id": "../x"}, "episode_id"),
    ],
)
def test_record_refuses_bad_fields_naming_them(change, field):
    with pytest.raises(EpisodeFormatError, match=field):
        _episode(**change)


def test_from_dict_names_missing_and_unknown_fields():
    doc = _episode().to_dict()
    del doc["goal_yaw_rad"]
    with pytest.raises(EpisodeFormatError, match="ig_test_000.*missing field 'goal_yaw_rad'"):
        ImageGoalEpisode.from_dict(doc)
    doc = {**_episode().to_dict(), "goals": []}
    with pytest.raises(EpisodeFormatError, match="unknown field 'goals'"):
        ImageGoalEpisode.from_dict(doc)


# ---- the shipped split --------------------------------------------------------------------


def test_split_is_versioned_and_holds_100_episodes_in_the_val100_homes(split):
    from humanclaw_gym.episodes import load_split
    from humanclaw_gym.episodes.io import assets_dir

    assert len(split) == 100 and len({e.episode_id for e in split}) == 100
    homes = sorted({e.scene_id for e in split})
    assert homes == sorted({e.scene_id for e in load_split("val100")})
    folder = assets_dir() / "splits" / SPLIT
    index = json.loads((folder / "index.json").read_text())
    assert index["schema"] == IMAGEGOAL_SPLIT_INDEX_SCHEMA
    assert index["num_episodes"] == 100
    for entry in index["scenes"]:
        doc = json.loads(gzip.decompress((folder / entry["file"]).read_bytes()))
        assert doc["schema"] == IMAGEGOAL_EPISODE_SCHEMA
        assert load_scene(entry["scene_id"]).content_hash() == entry["scene_content_sha256"]
    assert {e.info.difficulty for e in split} == {"easy", "medium", "hard"}


def test_split_refuses_a_changed_shard(tmp_path: Path):
    from humanclaw_gym.episodes.io import assets_dir

    folder = tmp_path / "ig"
    shutil.copytree(assets_dir() / "splits" / SPLIT, folder)
    assert len(load_imagegoal_split(folder)) == 100
    shard = sorted(folder.glob("*.json.gz"))[0]
    episodes = [
        ImageGoalEpisode.from_dict(e)
        for e in json.loads(gzip.decompress(shard.read_bytes()))["episodes"]
    ]
    shard.write_bytes(imagegoal_shard_bytes(episodes[0].scene_id, episodes[:-1]))
    with pytest.raises(EpisodeFormatError, match="SHA-256 does not match"):
        load_imagegoal_split(folder)
    with pytest.raises(EpisodeFormatError, match="unknown image-goal split 'nope'"):
        load_imagegoal_split("nope")


def test_every_goal_is_reachable_and_clear_of_furniture(split):
    from humanclaw_gym.episodes.spawns import SpawnChecker
    from humanclaw_gym.scenes.navgrid import NavGrid

    by_scene: dict[str, list[ImageGoalEpisode]] = {}
    for ep in split:
        by_scene.setdefault(ep.scene_id, []).append(ep)
    for scene_id, episodes in by_scene.items():
        scene = load_scene(scene_id)
        grid = NavGrid.from_scene(scene)
        spawns = SpawnChecker(scene, grid)
        main = grid.main_component()
        for ep in episodes:
            for x, z in (ep.start_xz, ep.goal_xz):
                iz, ix = grid.world_to_cell(x, z)
                assert main[iz, ix], (ep.episode_id, x, z)
                assert spawns.is_clear(x, z), (ep.episode_id, x, z)
            cell = np.array([grid.world_to_cell(*ep.goal_xz)])
            geodesic = grid.geodesic_distance(ep.start_xz, cell)
            assert math.isfinite(geodesic)
            assert geodesic == pytest.approx(ep.info.geodesic_distance, abs=1e-3)
            assert ep.info.geodesic_distance >= 2.0
            assert math.dist(ep.start_xz, ep.goal_xz) >= 1.5 > SUCCESS_DISTANCE_M
            assert ep.goal_position[1] == ep.start_position[1] == grid.floor_y


# ---- goal views ---------------------------------------------------------------------------


def test_goal_view_check_refuses_a_blank_wall_and_accepts_a_room():
    wall = np.full((64, 64, 3), 180, dtype=np.uint8)
    problems = goal_view_problems(goal_view_stats(wall, np.full((64, 64), 0.4)))
    names = {p.split()[0] for p in problems}
    assert names == {
        "luminance_std",
        "edge_fraction",
        "depth_median_m",
        "depth_spread_m",
        "near_fraction",
    }
    rng = np.random.default_rng(0)
    room = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    depth = np.linspace(0.8, 6.0, 64 * 64).reshape(64, 64)
    assert goal_view_problems(goal_view_stats(room, depth)) == ()
    stats = GoalViewStats(20.5, 0.021, 1.31, 1.51, 0.149, 0.031)
    assert goal_view_problems(stats) == ()
    assert len(goal_view_problems(stats, margin=GENERATOR_MARGIN)) == len(GOAL_VIEW_THRESHOLDS)


def _render_goal_views(episodes):
    from humanclaw_gym.backends.config import BackendConfig
    from humanclaw_gym.envs.simulation import Simulation
    from humanclaw_gym.envs.standing_view import render_standing_view

    sim = Simulation(BackendConfig().check())
    sim.resolve({"rgb", "depth", "instance"}, False, 448)
    try:
        for ep in episodes:
            sim.load_scene(ep.scene_id)
            seed = zlib.crc32(f"{ep.scene_id}/{ep.episode_id}".encode())
            modes = ("rgb", "depth", "instance")
            view = render_standing_view(
                sim, ep.goal_position, ep.goal_yaw_rad, 448, modes, seed=seed
            )
            yield ep, view, sim.scene
    finally:
        sim.close()


def _check_goal_views(episodes):
    failures = []
    for ep, view, scene in _render_goal_views(episodes):
        stats = goal_view_stats(view["rgb"], view["depth"], view["instance"], scene)
        problems = goal_view_problems(stats)
        if problems:
            failures.append((ep.episode_id, problems))
    assert not failures


def test_a_sample_of_goal_views_show_the_room(split):
    _check_goal_views(split[::20])


@pytest.mark.slow
def test_every_goal_view_shows_the_room(split):
    _check_goal_views(split)


def test_the_generator_reproduces_the_shipped_episodes(split):
    """The first episodes of a home, drawn again with the generator and the env's own
    renders, are the shipped records (moderngl, which the shipped split was checked with)."""
    from humanclaw_gym.backends import registry
    from humanclaw_gym.episodes.imagegoal_generate import (
        IMAGEGOAL_SEED_BASE,
        generate_imagegoal_scene_episodes,
    )

    try:
        registry.create_renderer("moderngl")[0].close()
    except Exception as exc:  # pragma: no cover - machines without EGL
        pytest.skip(f"moderngl unavailable: {exc}")
    import runpy

    script = Path(__file__).resolve().parents[1] / "scripts" / "generate_imagegoal_split.py"
    make_render_view = runpy.run_path(str(script), run_name="imagegoal_script")["make_render_view"]
    sim, render_view = make_render_view("moderngl")
    try:
        scene = load_scene("hc_val_003")
        drawn = generate_imagegoal_scene_episodes(
            scene, 3, IMAGEGOAL_SEED_BASE + 3, render_view, id_prefix="ig_val_003"
        )
    finally:
        sim.close()
    assert drawn == [e for e in split if e.scene_id == "hc_val_003"][:3]
