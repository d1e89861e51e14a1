"""Smoke tests: the example scripts run as a user would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_custom_planner_script_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "custom_planner.py"), "--episodes", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "after" in out.stdout and "steps" in out.stdout


def test_torch_policy_example_runs():
    pytest.importorskip("torch")
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "torch_policy_example.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "steps" in out.stdout


def test_cli_help_lists_commands():
    out = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for cmd in (
        "run",
        "rollout",
        "metrics",
        "render",
        "report",
        "serve",
        "doctor",
        "episodes",
        "scenes",
    ):
        assert cmd in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--episodes" in out.stdout and "--resume" in out.stdout


def test_cli_unknown_command_exits_2():
    out = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "frobnicate"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "unknown command" in out.stderr
