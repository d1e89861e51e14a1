"""Environment registration (no simulator import happens here)."""

from __future__ import annotations

ENV_ID = "HumanClawFindNavInteract-v0"


def register_envs() -> None:
    """Register ``HumanClawFindNavInteract-v0`` with Gymnasium (idempotent)."""
    import gymnasium as gym

    if ENV_ID in gym.registry:
        return
    gym.register(
        id=ENV_ID,
        entry_point="humanclaw_gym.envs.find_nav_interact:FindNavInteractEnv",
        vector_entry_point="humanclaw_gym.envs.vector:make_vector_env",
        disable_env_checker=False,
    )


def __getattr__(name: str):
    if name == "FindNavInteractEnv":
        from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

        return FindNavInteractEnv
    raise AttributeError(name)


__all__ = ["ENV_ID", "FindNavInteractEnv", "register_envs"]
