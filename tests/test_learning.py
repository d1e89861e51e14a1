"""Learning libraries plug in without glue: action adapters, observation options, vector
envs with per-sub-env action lists, fork-safe async workers, SB3's checker."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym import Decision, Skill, SkillCall, SkillCallError
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.sensors import EgoDepthSensor, EgoRGBSensor, TargetMaskSensor
from humanclaw_gym.skills import SkillCallTypeError
from humanclaw_gym.wrappers import (
    DiscreteSkills,
    GeodesicProgressReward,
    MultiDiscreteSkills,
    skill_menu,
)

needs_sb3 = pytest.mark.skipif(
    importlib.util.find_spec("stable_baselines3") is None,
    reason="stable-baselines3 is not installed (pip install 'humanclaw-gym[rl]')",
)


class _CountingRenders:
    """Counts the renderer's render calls (and the image sizes asked for)."""

    def __init__(self, env: gym.Env) -> None:
        renderer = env.unwrapped.simulation.renderer
        self.calls: list[tuple[int, bool, bool]] = []
        original = renderer.render

        def render(camera, modes=frozenset({"rgb"})):
            self.calls.append((camera.width, "instance" in modes, "depth" in modes))
            return original(camera, modes)

        renderer.render = render


# ----------------------------------------------------------------------------------------
# observation options
# ----------------------------------------------------------------------------------------
def test_default_observation_is_still_the_448_rgb_box():
    env = gym.make(ENV_ID, split="val100")
    try:
        assert env.observation_space == spaces.Box(0, 255, (448, 448, 3), np.uint8)
        assert env.unwrapped.sensors == (EgoRGBSensor(),)
    finally:
        env.close()


def test_obs_size_renders_the_ego_camera_directly_at_that_size():
    env = gym.make(ENV_ID, split="val100", obs_size=84, max_steps=3)
    try:
        assert env.observation_space == spaces.Box(0, 255, (84, 84, 3), np.uint8)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (84, 84, 3) and obs.std() > 5
        spy = _CountingRenders(env)
        obs, *_ = env.step("Turn<left><30>")
        assert obs.shape == (84, 84, 3)
        assert spy.calls == [(84, False, False)]  # one 84 px render, nothing resized
    finally:
        env.close()
    env = gym.make(ENV_ID, split="val100", obs_size=84)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_rgbd_is_a_dict_from_one_render_pass_and_passes_check_env():
    env = gym.make(ENV_ID, split="val100", obs_size=84, obs_mode="rgbd", max_steps=3)
    try:
        assert env.observation_space == spaces.Dict(
            {
                "rgb": spaces.Box(0, 255, (84, 84, 3), np.uint8),
                "depth": spaces.Box(0.0, 50.0, (84, 84, 1), np.float32),
            }
        )
        obs, _ = env.reset(seed=0)
        spy = _CountingRenders(env)
        obs, *_ = env.step("Walk<forward><slow>")
        assert spy.calls == [(84, False, True)]  # rgb and depth of the same pass
        depth = obs["depth"]
        assert depth.dtype == np.float32 and depth.shape == (84, 84, 1)
        assert 0.05 <= depth.min() and depth.max() <= 50.0
        assert 0.3 < np.median(depth) < 15.0  # a room: metres, not a [0, 1] buffer
        # the same RGB as a plain RGB env at that size
        plain = gym.make(ENV_ID, split="val100", obs_size=84, max_steps=3)
        try:
            p_obs, _ = plain.reset(seed=0)
            p_obs, *_ = plain.step("Walk<forward><slow>")
            np.testing.assert_array_equal(p_obs, obs["rgb"])
        finally:
            plain.close()
    finally:
        env.close()
    env = gym.make(ENV_ID, split="val100", obs_size=84, obs_mode="rgbd")
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_target_mask_is_privileged_and_marks_the_target_instances():
    with pytest.raises(PermissionError, match="privileged=True"):
        gym.make(ENV_ID, split="val100", obs_mode="rgb+instance")
    with pytest.raises(PermissionError, match="privileged=True"):
        gym.make(ENV_ID, split="val100", sensors=[EgoRGBSensor(), TargetMaskSensor()])
    env = gym.make(ENV_ID, split="val100", obs_size=112, obs_mode="rgb+instance", privileged=True)
    try:
        shown = 0
        for episode in env.unwrapped.episodes[:40]:  # until a target is in view at the start
            obs, _ = env.reset(options={"episode_id": episode.episode_id})
            mask = obs["target_mask"]
            assert mask.shape == (112, 112, 1) and mask.dtype == np.uint8
            # exactly the pixels of the target instances in the instance image of that view
            targets = [int(g.object_id) for g in episode.goals]
            ids = env.unwrapped.simulation.render("ego", 112, ("rgb", "instance")).instance
            np.testing.assert_array_equal(mask[..., 0], np.isin(ids, targets).astype(np.uint8))
            shown = int(mask.sum())
            if shown > 100:
                break
        assert 100 < shown < 112 * 112, "no target in view at the start of 40 episodes"
    finally:
        env.close()


