"""Regression tests of the third hardening round, API side: the Ray executor's own local
cluster, id lists given as a bare string, damaged ``node.json`` records on ``--resume``.
Every test failed on the code before its fix (the transport's are in
``test_server_transport.py``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from humanclaw_gym.provenance import cpu_record, read_node_record

_ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


# ----------------------------------------------------------------------------------------
# Ray: without --ray-address the run starts a cluster of its own
# ----------------------------------------------------------------------------------------
class _Stop(Exception):
    pass


def _fake_ray(calls: list[dict[str, Any]]) -> types.ModuleType:
    ray = types.ModuleType("ray")
    ray.is_initialized = lambda: False  # type: ignore[attr-defined]

    def init(**kwargs: Any) -> None:
        calls.append(kwargs)

    def nodes() -> list[Any]:
        raise _Stop  # enough: the cluster has been chosen

    ray.init = init  # type: ignore[attr-defined]
    ray.nodes = nodes  # type: ignore[attr-defined]
    ray.shutdown = lambda: None  # type: ignore[attr-defined]
    return ray


def test_without_an_address_ray_starts_a_local_cluster_not_a_recorded_one(monkeypatch) -> None:
    """``ray.init()`` without an address joins whatever RAY_ADDRESS or the last ``ray
    start`` record names; the run used to fail there with a traceback when that cluster was
    gone. It must ask for a local cluster explicitly."""
    from humanclaw_gym.evaluation import ray_executor as rx
    from humanclaw_gym.evaluation.batch import EpisodeSpec, RunConfig

    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray(calls))
    spec = EpisodeSpec("val100", "hc_val_003", "hc_val_003_000", "chair")
    config = RunConfig(agent="random", output="unused")
    runner = rx.EpisodeRunner(*(lambda *a: None,) * 4)
    with pytest.raises(_Stop):
        rx.run_ray([spec], config, lambda r: None, runner, workers=2)
    assert len(calls) == 1 and calls[0]["address"] == "local"
    assert calls[0]["num_cpus"] == 2

    calls.clear()
    with pytest.raises(_Stop):
        rx.run_ray([spec], config, lambda r: None, runner, address="10.0.0.1:6379")
    assert calls == [{"address": "10.0.0.1:6379", "log_to_driver": False}]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_stale_local_cluster_record_does_not_stop_a_ray_run(tmp_path: Path) -> None:
    """The real thing: Ray's record of the last ``ray start`` names a cluster that is gone
    (as after a reboot); ``humanclaw run --executor ray`` runs on a cluster of its own."""
    pytest.importorskip("ray")
    # Ray's socket paths must stay short: its temp dir goes under /tmp, not tmp_path.
    ray_tmp = Path(tempfile.mkdtemp(prefix="hcray", dir="/tmp"))
    try:
        (ray_tmp / "ray").mkdir()
        (ray_tmp / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{_closed_port()}\n")
        env = {**os.environ, "RAY_TMPDIR": str(ray_tmp)}
        env.pop("RAY_ADDRESS", None)
        out = tmp_path / "out"
        args = ["run", "--episodes", "val100", "--limit", "1", "--agent", "random"]
        args += ["--max-steps", "2", "--executor", "ray", "--output", str(out), "--quiet"]
        proc = _cli(*args, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        assert "completed 1" in proc.stdout
        assert len(list(out.glob("*/rollout_00/episode_result.json"))) == 1
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


# ----------------------------------------------------------------------------------------
# a bare string where a list of ids is taken
# ----------------------------------------------------------------------------------------
def test_a_bare_string_of_episode_ids_is_refused_in_one_line() -> None:
    """``episode_ids="hc_val_003_000"`` was read as ['h', 'c', '_', ...]."""
    from humanclaw_gym.envs.task import load_episodes

    with pytest.raises(ValueError) as info:
        load_episodes("val100", episode_ids="hc_val_003_000")
    message = str(info.value)
    assert "single string" in message and "['hc_val_003_000']" in message
    assert "\n" not in message
    chosen = load_episodes("val100", episode_ids=["hc_val_003_000"])
    assert [e.episode_id for e in chosen] == ["hc_val_003_000"]
    chosen = load_episodes("val100", episode_ids=("hc_val_003_003", "hc_val_003_000"))
    assert [e.episode_id for e in chosen] == ["hc_val_003_003", "hc_val_003_000"]


def test_the_image_goal_task_reads_episode_ids_the_same_way() -> None:
    """Both built-in tasks pick their episodes with ``tasks.base.episode_list``."""
    from humanclaw_gym.tasks.image_goal import ImageGoalTask

    with pytest.raises(ValueError, match="episode_ids='ig_val_003_000' is a single string"):
        ImageGoalTask.load_episodes("imagegoal_val100", episode_ids="ig_val_003_000")
    with pytest.raises(ValueError, match="not in split 'imagegoal_val100'"):
        ImageGoalTask.load_episodes("imagegoal_val100", episode_ids=["nope"])
    picked = ImageGoalTask.load_episodes(
        "imagegoal_val100", episode_ids=["ig_val_003_001", "ig_val_003_000"]
    )
    assert [e.episode_id for e in picked] == ["ig_val_003_001", "ig_val_003_000"]
    with pytest.raises(ValueError, match="has no episodes"):
        ImageGoalTask.load_episodes("imagegoal_val100", episodes=[])


def test_the_env_refuses_a_bare_string_of_episode_ids() -> None:
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

    with pytest.raises(ValueError, match="episode_ids='hc_val_003_000' is a single string"):
        FindNavInteractEnv(episode_ids="hc_val_003_000")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"hc_val_003_000", "single string"),
        ({"hc_val_003_000", "hc_val_003_003"}, "list or tuple"),
        (3, "list or tuple"),
        (["hc_val_003_000", 3], r"episode_ids\[1\] must be an id string"),
        ([None], r"episode_ids\[0\] must be an id string"),
    ],
)
def test_id_lists_must_be_ordered_lists_of_strings(value: Any, expected: str) -> None:
    from humanclaw_gym.id_lists import check_id_list

    with pytest.raises(ValueError, match=expected):
        check_id_list(value, "episode_ids")


def test_scene_id_lists_of_the_scene_dataset_refuse_a_bare_string(tmp_path: Path) -> None:
    pytest.importorskip("trimesh")
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    dataset = SceneDataset(write_synthetic_dataset(tmp_path / "ds").root)
    scene = dataset.scene_ids[0]
    with pytest.raises(ValueError, match="scene_ids=.* is a single string"):
        dataset.missing_scenes(scene)
    with pytest.raises(ValueError, match="scene_ids=.* is a single string"):
        dataset.asset_report(scene)
    assert dataset.missing_scenes([scene, "nope"]) == ["nope"]
    assert dataset.asset_report([scene])["scenes"] == 1


# ----------------------------------------------------------------------------------------
# damaged node.json records
# ----------------------------------------------------------------------------------------
def _nested(depth: int) -> str:
    return '{"schema": "humanclaw_node_v1", "cpu": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


@pytest.mark.parametrize(
    "text",
    [
        _nested(100_000),  # deeper than the decoder takes (RecursionError)
        _nested(600),  # decodes, but is no CPU record
        json.dumps({"schema": "humanclaw_node_v1", "cpu": {**cpu_record(), "model": ["x"]}}),
        json.dumps({"schema": "humanclaw_node_v1", "cpu": {**cpu_record(), "extra": 1}}),
        json.dumps({"schema": "humanclaw_node_v1", "cpu": {**cpu_record(), "blas": {"a": 1}}}),
        json.dumps({"schema": "humanclaw_node_v1", "cpu": {**cpu_record(), "numpy_simd": "X"}}),
        "[]",
        "\xff",
    ],
)
def test_a_damaged_node_record_reads_as_none_with_its_problem(tmp_path: Path, text: str) -> None:
    from humanclaw_gym.provenance import node_record_problem

    (tmp_path / "node.json").write_text(text, encoding="utf-8", errors="surrogateescape")
    assert read_node_record(tmp_path) is None
    problem = node_record_problem(tmp_path)
    assert problem is not None and "node.json" in problem and "\n" not in problem


def test_a_well_formed_node_record_reads_back(tmp_path: Path) -> None:
    from humanclaw_gym.provenance import node_record_problem, write_node_record

    assert node_record_problem(tmp_path) is None  # none at all: an older folder
    write_node_record(tmp_path)
    assert read_node_record(tmp_path) == cpu_record()
    assert node_record_problem(tmp_path) is None


def test_resume_reruns_an_episode_whose_node_record_is_nested_too_deeply(tmp_path: Path) -> None:
    """``run --resume`` used to end in a RecursionError traceback."""
    out = tmp_path / "run"
    args = ["run", "--episodes", "val100", "--limit", "2", "--agent", "random"]
    args += ["--max-steps", "1", "--metrics", "--output", str(out)]
    first = _cli(*args)
    assert first.returncode == 0, first.stderr
    folders = sorted(out.glob("*/rollout_00"))
    (folders[0] / "node.json").write_text(_nested(100_000))
    again = _cli(*args, "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Traceback" not in again.stderr
    assert "completed 1, skipped 1" in again.stdout
    assert read_node_record(folders[0]) == cpu_record()  # rewritten by the rerun
    summary = json.loads((out / "metrics_summary.json").read_text())["environment"]
    assert summary["episode_cpus"] == [{"cpu": cpu_record(), "episodes": 2}]
