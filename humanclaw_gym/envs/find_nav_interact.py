"""``HumanClawFindNavInteract-v0``: the HumanClaw benchmark's env.

:class:`FindNavInteractEnv` is :class:`~humanclaw_gym.envs.env.HumanClawEnv` with the task
``find_nav_interact`` (:class:`~humanclaw_gym.tasks.find_nav_interact.FindNavInteractTask`):
find an object in a home, walk to it and (for beds, couches, toilets) sit on it. Its
contract is in ``docs/env.md``.
"""

from __future__ import annotations

from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.envs.env import PrivilegedState
from humanclaw_gym.envs.pinned import PinnedTaskEnv
from humanclaw_gym.tasks import DEFAULT_TASK

__all__ = ["FindNavInteractEnv", "PrivilegedState"]


class FindNavInteractEnv(PinnedTaskEnv):
    """Find an object in a home, walk to it and (for beds, couches, toilets) sit on it.

    :class:`~humanclaw_gym.envs.env.HumanClawEnv` with ``task="find_nav_interact"``; every
    other argument is the same (``docs/env.md``). Another task is refused: make
    ``HumanClaw-v0`` with ``task=`` for it.
    """

    env_id = ENV_ID
    pinned_task = DEFAULT_TASK
