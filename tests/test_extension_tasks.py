"""The task, image-sensor and state-sensor worked examples of docs/architecture.md, performed
as written there, from a package outside ``humanclaw_gym``.

The code blocks marked ``<!-- example: PATH -->`` of the task and the two sensors are
written to ``PATH`` under a temporary
directory put on ``sys.path`` (and on ``PYTHONPATH`` for the processes a run starts); then
the task runs through ``gym.make``, the vector envs (sync, async, batched), ``humanclaw run
--task module:Class --metrics --video`` (a subprocess: metrics, videos, trajectories),
``--resume``, ``humanclaw metrics``, an installed entry point (``humanclaw rollout --task
NAME``) and (slow) the Ray executor, and the sensors through ``gym.make`` by their
registered names.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import humanclaw_gym
from humanclaw_gym import registry
from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, rollout_dir, run_batch
from humanclaw_gym.metrics.trackers import suite_for_spec
from humanclaw_gym.tasks import resolve_task
from humanclaw_gym.wrappers import MetricsWrapper

ROOT = Path(humanclaw_gym.__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
GENERIC_ID = "HumanClaw-v0"
_BLOCK = re.compile(r"^<!-- example: (\S+) -->\n```python\n(.*?)\n```$", re.S | re.M)
_FILES = ("mytasks/pointnav.py", "mysensors/gray.py", "mysensors/pelvis_height.py")
_TASK_PATH = "mytasks.pointnav:PointNavTask"


def worked_examples() -> dict[str, str]:
    """``{relative path: code}`` of the task and sensor examples of the architecture doc."""
    found = {path: code + "\n" for path, code in _BLOCK.findall(DOC.read_text())}
    assert set(_FILES) <= set(found), f"docs/architecture.md lacks {set(_FILES) - set(found)}"
    return {path: found[path] for path in _FILES}


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """The examples written into a temporary package root, importable in this process;
    their registrations are undone afterwards."""
    root = tmp_path_factory.mktemp("user_package")
    for rel, code in worked_examples().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(code)
    sys.path.insert(0, str(root))
    before = {kind: set(registry.names(kind)) for kind in ("task", "sensor", "tracker")}
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        for kind, names in before.items():
            for name in set(registry.names(kind)) - names:
                registry.unregister(kind, name)
        for name in [m for m in sys.modules if m.split(".")[0] in ("mytasks", "mysensors")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def pointnav(package):
    import mytasks.pointnav

    return mytasks.pointnav


# -- the task --------------------------------------------------------------------------------


def test_the_task_runs_through_gym_make_with_its_sensor_success_and_metrics(pointnav):
    task_cls = pointnav.PointNavTask
    assert resolve_task("pointnav") is task_cls is resolve_task(_TASK_PATH)
    env = MetricsWrapper(gym.make(GENERIC_ID, task="pointnav", privileged=True, max_steps=4))
    try:
        space = env.observation_space
        added = task_cls.spec.sensors
        assert isinstance(space, spaces.Dict) and list(space) == ["rgb", *added]
        obs, info = env.reset(seed=0)
        assert space.contains(obs) and info["instruction"] == "Walk to the goal point and stop."
        assert "target_category" not in info  # its own info, not the benchmark's
        goal = pointnav.goal_xz(env.unwrapped.task.episode)
        pelvis = env.unwrapped.privileged_state().realized_frame[[0, 2]]
        distance, _ = obs["pointgoal"]
        assert distance == pytest.approx(np.linalg.norm(goal - pelvis), abs=1e-5)
        evaluated = env.unwrapped.evaluate()
        assert evaluated["distance_m"] == pytest.approx(distance, abs=1e-5)
        assert evaluated["success"] == (distance <= pointnav.RADIUS_M)
        for action in ("Walk<forward><normal>", "Turn<left><30>", "Stop"):
            obs, _, terminated, truncated, info = env.step(action)
        assert terminated and not truncated
        metrics = info["metrics"]
        suite = suite_for_spec(task_cls.spec)
        assert metrics["schema"] == suite.schema and metrics["schema"].startswith(
            "humanclaw_pointnav_metrics_v"
        )
        assert tuple(metrics) == suite.layout
        assert metrics["goal_distance_m"] == pytest.approx(env.unwrapped.evaluate()["distance_m"])
        assert metrics["success"] == env.unwrapped.evaluate()["success"]
        assert metrics["path_length_m"] > 0.0 and metrics["steps"] == 3
        assert metrics["thresholds"]["pointnav_radius_m"] == pointnav.RADIUS_M
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["sync", "async", "batched"])
def test_the_task_runs_in_every_vector_env(pointnav, mode):
    # the async workers are new processes: the module path reaches them, and the task
    # registered in code is handed over as its class
    task = _TASK_PATH if mode == "async" else "pointnav"
    envs = gym.make_vec(GENERIC_ID, num_envs=2, mode=mode, task=task, max_steps=2, obs_size=32)
    try:
        obs, infos = envs.reset(seed=0)
        assert set(obs) == {"rgb", *pointnav.PointNavTask.spec.sensors}
        assert obs["rgb"].shape == (2, 32, 32, 3) and obs["pointgoal"].shape == (2, 2)
        obs, _, _, _, infos = envs.step(["Walk<forward><slow>", "Turn<right><20>"])
        assert list(infos["instruction"]) == ["Walk to the goal point and stop."] * 2
        assert envs.observation_space.contains(obs)
    finally:
        envs.close()


def _humanclaw(root: Path, *args: str, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (root, *path, ROOT)))}
    return subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_task_runs_through_humanclaw_run_with_metrics_and_resume(pointnav, package):
    out = package / "run"
    limit = 2
    args = ["run", "--task", _TASK_PATH, "--agent", "random", "--max-steps", "3", "--metrics"]
    args += ["--video", "--limit", str(limit), "--quiet", "--output", str(out)]
    done = _humanclaw(package, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    spec = pointnav.PointNavTask.spec
    suite = suite_for_spec(spec)
    assert "task=pointnav" in done.stdout and f"completed {limit}," in done.stdout
    for column in suite.columns("main"):
        assert column.label in done.stdout  # its own table
    specs = list_episode_specs(None, pointnav.PointNavTask)[:limit]
    for episode in specs:
        folder = rollout_dir(out, episode)
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["schema"] == suite.schema and metrics["episode_id"] == episode.episode_id
        result = json.loads((folder / "episode_result.json").read_text())
        manifest = json.loads((folder / "replay_manifest.json").read_text())
        assert result["task"] == manifest["task"] == spec.record()
        assert (folder / "final_ego.png").is_file()
        assert (folder / "ego.mp4").stat().st_size > 0 and (folder / "exo.mp4").stat().st_size > 0
    fingerprint = json.loads((out / "run_fingerprint.json").read_text())
    assert fingerprint["settings"]["task"] == spec.record()
    summary = json.loads((out / "metrics_summary.json").read_text())
    assert summary["task"] == spec.id and summary["counts"]["episodes"] == limit

    again = _humanclaw(package, *args, "--resume")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"skipped {limit}" in again.stdout

    other = [a if a != _TASK_PATH else "find_nav_interact" for a in args]
    refused = _humanclaw(package, *other, "--resume")
    assert refused.returncode == 2 and "task.id: recorded" in refused.stderr
    unknown = _humanclaw(package, "run", "--task", "nope", "--output", str(package / "x"))
    assert unknown.returncode == 2 and "unknown task 'nope'; registered:" in unknown.stderr
    assert not (package / "x").exists()

    table = _humanclaw(package, "metrics", str(out), "--task", _TASK_PATH)
    assert table.returncode == 0, table.stderr
    assert f"task {spec.id}" in table.stdout and suite.columns("main")[0].label in table.stdout
    unknown_layout = _humanclaw(package, "metrics", str(out))
    assert unknown_layout.returncode == 2 and suite.schema in unknown_layout.stderr

    # 2. of the recipe: an installed package's entry point names the task
    installed = package / "site"
    dist = installed / "mytasks-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mytasks\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[humanclaw_gym.tasks]\npointnav_installed = {_TASK_PATH}\n"
    )
    by_entry_point = _humanclaw(package, "metrics", str(out), path=(installed,))
    assert by_entry_point.returncode == 0, by_entry_point.stderr
    assert f"task {spec.id}" in by_entry_point.stdout
    rollout = _humanclaw(
        package,
        *("rollout", "--task", "pointnav_installed", "--agent", "random", "--max-steps", "2"),
        *("--output", str(package / "rollout")),
        path=(installed,),
    )
    assert rollout.returncode == 0, rollout.stderr[-3000:]
    assert any((package / "rollout").rglob("metrics.json"))


@pytest.mark.slow
def test_the_task_runs_on_ray(pointnav, package, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(package), str(ROOT)])}},
    )
    try:
        specs = list_episode_specs(None, _TASK_PATH)[:2]
        config = RunConfig(
            output=str(tmp_path), agent="random", metrics=True, max_steps=3, task=_TASK_PATH
        )
        summary = run_batch(specs, config, workers=2, executor="ray", progress=False)
    finally:
        ray.shutdown()
    assert (summary.completed, summary.failed) == (len(specs), 0)
    assert summary.metrics_summary["task"] == pointnav.PointNavTask.spec.id
    for episode in specs:
        metrics = json.loads((rollout_dir(tmp_path, episode) / "metrics.json").read_text())
        assert metrics["schema"] == suite_for_spec(pointnav.PointNavTask.spec).schema


# -- the sensors -----------------------------------------------------------------------------


def _count_renders(env: gym.Env) -> list[int]:
    """Wrap the env's renderer so that every render call is counted (built on reset)."""
    calls = [0]
    sim = env.unwrapped.simulation
    render = sim.renderer.render

    def counted(*args, **kwargs):
        calls[0] += 1
        return render(*args, **kwargs)

    sim.renderer.render = counted
    return calls


