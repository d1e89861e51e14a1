"""Environment registration (no simulator import happens here).

``HumanClaw-v0`` composes an env from any registered task (``gym.make("HumanClaw-v0",
task=NAME)``); ``HumanClawFindNavInteract-v0`` is that env with the benchmark's task
``find_nav_interact``.
"""

from __future__ import annotations

ENV_ID = "HumanClawFindNavInteract-v0"
#: The env of any task (``task=`` a registered name, ``"module:Class"`` or a task class).
GENERIC_ENV_ID = "HumanClaw-v0"
#: ``HumanClaw-v0`` with the image-goal navigation task.
IMAGE_GOAL_ENV_ID = "HumanClawImageGoal-v0"


def register_envs() -> None:
    """Register ``HumanClaw-v0`` and ``HumanClawFindNavInteract-v0`` with Gymnasium
    (idempotent)."""
    import gymnasium as gym

    if ENV_ID not in gym.registry:
        gym.register(
            id=ENV_ID,
            entry_point="humanclaw_gym.envs.find_nav_interact:FindNavInteractEnv",
            vector_entry_point="humanclaw_gym.envs.vector:make_vector_env",
            disable_env_checker=False,
        )
    if IMAGE_GOAL_ENV_ID not in gym.registry:
        gym.register(
            id=IMAGE_GOAL_ENV_ID,
            entry_point="humanclaw_gym.envs.image_goal:ImageGoalEnv",
            vector_entry_point="humanclaw_gym.envs.vector:make_vector_env",
            kwargs={"task": "image_goal"},
            disable_env_checker=False,
        )
    if GENERIC_ENV_ID not in gym.registry:
        gym.register(
            id=GENERIC_ENV_ID,
            entry_point="humanclaw_gym.envs.env:HumanClawEnv",
            vector_entry_point="humanclaw_gym.envs.vector:make_vector_env",
            disable_env_checker=False,
        )


def __getattr__(name: str):
    if name == "FindNavInteractEnv":
        from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

        return FindNavInteractEnv
    if name == "ImageGoalEnv":
        from humanclaw_gym.envs.image_goal import ImageGoalEnv

        return ImageGoalEnv
    if name == "HumanClawEnv":
        from humanclaw_gym.envs.env import HumanClawEnv

        return HumanClawEnv
    raise AttributeError(name)


__all__ = [
    "ENV_ID",
    "GENERIC_ENV_ID",
    "IMAGE_GOAL_ENV_ID",
    "FindNavInteractEnv",
    "HumanClawEnv",
    "ImageGoalEnv",
    "register_envs",
]
