"""Vector env: sharding, autoreset across an episode boundary, Gymnasium wrappers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym import SkillCall
from humanclaw_gym.envs import ENV_ID


def _batched(call: SkillCall, n: int) -> dict:
    one = call.to_action()
    return {k: np.stack([np.asarray(v)] * n) for k, v in one.items()}


def test_sync_vector_through_episode_boundary():
    envs = gym.make_vec(ENV_ID, num_envs=2, split="val100", max_steps=2)
    try:
        obs, infos = envs.reset(seed=0)
        assert obs.shape == (2, 448, 448, 3)
        first_ids = list(infos["episode_id"])
        assert first_ids[0] != first_ids[1]
        act = _batched(SkillCall.turn("left", 20), 2)
        _, _, term, trunc, infos = envs.step(act)
        assert not trunc.any()
        _, _, term, trunc, infos = envs.step(act)
        assert trunc.all() and not term.any()
        # NEXT_STEP autoreset: this step resets both sub-envs and ignores the action
        obs, rew, term, trunc, infos = envs.step(act)
        assert (infos["step"] == 0).all()
        second_ids = list(infos["episode_id"])
        assert set(second_ids).isdisjoint(first_ids)
    finally:
        envs.close()


def test_vector_shards_are_disjoint_and_cover():
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

    shards = [FindNavInteractEnv(split="val100", num_shards=3, shard_index=i) for i in range(3)]
    ids = [[e.episode_id for e in s.episodes] for s in shards]
    flat = [i for s in ids for i in s]
    assert len(flat) == len(set(flat)) == 100
    for s in shards:
        s.close()


def test_gymnasium_sync_mode_shards_by_seed():
    envs = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync", split="val100", num_shards=2)
    try:
        _, infos = envs.reset(seed=4)
        subs = envs.envs
        a = {e.episode_id for e in subs[0].unwrapped.episodes_for_seed(4)}
        b = {e.episode_id for e in subs[1].unwrapped.episodes_for_seed(5)}
        assert a.isdisjoint(b) and len(a | b) == 100
        assert infos["episode_id"][0] != infos["episode_id"][1]
    finally:
        envs.close()


def test_async_vector_env_steps():
    envs = gym.make_vec(ENV_ID, num_envs=2, split="val100", max_steps=3, mode="async")
    try:
        obs, infos = envs.reset(seed=1)
        assert obs.shape == (2, 448, 448, 3)
        obs, *_, infos = envs.step(_batched(SkillCall.walk("slow"), 2))
        assert (infos["step"] == 1).all()
        assert isinstance(infos["instruction"][0], str)
    finally:
        envs.close()


def test_gymnasium_record_episode_statistics_and_video(tmp_path):
    env = gym.make(ENV_ID, split="val100", max_steps=2, render_mode="rgb_array")
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = gym.wrappers.RecordVideo(
        env, str(tmp_path), episode_trigger=lambda i: True, disable_logger=True
    )
    try:
        env.reset(seed=0)
        info = {}
        for _ in range(2):
            _, _, term, trunc, info = env.step(SkillCall.turn("left", 15))
        assert trunc
        assert info["episode"]["l"] == 2
    finally:
        env.close()
    assert list(tmp_path.glob("*.mp4"))


@pytest.mark.parametrize("bad", [0, -1])
def test_bad_num_envs(bad):
    with pytest.raises(ValueError):
        gym.make_vec(ENV_ID, num_envs=bad, split="val100")
