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


#: ``(env id, entry point, keyword arguments)`` of every env :func:`register_envs`
#: registers, in that order.
_ENVS: tuple[tuple[str, str, dict[str, str]], ...] = (
    (ENV_ID, "humanclaw_gym.envs.find_nav_interact:FindNavInteractEnv", {}),
    (IMAGE_GOAL_ENV_ID, "humanclaw_gym.envs.image_goal:ImageGoalEnv", {"task": "image_goal"}),
    (GENERIC_ENV_ID, "humanclaw_gym.envs.env:HumanClawEnv", {}),
)


def register_envs() -> None:
    """Register ``HumanClaw-v0``, ``HumanClawFindNavInteract-v0`` and
    ``HumanClawImageGoal-v0`` with Gymnasium (idempotent)."""
    import gymnasium as gym

    for env_id, entry_point, kwargs in _ENVS:
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point=entry_point,
                vector_entry_point="humanclaw_gym.envs.vector:make_vector_env",
                kwargs=dict(kwargs),
                disable_env_checker=False,
            )


def __getattr__(name: str):
    for _, entry_point, _ in _ENVS:
        module, _, attr = entry_point.partition(":")
        if name == attr:
            import importlib

            return getattr(importlib.import_module(module), attr)
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
