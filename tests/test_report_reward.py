"""The HTML rollout report and the shaped-reward wrapper."""

from __future__ import annotations

import gymnasium as gym
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym import SkillCall
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, rollout_dir, run_batch
from humanclaw_gym.wrappers import GeodesicProgressReward


def test_report_html_from_a_rollout(tmp_path):
    from humanclaw_gym.cli import main

    spec = list_episode_specs("val100")[0]
    config = RunConfig(agent="random", output=str(tmp_path), metrics=True, max_steps=3, seed=2)
    assert run_batch([spec], config, progress=False).completed == 1
    d = rollout_dir(tmp_path, spec)
    assert (d / "final_ego.png").is_file()
    assert main(["report", "--rollout-dir", str(d)]) == 0
    page = (d / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 2  # map + at least one ego view
    assert "nav_success_20cm" in page and spec.episode_id in page
    # every decision appears as a row
    assert page.count("<td class='n'>") >= 1


def test_report_refuses_missing_bundle(tmp_path):
    from humanclaw_gym.cli import main

    assert main(["report", "--rollout-dir", str(tmp_path)]) == 1


def test_shaped_reward_needs_privileged_env():
    env = gym.make(ENV_ID, split="val100", max_steps=2)
    try:
        with pytest.raises(PermissionError):
            GeodesicProgressReward(env)
    finally:
        env.close()


def test_shaped_reward_follows_geodesic_progress():
    from humanclaw_agents.oracle import OraclePolicy

    env = GeodesicProgressReward(gym.make(ENV_ID, split="val100", privileged=True, max_steps=6))
    oracle = OraclePolicy()
    oracle.attach_env(env)
    try:
        obs, info = env.reset(seed=0)
        oracle.reset(info)
        total_progress = 0.0
        for _ in range(6):
            decision = oracle.act(obs, info)
            if decision.action.is_stop:
                break
            obs, reward, term, trunc, info = env.step(decision)
            terms = info["shaped_reward_terms"]
            assert reward == pytest.approx(sum(terms.values()))
            assert terms["step"] == pytest.approx(-0.01)
            total_progress += terms["progress"]
            if term or trunc:
                break
        assert total_progress > 0.3, (
            "following the shortest path should reduce the geodesic distance"
        )
        # a Stop far from the target is penalised
        env.reset(seed=0)
        _, reward, term, _, info = env.step(SkillCall.stop())
        assert term and info["shaped_reward_terms"]["stop"] == pytest.approx(-1.0)
    finally:
        env.close()
