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
        ({"goal_yaw_rad": True}, "goal_yaw_rad must be a finite number"),
        ({"start_position": (1e5, 0.0, 2.0)}, r"start_position .* is out of range"),
        ({"start_rotation": (0.0, 0.0, 0.0, 2.0)}, "start_rotation must be a unit quaternion"),
        ({"max_steps": 10_001}, r"max_steps must be an int in \[1, 10000\]"),
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
    """Each episode's goal view as the task renders it at reset (the body placed at the
    start, the goal view drawn by ``Simulation.render_at``), with depth and instance ids."""
    from humanclaw_gym.backends.config import BackendConfig
    from humanclaw_gym.envs.simulation import Simulation

    sim = Simulation(BackendConfig().check())
    sim.resolve({"rgb", "depth", "instance"}, False, 448)
    try:
        for ep in episodes:
            sim.load_scene(ep.scene_id)
            seed = zlib.crc32(f"{ep.scene_id}/{ep.episode_id}".encode())
            sim.reset(np.array(ep.start_position), ep.start_yaw_rad, seed=seed)
            modes = ("rgb", "depth", "instance")
            view = sim.render_at(np.array(ep.goal_position), ep.goal_yaw_rad, "ego", 448, modes)
            yield ep, {k: np.array(v) for k, v in view.items()}, sim.scene
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
    renders, are the shipped records (checked with moderngl and the TinyRenderer, as the
    shipped split was)."""
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
    made = [make_render_view(name) for name in ("moderngl", "tiny")]
    try:
        scene = load_scene("hc_val_003")
        drawn = generate_imagegoal_scene_episodes(
            scene, 3, IMAGEGOAL_SEED_BASE + 3, [view for _, view in made], id_prefix="ig_val_003"
        )
    finally:
        for sim, _ in made:
            sim.close()
    assert drawn == [e for e in split if e.scene_id == "hc_val_003"][:3]


# ---- success and SPL ----------------------------------------------------------------------


def test_stop_success_is_a_stop_within_the_radius_on_the_floor_plane():
    from humanclaw_gym.metrics.imagegoal import stop_success

    assert stop_success(True, (0.6, 0.8), (0.0, 0.0), 1.0) == (True, pytest.approx(1.0))
    assert stop_success(True, (0.61, 0.8), (0.0, 0.0), 1.0)[0] is False
    assert stop_success(False, (0.0, 0.1), (0.0, 0.0), 1.0) == (False, pytest.approx(0.1))
    with pytest.raises(ValueError, match="radius_m"):
        stop_success(True, (0, 0), (0, 0), float("nan"))


def test_spl_on_crafted_paths():
    from humanclaw_gym.metrics.imagegoal import path_length_m, spl

    straight = [(0.0, 0.0), (1.0, 0.0), (3.0, 0.0)]
    detour = [(0.0, 0.0), (0.0, 2.0), (3.0, 2.0), (3.0, 0.0)]
    assert path_length_m(straight) == pytest.approx(3.0)
    assert path_length_m(detour) == pytest.approx(7.0)
    assert path_length_m(np.zeros((0, 2))) == 0.0 == path_length_m([(1.0, 2.0)])
    assert spl(True, 3.0, path_length_m(straight)) == pytest.approx(1.0)
    assert spl(True, 3.0, path_length_m(detour)) == pytest.approx(3.0 / 7.0)
    assert spl(True, 3.0, 2.5) == pytest.approx(1.0)  # stopped short, inside the radius
    assert spl(False, 3.0, 3.0) == 0.0
    with pytest.raises(ValueError, match="shortest_m"):
        spl(True, 0.0, 1.0)
    with pytest.raises(ValueError, match="points_xz"):
        path_length_m([(0.0, 1.0, 2.0)])


# ---- the PSV agent ------------------------------------------------------------------------


def _planner_reply(action_id: int, name: str) -> str:
    return json.dumps(
        {
            "visible_state": "A rug and a green couch; the goal picture shows the couch.",
            "mid_level_progress_analysis": "The couch of the goal picture is ahead.",
            "mid_level_goal": "walk to the couch",
            "low_level_action_reasoning": "The lane is clear.",
            "action_id": action_id,
            "action_name": name,
            "additional_info": {},
        }
    )


def test_imagegoal_prompt_derives_the_skills_and_explains_both_pictures():
    from humanclaw_agents.prompts import HistoryRow, action_space_text
    from humanclaw_agents.prompts_imagegoal import render_imagegoal_prompt
    from humanclaw_gym.skills import Skill

    prompt = render_imagegoal_prompt(
        "Go to the goal.", 3, (HistoryRow(step=2, action_name="Walk<forward><slow>"),)
    )
    assert action_space_text() in prompt
    assert " | ".join(str(int(s)) for s in Skill) in prompt
    assert "the current picture" in prompt and "the goal picture" in prompt
    assert '"task": "Go to the goal."' in prompt and '"steps_taken": 3' in prompt
    assert "Walk<forward><slow>" in prompt and "$" not in prompt
    with pytest.raises(ValueError, match="image-goal prompt version"):
        render_imagegoal_prompt("x", 0, (), version="v2")


def _loopback_agent(url: str):
    from humanclaw_agents.model_config import OpenAICompatibleConfig
    from humanclaw_agents.psv import PSVAgent
    from humanclaw_agents.transports import OpenAICompatibleModel

    config = OpenAICompatibleConfig(
        model="loopback-vlm",
        base_url=url + "/v1",
        api_key_env="HUMANCLAW_LOOPBACK_KEY",
        max_tokens=256,
        temperature=0.0,
        timeout_s=10.0,
    )
    model = OpenAICompatibleModel(config, environ={"HUMANCLAW_LOOPBACK_KEY": "k"})
    return PSVAgent(model=model, retry_backoff_s=())


def _decode_images(body) -> list[np.ndarray]:
    import base64
    import io

    from PIL import Image

    out = []
    for part in body["messages"][0]["content"]:
        if part["type"] == "image_url":
            data = part["image_url"]["url"].split(",", 1)[1]
            out.append(np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")))
    return out


def test_psv_sends_both_pictures_and_the_imagegoal_prompt(monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("openai")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from chat_server import ChatServer, prompt_text

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    replies = iter(
        [
            _planner_reply(0, "Walk<forward><slow>"),
            json.dumps({"verdict": "accept", "reason": "clear", "final_action_id": 0}),
            _planner_reply(1, "Stop/Stand"),
        ]
    )
    rng = np.random.default_rng(1)
    current = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    goal = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    instruction = "Go to the place where the goal picture was taken and stop there."
    with ChatServer(lambda body: next(replies)) as server:
        agent = _loopback_agent(server.url)
        agent.reset({"instruction": instruction})
        obs = {"rgb": current, "goal_rgb": goal}
        walk = agent.act(obs, {"instruction": instruction, "step": 0})
        stop = agent.act(obs, {"instruction": instruction, "step": 1})
        bodies = [r["body"] for r in server.requests]
    assert str(walk.action) == "Walk<forward><slow>" and stop.action.is_stop
    assert len(bodies) == 3  # planner, walk verifier, planner; the Stop is not verified
    planner, verifier, planner2 = bodies
    images = _decode_images(planner)
    assert len(images) == 2
    assert np.array_equal(images[0], current) and np.array_equal(images[1], goal)
    text = prompt_text(planner)
    assert "goal picture" in text and instruction in text
    assert "You check one proposed action" in prompt_text(verifier)
    assert len(_decode_images(verifier)) == 1  # the lane is judged on the current view
    assert np.array_equal(_decode_images(verifier)[0], current)
    assert len(_decode_images(planner2)) == 2


def test_psv_refuses_imagegoal_on_a_one_picture_transport():
    from humanclaw_agents.psv import PSVAgent
    from humanclaw_agents.transports import ModelReply

    class OnePicture:
        def respond(self, prompt, image_rgb, stage):  # pragma: no cover - never reached
            return ModelReply(text="{}")

    agent = PSVAgent(model=OnePicture(), retry_backoff_s=())
    agent.reset({"instruction": "go"})
    image = np.zeros((32, 32, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="two pictures per call.*OnePicture"):
        agent.act({"rgb": image, "goal_rgb": image}, {"instruction": "go", "step": 0})


# ---- the env ------------------------------------------------------------------------------

_ACTIONS = ("Walk<forward><normal>", "Turn<left><30>", "Side step<right><0.3>", "Stop")


def _rollout(env, episode_id: str) -> list[tuple]:
    obs, info = env.reset(options={"episode_id": episode_id})
    out = [({k: v.copy() for k, v in obs.items()}, info)]
    for action in _ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append(({k: v.copy() for k, v in obs.items()}, reward, terminated, truncated, info))
    return out


def test_env_observes_the_view_and_the_goal_picture(split):
    import gymnasium as gym
    from gymnasium import spaces

    from humanclaw_gym.envs import IMAGE_GOAL_ENV_ID
    from humanclaw_gym.envs.image_goal import ImageGoalEnv
    from humanclaw_gym.tasks import ImageGoalTask

    ep = split[0]
    env = gym.make(IMAGE_GOAL_ENV_ID, privileged=True, max_steps=5)
    try:
        assert isinstance(env.unwrapped, ImageGoalEnv)
        assert isinstance(env.unwrapped.task, ImageGoalTask)
        box = spaces.Box(0, 255, (448, 448, 3), dtype=np.uint8)
        assert env.observation_space == spaces.Dict({"rgb": box, "goal_rgb": box})
        run = _rollout(env, ep.episode_id)
        first = run[0][0]
        assert env.observation_space.contains(first)
        (_, expected, _), *_ = _render_goal_views([ep])
        assert np.array_equal(first["goal_rgb"], expected["rgb"])  # the goal picture
        assert not np.array_equal(first["rgb"], first["goal_rgb"])
        for step in run[1:]:  # the goal picture stays, the view changes
            assert np.array_equal(step[0]["goal_rgb"], first["goal_rgb"])
        assert not np.array_equal(run[1][0]["rgb"], first["rgb"])
        assert run[0][1]["instruction"] == ep.instruction
        assert "goal_position" not in run[0][1] and "goal_view" not in run[0][1]
        assert run[-1][2] is True and run[-1][3] is False  # Stop terminates
        state = env.unwrapped.privileged_state()
        assert state.episode == ep
        result = env.unwrapped.evaluate()
        distance = math.dist(state.root_xz, ep.goal_xz)
        assert result == {"success": distance <= 1.0, "distance_m": pytest.approx(distance)}
    finally:
        env.close()


def test_obs_size_applies_to_both_pictures_and_generic_env_is_the_same(split):
    import gymnasium as gym

    ep = split[1]
    small = gym.make("HumanClawImageGoal-v0", obs_size=64, max_steps=5)
    generic = gym.make("HumanClaw-v0", task="image_goal", obs_size=64, max_steps=5)
    try:
        assert small.observation_space["goal_rgb"].shape == (64, 64, 3)
        assert small.observation_space == generic.observation_space
        a, b = _rollout(small, ep.episode_id), _rollout(generic, ep.episode_id)
        assert a[0][0]["goal_rgb"].shape == (64, 64, 3) == a[0][0]["rgb"].shape
        for x, y in zip(a, b, strict=True):  # deterministic: bit for bit, infos equal
            assert all(np.array_equal(x[0][k], y[0][k]) for k in ("rgb", "goal_rgb"))
            assert x[1:] == y[1:]
    finally:
        small.close()
        generic.close()


def test_env_refuses_what_the_task_cannot_take():
    import gymnasium as gym

    from humanclaw_gym.episodes import load_split

    with pytest.raises(ValueError, match="reads task state \\['goal_position'\\]"):
        gym.make("HumanClawImageGoal-v0", sensors=["rgb", "pointgoal"])
    with pytest.raises(ValueError, match="carry their own instruction"):
        gym.make("HumanClawImageGoal-v0", instruction_template="v1")
    with pytest.raises(ValueError, match="plays ImageGoalEpisode records, got Episode"):
        gym.make("HumanClawImageGoal-v0", episodes=load_split("val100")[:1])
    with pytest.raises(ValueError, match="plays the task 'image_goal'"):
        gym.make("HumanClawImageGoal-v0", task="find_nav_interact")
    with pytest.raises(EpisodeFormatError, match="unknown image-goal split 'val100x'"):
        gym.make("HumanClawImageGoal-v0", split="val100x")


# ---- the trackers on crafted trajectories -------------------------------------------------


def _start(**changes):
    from humanclaw_gym.metrics.imagegoal import ImageGoalStart

    fields = dict(
        episode_id="ig_test_000",
        scene_id="hc_val_003",
        start_xz=(0.0, 0.0),
        goal_xz=(3.0, 0.0),
        success_distance_m=1.0,
        geodesic_distance_m=3.0,
        dynamic_ids=(),
        floor_height_m=0.0,
        initial_penetration_m=0.0,
        difficulty="easy",
    )
    fields.update(changes)
    return ImageGoalStart(**fields)


def _score(path_xz, ended_by: str, start=None) -> dict:
    """The nav tracker's fields for a body whose pelvis is at ``path_xz[k]`` after motion
    decision ``k`` (15 frames each; only the last frame of a chunk is a path point)."""
    from humanclaw_gym.metrics.imagegoal import ImageGoalNavMetric
    from humanclaw_gym.metrics.tracker import EpisodeEnd, FrameRecord
    from humanclaw_gym.physics.types import CONTACT_DTYPE
    from humanclaw_gym.skills import Skill

    tracker = ImageGoalNavMetric()
    tracker.on_reset(start or _start())
    for step, (x, z) in enumerate(path_xz):
        for i in range(15):
            realized = np.zeros(75)
            # mid-chunk frames sway 0.3 m sideways: they must not count
            realized[[0, 1, 2]] = (x, 0.9, z) if i == 14 else (x + 0.3, 0.9, z + 0.3)
            tracker.on_frame(
                FrameRecord(
                    step, Skill.WALK, i, i == 14, realized, realized,
                    np.zeros(0, CONTACT_DTYPE), (), np.zeros((0, 3)),
                )
            )  # fmt: skip
    steps = len(path_xz) + (ended_by == "stop")
    return tracker.summary(EpisodeEnd(ended_by, steps, np.zeros((1, 3))))


def test_nav_tracker_scores_success_and_spl_of_crafted_paths():
    straight = _score([(1.0, 0.0), (2.0, 0.0), (2.5, 0.0)], "stop")
    assert straight["success"] is True
    assert straight["distance_to_goal_m"] == pytest.approx(0.5)
    assert straight["path_length_m"] == pytest.approx(2.5)
    assert straight["spl"] == pytest.approx(1.0)  # stopped short inside the radius
    detour = _score([(0.0, 2.0), (3.0, 2.0), (3.0, 0.5)], "stop")
    assert detour["success"] is True
    assert detour["path_length_m"] == pytest.approx(2.0 + 3.0 + 1.5)
    assert detour["spl"] == pytest.approx(3.0 / 6.5)
    short = _score([(1.0, 0.0), (1.9, 0.0)], "stop")
    assert short["success"] is False and short["spl"] == 0.0
    assert short["distance_to_goal_m"] == pytest.approx(1.1)
    cut = _score([(1.0, 0.0), (3.0, 0.0)], "truncated")  # at the goal, but never stopped
    assert cut["success"] is False and cut["spl"] == 0.0
    still = _score([], "stop")  # Stop at the start
    assert still["path_length_m"] == 0.0 and still["distance_to_goal_m"] == pytest.approx(3.0)
    assert still["success"] is False
    assert still["geodesic_distance_m"] == 3.0 and still["success_distance_m"] == 1.0


def test_start_record_refuses_bad_values():
    with pytest.raises(ValueError, match="geodesic_distance_m must be > 0"):
        _start(geodesic_distance_m=0.0)
    with pytest.raises(ValueError, match="goal_xz"):
        _start(goal_xz=(1.0, float("inf")))
    with pytest.raises(ValueError, match="difficulty"):
        _start(difficulty="trivial")
    # the fields shared with the benchmark's EpisodeStart are checked by the same code
    with pytest.raises(ValueError, match="link_names must be non-empty link names"):
        _start(link_names=("pelvis", ""))
    with pytest.raises(ValueError, match="episode_id must be a non-empty string"):
        _start(episode_id="")
    handles = {3: "chair_01"}
    start = _start(object_handles=handles, dynamic_ids=(5, 2))
    handles[3] = "changed"
    assert start.object_handles == {3: "chair_01"} and start.dynamic_ids == (2, 5)


def test_humanclaw_run_psv_on_image_goal_against_a_loopback_server(tmp_path: Path):
    """``humanclaw run --task image_goal --agent psv``: every planner call carries the
    image-goal prompt and both pictures (the current view, then the episode's goal
    picture); the run's metrics count the tokens and the table prints."""
    pytest.importorskip("openai")
    import os
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from chat_server import USAGE, ChatServer, prompt_text

    def reply(body):
        if "You check one proposed action" in prompt_text(body):
            return json.dumps({"verdict": "accept", "reason": "clear", "final_action_id": 0})
        return _planner_reply(0, "Walk<forward><slow>")

    steps = 2
    with ChatServer(reply) as server:
        config = tmp_path / "model.json"
        config.write_text(
            json.dumps(
                {
                    "backend": "openai_compatible",
                    "model": "loopback-vlm",
                    "base_url": server.url + "/v1",
                    "api_key_env": "HUMANCLAW_LOOPBACK_KEY",
                    "max_tokens": 256,
                    "timeout_s": 30,
                }
            )
        )
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env.update({"HUMANCLAW_LOOPBACK_KEY": "k", "NO_PROXY": "127.0.0.1,localhost"})
        out = tmp_path / "run"
        cmd = [
            sys.executable, "-m", "humanclaw_gym", "run", "--task", "image_goal",
            "--episodes", "imagegoal_val100", "--limit", "1", "--agent", "psv",
            "--model-config", str(config), "--max-steps", str(steps), "--metrics",
            "--output", str(out),
        ]  # fmt: skip
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        bodies = [r["body"] for r in server.requests]
    assert "completed 1, skipped 0, failed 0" in proc.stdout
    assert "Main table (task image_goal" in proc.stdout and "SPL" in proc.stdout
    planners = [b for b in bodies if "This task has a goal picture" in prompt_text(b)]
    verifiers = [b for b in bodies if "You check one proposed action" in prompt_text(b)]
    assert len(planners) == len(verifiers) == steps  # planner + walk verifier per step
    (rollout,) = {p.parent for p in out.rglob("goal_rgb.png")}
    from PIL import Image

    goal = np.asarray(Image.open(rollout / "goal_rgb.png").convert("RGB"))
    for body in planners:
        current, shown_goal = _decode_images(body)
        assert np.array_equal(shown_goal, goal) and not np.array_equal(current, goal)
    metrics = json.loads((rollout / "metrics.json").read_text())
    assert metrics["schema"].startswith("humanclaw_image_goal_metrics_v")
    assert metrics["tokens"]["input_tokens"] == USAGE["prompt_tokens"] * 2 * steps
    assert (metrics["ended_by"], metrics["success"], metrics["spl"]) == ("truncated", False, 0.0)