def test_obs_options_are_checked():
    with pytest.raises(ValueError, match="obs_mode='depth' is invalid"):
        gym.make(ENV_ID, split="val100", obs_mode="depth")
    with pytest.raises(ValueError, match="obs_size=8 is out of range"):
        gym.make(ENV_ID, split="val100", obs_size=8)
    with pytest.raises(ValueError, match="not both"):
        gym.make(ENV_ID, split="val100", obs_size=84, sensors=[EgoDepthSensor()])


# ----------------------------------------------------------------------------------------
# action adapters
# ----------------------------------------------------------------------------------------
class _RecordingEnv(gym.Env):
    """Stands in for the HumanClaw env: records the actions it receives."""

    observation_space = spaces.Box(0, 255, (4, 4, 3), np.uint8)

    def __init__(self) -> None:
        from humanclaw_gym.envs.vector import skill_action_space

        self.action_space = skill_action_space()
        self.received: list = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros((4, 4, 3), np.uint8), {"step": 0}

    def step(self, action):
        self.received.append(action)
        return np.zeros((4, 4, 3), np.uint8), 0.0, False, False, {}


def test_default_menu_covers_every_skill_and_round_trips():
    menu = skill_menu()
    assert {call.skill for call in menu} == set(Skill)
    assert len(menu) == 24 and len(set(menu)) == 24
    texts = [str(c) for c in menu]
    for expected in ("Turn<left><65>", "Side step<right><0.3>", "Sit down<0.5>", "Stop/Stand"):
        assert expected in texts
    env = DiscreteSkills(_RecordingEnv())
    assert env.action_space == spaces.Discrete(24)
    _, info = env.reset(seed=0)
    assert info["action_menu"] == tuple(texts)
    for i in range(24):
        assert env.from_skill_call(env.to_skill_call(i)) == i
        env.step(np.int64(i))
        assert env.env.received[-1] == menu[i]  # the env gets the SkillCall
    with pytest.raises(SkillCallError, match="not on the menu"):
        env.from_skill_call("Turn<left><30>")
    for bad in (24, -1, 1.5, True, np.array([1, 2])):
        with pytest.raises(SkillCallError, match="action"):
            env.step(bad)


def test_user_menu_and_its_errors():
    env = DiscreteSkills(_RecordingEnv(), menu=["Turn<left><30>", SkillCall.walk("fast")])
    assert env.action_space == spaces.Discrete(2)
    assert env.to_skill_call(0) == SkillCall.turn("left", 30)
    with pytest.raises(ValueError, match="repeats menu"):
        DiscreteSkills(_RecordingEnv(), menu=["Stop/Stand", SkillCall.stop()])
    with pytest.raises(SkillCallError, match=r"menu\[1\]"):
        DiscreteSkills(_RecordingEnv(), menu=["Stop/Stand", "Turn<left><500>"])
    with pytest.raises(ValueError, match="at least one"):
        DiscreteSkills(_RecordingEnv(), menu=[])


def test_multidiscrete_samples_are_valid_and_round_trip():
    env = MultiDiscreteSkills(_RecordingEnv(), bins=5)
    assert env.dims == (
        "skill", "speed", "direction", "angle_deg", "step_back_m", "side_step_m", "height_m",
    )  # fmt: skip
    assert env.action_space == spaces.MultiDiscrete([8, 3, 2, 5, 5, 5, 5])
    assert env.grids[3] == (10.0, 37.5, 65.0, 92.5, 120.0)
    _, info = env.reset(seed=0)
    assert info["action_menu"]["angle_deg"] == env.grids[3]
    env.action_space.seed(0)
    seen = set()
    for _ in range(300):
        call = env.to_skill_call(env.action_space.sample())
        seen.add(call.skill)
        assert env.to_skill_call(env.from_skill_call(call)) == call
    assert seen == set(Skill)
    assert str(env.to_skill_call([2, 0, 1, 4, 0, 0, 0])) == "Turn<right><120>"
    with pytest.raises(SkillCallError, match="not on the grid"):
        env.from_skill_call("Turn<left><30>")
    with pytest.raises(SkillCallError, match="angle_deg"):
        env.to_skill_call([2, 0, 1, 5, 0, 0, 0])
    with pytest.raises(SkillCallError, match="shape"):
        env.to_skill_call([2, 0, 1])


@needs_sb3
@pytest.mark.parametrize("adapter", [DiscreteSkills, MultiDiscreteSkills])
def test_sb3_check_env_passes_without_warnings(adapter):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    base = gym.make(ENV_ID, split="val100", obs_size=84, privileged=True, max_steps=5)
    env = adapter(GeodesicProgressReward(base))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sb3_check_env(env)
        assert [str(w.message) for w in caught] == []
    finally:
        env.close()


