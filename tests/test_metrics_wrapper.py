"""MetricsWrapper on the real env: what it asks for, when it reports, what it writes."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym import Decision, SkillCall, Usage
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.wrappers import MetricsWrapper, TrajectoryWrapper


def _first_episode():
    from humanclaw_gym.episodes import load_split

    return load_split("val100")[0]


def test_no_metric_work_without_the_wrapper():
    env = gym.make(ENV_ID, split="val100", max_steps=2)
    try:
        env.reset(seed=0)
        calls = {"contacts": 0, "instance": 0}
        physics, renderer = env.unwrapped._physics, env.unwrapped._renderer
        orig_contacts, orig_render = physics.contacts, renderer.render

        def contacts():
            calls["contacts"] += 1
            return orig_contacts()

        def render(camera, modes=frozenset({"rgb"})):
            calls["instance"] += int("instance" in modes)
            return orig_render(camera, modes)

        physics.contacts, renderer.render = contacts, render
        env.step(SkillCall.walk("normal"))
        assert calls == {"contacts": 0, "instance": 0}
    finally:
        env.close()


def test_metrics_at_episode_end_only(tmp_path):
    ep = _first_episode()
    env = MetricsWrapper(gym.make(ENV_ID, split="val100", max_steps=3), tmp_path)
    try:
        env.reset(options={"episode_id": ep.episode_id})
        usage = (Usage("planner", 1, 1000, 50, 20),)
        _, _, term, trunc, info = env.step(Decision(SkillCall.turn("left", 30), "A wall.", usage))
        assert "metrics" not in info and not list(tmp_path.rglob("metrics.json"))
        _, _, term, trunc, info = env.step(Decision(SkillCall.stop(), "No chair here.", usage))
        assert term
        m = info["metrics"]
        assert m["schema"] == "humanclaw_metrics_v2" and m["rules"] == "paper"
        # a plain turn in the open tracks its command: no anomaly, a few degrees at most
        assert m["motion_anomaly"] == 0 and 0.0 < m["max_joint_tracking_error_deg"] < 30.0
        assert m["episode_id"] == ep.episode_id and m["steps"] == 2 and m["active_stop"] is True
        assert m["find_success"] is False  # "No chair here." is a negated claim
        assert m["final_distance_m"] > 0.2 and m["nav_success_20cm"] is False
        assert m["tokens"]["input_tokens"] == 2000 and m["tokens"]["reasoning_tokens"] == 40
        assert env.last_metrics_path == tmp_path / f"0000_{ep.scene_id}_{ep.episode_id}" / (
            "metrics.json"
        )
        on_disk = json.loads(env.last_metrics_path.read_text())
        assert on_disk == json.loads(json.dumps(m))
    finally:
        env.close()


def test_truncated_episode_is_not_an_active_stop(tmp_path):
    env = MetricsWrapper(
        TrajectoryWrapper(gym.make(ENV_ID, split="val100", max_steps=2), tmp_path / "t")
    )
    try:
        env.reset(seed=1)
        env.step(SkillCall.walk("slow"))
        _, _, term, trunc, info = env.step(SkillCall.walk("slow"))
        assert trunc and not term
        m = info["metrics"]
        assert m["active_stop"] is False and m["nav_success_1m"] is False
        assert m["motion_jerk_m_s3"] is not None and np.isfinite(m["motion_jerk_m_s3"])
        assert m["motion_steps"] == 2
    finally:
        env.close()


def test_episode_with_an_exception_writes_no_metrics(tmp_path):
    env = MetricsWrapper(gym.make(ENV_ID, split="val100", max_steps=3), tmp_path)
    base = env.unwrapped
    try:
        env.reset(seed=0)

        def broken(call):
            raise RuntimeError("motion backend failure")

        base._motion.generate = broken
        with pytest.raises(RuntimeError, match="motion backend failure"):
            env.step(SkillCall.walk("slow"))
        assert not list(tmp_path.rglob("metrics.json"))
    finally:
        env.close()


def test_every_episode_keeps_its_metrics_file(tmp_path):
    """Two episodes through one wrapper give two files, and `humanclaw metrics` counts both
    (the wrapper used to overwrite one metrics.json); the same episode again is a second
    rollout, not a duplicate."""
    from humanclaw_gym.cli.metrics_cmd import main as metrics_main
    from humanclaw_gym.metrics import aggregate_metric_files

    episodes = _first_two_episodes()
    env = MetricsWrapper(gym.make(ENV_ID, split="val100", max_steps=2), tmp_path, rules="strict")
    try:
        for ep in (*episodes, episodes[0]):
            env.reset(options={"episode_id": ep.episode_id})
            _, _, term, _, info = env.step(SkillCall.stop())
            assert term and info["metrics"]["rules"] == "strict"
    finally:
        env.close()
    files = sorted(tmp_path.rglob("metrics.json"))
    assert len(files) == 3
    rollouts = sorted(
        (json.loads(f.read_text())["episode_id"], json.loads(f.read_text())["rollout_index"])
        for f in files
    )
    assert rollouts == sorted(
        [(episodes[0].episode_id, 0), (episodes[1].episode_id, 0), (episodes[0].episode_id, 1)]
    )
    summary = aggregate_metric_files(tmp_path)
    assert summary["counts"]["episodes"] == 3 and summary["rules"] == "strict"
    assert metrics_main([str(tmp_path)]) == 0


def test_paper_rules_fall_back_to_the_lowest_body_point_without_a_floor_hit(tmp_path):
    ep = _first_episode()
    env = gym.make(ENV_ID, split="val100", max_steps=2)
    base = env.unwrapped
    sim = base._sim
    sim.spawn_floor_y = lambda x, z: (None, sim.body_lowest_y())  # the ray finds no floor
    paper = MetricsWrapper(env, rules="paper")
    try:
        paper.reset(options={"episode_id": ep.episode_id})
        _, _, _, _, info = paper.step(SkillCall.stop())
        assert info["metrics"]["floor_source"] == "body_lowest_point_fallback"
        paper.detach()
        strict = MetricsWrapper(env, rules="strict")
        with pytest.raises(ValueError, match="no floor under the spawn"):
            strict.reset(options={"episode_id": ep.episode_id})
    finally:
        env.close()


def _first_two_episodes():
    from humanclaw_gym.episodes import load_split

    return load_split("val100")[:2]
