"""A custom planner in a dozen lines: turn until the image centre is bright, then walk.

    python scripts/custom_planner.py --episodes 3

Any object with ``reset(episode_info)`` and ``act(observation, info)`` is a policy; the same
class runs under ``humanclaw run --agent scripts.custom_planner:BrightnessPlanner`` (from the
repository root: ``--agent`` modules are looked up in the current directory first) and in
the benchmark server driver.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import tyro

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym import Decision, SkillCall
from humanclaw_gym.evaluation import run_episode


class BrightnessPlanner:
    """Walks toward open, bright space; stops after ``budget`` decisions."""

    def __init__(self, budget: int = 12) -> None:
        self.budget = budget

    def reset(self, episode_info):
        self.steps = 0

    def act(self, observation: np.ndarray, info) -> Decision:
        self.steps += 1
        if self.steps >= self.budget:
            return Decision(SkillCall.stop(), visible_state="I could not find it.")
        centre = observation[150:300, 150:300].mean()
        if centre < 110:  # something dark and close ahead: look elsewhere
            return Decision(SkillCall.turn("left", 45))
        return Decision(SkillCall.walk("normal"))


@dataclass
class Args:
    episodes: int = 3
    """how many val100 episodes to run"""


def main(args: Args) -> None:
    env = gym.make("HumanClawFindNavInteract-v0", split="val100")
    policy = BrightnessPlanner()
    for _ in range(args.episodes):
        result = run_episode(env, policy)
        print(f"{result.episode_id}: {result.ended_by} after {result.steps} steps")
    env.close()


if __name__ == "__main__":
    main(tyro.cli(Args))