def test_the_image_sensor_shares_the_rgb_pass_and_follows_obs_size(package):
    import mysensors.gray  # noqa: F401  (registers "gray")

    size = 48
    env = gym.make(GENERIC_ID, sensors=["rgb", "gray"], obs_size=size, max_steps=3)
    try:
        assert env.observation_space["gray"] == spaces.Box(0, 255, (size, size, 1), np.uint8)
        obs, _ = env.reset(seed=0)
        calls = _count_renders(env)
        for _ in range(2):
            obs, *_ = env.step("Turn<left><30>")
            luma = obs["rgb"] @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
            assert np.array_equal(obs["gray"][:, :, 0], np.round(luma).astype(np.uint8))
        assert calls[0] == 2  # one render per step for both image sensors
    finally:
        env.close()


def test_the_state_sensor_reads_the_body_and_costs_no_render(package):
    import mysensors.pelvis_height  # noqa: F401  (registers "pelvis_height")

    env = gym.make(GENERIC_ID, sensors=["pelvis_height"], privileged=True, max_steps=6)
    try:
        obs, _ = env.reset(seed=0)
        calls = _count_renders(env)
        start_y = env.unwrapped.task.public_state()["start_position"][1]
        for action in ("Walk<forward><normal>", "Sit down<0.45>", "Turn<left><20>"):
            obs, *_ = env.step(action)
            pelvis_y = env.unwrapped.privileged_state().realized_frame[1]
            assert obs == pytest.approx([pelvis_y - start_y], abs=1e-6)
        assert calls[0] == 0  # three steps, no render at all
    finally:
        env.close()
    with pytest.raises(ValueError, match="obs_size= sizes the sensors given by name"):
        gym.make(GENERIC_ID, sensors=[mysensors.pelvis_height.PelvisHeightSensor()], obs_size=64)
