"""Every run summary says what produced it (interpreter, package versions, git revision)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, run_batch
from humanclaw_gym.provenance import (
    REPORTED_PACKAGES,
    cpu_record,
    episode_cpu_groups,
    git_revision,
    run_environment,
    write_node_record,
)


def test_run_environment_reports_versions_without_importing():
    env = run_environment()
    assert set(env["packages"]) == set(REPORTED_PACKAGES)
    assert env["packages"]["numpy"] and env["packages"]["pybullet"]
    assert env["python"].count(".") == 2
    assert env["cpu"]["machine"]
    assert env["cpu"]["numpy_simd"] is None or isinstance(env["cpu"]["numpy_simd"], list)


def test_cpu_record_follows_the_simd_targets_numpy_uses():
    """A run with AVX-512 switched off in numpy says so (its figures differ, docs/baselines.md)."""
    env = run_environment()["cpu"]["numpy_simd"]
    if not env or "X86_V4" not in env:
        return  # nothing to switch off on this CPU
    code = "import json; from humanclaw_gym.provenance import cpu_record; print(json.dumps(cpu_record()))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    simd = json.loads(out)["numpy_simd"]
    assert "X86_V4" not in simd and "X86_V3" in simd


def test_git_revision_of_a_checkout_and_of_a_plain_directory(tmp_path):
    assert git_revision(tmp_path) is None
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f.txt").write_text("a")
    run("add", "f.txt")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    rev = git_revision(tmp_path)
    assert rev is not None and len(rev["commit"]) == 40 and rev["dirty"] is False
    (tmp_path / "f.txt").write_text("b")
    assert git_revision(tmp_path)["dirty"] is True


def test_metrics_summary_records_the_environment(tmp_path):
    specs = list_episode_specs("val100")[:1]
    config = RunConfig(agent="random", output=str(tmp_path), metrics=True, max_steps=1)
    run_batch(specs, config, workers=1, progress=False)
    summary = json.loads((tmp_path / "metrics_summary.json").read_text())
    assert summary["environment"]["packages"]["humanclaw-gym"]
    assert (
        summary["environment"]["packages"]["pybullet"] == run_environment()["packages"]["pybullet"]
    )


def test_each_episode_records_its_cpu_and_a_mixed_run_says_so(tmp_path):
    """node.json per episode; a run whose episodes ran on two CPU records warns at the end
    and says so in its summary (here the second record is planted, as a node whose numpy
    runs other SIMD targets would write it; tests/test_ray_cluster.py does it for real)."""
    out = tmp_path / "run"
    args = ["run", "--episodes", "val100", "--limit", "2", "--agent", "random"]
    args += ["--max-steps", "1", "--metrics", "--quiet", "--output", str(out)]
    first = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", *args], capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    assert "warning" not in first.stderr
    folders = sorted(out.glob("*/rollout_00"))
    records = [json.loads((f / "node.json").read_text()) for f in folders]
    assert records[0] == records[1] == {"schema": "humanclaw_node_v1", "cpu": cpu_record()}
    summary = json.loads((out / "metrics_summary.json").read_text())["environment"]
    assert summary["mixed_cpus"] is False
    assert summary["episode_cpus"] == [{"cpu": cpu_record(), "episodes": 2}]

    other = {**cpu_record(), "numpy_simd": ["X86_V2"]}
    (folders[1] / "node.json").write_text(json.dumps({"schema": "humanclaw_node_v1", "cpu": other}))
    again = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", *args, "--resume"], capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert "skipped 2" in again.stdout
    warning = [line for line in again.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "2 different CPU records" in warning[0], again.stderr
    assert "numpy SIMD: X86_V2" in warning[0]
    summary = json.loads((out / "metrics_summary.json").read_text())["environment"]
    assert summary["mixed_cpus"] is True
    assert sorted(g["episodes"] for g in summary["episode_cpus"]) == [1, 1]


def test_cpu_groups_count_folders_without_a_record_apart(tmp_path):
    a, b, c = (tmp_path / n for n in "abc")
    for folder in (a, b, c):
        folder.mkdir()
    write_node_record(a)
    write_node_record(b)
    groups = episode_cpu_groups([a, b, c, tmp_path / "never_ran"])
    assert groups == [{"cpu": cpu_record(), "episodes": 2}, {"cpu": None, "episodes": 1}]
