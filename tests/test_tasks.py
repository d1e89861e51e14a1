"""Tasks as an extension point: the task protocol, ``HumanClaw-v0`` composed from a task,
the benchmark env as that env with ``find_nav_interact``, task resolution and its errors."""

from __future__ import annotations

import json
from pathlib import Path

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
        trackers=("outcome", "jerk"),
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


# -- the registry's built-ins ----------------------------------------------------------------


def test_a_fresh_process_lists_the_built_in_tasks_sensors_and_trackers_in_order():
    import subprocess
    import sys

    from humanclaw_gym.metrics.trackers import TRACKERS

    code = (
        "import json; from humanclaw_gym import registry; "
        "print(json.dumps({k: registry.names(k) for k in ('task', 'sensor', 'tracker')}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    listed = json.loads(done.stdout)
    assert DEFAULT_TASK in listed["task"]
    assert {"rgb", "depth", "target_mask", "gps_compass", "pointgoal"} <= set(listed["sensor"])
    paper = [cls.spec.name for cls in TRACKERS]
    assert listed["tracker"][: len(paper)] == paper  # registered in the paper's order
    assert FindNavInteractTask.spec.trackers == tuple(paper)
    assert "outcome" in listed["tracker"]


# -- sensors that read state -----------------------------------------------------------------


def _count_renders(env: gym.Env) -> list[int]:
    calls = [0]
    renderer = env.unwrapped.simulation.renderer
    render = renderer.render

    def counted(*args, **kwargs):
        calls[0] += 1
        return render(*args, **kwargs)

    renderer.render = counted
    return calls


@pytest.mark.parametrize("sensors, per_step", [(["gps_compass"], 0), (["rgb", "gps_compass"], 1)])
def test_renders_per_step_a_state_sensor_costs_none(sensors, per_step):
    env = gym.make(GENERIC_ID, sensors=sensors, max_steps=5)
    try:
        env.reset(seed=0)
        calls = _count_renders(env)
        steps = ("Walk<forward><normal>", "Turn<left><30>", "Walk<forward><slow>")
        for action in steps:
            env.step(action)
        assert calls[0] == per_step * len(steps)
    finally:
        env.close()


def test_gps_compass_is_start_relative_odometry():
    env = gym.make(GENERIC_ID, sensors=["rgb", "gps_compass"], privileged=True, max_steps=6)
    try:
        obs, _ = env.reset(seed=0)
        assert np.allclose(obs["gps_compass"], 0.0, atol=1e-6)  # the start pose is the origin
        start = env.unwrapped.task.public_state()
        obs, *_ = env.step("Walk<forward><normal>")
        forward, left, heading = obs["gps_compass"]
        assert forward > 0.2 and abs(left) < 0.05 and abs(heading) < 0.05
        obs, *_ = env.step("Turn<left><40>")
        state = env.unwrapped.privileged_state()
        yaw_change = float(np.angle(np.exp(1j * (state.yaw_rad - start["start_yaw_rad"]))))
        assert obs["gps_compass"][2] == pytest.approx(yaw_change, abs=1e-5) and yaw_change > 0.5
        obs, *_ = env.step("Walk<forward><normal>")  # walking after a left turn: to the left
        moved = state.root_xz - np.asarray(start["start_position"])[[0, 2]]
        assert np.hypot(*obs["gps_compass"][:2]) > np.hypot(*moved)
        assert obs["gps_compass"][1] > left + 0.05
        assert env.observation_space.contains(obs)
    finally:
        env.close()


def test_pointgoal_reads_the_goal_only_a_point_goal_task_exposes():
    with pytest.raises(ValueError, match=r"reads task state \['goal_position'\]"):
        gym.make(GENERIC_ID, sensors=["rgb", "pointgoal"])
    env = gym.make(
        GENERIC_ID, task=_PointVariant, sensors=["pointgoal"], privileged=True, max_steps=6
    )
    try:
        obs, _ = env.reset(seed=0)
        goal = env.unwrapped.task.public_state()["goal_position"]
        for action in ("Walk<forward><normal>", "Turn<left><30>"):
            state = env.unwrapped.privileged_state()
            delta = goal[[0, 2]] - state.root_xz
            assert obs[0] == pytest.approx(np.hypot(*delta), abs=1e-5)
            direction = np.arctan2(delta[0], delta[1]) - state.yaw_rad  # yaw: atan2(x, z)
            assert obs[1] == pytest.approx(np.angle(np.exp(1j * direction)), abs=1e-5)
            obs, *_ = env.step(action)
    finally:
        env.close()


class _GoalViewTask(FindNavInteractTask):
    """A task that renders, at reset, the view from its goal pose (a goal image)."""

    spec = TaskSpec(
        id="goal_view_test",
        version=1,
        description="d",
        success="s",
        trackers=("outcome",),
        public_state=("start_position", "start_yaw_rad", "goal_rgb"),
    )

    def initialize_episode(self, episode, simulation):
        super().initialize_episode(episode, simulation)
        position, yaw = self.start_pose(episode)
        self.goal_rgb = simulation.render_at(position, yaw + np.pi, "ego", 64).rgb.copy()
        self.start_view = simulation.render_at(position, yaw, "ego", 64).rgb.copy()

    def public_state(self):
        return {**super().public_state(), "goal_rgb": self.goal_rgb}


def test_a_task_renders_a_camera_at_a_pose_of_its_choosing_at_reset():
    env = gym.make(GENERIC_ID, task=_GoalViewTask, obs_size=64, sensors=["rgb"], max_steps=3)
    try:
        with pytest.raises(RuntimeError, match="after reset"):
            env.unwrapped.simulation.render_at(np.zeros(3), 0.0)
        obs, _ = env.reset(seed=0)
        task, sim = env.unwrapped.task, env.unwrapped.simulation
        # the start pose drawn by render_at is the first observation (the body's
        # kinematics against physics' float32 link poses may move a few edge pixels)
        same = np.all(task.start_view == obs, axis=-1)
        assert same.mean() > 0.99
        assert np.abs(task.goal_rgb.astype(int) - obs).mean() > 10  # facing the other way
        version = sim.state_version
        again = sim.render_at(*task.start_pose(task.episode), "ego", 64).rgb
        assert np.array_equal(again, task.start_view) and sim.state_version == version
        assert np.array_equal(env.unwrapped._observe(), obs)  # the real body again
        assert task.public_state()["goal_rgb"] is task.goal_rgb
        with pytest.raises(ValueError, match="render_at"):
            sim.render_at([0.0, np.nan, 0.0], 0.0)
    finally:
        env.close()


# -- evaluate and the metrics of a task ------------------------------------------------------


def test_evaluate_is_the_success_rule_the_metrics_score_at_the_stop():
    from humanclaw_agents.oracle import OraclePolicy
    from humanclaw_gym.evaluation.episode import run_episode
    from humanclaw_gym.wrappers import MetricsWrapper

    env = MetricsWrapper(gym.make(ENV_ID, privileged=True))
    try:
        with pytest.raises(PermissionError, match="evaluate"):
            gym.make(ENV_ID).unwrapped.evaluate()
        result = run_episode(env, OraclePolicy(), episode_id="hc_val_003_000")
        evaluated = env.unwrapped.evaluate()
        assert result.ended_by == "stop" and result.task == FindNavInteractTask.spec.record()
        assert evaluated["success"] == result.metrics["nav_success_20cm"] is True
        assert evaluated["distance_m"] == pytest.approx(result.metrics["final_distance_m"])
    finally:
        env.close()


def test_a_task_with_other_trackers_writes_reads_and_sums_up_its_own_layout(tmp_path):
    from humanclaw_gym.metrics import (
        MetricsFileError,
        aggregate,
        aggregate_metric_files,
        format_tables,
        validate_metrics,
    )
    from humanclaw_gym.metrics.trackers import BENCHMARK_SUITE, suite_for_spec
    from humanclaw_gym.wrappers import MetricsWrapper

    suite = suite_for_spec(_PointVariant.spec)
    assert suite is not BENCHMARK_SUITE and suite.schema.startswith("humanclaw_point_variant")
    assert suite.needs == frozenset()  # none needed; the wrapper asks contacts anyway
    registry.register_task("point_variant_metrics_test", _PointVariant)
    try:
        env = MetricsWrapper(gym.make(GENERIC_ID, task=_PointVariant, max_steps=2), tmp_path)
        rows = []
        try:
            for episode in ("hc_val_003_000", "hc_val_003_003"):
                env.reset(options={"episode_id": episode})
                env.step("Walk<forward><normal>")
                *_, info = env.step("Turn<left><20>")
                rows.append(info["metrics"])
        finally:
            env.close()
        assert [tuple(r) for r in rows] == [suite.layout] * 2
        assert rows[0]["ended_by"] == "truncated" and rows[0]["motion_jerk_m_s3"] > 0
        assert validate_metrics(rows[0]) == rows[0]
        with pytest.raises(MetricsFileError, match="active_stop"):
            validate_metrics({**rows[0], "active_stop": True})
        with pytest.raises(MetricsFileError, match="steps is missing"):
            validate_metrics({k: v for k, v in rows[0].items() if k != "steps"})
        summary = aggregate_metric_files(tmp_path)
        assert summary["task"] == "point_variant" and summary["counts"]["episodes"] == 2
        assert summary["main"]["avg_steps"] == 2.0
        assert "task point_variant" in format_tables(summary)
        benchmark_row = json.loads(
            next(Path(__file__).parent.glob("fixtures/**/metrics.json")).read_text()
        )
        with pytest.raises(MetricsFileError, match="different tasks"):
            aggregate([rows[0], benchmark_row])
    finally:
        registry.unregister("task", "point_variant_metrics_test")
    with pytest.raises(MetricsFileError, match="layout of a registered task"):
        validate_metrics(rows[0])  # nobody knows that layout any more


def test_a_task_naming_an_unregistered_tracker_is_refused_by_the_metrics():
    from humanclaw_gym.evaluation.batch import RunConfig, check_run_config
    from humanclaw_gym.wrappers import MetricsWrapper

    class Unscored(_PointVariant):
        spec = TaskSpec(id="unscored", version=1, description="d", success="s", trackers=("x",))

    env = gym.make(GENERIC_ID, task=Unscored)
    try:
        with pytest.raises(ValueError, match="names tracker 'x', which is not registered"):
            MetricsWrapper(env)
    finally:
        env.close()
    with pytest.raises(ValueError, match="names tracker 'x'"):
        check_run_config(RunConfig(task=Unscored, metrics=True))
    with pytest.raises(ValueError, match="--profile and --via-server run the benchmark"):
        check_run_config(RunConfig(task=Unscored, via_server="http://127.0.0.1:1"))


def test_the_task_is_part_of_the_run_fingerprint_and_old_records_are_the_benchmark():
    from humanclaw_gym.evaluation.batch import RunConfig
    from humanclaw_gym.evaluation.fingerprint import fingerprint_differences, run_fingerprint

    episodes = {"selection": "val100", "sha256": "x"}
    benchmark = run_fingerprint(RunConfig(), episodes)
    assert benchmark["settings"]["task"] == FindNavInteractTask.spec.record()
    old = {"settings": {k: v for k, v in benchmark["settings"].items() if k != "task"}}
    assert fingerprint_differences(old, benchmark) == []
    other = run_fingerprint(RunConfig(task=_PointVariant), episodes)
    assert [d[0] for d in fingerprint_differences(benchmark, other)] == ["task.id"]


def test_replay_manifests_record_the_task(tmp_path):
    from humanclaw_gym.replay import load_bundle
    from humanclaw_gym.replay.bundle import ReplayBundleError
    from humanclaw_gym.replay.layout import flat_dir
    from humanclaw_gym.wrappers import TrajectoryWrapper

    for task, out in ((DEFAULT_TASK, tmp_path / "a"), (_PointVariant, tmp_path / "b")):
        env = TrajectoryWrapper(
            gym.make(GENERIC_ID, task=task, max_steps=1), out, episode_dir_fn=flat_dir
        )
        try:
            env.reset(seed=0)
            env.step("Walk<forward><slow>")
        finally:
            env.close()
        assert load_bundle(out).task == resolve_task(task).spec.record()
    manifest = json.loads((tmp_path / "b" / "replay_manifest.json").read_text())
    del manifest["task"]  # a bundle written before tasks were recorded
    (tmp_path / "b" / "replay_manifest.json").write_text(json.dumps(manifest))
    assert load_bundle(tmp_path / "b").task == FindNavInteractTask.spec.record()
    manifest["task"] = {"id": "", "version": 0}
    (tmp_path / "b" / "replay_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ReplayBundleError, match="field 'task'"):
        load_bundle(tmp_path / "b")


# -- properties of every registered task -----------------------------------------------------


@pytest.mark.parametrize("name", task_names())
def test_every_registered_task_passes_the_env_checker_and_repeats_bit_for_bit(name):
    from gymnasium.utils.env_checker import check_env

    def run() -> list:
        env = gym.make(GENERIC_ID, task=name, obs_size=32, max_steps=4)
        try:
            obs, info = env.reset(seed=3)
            out = [(obs, info)]
            for action in ("Walk<forward><normal>", "Turn<right><25>", "Walk<forward><slow>"):
                out.append(env.step(action))
            check_env(env.unwrapped, skip_render_check=True)
            return out
        finally:
            env.close()

    first, second = run(), run()
    for a, b in zip(first, second, strict=True):
        obs_a, obs_b = a[0], b[0]
        if isinstance(obs_a, dict):
            assert all(np.array_equal(obs_a[k], obs_b[k]) for k in obs_a)
        else:
            assert np.array_equal(obs_a, obs_b)
        assert a[1:] == b[1:]
