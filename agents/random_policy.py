"""A seeded random policy: the floor of the benchmark table.

Each decision draws a skill uniformly from the registered skills of the skill table (with
the built-in ones alone, Stop is one of eight, so episodes end by an active stop after about
eight decisions on average; a skill registered by a package of its own joins the draw) and
its parameters uniformly inside the table's ranges. The random stream is seeded per episode
from ``(seed, scene, episode)``, so results do not depend on the order in which episodes are
run or on the worker.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import Choice, Skill, SkillCall

__all__ = ["RandomPolicy"]


class RandomPolicy:
    """Uniform random skills. ``seed`` fixes the whole run; ``allow_stop=False`` never draws
    a terminal skill (Stop/Stand)."""

    def __init__(self, seed: int = 0, allow_stop: bool = True) -> None:
        self.seed = int(seed)
        self.allow_stop = bool(allow_stop)
        self._rng = np.random.default_rng(self.seed)

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        key = f"{self.seed}/{episode_info.get('scene_id')}/{episode_info.get('episode_id')}"
        self._rng = np.random.default_rng(zlib.crc32(key.encode()))

    def _sample(self) -> SkillCall:
        rng = self._rng
        skills = [s for s in Skill if self.allow_stop or not s.spec.terminal]
        skill = skills[int(rng.integers(len(skills)))]
        params: dict[str, Any] = {}
        for name, rule in skill.spec.params.items():  # draws in text order
            if isinstance(rule, Choice):
                if len(rule.values) > 1:
                    params[name] = rule.values[int(rng.integers(len(rule.values)))]
            else:  # degrees to 0.1, metres to 0.01, as a person would type them
                digits = 1 if rule.unit == "deg" else 2
                params[name] = round(float(rng.uniform(rule.low, rule.high)), digits)
        return SkillCall(skill, **params)

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision:
        call = self._sample()
        return Decision(action=call, visible_state=None, extras={"policy": "random"})