# ----------------------------------------------------------------------------------------
# invalid actions: one exception type
# ----------------------------------------------------------------------------------------
def test_wrong_action_types_raise_skillcallerror_before_anything_changes():
    env = gym.make(ENV_ID, split="val100", max_steps=3)
    try:
        env.reset(seed=0)
        for bad in (42, None, 3.5, ["Stop/Stand"], np.int64(2)):
            with pytest.raises(SkillCallError) as info:
                env.step(bad)
            assert isinstance(info.value, TypeError)  # still the usual Python signal
            assert isinstance(info.value, SkillCallTypeError) and info.value.field == "action"
        _, _, _, _, info = env.step("Turn<left><30>")
        assert info["step"] == 1
    finally:
        env.close()


# ----------------------------------------------------------------------------------------
# vector envs
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["entry_point", "sync"])
def test_vector_env_takes_a_list_of_actions(mode):
    kwargs = {"vectorization_mode": "sync", "num_shards": 2} if mode == "sync" else {}
    envs = gym.make_vec(ENV_ID, num_envs=2, split="val100", max_steps=5, **kwargs)
    try:
        envs.reset(seed=0)
        _, _, _, _, info = envs.step([SkillCall.turn("left", 30), "Walk<forward><slow>"])
        assert list(info["executed_skill"]) == ["Turn<left><30>", "Walk<forward><slow>"]
        _, _, _, _, info = envs.step(
            (Decision(SkillCall.walk("fast"), visible_state="a door"), "Side step<left><0.2>")
        )
        assert list(info["executed_skill"]) == ["Walk<forward><fast>", "Side step<left><0.2>"]
        # the batched Dict still works
        batched = {
            k: np.stack([np.asarray(v)] * 2)
            for k, v in SkillCall.turn("right", 20).to_action().items()
        }
        _, _, _, _, info = envs.step(batched)
        assert list(info["step"]) == [3, 3]
        # every entry is checked before any sub-env steps
        with pytest.raises(SkillCallError, match=r"actions\[1\].*angle_deg"):
            envs.step(["Walk<forward><slow>", "Turn<left><500>"])
        with pytest.raises(SkillCallError, match=r"actions\[0\]"):
            envs.step([42, "Walk<forward><slow>"])
        with pytest.raises(ValueError, match="one action per sub-env"):
            envs.step(["Walk<forward><slow>"])
        _, _, _, _, info = envs.step(["Stop/Stand", "Stop/Stand"])
        assert list(info["step"]) == [4, 4]
    finally:
        envs.close()


# ----------------------------------------------------------------------------------------
# async workers after the parent rendered (the deadlock of issue 16)
# ----------------------------------------------------------------------------------------
_MESA_VARIABLES = ("LP_NUM_THREADS", "MESA_SHADER_CACHE_DISABLE")
_DEADLOCK_SEQUENCE = textwrap.dedent(
    """
    import gymnasium as gym
    import humanclaw_gym

    env = gym.make("HumanClawFindNavInteract-v0", split="val100")
    env.reset()
    env.step("Turn<left><30>")
    env.close()
    envs = gym.make_vec(
        "HumanClawFindNavInteract-v0", num_envs=2, vectorization_mode="async", split="val100"
    )
    obs, info = envs.reset(seed=0)
    assert obs.shape == (2, 448, 448, 3) and obs.std() > 5, obs.std()
    obs, *_ = envs.step(["Walk<forward><slow>", "Turn<left><30>"])
    print("renderers", sorted(set(envs.get_attr("backend_info")[i]["renderer"] for i in range(2))))
    envs.close()
    print("done")
    """
)


def test_async_workers_start_after_the_parent_rendered():
    """Make an env, reset, step, close; then Gymnasium's own async vector env (forked
    workers) must reset and step instead of hanging on the parent's GL state."""
    env = {k: v for k, v in os.environ.items() if k not in _MESA_VARIABLES}  # the defaults
    try:
        out = subprocess.run(
            [sys.executable, "-c", _DEADLOCK_SEQUENCE],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:  # the old behaviour: workers wait forever
        raise AssertionError("async vector env workers hung after the parent rendered") from exc
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("done")
    if _moderngl_available():
        assert "renderers ['moderngl']" in out.stdout  # the workers needed no fallback


def _moderngl_available() -> bool:
    try:
        from humanclaw_gym.render import ModernglRenderer

        ModernglRenderer().close()
    except Exception:
        return False
    return True


_THREADED_PARENT = textwrap.dedent(
    """
    import multiprocessing as mp
    import os
    os.environ["LP_NUM_THREADS"] = "2"      # a parent whose Mesa keeps render threads
    from humanclaw_gym.render import ModernglRenderer, RenderBackendUnavailable

    ModernglRenderer().close()

    def child(queue):
        try:
            ModernglRenderer().close()
            queue.put("built")
        except RenderBackendUnavailable as exc:
            queue.put("refused: " + str(exc))

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    print(queue.get(timeout=60))
    proc.join(30)
    """
)


def test_renderer_in_a_fork_of_a_threaded_gl_parent_refuses_instead_of_hanging():
    if not _moderngl_available():
        pytest.skip("moderngl renderer unavailable here")
    out = subprocess.run(
        [sys.executable, "-c", _THREADED_PARENT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused: this process was forked from process" in out.stdout
    assert "spawn" in out.stdout
