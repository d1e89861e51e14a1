"""What a new user runs first: the README smoke rollout, ``--agent module:Class`` from the
current directory, and a policy that cannot be imported."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from humanclaw_gym.evaluation.policies import PolicySpecError, resolve_policy_factory

ROOT = Path(__file__).resolve().parents[1]


def test_agent_module_is_imported_from_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "mypolicies").mkdir()
    (tmp_path / "mypolicies" / "planner_x9.py").write_text(
        "class Planner:\n    def reset(self, info):\n        pass\n"
    )
    monkeypatch.chdir(tmp_path)
    # a console script's sys.path starts with its bin directory, not the working directory
    cwd = str(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", cwd)])
    factory, _ = resolve_policy_factory("mypolicies.planner_x9:Planner")
    assert factory.__name__ == "Planner"
    assert sys.path[0] == cwd


def test_docs_example_agent_runs_from_the_repository_root(tmp_path):
    """docs/policies.md / scripts/custom_planner.py: ``humanclaw run --agent
    scripts.custom_planner:BrightnessPlanner`` from the repository root."""
    episodes = tmp_path / "one.json"
    from humanclaw_gym.episodes import load_split

    episodes.write_text(json.dumps([load_split("val100")[0].episode_id]))
    humanclaw = Path(sys.executable).with_name("humanclaw")
    out = subprocess.run(
        [str(humanclaw), "run", "--agent", "scripts.custom_planner:BrightnessPlanner",
         "--episodes", str(episodes), "--max-steps", "2", "--output", str(tmp_path / "out"),
         "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "completed 1, skipped 0, failed 0" in out.stdout


def test_a_policy_that_cannot_be_imported_fails_once_before_any_episode(tmp_path, capsys):
    from humanclaw_gym.cli import main

    code = main(
        ["run", "--agent", "no_such_pkg_x9.mod:Policy", "--episodes", "val100",
         "--output", str(tmp_path / "out"), "--quiet"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("cannot import policy module 'no_such_pkg_x9.mod'") == 1
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(PolicySpecError, match="current directory"):
        resolve_policy_factory("no_such_pkg_x9.mod:Policy")


def _readme_rollout_command() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"`(humanclaw rollout [^`|]*)`", readme)
    assert match, "README has no humanclaw rollout command"
    return shlex.split(match.group(1))


def test_readme_smoke_rollout_shows_a_multi_step_episode(tmp_path, capsys):
    from humanclaw_gym.cli import main

    argv = _readme_rollout_command()
    assert argv[:2] == ["humanclaw", "rollout"]
    code = main([*argv[1:], "--output", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    steps = int(re.search(r"after (\d+) steps", out).group(1))
    assert steps >= 5, out
    metrics = re.search(r"^metrics: (.*)$", out, re.M).group(1)
    values = dict(item.split("=") for item in metrics.split(", "))
    assert "None" not in values.values()
    assert float(values["collision_rate"]) >= 0.0 and float(values["motion_jerk_m_s3"]) > 0.0
    from humanclaw_gym.episodes import load_split

    episode = load_split("val100")[0]  # the smoke test's episode
    assert episode.episode_id in out
    # it walked towards the target: well inside the distance it started from
    assert float(values["final_distance_m"]) < episode.info.euclidean_distance - 0.5
    assert not re.search(r"\d\.\d{4,}", metrics)  # rounded for reading


def test_readme_vector_example_runs(tmp_path):
    """The README's vector env example, as a script (async workers start with spawn, so
    the ``if __name__ == "__main__":`` guard is needed and present)."""
    readme = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "make_vec" in b)
    script = tmp_path / "vector_example.py"
    script.write_text(re.sub(r"^  ", "", block, flags=re.M))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
