"""``humanclaw doctor``: the installation report, its exit codes and its isolation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from humanclaw_gym import doctor
from humanclaw_gym.cli import doctor_cmd


@pytest.fixture(autouse=True)
def _no_hide_env(monkeypatch):
    monkeypatch.delenv(doctor.HIDE_ENV_VAR, raising=False)


def test_report_is_json_serialisable_and_ready_here():
    report = doctor.installation_report()
    assert json.loads(json.dumps(report)) == report
    assert report["schema"] == "humanclaw_doctor_v2"
    assert report["ok"] is True and report["missing"] == []
    assert set(report["packages"]) == {p.name for p in doctor.PACKAGES}
    pyb = report["packages"]["pybullet"]
    assert pyb["installed"] and pyb["version"]
    assert report["probes"]["pybullet"]["ok"] is True
    assert report["ffmpeg"]["ok"] is True and report["ffmpeg"]["path"]
    defaults = report["defaults"]
    assert defaults["physics"]["name"] == "pybullet"
    assert defaults["motion"]["name"] == "procedural"
    if not report["packages"]["torch"]["installed"]:
        assert defaults["motion"]["flow_available"] is False
        assert "torch is not installed" in defaults["motion"]["reason"]
    render = defaults["render"]
    if report["probes"]["egl"]["ok"]:
        assert render["name"] == "moderngl" and "EGL" in render["reason"]
    else:
        assert render["name"] == "tiny" and "falls back" in render["reason"]


def test_cli_exit_0_and_json(capsys):
    assert doctor_cmd.main(["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True


def test_cli_table_output(capsys):
    assert doctor_cmd.main(["--no-probe"]) == 0
    out = capsys.readouterr().out
    assert "pybullet" in out and "defaults" in out and "result: OK" in out


def test_exit_1_names_pybullet_when_hidden_by_env_var(monkeypatch, capsys):
    monkeypatch.setenv(doctor.HIDE_ENV_VAR, "pybullet")
    assert doctor_cmd.main(["--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert any(m.startswith("pybullet") for m in report["missing"])
    assert report["packages"]["pybullet"]["hidden"] is True


def test_exit_1_when_the_pybullet_check_fails(monkeypatch, capsys):
    real = doctor._run_probe

    def fake(code, timeout_s):
        if "pybullet" in code:
            return {"ok": False, "detail": "the probe process crashed (SIGSEGV)", "seconds": 0.1}
        return real(code, timeout_s)

    monkeypatch.setattr(doctor, "_run_probe", fake)
    assert doctor_cmd.main([]) == 1
    out = capsys.readouterr().out
    assert "NOT READY" in out and "SIGSEGV" in out


def test_without_egl_the_default_renderer_falls_back_to_tiny():
    report = doctor.installation_report(["egl"])
    assert report["ok"] is True
    assert report["defaults"]["render"]["name"] == "tiny"
    assert "hidden" in report["defaults"]["render"]["reason"]
    report = doctor.installation_report(["egl", "pybullet"])
    assert report["defaults"]["render"]["name"] is None
    assert any("renderer" in m for m in report["missing"])


def test_missing_ffmpeg_is_not_ready():
    report = doctor.installation_report(["ffmpeg"], probe=False)
    assert report["ok"] is False
    assert any(m.startswith("ffmpeg") for m in report["missing"])


def test_unknown_hide_name_is_a_usage_error(capsys):
    with pytest.raises(ValueError, match="hide name 'nope'"):
        doctor.installation_report(["nope"])
    assert doctor_cmd.main(["--hide", "nope"]) == 2
    assert "allowed" in capsys.readouterr().err


def test_probe_crash_and_hang_are_contained():
    crashed = doctor._run_probe("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 10.0)
    assert crashed["ok"] is False and "SIGSEGV" in crashed["detail"]
    hung = doctor._run_probe("import time; time.sleep(30)", 0.5)
    assert hung["ok"] is False and "timed out" in hung["detail"]
    failed = doctor._run_probe("raise SystemExit('no EGL display')", 10.0)
    assert failed["ok"] is False and "no EGL display" in failed["detail"]


def test_doctor_imports_nothing_heavy():
    code = (
        "import sys, json\n"
        "from humanclaw_gym.doctor import installation_report\n"
        "report = installation_report()\n"
        "heavy = [m for m in ('pybullet', 'moderngl', 'glcontext', 'torch', 'openai', 'ray',"
        " 'matplotlib') if m in sys.modules]\n"
        "print(json.dumps({'ok': report['ok'], 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"ok": True, "heavy": []}


def test_console_entry_point_exit_codes():
    ok = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "doctor", "--json", "--no-probe"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["ok"] is True
    hidden = subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "doctor", "--hide", "pybullet", "--no-probe"],
        capture_output=True,
        text=True,
    )
    assert hidden.returncode == 1
    assert "pybullet" in hidden.stdout


def test_the_registry_is_listed_in_text_and_json(capsys):
    """Every kind of the one registry, with what is registered (a task registered by path
    here: listed, not imported)."""
    from humanclaw_gym import registry

    registry.register("task", "demo_task", "no_such_module_x:Task", description="a demo task")
    try:
        assert doctor_cmd.main(["--json", "--no-probe"]) in (0, 1)
        report = json.loads(capsys.readouterr().out)
        assert report["schema"] == "humanclaw_doctor_v2"
        listed = report["registered"]
        assert set(listed) == set(registry.KINDS)  # (--json sorts the keys)
        assert {"name": "demo_task", "where": "no_such_module_x:Task", "source": "code",
                "description": "a demo task"} in listed["task"]  # fmt: skip
        assert [e["name"] for e in listed["skill"]][:2] == ["walk", "stop"]
        assert {"pybullet", "mujoco"} <= {e["name"] for e in listed["physics"]}
        assert all("in_auto" in e for e in listed["render"])
        assert {"oracle", "random"} <= {e["name"] for e in listed["agent"]}
        doctor_cmd.main(["--no-probe"])
        text = capsys.readouterr().out
        section = text[text.index("\nregistered\n") :]
        assert "demo_task" in section and "a demo task" in section
        assert "agent    oracle" in section and "(tried by auto)" in section
    finally:
        registry.unregister("task", "demo_task")
