"""The episode loop, policy resolution, batch runs (resume, crash isolation, executors)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401
from humanclaw_gym import Decision, SkillCall
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.evaluation import run_episode
from humanclaw_gym.evaluation.batch import (
    RunConfig,
    list_episode_specs,
    rollout_complete,
    rollout_dir,
    run_batch,
)
from humanclaw_gym.evaluation.policies import PolicySpecError, load_policy


class _Scripted:
    def __init__(self, calls):
        self.calls = list(calls)
        self.resets = 0

    def reset(self, episode_info):
        self.resets += 1
        self.i = 0

    def act(self, obs, info):
        call = self.calls[min(self.i, len(self.calls) - 1)]
        self.i += 1
        return Decision(call, visible_state="I see a chair.") if self.i % 2 else call


def test_run_episode_stop_and_truncation(tmp_path):
    env = gym.make(ENV_ID, split="val100", max_steps=4)
    try:
        res = run_episode(
            env, _Scripted([SkillCall.turn("left", 20), SkillCall.stop()]), output_dir=tmp_path
        )
        assert res.ended_by == "stop" and res.steps == 2
        assert [a.action for a in res.actions] == ["Turn<left><20>", "Stop/Stand"]
        res = run_episode(env, _Scripted([SkillCall.turn("left", 20)]))
        assert res.ended_by == "truncated" and res.steps == 4
    finally:
        env.close()
    data = json.loads((tmp_path / "episode_result.json").read_text())
    assert data["schema"] == "humanclaw_episode_result_v1" and data["ended_by"] == "stop"


def test_run_episode_rejects_bad_policy_output():
    class Bad:
        def reset(self, info):
            pass

        def act(self, obs, info):
            return "Walk<forward><slow>"

    env = gym.make(ENV_ID, split="val100", max_steps=2)
    try:
        with pytest.raises(TypeError, match="Decision or a SkillCall"):
            run_episode(env, Bad())
        res = run_episode(env, Bad(), raise_errors=False)
        assert res.ended_by == "error" and "TypeError" in res.error
    finally:
        env.close()


def test_oracle_needs_privileged_env():
    oracle = load_policy("oracle")
    env = gym.make(ENV_ID, split="val100", max_steps=2)
    try:
        with pytest.raises(PermissionError):
            run_episode(env, oracle)
    finally:
        env.close()


def test_policy_resolution():
    assert type(load_policy("random", seed=3)).__name__ == "RandomPolicy"
    assert (
        type(load_policy("humanclaw_agents.random_policy:RandomPolicy")).__name__ == "RandomPolicy"
    )
    with pytest.raises(PolicySpecError, match="unknown agent"):
        load_policy("no-such-agent")
    with pytest.raises(PolicySpecError, match="cannot import"):
        load_policy("no_such_module_xyz:Thing")
    with pytest.raises(PolicySpecError, match="model-config"):
        load_policy("psv")


def test_random_policy_is_seeded_per_episode():
    a, b = load_policy("random", seed=7), load_policy("random", seed=7)
    info = {"scene_id": "s", "episode_id": "e"}
    a.reset(info)
    b.reset(info)
    obs = np.zeros((448, 448, 3), np.uint8)
    assert [str(a.act(obs, info).action) for _ in range(10)] == [
        str(b.act(obs, info).action) for _ in range(10)
    ]


def test_episode_selection_forms(tmp_path):
    assert len(list_episode_specs("one")) == 1
    assert len(list_episode_specs("val100")) == 100
    specs = list_episode_specs("val100")[:2]
    lst = tmp_path / "list.json"
    lst.write_text(json.dumps([s.episode_id for s in specs]))
    assert [s.episode_id for s in list_episode_specs(str(lst))] == [s.episode_id for s in specs]
    lst.write_text(json.dumps(["not-an-episode"]))
    with pytest.raises(ValueError, match="not in the val split"):
        list_episode_specs(str(lst))
    with pytest.raises(ValueError):
        list_episode_specs("nonsense")


def _tree(root: Path) -> dict[str, str]:
    """Relative paths of the artifacts below root (content-independent set)."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.name != "metrics_summary.json"
    )


