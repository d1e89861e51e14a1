"""End-to-end tests of HumanClawFindNavInteract-v0 on the embedded defaults."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym import Decision, SkillCall, SkillCallError
from humanclaw_gym.backends.protocols import RenderCapabilities
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.render.tiny_backend import TinyRenderer


@pytest.fixture(scope="module")
def env():
    e = gym.make(ENV_ID, split="val100", max_steps=6)
    yield e
    e.close()


def _first_episode_id() -> str:
    from humanclaw_gym.episodes import load_split

    return load_split("val100")[0].episode_id


def test_reset_observation_and_info(env):
    obs, info = env.reset(seed=0, options={"episode_id": _first_episode_id()})
    assert obs.shape == (448, 448, 3) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    for key in ("instruction", "episode_id", "scene_id", "target_category", "step", "interact"):
        assert key in info
    assert info["step"] == 0
    # never hidden state
    flat = " ".join(map(str, info.keys()))
    assert "position" not in flat and "distance" not in flat
    assert obs.std() > 5.0, "the first ego image should show a scene, not a flat colour"


def test_step_accepts_all_action_forms(env):
    env.reset(options={"episode_id": _first_episode_id()})
    obs, reward, term, trunc, info = env.step(SkillCall.turn("left", 30))
    assert reward == 0.0 and not term and not trunc
    assert info["executed_skill"] == "Turn<left><30>"
    obs, *_, info = env.step("Walk<forward><slow>")
    assert info["executed_skill"] == "Walk<forward><slow>"
    obs, *_, info = env.step(SkillCall.side_step("right", 0.2).to_action())
    assert info["executed_skill"] == "Side step<right><0.2>"
    obs, *_, info = env.step(Decision(SkillCall.step_back(0.2), visible_state="I see a wall."))
    assert info["step"] == 4


def test_stop_terminates_and_limit_truncates(env):
    env.reset(options={"episode_id": _first_episode_id()})
    _, _, term, trunc, _ = env.step(SkillCall.stop())
    assert term and not trunc
    with pytest.raises(RuntimeError):
        env.step(SkillCall.stop())
    env.reset(options={"episode_id": _first_episode_id()})
    for _i in range(6):
        _, _, term, trunc, info = env.step(SkillCall.turn("right", 10))
    assert trunc and not term and info["step"] == 6


def test_invalid_action_changes_nothing():
    eid = _first_episode_id()
    a = gym.make(ENV_ID, split="val100", max_steps=5, privileged=True)
    b = gym.make(ENV_ID, split="val100", max_steps=5, privileged=True)
    try:
        a.reset(options={"episode_id": eid})
        b.reset(options={"episode_id": eid})
        a.step(SkillCall.walk("normal"))
        b.step(SkillCall.walk("normal"))
        for bad in (
            "Turn<left><500>",
            "Walk<backward><fast>",
            {"skill": 2, "angle_deg": float("nan")},
            42,
        ):
            with pytest.raises((SkillCallError, TypeError)):
                a.step(bad)
        obs_a, *_ = a.step(SkillCall.turn("left", 45))
        obs_b, *_ = b.step(SkillCall.turn("left", 45))
        assert np.array_equal(obs_a, obs_b)
        np.testing.assert_array_equal(
            a.unwrapped.privileged_state().realized_frame,
            b.unwrapped.privileged_state().realized_frame,
        )
    finally:
        a.close()
        b.close()


def test_determinism_same_seed_same_actions():
    eid = _first_episode_id()
    actions = [
        SkillCall.walk("fast"),
        SkillCall.turn("left", 60),
        SkillCall.walk("normal"),
        SkillCall.side_step("left", 0.3),
    ]
    runs = []
    for _ in range(2):
        e = gym.make(ENV_ID, split="val100", privileged=True)
        obs, _ = e.reset(seed=3, options={"episode_id": eid})
        frames, images = [], [obs]
        for act in actions:
            obs, *_ = e.step(act)
            images.append(obs)
            frames.append(e.unwrapped.privileged_state().realized_frame)
        runs.append((np.array(frames), np.array(images)))
        e.close()
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_history_independence_a_b_a():
    """Playing another episode in between does not change an episode's trajectory."""
    from humanclaw_gym.episodes import load_split

    eps = load_split("val100")
    a_id, b_id = eps[0].episode_id, eps[1].episode_id
    e = gym.make(ENV_ID, split="val100", privileged=True)
    try:

        def play(eid):
            e.reset(options={"episode_id": eid})
            out = []
            for act in (SkillCall.walk("normal"), SkillCall.turn("right", 30)):
                e.step(act)
                out.append(e.unwrapped.privileged_state().realized_frame)
            return np.array(out)

        first = play(a_id)
        play(b_id)
        again = play(a_id)
        np.testing.assert_array_equal(first, again)
    finally:
        e.close()


