"""The Ray executor: the same per-episode function as the local one, its folders sent back
to the driver through Ray's object store, byte for byte; lost workers and broken transfers
leave nothing at the driver and fail the run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from humanclaw_gym.evaluation import artifacts
from humanclaw_gym.evaluation import ray_executor as rx
from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, rollout_dir, run_batch

ray = pytest.importorskip("ray")

_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_ROOT))

from tests.helpers_scale import EXIT_EPISODE_ENV  # noqa: E402

WALL_CLOCK_FIELDS = {
    "episode_result.json": ("wall_time_s",),
    "replay_manifest.json": ("started_unix_s", "written_unix_s"),
}
"""The only per-episode content that differs between two runs of the same episode."""


def assert_same_episode_folders(a: Path, b: Path) -> int:
    """Every file of every episode folder equal byte for byte, except the wall-clock fields
    above (compared with those fields removed); returns the number of files compared."""
    files_a = sorted(p.relative_to(a) for p in a.glob("*/rollout_00/**/*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.glob("*/rollout_00/**/*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        fields = WALL_CLOCK_FIELDS.get(rel.name)
        if fields is None:
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
        else:
            ja, jb = json.loads((a / rel).read_text()), json.loads((b / rel).read_text())
            for f in fields:
                assert f in ja and f in jb
                ja.pop(f), jb.pop(f)
            assert ja == jb, rel
    return len(files_a)


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray instance for the module; the workers can import ``tests.*``."""
    exit_episode = list_episode_specs("val100")[1].episode_id
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={
            "env_vars": {
                "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")]),
                EXIT_EPISODE_ENV: exit_episode,
            }
        },
    )
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_folders_equal_the_local_executors_byte_for_byte(tmp_path, ray_session, monkeypatch):
    monkeypatch.setattr(artifacts, "CHUNK_BYTES", 4096)  # the videos travel in many chunks
    specs = list_episode_specs("val100")[:3]
    kwargs = dict(agent="random", metrics=True, video=True, seed=4, max_steps=3)
    local = RunConfig(output=str(tmp_path / "local"), **kwargs)
    remote = RunConfig(output=str(tmp_path / "ray"), **kwargs)
    a = run_batch(specs, local, workers=1, progress=False)
    b = run_batch(specs, remote, workers=2, executor="ray", progress=False)
    assert (a.completed, b.completed) == (3, 3)
    assert assert_same_episode_folders(tmp_path / "local", tmp_path / "ray") == 3 * 9
    assert (rollout_dir(remote.output, specs[0]) / "ego.mp4").stat().st_size > 4096
    for res in b.results:
        assert res["dir"] == str(
            rollout_dir(remote.output, next(s for s in specs if s.episode_id == res["episode_id"]))
        )
    assert not b.mixed_cpus and b.cpu_records[0]["episodes"] == 3
    # resume checks the driver's copy: nothing to run again
    c = run_batch(specs, remote, workers=2, executor="ray", resume=True, progress=False)
    assert (c.skipped, c.completed) == (3, 0)


@pytest.mark.slow
def test_lost_workers_and_broken_transfers_leave_nothing_and_fail(
    tmp_path, ray_session, monkeypatch
):
    specs = list_episode_specs("val100")[:3]  # the fixture makes the second one exit
    config = RunConfig(
        agent="tests.helpers_scale:ExitMidEpisode", output=str(tmp_path / "out"), max_steps=3
    )
    broken = rollout_dir(config.output, specs[2])

    class FullDisk(rx.FolderReceiver):
        def write(self, chunk):
            if self.target == broken:
                raise OSError(28, "No space left on device")
            super().write(chunk)

    monkeypatch.setattr(rx, "FolderReceiver", FullDisk)
    summary = run_batch(specs, config, workers=2, executor="ray", progress=False)
    assert (summary.completed, summary.failed) == (1, 2)
    errors = {r["episode_id"]: r.get("error") or "" for r in summary.results}
    assert "worker was lost" in errors[specs[1].episode_id]
    assert "did not reach the driver" in errors[specs[2].episode_id]
    assert "No space left" in errors[specs[2].episode_id]
    assert (rollout_dir(config.output, specs[0]) / "episode_result.json").is_file()
    for spec in specs[1:]:  # nothing half-written: not even a staging folder
        folder = rollout_dir(config.output, spec).parent
        assert not folder.exists() or not any(folder.iterdir()), list(folder.iterdir())


