"""The vector entry point: ``gym.make_vec("HumanClawFindNavInteract-v0", num_envs=N)``.

Builds a Gymnasium :class:`~gymnasium.vector.SyncVectorEnv` (``mode="sync"``, default) or
:class:`~gymnasium.vector.AsyncVectorEnv` (``mode="async"``, one process per sub-env) whose
sub-env ``i`` plays shard ``i`` of ``N`` of the episode list, so no episode is played by two
sub-envs. Autoreset mode is Gymnasium's ``NEXT_STEP``.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

__all__ = ["make_vector_env"]


def _make_sub_env(
    index: int, num_envs: int, wrappers: tuple[Any, ...], kwargs: dict[str, Any]
) -> gym.Env:
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

    env: gym.Env = FindNavInteractEnv(num_shards=num_envs, shard_index=index, **kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env


def make_vector_env(
    num_envs: int = 1,
    mode: str = "sync",
    wrappers: tuple[Any, ...] = (),
    max_episode_steps: int | None = None,
    **kwargs: Any,
) -> gym.vector.VectorEnv:
    """Create ``num_envs`` sharded sub-envs in a sync or async Gymnasium vector env.

    Args:
        num_envs: number of sub-envs (>= 1); sub-env ``i`` plays episode shard ``i``.
        mode: ``"sync"`` (one process) or ``"async"`` (one worker process per sub-env).
        wrappers: callables applied to each sub-env (e.g. a metrics wrapper factory).
        max_episode_steps: ignored (the env truncates at its own ``max_steps``); accepted
            because Gymnasium passes the spec's value.
        **kwargs: forwarded to :class:`~humanclaw_gym.envs.FindNavInteractEnv`.
    """
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if mode not in ("sync", "async"):
        raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}")
    if "num_shards" in kwargs or "shard_index" in kwargs:
        raise ValueError(
            "num_shards/shard_index are set by the vector entry point; do not pass them"
        )
    if max_episode_steps is not None and "max_steps" not in kwargs:
        kwargs["max_steps"] = int(max_episode_steps)
    fns = [
        functools.partial(_make_sub_env, i, num_envs, tuple(wrappers), dict(kwargs))
        for i in range(num_envs)
    ]
    if mode == "sync":
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    # "spawn": a forked child would inherit the parent's GL context and pybullet state.
    return gym.vector.AsyncVectorEnv(
        fns, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP, context="spawn"
    )
