"""humanclaw-gym: the HumanClaw find-navigate-interact benchmark as a Gymnasium environment.

Importing this package is cheap: it registers ``HumanClawFindNavInteract-v0`` with
Gymnasium and exposes the action schema, but loads no simulator, renderer or torch.

    import gymnasium as gym
    import humanclaw_gym  # registers the env
    env = gym.make("HumanClawFindNavInteract-v0", split="val100")
"""

from __future__ import annotations

from humanclaw_gym.backends.config import BackendConfig
from humanclaw_gym.envs import ENV_ID, register_envs
from humanclaw_gym.policy import Decision, Policy, Usage
from humanclaw_gym.sensors import EgoDepthSensor, EgoRGBSensor, Sensor, TargetMaskSensor
from humanclaw_gym.skills import (
    Skill,
    SkillCall,
    SkillCallError,
    SkillCallParseError,
    SkillCallTypeError,
    action_space,
)

__version__ = "0.1.0"

register_envs()

__all__ = [
    "ENV_ID",
    "BackendConfig",
    "Decision",
    "EgoDepthSensor",
    "EgoRGBSensor",
    "Policy",
    "Sensor",
    "Skill",
    "SkillCall",
    "SkillCallError",
    "SkillCallParseError",
    "SkillCallTypeError",
    "TargetMaskSensor",
    "Usage",
    "__version__",
    "action_space",
]