@pytest.mark.slow
def test_resources_no_node_offers_are_refused(tmp_path, ray_session):
    config = RunConfig(agent="random", output=str(tmp_path / "out"), max_steps=1)
    with pytest.raises(rx.RayClusterError, match="no node of the local Ray cluster offers"):
        run_batch(
            list_episode_specs("val100")[:1],
            config,
            executor="ray",
            progress=False,
            ray_resources={"vlm_node": 1},
        )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_ray_address_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "humanclaw_gym",
            "run",
            "--episodes",
            "val100",
            "--limit",
            "1",
            "--agent",
            "random",
            "--executor",
            "ray",
            "--ray-address",
            f"127.0.0.1:{_closed_port()}",
            "--output",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "no Ray cluster can be reached" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_task_resources_parse_or_are_refused():
    assert rx.parse_task_resources(["CPU=0.25", "vlm_node=1"]) == {"CPU": 0.25, "vlm_node": 1.0}
    for bad in (["CPU"], ["CPU=0"], ["=1"], ["CPU=x"], ["CPU=nan"], ["a=1", "a=2"]):
        with pytest.raises(ValueError, match="ray-task-resources"):
            rx.parse_task_resources(bad)
    with pytest.raises(rx.RayAddressError, match="invalid"):
        rx.check_ray_address("no-port")


# ---- the policy's status line on the progress bar --------------------------------------------
@pytest.mark.slow
def test_the_progress_bar_shows_a_waiting_policy_of_a_ray_task(tmp_path, ray_session, capfd):
    """As from the local executor's workers (tests/test_endpoints.py): the Ray executor
    showed no status line."""
    config = RunConfig(
        agent="tests.helpers_endpoints:WaitingPolicy", output=str(tmp_path), max_steps=1
    )
    summary = run_batch(
        list_episode_specs("val100")[:1], config, workers=1, executor="ray", progress=True
    )
    assert summary.completed == 1
    err = capfd.readouterr().err
    assert "waiting=endpoint retry for step 0: attempt 2/5 in 0.4 s" in err, err[-2000:]


def test_a_task_sends_its_status_lines_while_the_episode_runs(tmp_path):
    """The task side of the channel, without a cluster: the lines the policy reports during
    the episode go into the queue, in order; none before or after it (the worker process
    runs other tasks next), and a queue that fails does not fail the episode."""
    import logging

    from humanclaw_gym.evaluation.status import POLICY_STATUS_LOGGER, report_status

    class Queue:
        def __init__(self, fail: bool = False) -> None:
            self.lines: list[str] = []
            self.fail = fail

        def put_nowait(self, line: str) -> None:
            if self.fail:
                raise ConnectionError("the driver is gone")
            self.lines.append(line)

    def run(spec, config):
        report_status("attempt 2/5 in 1 s:\n refused")
        report_status("")
        folder = Path(config.output) / "ep"
        folder.mkdir(parents=True)
        (folder / "a.txt").write_text("a")
        return {"status": "completed"}

    runner = rx.EpisodeRunner(
        run, lambda output, spec: Path(output) / "ep", lambda folder: None, lambda: None
    )
    logger = logging.getLogger(POLICY_STATUS_LOGGER)
    handlers = list(logger.handlers)
    sent, failing = Queue(), Queue(fail=True)
    for queue in (sent, failing):
        task = rx._episode_task(runner, None, RunConfig(output=str(tmp_path)), None, 4096, queue)
        header = next(task)
        assert header["summary"] == {"status": "completed"}
        list(task)
        report_status("after the task: nobody listens")
        assert logger.handlers == handlers
    assert sent.lines == ["attempt 2/5 in 1 s: refused", ""] and failing.lines == []
