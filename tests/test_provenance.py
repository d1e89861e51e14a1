"""Every run summary says what produced it (interpreter, package versions, git revision)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, run_batch
from humanclaw_gym.provenance import REPORTED_PACKAGES, git_revision, run_environment


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
