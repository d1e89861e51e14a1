"""Tasks: what an env asks of the agent, as an extension point.

A task (:class:`BaseTask` subclass with a :class:`TaskSpec`) is registered by name in the
one registry (:func:`register_task`, decorator form too) and composed into an env by
``gym.make("HumanClaw-v0", task=NAME)``; ``HumanClawFindNavInteract-v0`` is that env with
the benchmark's task, :class:`FindNavInteractTask` (``find_nav_interact``). A task is found
by its registered name, by ``"module:Class"`` or by an entry point of the group
``humanclaw_gym.tasks`` (:func:`resolve_task`); the built-in ones register here lazily, so
importing this package imports no task module.
"""

from __future__ import annotations

from typing import Any

from humanclaw_gym import registry
from humanclaw_gym.registry import register_task
from humanclaw_gym.tasks.base import (
    DEFAULT_MAX_STEPS,
    RESET_OPTIONS,
    BaseTask,
    Task,
    TaskSimulation,
    TaskSpec,
)

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TASK",
    "RESET_OPTIONS",
    "BaseTask",
    "FindNavInteractTask",
    "IMAGE_GOAL_TASK",
    "ImageGoalTask",
    "Task",
    "TaskSimulation",
    "TaskSpec",
    "UnknownTaskError",
    "register_task",
    "resolve_task",
    "task_names",
    "portable_task",
]

#: The task of ``HumanClawFindNavInteract-v0`` and of ``humanclaw run`` without ``--task``.
DEFAULT_TASK = "find_nav_interact"

register_task(
    DEFAULT_TASK,
    "humanclaw_gym.tasks.find_nav_interact:FindNavInteractTask",
    description="the HumanClaw benchmark: find an object, walk to it, sit on seats",
)
#: The image-goal navigation task (``HumanClawImageGoal-v0``).
IMAGE_GOAL_TASK = "image_goal"
register_task(
    IMAGE_GOAL_TASK,
    "humanclaw_gym.tasks.image_goal:ImageGoalTask",
    description="image-goal navigation: walk to where a goal picture was taken",
)


class UnknownTaskError(ValueError):
    """A task name that is neither registered nor an importable ``module:Class`` task (the
    message lists the registered ones)."""


def task_names() -> tuple[str, ...]:
    """The registered task names, in registration order (entry points included)."""
    return registry.names("task")


def _check_task_class(obj: Any, where: str) -> type[Task]:
    spec = getattr(obj, "spec", None)
    if not isinstance(obj, type) or not isinstance(spec, TaskSpec):
        raise UnknownTaskError(
            f"task {where} is not a task class (a class with spec = TaskSpec(...), e.g. a "
            "BaseTask subclass)"
        )
    return obj


def resolve_task(task: Any) -> type[Task]:
    """The task class named by ``task``: a registered name, ``"module:Class"`` (the module
    imported now, from the current directory too) or a task class itself.

    Raises:
        UnknownTaskError: an unknown name (the registered ones are listed), a path that
            cannot be imported, or something that is not a task class.
    """
    if isinstance(task, type):
        return _check_task_class(task, repr(task.__qualname__))
    if not isinstance(task, str) or not task:
        raise UnknownTaskError(
            f"task must be a registered task name, 'module:Class' or a task class, got {task!r}"
        )
    if ":" in task:
        import importlib
        import sys

        module_name, _, attr = task.partition(":")
        if "" not in sys.path and "." not in sys.path:
            sys.path.insert(0, "")  # a task module of the current directory, like --agent
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, ValueError) as exc:
            raise UnknownTaskError(f"task {task!r} cannot be imported: {exc}") from None
        return _check_task_class(obj, repr(task))
    try:
        obj = registry.load("task", task)
    except registry.RegistryError as exc:
        if task not in registry.names("task"):
            known = ", ".join(task_names()) or "none"
            raise UnknownTaskError(
                f"unknown task {task!r}; registered: {known} (or give module:Class)"
            ) from None
        raise UnknownTaskError(str(exc)) from None
    return _check_task_class(obj, repr(task))


def portable_task(task: Any) -> str | type[Task]:
    """What to hand another process (vector-env workers, batch workers, Ray tasks) so that
    it resolves the same task: a built-in, lazily registered or entry-point name and a
    ``"module:Class"`` path as they are (they resolve anywhere), else the task class itself
    (pickled by reference: the receiving process imports its module, which registers it
    again).

    Raises:
        UnknownTaskError: as :func:`resolve_task`.
    """
    cls = resolve_task(task)
    if isinstance(task, str) and (":" in task or registry.get("task", task).target is not None):
        return task
    return cls


def __getattr__(name: str) -> Any:
    if name == "FindNavInteractTask":
        from humanclaw_gym.tasks.find_nav_interact import FindNavInteractTask

        return FindNavInteractTask
    if name == "ImageGoalTask":
        from humanclaw_gym.tasks.image_goal import ImageGoalTask

        return ImageGoalTask
    raise AttributeError(name)
