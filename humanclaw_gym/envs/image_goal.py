"""``HumanClawImageGoal-v0``: image-goal navigation as a Gymnasium env.

:class:`ImageGoalEnv` is :class:`~humanclaw_gym.envs.env.HumanClawEnv` with the task
``image_goal`` (:class:`~humanclaw_gym.tasks.image_goal.ImageGoalTask`): walk to the place
where the goal picture was taken and stop within 1 m of it. Its contract is in
``docs/tasks.md``.
"""

from __future__ import annotations

from humanclaw_gym.envs import IMAGE_GOAL_ENV_ID
from humanclaw_gym.envs.pinned import PinnedTaskEnv
from humanclaw_gym.tasks import IMAGE_GOAL_TASK

__all__ = ["ImageGoalEnv"]


class ImageGoalEnv(PinnedTaskEnv):
    """Walk to where the goal picture was taken; stop with the pelvis within 1 m of it.

    The observation is ``Dict(rgb, goal_rgb)``: the head camera's image and the goal
    picture (the same camera at the goal pose, rendered at reset), both ``uint8 (448, 448,
    3)`` (``obs_size`` applies to both); the action space, rewards (0.0), ending (Stop:
    terminated; the step limit: truncated) and arguments are those of
    :class:`~humanclaw_gym.envs.env.HumanClawEnv` (``split`` defaults to
    ``"imagegoal_val100"``). Success, SPL and the other metrics come from the metrics
    wrapper; a privileged env's ``evaluate()`` gives the success rule now. See
    ``docs/tasks.md``.
    """

    env_id = IMAGE_GOAL_ENV_ID
    pinned_task = IMAGE_GOAL_TASK