def test_batch_metrics_and_resume(tmp_path):
    specs = list_episode_specs("val100")[:3]
    config = RunConfig(
        agent="random", output=str(tmp_path / "a"), metrics=True, seed=1, max_steps=3
    )
    summary = run_batch(specs, config, workers=1, progress=False)
    assert (summary.completed, summary.failed, summary.skipped) == (3, 0, 0)
    for spec in specs:
        d = rollout_dir(config.output, spec)
        assert rollout_complete(d, config)
        assert (d / "metrics.json").is_file() and (d / "replay_manifest.json").is_file()
    assert (tmp_path / "a" / "metrics_summary.json").is_file()
    again = run_batch(specs, config, workers=1, resume=True, progress=False)
    assert (again.completed, again.skipped) == (0, 3)
    # a tampered artifact makes that one episode run again
    d0 = rollout_dir(config.output, specs[0])
    (d0 / "trajectory_after.npz").write_bytes(b"tampered")
    third = run_batch(specs, config, workers=1, resume=True, progress=False)
    assert (third.completed, third.skipped) == (1, 2)
    # a run killed while writing the final image (result file present, temp file left)
    d1 = rollout_dir(config.output, specs[1])
    (d1 / "final_ego.png").rename(d1 / ".final_ego.png.tmp")
    assert not rollout_complete(d1, config)
    fourth = run_batch(specs, config, workers=1, resume=True, progress=False)
    assert (fourth.completed, fourth.skipped) == (1, 2)
    assert (d1 / "final_ego.png").is_file() and not (d1 / ".final_ego.png.tmp").exists()


def test_run_episode_on_end_runs_before_the_result_file(tmp_path):
    seen = []

    def on_end(result):
        seen.append((result.ended_by, (tmp_path / "episode_result.json").exists()))

    env = gym.make(ENV_ID, split="val100", max_steps=2)
    try:
        run_episode(env, _Scripted([SkillCall.stop()]), output_dir=tmp_path, on_end=on_end)
    finally:
        env.close()
    assert seen == [("stop", False)] and (tmp_path / "episode_result.json").is_file()


def test_crash_of_one_episode_does_not_stop_the_batch(tmp_path):
    specs = list_episode_specs("val100")[:2]
    config = RunConfig(
        agent="tests.helpers_policies:CrashOnSecondEpisode", output=str(tmp_path), max_steps=2
    )
    sys.path.insert(0, str(Path(__file__).parent.parent))
    summary = run_batch(specs, config, workers=1, progress=False)
    assert summary.completed + summary.failed == 2
    assert summary.failed == 1
    failed = [r for r in summary.results if r["status"] == "failed"][0]
    assert "boom" in failed["error"]
    res = json.loads((Path(failed["dir"]) / "episode_result.json").read_text())
    assert res["ended_by"] == "error"


def test_killed_batch_resumed_equals_uninterrupted(tmp_path):
    """Kill a 2-worker batch mid-way, resume it, compare with an uninterrupted run."""
    args = [
        "--episodes",
        "val100",
        "--limit",
        "4",
        "--agent",
        "random",
        "--seed",
        "5",
        "--max-steps",
        "3",
        "--metrics",
        "--quiet",
    ]
    full = tmp_path / "full"
    subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "run", *args, "--output", str(full)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    part = tmp_path / "part"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "humanclaw_gym",
            "run",
            *args,
            "--workers",
            "2",
            "--output",
            str(part),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline and len(list(part.rglob("episode_result.json"))) < 1:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(part.rglob("episode_result.json")))
    assert done_before < 4, "the batch finished before it could be killed"
    subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "run", *args, "--resume", "--output", str(part)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert _tree(full) == _tree(part)
    for rel in _tree(full):
        if rel.endswith("trajectory_after.npz"):
            a, b = np.load(full / rel), np.load(part / rel)
            np.testing.assert_array_equal(a["realized"], b["realized"])


