"""Image-goal navigation with any body the env simulates.

``Simulation.render_at`` (the goal picture, rendered at reset) drew only the built-in body
and refused ``body_asset=`` / ``body_model_dir=``, so ``HumanClawImageGoal-v0`` could not
run with a body asset. It now poses the body in its standing frame at the goal and places
the camera as the body's own ego camera: rendered at the start pose, the goal picture is
the ego view of the reset.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401  (registers the envs)
from humanclaw_gym.skills import SkillCall

ENV = "HumanClawImageGoal-v0"


@pytest.fixture(scope="module")
def body_asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from humanclaw_gym.body.synthetic import write_synthetic_body_asset

    return write_synthetic_body_asset(tmp_path_factory.mktemp("asset") / "merged")


@pytest.fixture(scope="module")
def body_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("smplx")
    from smplx_synthetic import write_synthetic_smplx

    directory = tmp_path_factory.mktemp("smplx_body")
    write_synthetic_smplx(directory, (0.01, -0.35, 0.02))
    return directory


def _near(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(fraction of pixels that differ, mean absolute difference)."""
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return float(np.any(d > 0, axis=-1).mean()), float(d.mean())


def _goal_at_start_is_the_ego_view(**body: object) -> np.ndarray:
    """Reset, render the goal camera at the episode's start pose, compare it with the ego
    observation; returns the goal picture of the reset."""
    env = gym.make(ENV, **body)
    try:
        obs, _ = env.reset(seed=0)
        sim = env.unwrapped.simulation
        episode = env.unwrapped.task.episode
        at_start = sim.render_at(
            np.array(episode.start_position), episode.start_yaw_rad, "ego", 448
        )
        differ, mean = _near(np.asarray(at_start["rgb"]), obs["rgb"])
        # the same camera on the same body: equal but for the realized pose's last bits
        assert differ < 0.005 and mean < 0.1, (differ, mean)
        # nothing simulated changed: the ordinary view is drawn as before
        again = sim.render("ego", 448)
        np.testing.assert_array_equal(np.asarray(again["rgb"]), obs["rgb"])
        exo = sim.render_at(np.array(episode.goal_position), episode.goal_yaw_rad, "exo", 96)
        assert np.asarray(exo["rgb"]).shape == (96, 96, 3)
        return obs["goal_rgb"].copy()
    finally:
        env.close()


def test_image_goal_runs_with_a_body_asset(body_asset: Path) -> None:
    """It raised ``ValueError: render_at() draws the built-in body only`` at reset."""
    env = gym.make(ENV, body_asset=str(body_asset), max_steps=2)
    try:
        obs, _ = env.reset(seed=0)
        goal = obs["goal_rgb"]
        assert goal.shape == (448, 448, 3) and goal.dtype == np.uint8
        assert float(goal.std()) > 10.0  # a view of the room, not a blank image
        obs, _, terminated, truncated, _ = env.step(SkillCall.walk("normal"))
        np.testing.assert_array_equal(obs["goal_rgb"], goal)  # the same picture all episode
        obs2, _ = env.reset(seed=0)
        np.testing.assert_array_equal(obs2["goal_rgb"], goal)  # deterministic
    finally:
        env.close()


def test_the_goal_picture_is_the_body_asset_s_own_ego_camera(body_asset: Path) -> None:
    asset_goal = _goal_at_start_is_the_ego_view(body_asset=str(body_asset))
    builtin_goal = _goal_at_start_is_the_ego_view()
    # the asset's camera sits on its own head: another picture than the built-in body's
    assert _near(asset_goal, builtin_goal)[0] > 0.5


def test_the_goal_picture_with_a_smplx_body_model(body_model_dir: Path) -> None:
    mesh_goal = _goal_at_start_is_the_ego_view(body_model_dir=str(body_model_dir))
    assert mesh_goal.shape == (448, 448, 3) and float(mesh_goal.std()) > 10.0
