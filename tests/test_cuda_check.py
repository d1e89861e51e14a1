"""benchmarks/cuda_check.py on a machine without a GPU: the one-line refusal (exit 2,
nothing written), and its checks run with the CPU standing in for the device (a tiny
random-weight model in the release's layout)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "cuda_check.py"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("cuda_check_under_test", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_cuda_it_says_so_in_one_line_and_exits_2(tmp_path) -> None:
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(_PATH), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no CUDA device" in lines[0] and "--dry-run" in lines[0]
    assert not out.exists()


def test_the_device_comparison_and_timing_run_on_the_cpu(check, tmp_path) -> None:
    """CPU against CPU from the same noise: identical chunks for every skill, twice in a
    row; a perturbed noise is caught by the tolerance; the timing reports its ratio."""
    from humanclaw_gym.motion.paper import clear_model_cache
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    root = tmp_path / "release"
    write_synthetic_release(root, seed=2, hidden_dim=32, num_layers=2, num_heads=2, nfe_steps=4)
    options = {"release_dir": str(root), "num_threads": 1}
    try:
        same = check.compare_devices(options, "cpu", 1e-3)
        assert same["ok"] and same["chunks"] == 16
        assert same["max_abs_difference_frames"] == 0.0
        assert {row["call"] for row in same["per_chunk"]} == set(check.CALLS)
        timing = check.time_decisions(options, "cpu", repeats=1)
        assert timing["one_decision_ms"] > 0.0 and timing["batch_of_8_ms"] > 0.0
        assert timing["ok"] == (timing["batch_over_one"] <= 3.0)
    finally:
        clear_model_cache()


def test_a_differing_device_fails_the_comparison(check, tmp_path, monkeypatch) -> None:
    from humanclaw_gym.motion.paper import clear_model_cache
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    root = tmp_path / "release"
    write_synthetic_release(root, seed=2, hidden_dim=32, num_layers=2, num_heads=2, nfe_steps=4)
    chunk = check._chunk_with_noise
    calls = {"n": 0}

    def skewed(gen, call, noise):  # every second generator sees other noise
        calls["n"] += 1
        return chunk(gen, call, noise + (0.5 if calls["n"] % 2 == 0 else 0.0))

    monkeypatch.setattr(check, "_chunk_with_noise", skewed)
    try:
        out = check.compare_devices({"release_dir": str(root), "num_threads": 1}, "cpu", 1e-3)
    finally:
        clear_model_cache()
    assert not out["ok"] and out["max_abs_difference_frames"] > 1e-3


def test_the_ego_view_renders_on_an_egl_device(check) -> None:
    pytest.importorskip("moderngl")
    out = check.render_ego(repeats=1, need_gpu=False)
    if not any("gl_renderer" in d for d in out["egl_devices"]):
        pytest.skip("no EGL device on this machine")
    assert out["ok"], out
    assert out["scene_pixels"] > 1000 and out["ego_render_ms"] > 0.0
    software_only = all(d["software"] for d in out["egl_devices"] if "gl_renderer" in d)
    assert (out["gpu_device"] is None) == software_only
    if software_only:  # a GPU is required outside --dry-run
        assert not check.render_ego(repeats=1, need_gpu=True)["ok"]
