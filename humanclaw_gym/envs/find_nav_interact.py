"""``HumanClawFindNavInteract-v0``: the HumanClaw benchmark's env.

:class:`FindNavInteractEnv` is :class:`~humanclaw_gym.envs.env.HumanClawEnv` with the task
``find_nav_interact`` (:class:`~humanclaw_gym.tasks.find_nav_interact.FindNavInteractTask`):
find an object in a home, walk to it and (for beds, couches, toilets) sit on it. Its
contract is in ``docs/env.md``.
"""

from __future__ import annotations

from typing import Any

from humanclaw_gym.envs.env import HumanClawEnv, PrivilegedState
from humanclaw_gym.tasks import DEFAULT_TASK, resolve_task

__all__ = ["FindNavInteractEnv", "PrivilegedState"]


class FindNavInteractEnv(HumanClawEnv):
    """Find an object in a home, walk to it and (for beds, couches, toilets) sit on it.

    :class:`~humanclaw_gym.envs.env.HumanClawEnv` with ``task="find_nav_interact"``; every
    other argument is the same (``docs/env.md``). Another task is refused: make
    ``HumanClaw-v0`` with ``task=`` for it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        task = kwargs.pop("task", DEFAULT_TASK)
        if resolve_task(task).spec.id != DEFAULT_TASK:
            raise ValueError(
                f"HumanClawFindNavInteract-v0 plays the task {DEFAULT_TASK!r}, not {task!r}: "
                "make 'HumanClaw-v0' with task=... for another task"
            )
        super().__init__(task, *args, **kwargs)
