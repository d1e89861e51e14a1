"""humanclaw-gym: the HumanClaw find-navigate-interact benchmark as a Gymnasium environment.

Importing this package is cheap: it registers ``HumanClawFindNavInteract-v0`` and
``HumanClaw-v0`` (the env of any registered task) with Gymnasium and exposes the action
schema and the task registration, but loads no simulator, renderer or torch.

    import gymnasium as gym
    import humanclaw_gym  # registers the envs
    env = gym.make("HumanClawFindNavInteract-v0", split="val100")
    env = gym.make("HumanClaw-v0", task="find_nav_interact")  # the same env
"""

from __future__ import annotations

from humanclaw_gym.backends.config import BackendConfig
from humanclaw_gym.envs import ENV_ID, GENERIC_ENV_ID, register_envs
from humanclaw_gym.policy import Decision, Policy, Usage
from humanclaw_gym.registry import register_sensor, register_task, register_tracker
from humanclaw_gym.sensors import (
    EgoDepthSensor,
    EgoRGBSensor,
    GPSCompassSensor,
    PointGoalSensor,
    Sensor,
    TargetMaskSensor,
)
from humanclaw_gym.skills import (
    Skill,
    SkillCall,
    SkillCallError,
    SkillCallParseError,
    SkillCallTypeError,
    action_space,
)
from humanclaw_gym.tasks import BaseTask, TaskSpec

__version__ = "0.1.0"

register_envs()

__all__ = [
    "ENV_ID",
    "GENERIC_ENV_ID",
    "BackendConfig",
    "BaseTask",
    "Decision",
    "EgoDepthSensor",
    "EgoRGBSensor",
    "GPSCompassSensor",
    "PointGoalSensor",
    "Policy",
    "Sensor",
    "Skill",
    "SkillCall",
    "SkillCallError",
    "SkillCallParseError",
    "SkillCallTypeError",
    "TargetMaskSensor",
    "TaskSpec",
    "Usage",
    "__version__",
    "action_space",
    "register_sensor",
    "register_task",
    "register_tracker",
]