def test_run_selections_and_a_wrong_split_on_the_command_line(tmp_path: Path, split):
    import subprocess
    import sys

    from humanclaw_gym.tasks import resolve_task

    task = resolve_task("image_goal")
    assert task.select_episodes("one") == [(SPLIT, split[0])]
    assert [ep for _, ep in task.select_episodes(SPLIT)] == split
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "humanclaw_gym", "run", "--task", "image_goal",
        "--episodes", "val100", "--agent", "random", "--output", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("humanclaw run: error: unknown image-goal split 'val100'")
    )
    assert not out.exists()


def test_vector_env_of_the_task(split):
    import gymnasium as gym

    envs = gym.make_vec("HumanClawImageGoal-v0", num_envs=2, obs_size=32, max_steps=2)
    try:
        obs, infos = envs.reset(seed=0)
        assert obs["rgb"].shape == obs["goal_rgb"].shape == (2, 32, 32, 3)
        played = set(infos["episode_id"])
        assert len(played) == 2 and played <= {e.episode_id for e in split}
        obs2, _, terminated, truncated, _ = envs.step(["Turn<left><30>", "Stop"])
        assert list(terminated) == [False, True] and not truncated.any()
        assert np.array_equal(obs2["goal_rgb"][0], obs["goal_rgb"][0])
    finally:
        envs.close()
