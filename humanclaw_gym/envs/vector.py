"""The vector entry point: ``gym.make_vec("HumanClawFindNavInteract-v0", num_envs=N)`` and
``gym.make_vec("HumanClaw-v0", num_envs=N, task=NAME)``.

Builds a Gymnasium :class:`~gymnasium.vector.SyncVectorEnv` (``mode="sync"``, default),
:class:`~gymnasium.vector.AsyncVectorEnv` (``mode="async"``, one process per sub-env,
started with ``spawn``) or :class:`~humanclaw_gym.envs.batched.BatchedVectorEnv`
(``mode="batched"``: one process, the sub-envs stepped together on threads) whose sub-env
``i`` plays shard ``i`` of ``N`` of the episode list, so no episode is played by two
sub-envs. Autoreset mode is Gymnasium's ``NEXT_STEP``.

Actions of a vector env: the batched ``Dict`` (each entry stacked along a first axis of
length N, as ``envs.action_space.sample()`` gives) or a list/tuple of N per-sub-env
actions, each a :class:`~humanclaw_gym.SkillCall`, its text form or a
:class:`~humanclaw_gym.policy.Decision`. The list form works in every vectorization mode
(this entry point and Gymnasium's own ``vectorization_mode="sync"``/``"async"``) because the
env's action space is a :class:`SkillActionSpace`, whose batched form
(:class:`BatchedSkillActionSpace`) Gymnasium's ``iterate`` splits either way. Every entry of
a list is validated before any sub-env steps.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
from gymnasium.vector.utils import iterate

from humanclaw_gym.skills.call import SkillCall
from humanclaw_gym.skills.spaces import (
    BatchedSkillActionSpace,
    SkillActionSpace,
    per_env_actions,
    skill_action_space,
)

__all__ = [
    "BatchedMotionSyncVectorEnv",
    "BatchedSkillActionSpace",
    "SkillActionSpace",
    "make_vector_env",
    "skill_action_space",
]


class BatchedMotionSyncVectorEnv(gym.vector.SyncVectorEnv):
    """A SyncVectorEnv whose sub-envs generate their motion chunks as ONE batch per step.

    Before the sub-envs step one after the other, the skill of every sub-env that will
    execute motion (not a Stop, not an autoreset row) is handed, with that sub-env's motion
    generator, to a batching service (``generator.batch_service``); the service computes
    all chunks in one model call and parks each in its generator, whose own ``generate``
    then returns it. Results equal the unbatched ones (each generator keeps its own RNG);
    only generators that declare ``capabilities.batched`` take part, others generate as
    usual. Every sub-env's action is validated once, before any sub-env steps (an invalid
    one raises naming its index, with no simulator state changed).
    """

    def step(self, actions: Any):
        # validated once, before any sub-env steps; the sub-envs receive SkillCalls and
        # Decisions, which they do not validate again
        items = (
            actions if isinstance(actions, (list, tuple)) else iterate(self.action_space, actions)
        )
        actions = per_env_actions(items, self.num_envs)
        from humanclaw_gym.envs.simulation import check_sub_env_executable

        for i, action in enumerate(actions):  # a skill a sub-env's generator lacks
            if not self._autoreset_envs[i]:
                call = action if isinstance(action, SkillCall) else action.action
                check_sub_env_executable(self.envs[i], call, i)
        pairs = []
        service = None
        for i, action in enumerate(actions):
            if (
                self.autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP
                and self._autoreset_envs[i]
            ):
                continue
            motion = getattr(self.envs[i].unwrapped, "motion_generator", None)
            caps = getattr(motion, "capabilities", None)
            if motion is None or not getattr(caps, "batched", False):
                continue
            call = action if isinstance(action, SkillCall) else action.action
            if call.is_stop:
                continue
            if service is None:
                service = _batch_service_for(motion)
                if service is None:
                    continue
            pairs.append((motion, call))
        if service is not None and len(pairs) > 1:
            service.stage(pairs)
        return super().step(actions)


def _batch_service_for(motion: Any) -> Any:
    """The batching service of a batched generator: ``motion.batch_service()`` when it has
    one, else the ``BatchedMotionService`` class of the generator's own module."""
    import sys

    factory = getattr(motion, "batch_service", None)
    if factory is None:
        factory = getattr(sys.modules.get(type(motion).__module__), "BatchedMotionService", None)
    return None if factory is None else factory()


def _make_sub_env(
    index: int, num_envs: int, wrappers: tuple[Any, ...], kwargs: dict[str, Any]
) -> gym.Env:
    if "task" in kwargs:
        from humanclaw_gym.envs.env import HumanClawEnv

        env: gym.Env = HumanClawEnv(num_shards=num_envs, shard_index=index, **kwargs)
    else:
        from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

        env = FindNavInteractEnv(num_shards=num_envs, shard_index=index, **kwargs)
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
        mode: ``"sync"`` (one process), ``"async"`` (one worker process per sub-env) or
            ``"batched"`` (one process, the sub-envs stepped together on threads; pays off
            with ``physics="mujoco"``, see :mod:`humanclaw_gym.envs.batched`).
        wrappers: callables applied to each sub-env (e.g. a metrics wrapper factory).
        max_episode_steps: ignored (the env truncates at its own ``max_steps``); accepted
            because Gymnasium passes the spec's value.
        **kwargs: forwarded to :class:`~humanclaw_gym.envs.FindNavInteractEnv` (with
            ``task=``: to :class:`~humanclaw_gym.envs.HumanClawEnv`, the task resolved here
            first, so an unknown task fails before any sub-env is made, and handed to the
            sub-envs in a form their processes resolve too), except ``max_concurrent`` and ``motion_workers`` (``mode="batched"`` only: sub-envs
            running at once, default twice the number of CPUs; worker processes for procedural
            motion, default the number of CPUs, 0 on one CPU).
    """
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if mode not in ("sync", "async", "batched"):
        raise ValueError(f"mode must be 'sync', 'async' or 'batched', got {mode!r}")
    max_concurrent = kwargs.pop("max_concurrent", None)
    if max_concurrent is not None and mode != "batched":
        raise ValueError("max_concurrent is an option of mode='batched' only")
    motion_workers = kwargs.pop("motion_workers", None)
    if motion_workers is not None and mode != "batched":
        raise ValueError("motion_workers is an option of mode='batched' only")
    if "num_shards" in kwargs or "shard_index" in kwargs:
        raise ValueError(
            "num_shards/shard_index are set by the vector entry point; do not pass them"
        )
    if max_episode_steps is not None and "max_steps" not in kwargs:
        kwargs["max_steps"] = int(max_episode_steps)
    if "task" in kwargs:
        from humanclaw_gym.tasks import portable_task

        kwargs["task"] = portable_task(kwargs["task"])
    fns = [
        functools.partial(_make_sub_env, i, num_envs, tuple(wrappers), dict(kwargs))
        for i in range(num_envs)
    ]
    if mode == "batched":
        from humanclaw_gym.envs.batched import BatchedVectorEnv

        return BatchedVectorEnv(fns, max_concurrent=max_concurrent, motion_workers=motion_workers)
    if mode == "sync":
        # Batched motion pays off only for a batched generator; it is a no-op otherwise.
        return BatchedMotionSyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    # "spawn": a forked child would inherit the parent's GL context and pybullet state.
    return gym.vector.AsyncVectorEnv(
        fns, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP, context="spawn"
    )
