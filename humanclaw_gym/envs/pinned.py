"""An env with one task pinned: the base of the built-in tasks' own env ids.

``HumanClawFindNavInteract-v0`` and ``HumanClawImageGoal-v0`` are ``HumanClaw-v0``
(:class:`~humanclaw_gym.envs.env.HumanClawEnv`) with their task fixed: ``task=`` may name
only that task (another one is refused, pointing at ``HumanClaw-v0``), every other argument
is the same.
"""

from __future__ import annotations

from typing import Any, ClassVar

from humanclaw_gym.envs.env import HumanClawEnv
from humanclaw_gym.tasks import resolve_task

__all__ = ["PinnedTaskEnv"]


class PinnedTaskEnv(HumanClawEnv):
    """:class:`~humanclaw_gym.envs.env.HumanClawEnv` that plays one task.

    Class attributes:
        env_id: the Gymnasium id it is registered under (named in the refusal).
        pinned_task: the task's registered name (``task=`` defaults to it).

    Raises:
        ValueError: ``task=`` names another task.
    """

    env_id: ClassVar[str]
    pinned_task: ClassVar[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        task = kwargs.pop("task", self.pinned_task)
        if resolve_task(task).spec.id != self.pinned_task:
            raise ValueError(
                f"{self.env_id} plays the task {self.pinned_task!r}, not {task!r}: make "
                "'HumanClaw-v0' with task=... for another task"
            )
        super().__init__(task, *args, **kwargs)
