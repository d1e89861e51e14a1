"""A seeded random policy: the floor of the benchmark table.

Each decision draws a skill uniformly from the 8 skills (Stop included, so episodes end by
an active stop after about 8 decisions on average) and its parameters uniformly inside the
documented ranges. The random stream is seeded per episode from ``(seed, scene, episode)``,
so results do not depend on the order in which episodes are run or on the worker.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import (
    DIRECTIONS,
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_HEIGHT_RANGE_M,
    SPEEDS,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    Skill,
    SkillCall,
)

__all__ = ["RandomPolicy"]


class RandomPolicy:
    """Uniform random skills. ``seed`` fixes the whole run; ``allow_stop=False`` never stops."""

    def __init__(self, seed: int = 0, allow_stop: bool = True) -> None:
        self.seed = int(seed)
        self.allow_stop = bool(allow_stop)
        self._rng = np.random.default_rng(self.seed)

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        key = f"{self.seed}/{episode_info.get('scene_id')}/{episode_info.get('episode_id')}"
        self._rng = np.random.default_rng(zlib.crc32(key.encode()))

    def _sample(self) -> SkillCall:
        rng = self._rng
        skills = [s for s in Skill if self.allow_stop or s is not Skill.STOP]
        skill = skills[int(rng.integers(len(skills)))]
        if skill is Skill.WALK:
            return SkillCall.walk(SPEEDS[int(rng.integers(3))])
        if skill is Skill.STOP:
            return SkillCall.stop()
        if skill is Skill.TURN:
            lo, hi = TURN_ANGLE_RANGE_DEG
            return SkillCall.turn(
                DIRECTIONS[int(rng.integers(2))], round(float(rng.uniform(lo, hi)), 1)
            )
        if skill is Skill.CLIMB_UP:
            return SkillCall.climb_up()
        if skill is Skill.SIT:
            lo, hi = SIT_HEIGHT_RANGE_M
            return SkillCall.sit(round(float(rng.uniform(lo, hi)), 2))
        if skill is Skill.STEP_BACK:
            lo, hi = STEP_BACK_DISTANCE_RANGE_M
            return SkillCall.step_back(round(float(rng.uniform(lo, hi)), 2))
        if skill is Skill.SIDE_STEP:
            lo, hi = SIDE_STEP_DISTANCE_RANGE_M
            return SkillCall.side_step(
                DIRECTIONS[int(rng.integers(2))], round(float(rng.uniform(lo, hi)), 2)
            )
        return SkillCall.climb_down()

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision:
        call = self._sample()
        return Decision(action=call, visible_state=None, extras={"policy": "random"})