def test_motion_options_from_the_cli_reach_the_env_or_are_refused_early(tmp_path, capsys):
    from humanclaw_gym.cli.run_cmd import main as run_main
    from humanclaw_gym.cli.run_cmd import parse_motion_options
    from humanclaw_gym.evaluation.batch import _base_env, check_run_config, close_worker_envs

    assert parse_motion_options(("steps=10", "seat_guidance=false", "name=abc")) == (
        ("steps", 10),
        ("seat_guidance", False),
        ("name", "abc"),
    )
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_motion_options(("steps",))
    # refused before any worker or output exists, exit code 2, the allowed names listed
    out = tmp_path / "refused"
    argv = ["--episodes", "val100", "--limit", "1", "--agent", "random", "--quiet"]
    code = run_main([*argv, "--output", str(out), "--motion-option", "stepz=3"])
    assert code == 2 and not out.exists()
    assert "allowed ['fps', 'frames_per_chunk', 'history_frames']" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a registered motion generator"):
        check_run_config(RunConfig(motion="warp"))
    # an accepted option is passed to the generator the worker env builds
    config = RunConfig(motion_options=(("history_frames", 6),), max_steps=1)
    check_run_config(config)
    env = _base_env(config, "val100", False)
    try:
        env.reset(options={"episode_id": list_episode_specs("val100")[0].episode_id})
        assert env.motion_generator.history_frames == 6  # not the default 5
    finally:
        close_worker_envs()


# --------------------------------------------------------------------------------------
# the run fingerprint: one directory, one set of settings
# --------------------------------------------------------------------------------------


def _snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_resume_with_other_settings_is_refused_before_anything_runs(tmp_path, capsys):
    """The issue's case: a random-agent run resumed as the oracle with another seed and
    step limit used to skip every episode and summarise the random agent's results under
    the oracle's name."""
    from humanclaw_gym.cli.run_cmd import main as run_main

    out = tmp_path / "D"
    common = ["--episodes", "val100", "--metrics", "--quiet", "--output", str(out)]
    first = ["--limit", "1", "--max-steps", "1", "--agent", "random"]
    assert run_main([*common, *first]) == 0
    fingerprint = json.loads((out / "run_fingerprint.json").read_text())
    assert fingerprint["schema"] == "humanclaw_run_fingerprint_v1"
    assert fingerprint["settings"]["agent"] == "random"
    before = _snapshot(out)
    capsys.readouterr()
    other = ["--limit", "1", "--max-steps", "80", "--agent", "oracle", "--seed", "5"]
    for extra in (["--resume"], []):
        assert run_main([*common, *other, *extra]) == 2
        err = capsys.readouterr().err
        assert 'agent: recorded "random", now "oracle"' in err
        assert "max_steps: recorded 1, now 80" in err and "seed: recorded 0, now 5" in err
        assert ("--resume refused" in err) == bool(extra)
        assert _snapshot(out) == before, "nothing may run or be written"
    # the same settings resume, and --limit may grow: the first episode is reused
    assert (
        run_main([*common, "--limit", "2", "--max-steps", "1", "--agent", "random", "--resume"])
        == 0
    )
    assert "completed 1, skipped 1, failed 0" in capsys.readouterr().out


