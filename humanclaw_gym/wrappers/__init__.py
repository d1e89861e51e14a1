"""Gymnasium wrappers: paper metrics, ego/exo video, trajectory (replay) recording, a
shaped reward for learning, and discrete action adapters for RL libraries
(:class:`DiscreteSkills`, :class:`MultiDiscreteSkills`). They compose in any order with each other and with Gymnasium's
own wrappers; each one talks to the env only through the observer API
(:mod:`humanclaw_gym.envs.events`) and asks only for what it needs.

Imports are lazy: ``import humanclaw_gym.wrappers`` loads no encoder or simulator.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "MetricsWrapper": "humanclaw_gym.wrappers.metrics",
    "VideoWrapper": "humanclaw_gym.wrappers.video",
    "TrajectoryWrapper": "humanclaw_gym.wrappers.trajectory",
    "GeodesicProgressReward": "humanclaw_gym.wrappers.reward",
    "DiscreteSkills": "humanclaw_gym.wrappers.actions",
    "MultiDiscreteSkills": "humanclaw_gym.wrappers.actions",
    "skill_menu": "humanclaw_gym.wrappers.actions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'humanclaw_gym.wrappers' has no attribute {name!r}")