def test_privileged_state_refused_by_default(env):
    env.reset(options={"episode_id": _first_episode_id()})
    with pytest.raises(PermissionError):
        env.unwrapped.privileged_state()


def test_close_idempotent_and_after_failed_reset():
    e = gym.make(ENV_ID, split="val100")
    with pytest.raises(ValueError):
        e.reset(options={"episode_id": "does-not-exist"})
    e.close()
    e.close()


def test_render_rgb_array():
    e = gym.make(ENV_ID, split="val100", render_mode="rgb_array", max_steps=2)
    try:
        e.reset(options={"episode_id": _first_episode_id()})
        frame = e.render()
        assert frame.shape == (512, 512, 3) and frame.dtype == np.uint8
    finally:
        e.close()


def test_check_env_passes():
    from gymnasium.utils.env_checker import check_env

    e = gym.make(ENV_ID, split="val100", max_steps=3)
    try:
        check_env(e.unwrapped, skip_render_check=True)
    finally:
        e.close()


def test_unknown_backend_fails_before_building():
    from humanclaw_gym.backends.registry import BackendCapabilityError

    with pytest.raises(BackendCapabilityError, match="physics"):
        gym.make(ENV_ID, split="val100", physics="no-such-engine")


class RgbOnlyRenderer(TinyRenderer):
    """The tiny renderer declaring RGB images only."""

    capabilities = RenderCapabilities(name="rgb-only", modes=frozenset({"rgb"}))


def test_missing_capability_fails_before_building_and_names_it():
    """A render backend without instance images cannot serve the metrics wrapper."""
    from humanclaw_gym.backends import registry
    from humanclaw_gym.backends.registry import BackendCapabilityError
    from humanclaw_gym.wrappers import MetricsWrapper

    registry.register_render("rgb-only", f"{__name__}:RgbOnlyRenderer")
    env = gym.make(ENV_ID, split="val100", renderer="rgb-only", max_steps=2)
    try:
        with pytest.raises(BackendCapabilityError, match="rgb-only.*instance"):
            MetricsWrapper(env)
        assert env.unwrapped._physics is None and env.unwrapped._renderer is None  # nothing built
    finally:
        env.close()


def test_failed_reset_changes_nothing(env):
    """A reset whose episode choice fails (unknown scene or episode) leaves the running
    episode, the episode order and the RNG exactly as they were."""
    base = env.unwrapped
    _, info = env.reset(seed=3)
    first = info["episode_id"]
    env.step(SkillCall.turn("left", 20))
    state = base.np_random.bit_generator.state
    for bad in (
        {"scene_id": "nope"},
        {"episode_id": "nope"},
        {"episode_id": "nope", "scene_id": "x"},
    ):
        with pytest.raises(ValueError, match="nope"):
            env.reset(seed=9, options=bad)
    assert base.np_random.bit_generator.state == state
    _, _, term, trunc, info = env.step(SkillCall.turn("left", 20))  # the episode carries on
    assert (info["episode_id"], info["step"], term, trunc) == (first, 2, False, False)
    expected = [ep.episode_id for ep in base.episodes_for_seed(3)[1:3]]
    played = [env.reset()[1]["episode_id"] for _ in range(2)]
    assert played == expected


def test_reset_options_of_the_wrong_type_say_what_options_must_be(env):
    with pytest.raises(ValueError, match="reset options must be a mapping with keys from"):
        env.reset(options="episode_id")
    with pytest.raises(ValueError, match=r"unknown reset options \['episode'\]"):
        env.reset(options={"episode": "x"})


def test_a_huge_action_text_is_refused_with_a_short_message(env):
    env.reset(options={"episode_id": _first_episode_id()})
    huge = "Turn<left><" + "9" * 1_000_000 + ">"
    with pytest.raises(SkillCallError) as info:
        env.step(huge)
    assert len(str(info.value)) < 2000 and "(1000012 characters)" in str(info.value)
    _, _, _, _, info2 = env.step(SkillCall.turn("left", 30))  # nothing was consumed
    assert info2["step"] == 1