def test_fingerprint_records_settings_without_secrets_and_names_each_difference(
    tmp_path, monkeypatch
):
    from dataclasses import replace

    from humanclaw_gym.evaluation.fingerprint import FINGERPRINT_FILE, RunFingerprintError

    model = {
        "backend": "openai_compatible",
        "model": "m",
        "base_url": "https://example.invalid/v1",
        "api_key_env": "HC_TEST_KEY",
        "model_env": "HC_TEST_MODEL",
        "max_tokens": 100,
        "temperature": 0.0,
        "extra_body": {"api_key": "sk-SECRET-1", "top_k": 1},
        "headers": {"Authorization": "Bearer SECRET-2", "x-api-key": "SECRET-3"},
    }
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    monkeypatch.setenv("HC_TEST_KEY", "sk-SECRET-4")
    monkeypatch.setenv("HC_TEST_MODEL", "deployment-a")
    out = tmp_path / "run"
    config = RunConfig(agent="psv", model_config=str(path), output=str(out), seed=1, max_steps=4)
    run_batch([], config, progress=False)
    text = (out / FINGERPRINT_FILE).read_text()
    assert "SECRET" not in text
    settings = json.loads(text)["settings"]
    record = settings["model_config"]
    assert record["withheld"] == [
        "extra_body.api_key",
        "headers.Authorization",
        "headers.x-api-key",
    ]
    assert record["resolved_env"] == {"HC_TEST_MODEL": "deployment-a"}
    assert (
        record["config"]["api_key_env"] == "HC_TEST_KEY" and record["config"]["max_tokens"] == 100
    )
    assert settings["metric_rules"] == "paper" and settings["backend"]["motion"] == "procedural"
    assert not list(out.glob(".*.tmp"))
    umask = os.umask(0)
    os.umask(umask)
    assert (out / FINGERPRINT_FILE).stat().st_mode & 0o777 == 0o666 & ~umask

    def refused_fields(cfg: RunConfig) -> tuple[str, ...]:
        with pytest.raises(RunFingerprintError) as info:
            run_batch([], cfg, progress=False, resume=True)
        assert "SECRET" not in str(info.value)
        return info.value.fields

    # secrets are not settings: a new key changes nothing
    monkeypatch.setenv("HC_TEST_KEY", "sk-SECRET-5")
    path.write_text(json.dumps({**model, "extra_body": {"api_key": "sk-SECRET-6", "top_k": 1}}))
    run_batch([], config, progress=False, resume=True)
    path.write_text(json.dumps({**model, "temperature": 0.7}))
    assert refused_fields(config) == ("model_config.config.temperature",)
    path.write_text(json.dumps(model))
    monkeypatch.setenv("HC_TEST_MODEL", "deployment-b")
    assert refused_fields(config) == ("model_config.resolved_env.HC_TEST_MODEL",)
    monkeypatch.setenv("HC_TEST_MODEL", "deployment-a")
    tuned = replace(config, backend=config.backend.replace(motion_options={"history_frames": 6}))
    assert refused_fields(tuned) == ("backend.motion_options.history_frames",)
    assert refused_fields(replace(config, agent="random", seed=2)) == ("agent", "seed")
    other = [list_episode_specs("val100")[0]]
    with pytest.raises(RunFingerprintError) as info:
        run_batch(other, config, progress=False, resume=True)
    assert info.value.fields == ("episodes.sha256",)
    # a record written before metric rules existed is read as the paper rules
    data = json.loads((out / FINGERPRINT_FILE).read_text())
    del data["settings"]["metric_rules"]
    (out / FINGERPRINT_FILE).write_text(json.dumps(data))
    run_batch([], config, progress=False, resume=True)
    data["settings"]["metric_rules"] = "strict"
    (out / FINGERPRINT_FILE).write_text(json.dumps(data))
    assert refused_fields(config) == ("metric_rules",)


def test_results_without_a_fingerprint_are_not_resumed(tmp_path):
    from humanclaw_gym.evaluation.fingerprint import FINGERPRINT_FILE, RunFingerprintError

    spec = list_episode_specs("val100")[0]
    legacy = rollout_dir(tmp_path, spec)
    legacy.mkdir(parents=True)
    (legacy / "episode_result.json").write_text("{}")
    config = RunConfig(agent="random", output=str(tmp_path))
    with pytest.raises(RunFingerprintError, match="no run_fingerprint.json"):
        run_batch([], config, progress=False, resume=True)
    assert not (tmp_path / FINGERPRINT_FILE).exists()
    (tmp_path / FINGERPRINT_FILE).write_text("not json")
    with pytest.raises(RunFingerprintError, match="cannot be read"):
        run_batch([], config, progress=False)


def test_fingerprint_follows_checkpoint_contents(tmp_path):
    from humanclaw_gym.evaluation.fingerprint import RunFingerprintError, run_fingerprint

    ckpt = tmp_path / "policy.pt"
    ckpt.write_bytes(b"weights v1")
    config = RunConfig(agent=f"checkpoint:{ckpt}", output=str(tmp_path / "run"))
    episodes = {"selection": "val100", "sha256": "0" * 64}
    recorded = run_fingerprint(config, episodes)["settings"]
    assert len(recorded["agent_checkpoint_sha256"]) == 64
    run_batch([], config, progress=False)
    ckpt.write_bytes(b"weights v2")  # same path, other weights: other results
    with pytest.raises(RunFingerprintError) as info:
        run_batch([], config, progress=False, resume=True)
    assert info.value.fields == ("agent_checkpoint_sha256",)
