"""``humanclaw run --agent psv`` end to end against a loopback OpenAI-compatible server.

The server answers like a reasoning VLM (a think block and prose around the JSON). Five
val100 episodes run in a real ``humanclaw run`` process; every step must leave the
reference's two step records (planner and verifier) with the prompt sent and the reply
read, and the cost metrics must see the provider's token counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from chat_server import USAGE, ChatServer, prompt_text  # noqa: E402

_EPISODES = 5
_STEPS = 3
_KEY_ENV = "HUMANCLAW_LOOPBACK_KEY"


def _reply(body: dict[str, Any]) -> str:
    prompt = prompt_text(body)
    if "You check one proposed action" in prompt:
        answer = {"verdict": "accept", "reason": "the lane is clear", "final_action_id": 0}
    else:
        answer = {
            "visible_state": "A hallway; the lane ahead is clear; no couch visible.",
            "mid_level_progress_analysis": "Nothing found yet; keep exploring ahead.",
            "mid_level_goal": "walk down the hallway",
            "low_level_action_reasoning": "The floor ahead is free.",
            "action_id": 0,
            "action_name": "Walk<forward><slow>",
            "additional_info": {},
        }
    return f"<think>Looking at the picture.</think>\nMy answer:\n{json.dumps(answer)}\nDone."


def test_humanclaw_run_psv_against_a_loopback_server(tmp_path: Path):
    with ChatServer(_reply) as server:
        config = tmp_path / "model.json"
        config.write_text(
            json.dumps(
                {
                    "backend": "openai_compatible",
                    "model": "loopback-vlm",
                    "base_url": server.url + "/v1",
                    "api_key_env": _KEY_ENV,
                    "max_tokens": 512,
                    "temperature": 0.0,
                    "response_format": {"type": "json_object"},
                    "extra_body": {},
                    "timeout_s": 30,
                }
            )
        )
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env.update({_KEY_ENV: "loopback-key", "NO_PROXY": "127.0.0.1,localhost"})
        out = tmp_path / "run"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "humanclaw_gym",
                "run",
                "--episodes",
                "val100",
                "--limit",
                str(_EPISODES),
                "--agent",
                "psv",
                "--model-config",
                str(config),
                "--max-steps",
                str(_STEPS),
                "--metrics",
                "--quiet",
                "--output",
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"completed {_EPISODES}, skipped 0, failed 0" in proc.stdout
    # one preflight request before the first episode, then two calls per step
    assert len(server.requests) == 1 + _EPISODES * _STEPS * 2
    preflight = server.requests[0]["body"]
    assert preflight["stream"] is True and "image_url" not in json.dumps(preflight)
    assert not any(r["body"].get("stream") for r in server.requests[1:])

    results = sorted(out.rglob("episode_result.json"))
    assert len(results) == _EPISODES
    for result_path in results:
        rollout = result_path.parent
        result = json.loads(result_path.read_text())
        assert (result["ended_by"], result["steps"]) == ("truncated", _STEPS)
        for step in range(_STEPS):
            planner = json.loads((rollout / f"step{step:03d}_percept_mid_low.json").read_text())
            verifier = json.loads((rollout / f"step{step:03d}_verifier.json").read_text())
            assert "You choose both the plan and the skill" in planner["prompt"]
            assert planner["response"]["action_name"] == "Walk<forward><slow>"
            assert "You check one proposed action" in verifier["prompt"]
            assert verifier["response"]["verdict"] == "accept"
            for record in (planner, verifier):
                assert "error" not in record and record["attempts"] == 1
                assert record["retries"]["extraction"] == 0
                assert {"think_block", "prose_around"} <= set(record["recoveries"])
        metrics = json.loads((rollout / "metrics.json").read_text())
        assert "loopback-key" not in json.dumps(metrics)
        # the preflight's tokens are in no episode: each counts its own 2 calls per step
        assert metrics["tokens"]["input_tokens"] == USAGE["prompt_tokens"] * _STEPS * 2
