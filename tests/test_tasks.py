"""Tasks as an extension point: the task protocol, ``HumanClaw-v0`` composed from a task,
the benchmark env as that env with ``find_nav_interact``, task resolution and its errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym
from humanclaw_gym import registry
from humanclaw_gym.envs.env import HumanClawEnv
from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
from humanclaw_gym.tasks import (
    DEFAULT_TASK,
    BaseTask,
    FindNavInteractTask,
    TaskSpec,
    UnknownTaskError,
    portable_task,
    resolve_task,
    task_names,
)

ENV_ID = "HumanClawFindNavInteract-v0"
GENERIC_ID = "HumanClaw-v0"
_ACTIONS = ("Walk<forward><normal>", "Turn<left><30>", "Side step<right><0.3>", "Stop")


def _rollout(env: gym.Env, episode_id: str) -> list[tuple]:
    obs, info = env.reset(options={"episode_id": episode_id})
    out = [(obs.copy(), info)]
    for action in _ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs.copy(), reward, terminated, truncated, info))
    return out


def test_the_benchmark_env_is_the_generic_env_with_its_task():
    assert humanclaw_gym.register_task is registry.register_task
    assert DEFAULT_TASK in task_names()
    assert resolve_task(DEFAULT_TASK) is FindNavInteractTask
    spec = FindNavInteractTask.spec
    assert (spec.id, spec.version, spec.metrics_schema) == (
        "find_nav_interact",
        1,
        "humanclaw_metrics_v",
    )
    runs = []
    for env_id, kwargs in ((ENV_ID, {}), (GENERIC_ID, {"task": DEFAULT_TASK})):
        env = gym.make(env_id, max_steps=8, **kwargs)
        try:
            assert isinstance(env.unwrapped, HumanClawEnv)
            assert isinstance(env.unwrapped.task, FindNavInteractTask)
            assert env.observation_space == gym.make(ENV_ID).observation_space
            runs.append(_rollout(env, "hc_val_003_000"))
        finally:
            env.close()
    assert isinstance(gym.make(ENV_ID).unwrapped, FindNavInteractEnv)
    for a, b in zip(*runs, strict=True):
        assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]  # bit for bit, infos equal


def test_an_unknown_task_is_refused_before_anything_is_built():
    with pytest.raises(UnknownTaskError, match=r"unknown task 'nope'; registered: .*find_nav"):
        gym.make(GENERIC_ID, task="nope")
    with pytest.raises(UnknownTaskError, match="cannot be imported"):
        gym.make(GENERIC_ID, task="no_such_module_xyz:Task")
    with pytest.raises(UnknownTaskError, match="is not a task class"):
        resolve_task("humanclaw_gym.tasks:TaskSpec")
    with pytest.raises(ValueError, match="HumanClawFindNavInteract-v0 plays the task"):
        FindNavInteractEnv(task=_PointVariant)
    with pytest.raises(ValueError, match="task_options must be a mapping"):
        gym.make(GENERIC_ID, task_options=["x"])
    with pytest.raises(ValueError, match="takes no task options"):
        gym.make(GENERIC_ID, task_options={"radius": 1.0})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"id": "Bad Id"}, r"TaskSpec.id='Bad Id' is invalid"),
        ({"version": 0}, r"TaskSpec.version=0 is invalid"),
        ({"trackers": ()}, "TaskSpec.trackers is empty"),
        ({"trackers": "nav"}, r"TaskSpec.trackers='nav' is invalid"),
        ({"sensors": ("a", "a")}, "names an entry twice"),
        ({"metrics_schema": "x y"}, "TaskSpec.metrics_schema='x y' is invalid"),
    ],
)
def test_a_malformed_task_spec_is_refused(change, message):
    fields = dict(id="t", version=1, description="d", success="s", trackers=("nav",))
    fields.update(change)
    with pytest.raises(ValueError, match=message):
        TaskSpec(**fields)
    assert TaskSpec(
        id="t", version=2, description="d", success="s", trackers=("nav",)
    ).record() == {
        "id": "t",
        "version": 2,
    }


class _PointVariant(FindNavInteractTask):
    """A task of the same episodes that exposes a goal (here: the first target's first
    approach point, only to exercise the public state)."""

    spec = TaskSpec(
        id="point_variant",
        version=1,
        description="walk to a point",
        success="Stop within 1 m",
        trackers=("jerk",),
        public_state=("start_position", "start_yaw_rad", "goal_position"),
        metrics_schema=None,
    )

    def public_state(self):
        goal = self.episode.goals[0]
        point = goal.approach_points[0] if goal.approach_points else goal.position
        state = dict(super().public_state())
        state["goal_position"] = np.array(point, dtype=np.float64)
        return state


def test_registration_by_name_decorator_and_class_and_what_other_processes_get():
    registry.register_task("point_variant_test", _PointVariant)
    try:
        assert resolve_task("point_variant_test") is _PointVariant
        assert portable_task("point_variant_test") is _PointVariant  # in code: the class
        assert portable_task(DEFAULT_TASK) == DEFAULT_TASK  # lazy: resolvable anywhere
        path = f"{__name__}:_PointVariant"
        assert resolve_task(path) is _PointVariant and portable_task(path) == path
        env = gym.make(GENERIC_ID, task="point_variant_test", max_steps=2)
        try:
            assert env.unwrapped.task.spec.id == "point_variant"
        finally:
            env.close()
    finally:
        registry.unregister("task", "point_variant_test")
    assert _PointVariant.spec.metrics_schema == "humanclaw_point_variant_metrics_v"

    @registry.register_task("decorated_test")
    class Decorated(BaseTask):
        spec = TaskSpec(id="decorated", version=1, description="d", success="s", trackers=("x",))

    try:
        assert resolve_task("decorated_test") is Decorated
        with pytest.raises(NotImplementedError, match="load_episodes"):
            gym.make(GENERIC_ID, task="decorated_test")
    finally:
        registry.unregister("task", "decorated_test")
