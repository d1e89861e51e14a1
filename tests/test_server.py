"""The benchmark server end to end: a real ``humanclaw serve`` subprocess on loopback.

Covers: side-effect-free import/start/describe, loopback-only binding and token checks,
trajectory equality with the in-process env (driver and hand-written clients), sequence
and invalid-action refusals without state change, authentication, artifact path safety,
the fixed plan and its claims, privileged refusal, counting, and fuzzed request bodies.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from humanclaw_gym.policy import Decision, Usage
from humanclaw_gym.server.client import (
    PrivilegedPolicyError,
    ServerClient,
    ServerError,
    ServerUnauthorizedError,
    decode_observation,
)
from humanclaw_gym.server.plan import plan_order
from humanclaw_gym.server.service import METHODS
from humanclaw_gym.skills import SkillCall

_TOKEN = secrets.token_urlsafe(32)
_MAX_STEPS = 3
_SEED = 7
_LIMIT = 14
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1] / "humanclaw_gym")


# --------------------------------------------------------------------------------------
# server process helpers
# --------------------------------------------------------------------------------------


class ServerProcess:
    """A ``humanclaw serve`` subprocess listening on a free loopback port."""

    def __init__(self, root: Path, *extra: str) -> None:
        self.root = root
        self.output_dir = root / "out"
        self.ready_file = root / "ready.json"
        self.log_path = root / "server.log"
        env = dict(os.environ, HUMANCLAW_SERVER_TOKEN=_TOKEN, LP_NUM_THREADS="1")
        args = [
            sys.executable, "-m", "humanclaw_gym", "serve",
            "--port", "0",
            "--output-dir", str(self.output_dir),
            "--ready-file", str(self.ready_file),
            "--episodes", "val100",
            "--seed", str(_SEED),
            "--limit", str(_LIMIT),
            "--max-steps", str(_MAX_STEPS),
            *extra,
        ]  # fmt: skip
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60.0
        while not self.ready_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server did not start:\n{self.log()}")
            time.sleep(0.05)
        ready = json.loads(self.ready_file.read_text())
        self.port = int(ready["port"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = ServerClient(self.url, token=_TOKEN, timeout_s=60.0)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def post(
    port: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    path: str = "/rpc",
) -> tuple[int, dict[str, Any]]:
    """A raw HTTP request; returns (status, decoded JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        hdrs = {"Content-Type": "application/json", "Authorization": f"Bearer {_TOKEN}"}
        if headers is not None:
            hdrs = dict(headers)
        conn.putrequest(method, path, skip_accept_encoding=True)
        for key, value in hdrs.items():
            conn.putheader(key, value)
        if "Content-Length" not in hdrs:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, json.loads(response.read().decode("utf-8"))
    finally:
        conn.close()


def raw_request(port: int, data: bytes) -> bytes:
    """Send raw bytes and return everything the server answers before closing."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def rpc(port: int, method: str, params: Any = None, **headers: str) -> tuple[int, dict[str, Any]]:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        payload["params"] = params
    hdrs = {"Content-Type": "application/json", **headers}
    hdrs.setdefault("Authorization", f"Bearer {_TOKEN}")
    return post(port, json.dumps(payload).encode(), hdrs)


def error_name(exc: pytest.ExceptionInfo[ServerError]) -> str:
    return exc.value.name


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("server"))
    try:
        yield proc
    finally:
        proc.stop()
    assert _TOKEN not in proc.log(), "the token must never be logged"


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("fuzz"))
    try:
        yield proc
    finally:
        proc.stop()
    assert _TOKEN not in proc.log()


@pytest.fixture(scope="module")
def local_env() -> Iterator[Any]:
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv

    env = FindNavInteractEnv(split="val100", max_steps=_MAX_STEPS)
    try:
        yield env
    finally:
        env.close()


def run_local(
    env: Any, episode_id: str, actions: list[str], out: Path
) -> tuple[list[np.ndarray], dict]:
    """The same episode in-process with the server's wrappers; returns the observations
    (after reset and after every step) and the final metrics."""
    from humanclaw_gym.replay.layout import flat_dir
    from humanclaw_gym.wrappers import MetricsWrapper, TrajectoryWrapper

    traj = TrajectoryWrapper(env, out, episode_dir_fn=flat_dir)
    wrapped = MetricsWrapper(traj, out, episode_dir_fn=flat_dir)
    try:
        obs, _ = wrapped.reset(options={"episode_id": episode_id})
        observations = [obs]
        metrics: dict = {}
        for text in actions:
            obs, _, term, trunc, info = wrapped.step(SkillCall.parse(text))
            observations.append(obs)
            metrics = info.get("metrics", metrics)
            if term or trunc:
                break
    finally:
        traj.detach()
        wrapped.detach()
    return observations, metrics


def realized(npz_bytes_or_path: bytes | Path) -> dict[str, np.ndarray]:
    source = (
        io.BytesIO(npz_bytes_or_path) if isinstance(npz_bytes_or_path, bytes) else npz_bytes_or_path
    )
    with np.load(source) as data:
        return {k: data[k].copy() for k in data.files}


def artifact(client: ServerClient, finish: dict, name: str) -> bytes:
    (item,) = [a for a in finish["artifacts"] if a["path"].endswith("/" + name)]
    return client.read_artifact(item["path"])


class ScriptedPolicy:
    """Plays a fixed list of actions and records every observation it is shown."""

    def __init__(self, actions: list[str], visible_state: str | None = None) -> None:
        self.actions = actions
        self.visible_state = visible_state
        self.seen: list[np.ndarray] = []
        self.infos: list[dict[str, Any]] = []

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        self.seen.clear()
        self.infos.clear()

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision:
        self.seen.append(observation.copy())
        self.infos.append(dict(info))
        return Decision(
            SkillCall.parse(self.actions[len(self.seen) - 1]), visible_state=self.visible_state
        )


# --------------------------------------------------------------------------------------
# start-up, binding, token
# --------------------------------------------------------------------------------------


def test_import_start_and_describe_have_no_side_effects(tmp_path: Path) -> None:
    code = f"""
import sys
import humanclaw_gym.server as srv
from humanclaw_gym.server import client, plan, protocol, service, session, transport, artifacts
from humanclaw_gym.server.plan import EpisodePlan
from humanclaw_gym.server.service import BenchService
p = EpisodePlan.from_selection("val100", 3, {str(tmp_path / "out")!r}, limit=4)
s = BenchService(p, max_steps=2)
server = transport.make_server(s, "x" * 40, port=0)
r = s.handle({{"jsonrpc": "2.0", "id": 1, "method": "describe"}})
server.server_close()
assert r["result"]["plan"]["size"] == 4, r
assert s._env is None
heavy = [m for m in ("pybullet", "moderngl", "torch", "humanclaw_gym.envs.find_nav_interact",
                     "humanclaw_agents") if m in sys.modules]
assert not heavy, heavy
print("clean")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "clean" in done.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["claims.json", "plan.json"]


def _serve(
    tmp_path: Path, *args: str, token: str | None = _TOKEN
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HUMANCLAW_SERVER_TOKEN"}
    if token is not None:
        env["HUMANCLAW_SERVER_TOKEN"] = token
    cmd = [
        sys.executable,
        "-m",
        "humanclaw_gym",
        "serve",
        "--output-dir",
        str(tmp_path / "o"),
        "--port",
        "0",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def test_refuses_non_loopback_bind_and_bad_tokens(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--host", "0.0.0.0")
    assert done.returncode == 2
    assert "loopback" in done.stderr and "0.0.0.0" in done.stderr

    done = _serve(tmp_path, token=None)
    assert done.returncode == 2 and "HUMANCLAW_SERVER_TOKEN" in done.stderr

    bad = "short-token"
    done = _serve(tmp_path, token=bad)
    assert (
        done.returncode == 2 and "32..256" in done.stderr and bad not in done.stderr + done.stdout
    )

    bad = "a" * 31 + "!" * 5  # long enough but not URL-safe
    done = _serve(tmp_path, token=bad)
    assert done.returncode == 2 and bad not in done.stderr + done.stdout

    # a trailing newline (as `echo $TOKEN > file` leaves it) used to pass a `$` check; every
    # request was then refused and the client printed the whole token
    bad = _TOKEN + "\n"
    done = _serve(tmp_path, token=bad)
    assert done.returncode == 2 and "malformed" in done.stderr
    assert _TOKEN not in done.stderr + done.stdout
    assert not (tmp_path / "o").exists(), "nothing is written before the token is accepted"


def test_refuses_unknown_motion_options_before_anything_is_written(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--motion-option", "stepz=3")
    assert done.returncode == 2 and "not accepted by the 'procedural'" in done.stderr
    done = _serve(tmp_path, "--motion-option", "nokey")
    assert done.returncode == 2 and "KEY=VALUE" in done.stderr
    assert not (tmp_path / "o").exists()


def test_refuses_a_used_output_dir(server: ServerProcess, tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "humanclaw_gym",
        "serve",
        "--output-dir",
        str(server.output_dir),
        "--port",
        "0",
    ]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, HUMANCLAW_SERVER_TOKEN=_TOKEN),
    )
    assert done.returncode == 2 and "fresh output directory" in done.stderr


def test_describe_declares_protocol_specs_budgets_and_plan(server: ServerProcess) -> None:
    d = server.client.describe()
    assert d["wire_protocol"] == "humanclaw.sim-server/v1"
    assert d["benchmark_protocol"].startswith("humanclaw.find-nav-interact/")
    budgets = d["budgets"]
    assert budgets["physics_ticks_per_action"] == 60
    assert budgets["frames_per_action"] == 15 and budgets["substeps_per_frame"] == 4
    assert budgets["environment_step_cap"] == _MAX_STEPS
    skills = d["action_spec"]["skills"]
    assert [s["id"] for s in skills] == list(range(8))
    turn = next(s for s in skills if s["key"] == "turn")
    assert (
        turn["params"]["angle_deg"]["minimum"] == 10
        and turn["params"]["angle_deg"]["maximum"] == 120
    )
    for s in skills:  # every example is valid text and its JSON form round-trips
        call = SkillCall.parse(s["example"])
        assert SkillCall.from_dict(call.to_dict()) == call
    fields = set(d["observation_spec"]["fields"])
    assert fields == {
        "instruction",
        "step",
        "max_steps",
        "episode_id",
        "scene_id",
        "target_category",
    }
    assert d["privileged_mode"]["supported"] is False
    plan = d["plan"]
    assert plan["size"] == _LIMIT and plan["seed"] == _SEED

    from humanclaw_gym.episodes import load_split

    episodes = load_split("val100")
    expected = [episodes[i].episode_id for i in plan_order([e.scene_id for e in episodes], _SEED)][
        :_LIMIT
    ]
    assert [e["episode_id"] for e in plan["episodes"]] == expected
    text = json.dumps(d)
    for hidden in ("object_id", "aabb", "start_position", "geodesic", 'success":'):
        assert hidden not in text


# --------------------------------------------------------------------------------------
# episodes: equality with the in-process env
# --------------------------------------------------------------------------------------


def test_driver_episode_matches_in_process_env(
    server: ServerProcess, local_env: Any, tmp_path: Path
) -> None:
    from humanclaw_agents.server_driver import ServerDriver

    actions = ["Walk<forward><normal>", "Turn<left><45>", "Walk<forward><slow>"]
    policy = ScriptedPolicy(actions, visible_state="I see a chair ahead.")
    driver = ServerDriver(server.url, token=_TOKEN)
    run = driver.run_episode(policy, output_root=tmp_path / "driver")
    fin = run.finish
    assert run.result.ended_by == "truncated" and run.result.steps == 3
    assert fin["ended_by"] == "truncated" and fin["metrics"] is not None
    assert run.result.metrics == fin["metrics"]
    counts = fin["counts"]
    assert counts["executed_actions"] == 3 and counts["rejected_actions"] == 0
    assert counts["physics_ticks"] == 3 * 60 and counts["physics_frames"] == 45
    assert counts["driver_decision_calls"] == 3 and counts["driver_acknowledged_steps"] == 3
    assert counts["model_requests"] == 0 and fin["counts_unknown"] == {}

    # the policy saw only the declared fields (+ the echo of its last command)
    assert set(policy.infos[0]) <= {
        "instruction",
        "step",
        "max_steps",
        "episode_id",
        "scene_id",
        "target_category",
        "executed_skill",
        "output_dir",
    }
    assert [i["step"] for i in policy.infos] == [0, 1, 2]

    local_obs, local_metrics = run_local(local_env, fin["episode_id"], actions, tmp_path / "local")
    for remote, local in zip(policy.seen, local_obs, strict=False):
        np.testing.assert_array_equal(remote, local)
    remote_after = realized(artifact(server.client, fin, "trajectory_after.npz"))
    local_after = realized(tmp_path / "local" / "trajectory_after.npz")
    assert set(remote_after) == set(local_after)
    for key in local_after:
        np.testing.assert_array_equal(remote_after[key], local_after[key])
    assert remote_after["realized"].shape[0] == 45
    from humanclaw_gym.server.protocol import jsonable

    assert fin["metrics"] == jsonable(local_metrics)

    # downloaded copies verify and sit next to the driver's own files
    out = run.output_dir
    names = {p.name for p in out.iterdir()}
    assert {
        "trajectory_after.npz",
        "metrics.json",
        "server_record.json",
        "server_finish.json",
        "episode_result.json",
    } <= names
    record = json.loads((out / "server_record.json").read_text())
    assert [r["visible_state"] for r in record["requests"] if r["method"] == "step"] == [
        "I see a chair ahead."
    ] * 3
    assert _TOKEN not in json.dumps(record)


def test_random_and_psv_policies_run_through_the_driver(
    server: ServerProcess, tmp_path: Path
) -> None:
    from humanclaw_agents.psv import PSVAgent
    from humanclaw_agents.random_policy import RandomPolicy
    from humanclaw_agents.server_driver import ServerDriver
    from humanclaw_agents.transports import ModelReply

    driver = ServerDriver(server.url, token=_TOKEN)
    run = driver.run_episode(RandomPolicy(seed=5), output_root=tmp_path)
    assert run.finish["ended_by"] in ("stop", "truncated")
    assert run.finish["counts"]["executed_actions"] == run.result.steps

    class TurningModel:
        def respond(self, prompt: str, image_rgb: np.ndarray | None, stage: str) -> ModelReply:
            assert image_rgb is not None and image_rgb.shape == (448, 448, 3)
            text = json.dumps(
                {
                    "visible_state": "I see a wall.",
                    "mid_level_progress_analysis": "none",
                    "mid_level_goal": "look around",
                    "low_level_action_reasoning": "turn",
                    "action_id": 2,
                    "action_name": "Turn<left><30>",
                    "additional_info": {},
                }
            )
            return ModelReply(text=text, usage=Usage(stage=stage, input_tokens=50, output_tokens=5))

    run = driver.run_episode(PSVAgent(TurningModel()), output_root=tmp_path)
    fin = run.finish
    assert fin["ended_by"] == "truncated" and fin["counts"]["model_requests"] == _MAX_STEPS
    assert fin["metrics"]["tokens"]["input_tokens"] == 50 * _MAX_STEPS
    assert (run.output_dir / "step000_percept_mid_low.json").is_file()


def test_privileged_policies_are_refused(server: ServerProcess, tmp_path: Path) -> None:
    from humanclaw_agents.server_driver import ServerDriver

    class Oracleish(ScriptedPolicy):
        requires_privileged = True

    before = server.client.describe()["plan"]["counts"]
    driver = ServerDriver(server.url, token=_TOKEN)
    with pytest.raises(PrivilegedPolicyError, match="privileged"):
        driver.run_episode(Oracleish(["Stop/Stand"]), output_root=tmp_path)
    with pytest.raises(PrivilegedPolicyError):
        driver.run_plan(Oracleish(["Stop/Stand"]), tmp_path)
    with pytest.raises(ServerError) as exc:
        server.client.call("open", {"privileged": True})
    assert error_name(exc) == "privileged_refused"
    assert server.client.describe()["plan"]["counts"] == before, "nothing was claimed"


def test_run_via_server(
    server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from humanclaw_gym.evaluation.batch import EpisodeSpec
    from humanclaw_gym.evaluation.remote import run_via_server, server_plan_specs

    monkeypatch.setenv("HUMANCLAW_SERVER_TOKEN", _TOKEN)
    nxt = server_plan_specs(server.url)[0]
    wrong = EpisodeSpec("val100", "hc_val_999", "nope", "chair")
    before = server.client.describe()["plan"]["counts"]
    with pytest.raises(ServerError) as exc:
        run_via_server(server.url, ScriptedPolicy([]), wrong, tmp_path / "x")
    assert (
        error_name(exc) == "plan_mismatch" and exc.value.data["next_episode_id"] == nxt.episode_id
    )
    assert server.client.describe()["plan"]["counts"] == before

    result = run_via_server(
        server.url, ScriptedPolicy(["Turn<right><20>", "Stop/Stand"]), nxt, tmp_path / "y"
    )
    assert result.ended_by == "stop" and result.steps == 2 and result.episode_id == nxt.episode_id
    assert result.metrics is not None and result.metrics["active_stop"] is True
    assert json.loads((tmp_path / "y" / "episode_result.json").read_text())["ended_by"] == "stop"
    from humanclaw_gym.replay import load_bundle

    assert load_bundle(tmp_path / "y").manifest["complete"] is True


# --------------------------------------------------------------------------------------
# sequencing, invalid actions, authentication
# --------------------------------------------------------------------------------------


def test_sequence_and_invalid_actions_are_refused_without_state_change(
    server: ServerProcess, local_env: Any, tmp_path: Path
) -> None:
    c = server.client
    opened = c.open()
    h = opened["episode_handle"]
    assert opened["instruction"].startswith("Find the")
    with pytest.raises(ServerError) as exc:
        c.step(h, 1, "Walk<forward><normal>")
    assert error_name(exc) == "sequence_error"  # no reset yet
    with pytest.raises(ServerError) as exc:
        c.call("reset", {"episode_handle": h, "sequence": 1})
    assert error_name(exc) == "sequence_error"
    first = c.reset(h)
    with pytest.raises(ServerError) as exc:
        c.reset(h)
    assert error_name(exc) == "sequence_error"

    a, b, last = (
        "Walk<forward><fast>",
        {"skill": "turn", "direction": "right", "angle_deg": 60},
        "Side step<left><0.3>",
    )
    r1 = c.step(h, 1, a)
    assert r1["executed"] is True and r1["observation"]["step"] == 1
    for seq in (1, 0, 3, 99):  # replayed and out-of-order
        with pytest.raises(ServerError) as exc:
            c.step(h, seq, a)
        assert error_name(exc) == "sequence_error" and exc.value.data["expected_sequence"] == 2
    bad_actions: list[Any] = [
        "Turn<left><500>",
        "Walk<forward><warp>",
        "Fly<up>",
        "",
        "Turn<left><nan>",
        {"skill": "walk", "speed": "warp"},
        {"skill": "side_step", "direction": "left", "distance_m": 0.9},
        {"skill": "turn", "direction": "left"},
        42,
        None,
        [1, 2],
        "x" * 300,
    ]
    for bad in bad_actions:
        with pytest.raises(ServerError) as exc:
            c.step(h, 2, bad)
        assert error_name(exc) == "invalid_action", bad
        assert exc.value.code == -32021
        assert exc.value.data["executed"] is False and exc.value.data["sequence_consumed"] is False
    r2 = c.step(h, 2, b)
    assert r2["executed_skill"] == "Turn<right><60>"
    r3 = c.step(h, 3, last)
    assert r3["truncated"] is True and r3["terminated"] is False
    with pytest.raises(ServerError) as exc:
        c.step(h, 4, "Stop/Stand")
    assert error_name(exc) == "episode_over"
    for result in (first, r1, r2, r3):
        leaked = set(result["observation"]) - {
            "image_png_b64",
            "width_px",
            "height_px",
            "instruction",
            "step",
            "max_steps",
            "episode_id",
            "scene_id",
            "target_category",
        }
        assert not leaked
        assert "metrics" not in result and "reward" not in json.dumps(result)

    fin = c.finish(h)
    counts = fin["counts"]
    assert counts["executed_actions"] == 3 and counts["rejected_actions"] == len(bad_actions)
    assert counts["decision_calls"] == 3 + len(bad_actions)
    # refused: step before reset, reset with sequence 1, second reset, 4 bad sequences, after end
    assert counts["refused_requests"] == 1 + 1 + 1 + 4 + 1
    assert counts["physics_ticks"] == 180
    assert counts["model_requests"] is None and "usage" in fin["counts_unknown"]["model_requests"]
    assert (
        counts["driver_decision_calls"] is None and fin["counts_unknown"]["driver_decision_calls"]
    )

    texts = ["Walk<forward><fast>", "Turn<right><60>", last]
    local_obs, local_metrics = run_local(local_env, opened["episode_id"], texts, tmp_path)
    remote_obs = [decode_observation(r["observation"])[0] for r in (first, r1, r2, r3)]
    for remote, local in zip(remote_obs, local_obs, strict=True):
        np.testing.assert_array_equal(remote, local)
    remote_after = realized(artifact(c, fin, "trajectory_after.npz"))
    local_after = realized(tmp_path / "trajectory_after.npz")
    np.testing.assert_array_equal(remote_after["realized"], local_after["realized"])
    np.testing.assert_array_equal(remote_after["object_poses"], local_after["object_poses"])


def test_unauthorized_requests_are_refused_and_execute_nothing(server: ServerProcess) -> None:
    c = server.client
    counts_before = c.describe()["plan"]["counts"]
    wrong = secrets.token_urlsafe(32)
    variants = [
        {},
        {"Authorization": f"Bearer {wrong}"},
        {"Authorization": f"Bearer {_TOKEN[:-1]}"},
        {"Authorization": f"Bearer {_TOKEN}x"},
        {"Authorization": f"Basic {_TOKEN}"},
        {"Authorization": "Bearer"},
        {"Authorization": _TOKEN},
    ]
    for headers in variants:
        status, body = post(
            server.port,
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "open"}).encode(),
            {"Content-Type": "application/json", **headers},
        )
        assert status == 401 and body["error"]["code"] == -32001
        assert body["error"]["data"]["error"] == "unauthorized"
    assert c.describe()["plan"]["counts"] == counts_before

    h = c.open()["episode_handle"]
    c.reset(h)
    params = {"episode_handle": h, "sequence": 1, "action": "Walk<forward><normal>"}
    step = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "step", "params": params}).encode()
    for headers in variants:
        status, _ = post(server.port, step, {"Content-Type": "application/json", **headers})
        assert status == 401
    active = c.describe()["active_episode"]
    assert active["last_sequence"] == 0 and active["executed_actions"] == 0
    with pytest.raises(ServerUnauthorizedError):
        ServerClient(server.url, token=wrong).describe()
    assert c.step(h, 1, "Stop/Stand")["terminated"] is True  # sequence 1 was still free
    assert c.finish(h)["counts"]["executed_actions"] == 1


def test_plan_claims_are_fixed_and_never_requeued(server: ServerProcess) -> None:
    c = server.client
    plan = c.describe()["plan"]
    nxt = plan["episodes"][plan["next_index"]]
    with pytest.raises(ServerError) as exc:
        c.open(episode_id="not-the-next-one")
    assert error_name(exc) == "plan_mismatch"
    opened = c.open(episode_id=nxt["episode_id"])
    assert opened["episode_id"] == nxt["episode_id"] and opened["plan_index"] == nxt["index"]
    with pytest.raises(ServerError) as exc:
        c.open()
    assert error_name(exc) == "episode_active"
    fin = c.finish(opened["episode_handle"], abandon_reason="test gives up before reset")
    assert fin["ended_by"] == "abandoned_before_reset" and fin["metrics"] is None
    assert "no score" in fin["metrics_unknown_reason"]
    assert fin["counts"]["physics_ticks"] is None and fin["counts_unknown"]["physics_ticks"]
    with pytest.raises(ServerError) as exc:
        c.finish(opened["episode_handle"])
    assert error_name(exc) == "no_active_episode"

    # abandoned mid-episode: recorded, bundle kept, not re-queued
    opened2 = c.open()
    assert opened2["plan_index"] == nxt["index"] + 1
    h = opened2["episode_handle"]
    c.reset(h)
    c.step(h, 1, "Walk<forward><normal>")
    fin2 = c.finish(h, client_counts={"decision_calls": 2}, abandon_reason="policy crashed")
    assert fin2["ended_by"] == "abandoned" and fin2["metrics"] is None
    assert fin2["counts"]["driver_decision_calls"] == 2
    assert any(a["path"].endswith("trajectory_after.npz") for a in fin2["artifacts"])
    statuses = {e["index"]: e["status"] for e in c.describe()["plan"]["episodes"]}
    assert statuses[nxt["index"]] == "abandoned" and statuses[nxt["index"] + 1] == "abandoned"
    assert c.open()["plan_index"] == nxt["index"] + 2
    ledger = json.loads((server.output_dir / "claims.json").read_text())
    assert ledger["claims"][nxt["index"]]["abandon_reason"] == "test gives up before reset"
    c.finish(c.describe()["active_episode"]["episode_handle"])


# --------------------------------------------------------------------------------------
# artifacts
# --------------------------------------------------------------------------------------


def test_read_artifact_refuses_traversal_links_and_unlisted_files(server: ServerProcess) -> None:
    c = server.client
    h = c.open()["episode_handle"]
    c.reset(h)
    c.step(h, 1, "Stop/Stand")
    fin = c.finish(h)
    paths = {a["path"]: a for a in fin["artifacts"]}
    metrics_path = next(p for p in paths if p.endswith("/metrics.json"))
    content = c.read_artifact(metrics_path)
    assert json.loads(content)["ended_by"] == "stop"
    ep_dir = metrics_path.split("/")[0]

    refused = [
        "../plan.json",
        f"{ep_dir}/../plan.json",
        f"{ep_dir}/../../etc/passwd",
        "/etc/passwd",
        str(server.output_dir / metrics_path),
        "./" + metrics_path,
        f"{ep_dir}//metrics.json",
        f"{ep_dir}\\metrics.json",
        "",
        "..",
        f"{ep_dir}/metrics.json\x00",
        "%2e%2e/plan.json",
        f"{ep_dir}/métrics.json",
        "a" * 600,
        42,
        None,
        ["x"],
    ]
    for bad in refused:
        status, body = rpc(server.port, "read_artifact", {"path": bad})
        assert status == 200 and "error" in body, bad
        assert body["error"]["data"]["error"] in ("artifact_refused", "artifact_not_found")
        assert str(server.output_dir) not in body["error"]["message"]
    for unlisted in ("plan.json", "claims.json", ep_dir, f"{ep_dir}/nothing.json"):
        with pytest.raises(ServerError) as exc:
            c.read_artifact(unlisted)
        assert error_name(exc) == "artifact_not_found"

    root = server.output_dir
    target = root / metrics_path
    # a symlink swapped in for a frozen artifact is not followed
    saved = target.read_bytes()
    target.unlink()
    target.symlink_to(root / "plan.json")
    with pytest.raises(ServerError) as exc:
        c.read_artifact(metrics_path)
    assert error_name(exc) == "artifact_refused" and "link" in str(exc.value)
    # a symlinked directory on the way is not followed either
    target.unlink()
    target.write_bytes(saved)
    real_dir = root / ep_dir
    moved = root / (ep_dir + "_moved")
    real_dir.rename(moved)
    real_dir.symlink_to(moved, target_is_directory=True)
    try:
        with pytest.raises(ServerError) as exc:
            c.read_artifact(metrics_path)
        assert error_name(exc) == "artifact_refused"
    finally:
        real_dir.unlink()
        moved.rename(real_dir)
    assert c.read_artifact(metrics_path) == saved
    # content changed after finish: refused
    target.write_bytes(saved + b" ")
    with pytest.raises(ServerError) as exc:
        c.read_artifact(metrics_path)
    assert error_name(exc) == "artifact_refused"
    target.write_bytes(saved)


# --------------------------------------------------------------------------------------
# transport robustness and fuzzing
# --------------------------------------------------------------------------------------


def _assert_clean_error(body: dict[str, Any], server: ServerProcess) -> None:
    assert body.get("jsonrpc") == "2.0"
    err = body["error"]
    assert isinstance(err["code"], int) and isinstance(err["message"], str)
    text = json.dumps(err)
    for leak in ("Traceback", 'File "', str(server.output_dir), _PACKAGE_DIR, _TOKEN):
        assert leak not in text


def test_transport_limits_and_envelope_errors(fuzz_server: ServerProcess) -> None:
    port = fuzz_server.port
    auth = {"Authorization": f"Bearer {_TOKEN}", "Content-Type": "application/json"}
    describe = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "describe"}).encode()
    cases = [
        (post(port, describe, {**auth, "Content-Length": "abc"}), 400),
        (post(port, describe, {**auth, "Content-Length": "-1"}), 400),
        (post(port, b"", {**auth, "Content-Length": str(2 << 20)}), 413),
        (post(port, describe, method="GET"), 405),
        (post(port, describe, path="/other"), 404),
        (post(port, b"x" * ((1 << 20) + 1)), 413),
        (post(port, describe, {"Content-Type": "application/json"}), 401),
    ]
    # Content-Length must be ASCII digits: '²' passed str.isdigit() and crashed the handler
    # before authentication, closing the connection without an answer
    for weird in ("\u00b2", "\u00b9\u00b2", "1_0", "+5", "0x10", "4 4", " ", "1" * 13):
        cases.append((post(port, describe, {**auth, "Content-Length": weird}), 400))
        cases.append((post(port, describe, {"Content-Length": weird}), 401))
    for (status, body), expected in cases:
        assert status == expected, (status, body)
        _assert_clean_error(body, fuzz_server)
    # a malformed request line gets JSON like every other refusal, nothing echoed
    for line in (b"GARBAGE /rpc HTTP/1.1 extra", b"POST /rpc HTTP/9", b"\x00\xff" * 10):
        answer = raw_request(port, line + b"\r\nX-Probe: " + _TOKEN.encode() + b"\r\n\r\n")
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 400 ") and b"application/json" in head, answer[:200]
        body = json.loads(payload)
        assert body["error"]["code"] == -32600
        _assert_clean_error(body, fuzz_server)
        assert line not in answer and _TOKEN.encode() not in answer
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", "/rpc")
    conn.putheader("Authorization", f"Bearer {_TOKEN}")
    conn.endheaders()
    assert conn.getresponse().status == 411
    conn.close()

    envelopes = {
        b"{": -32700,
        b"\xff\xfe": -32700,
        b"[1e999999]": -32600,
        b'{"jsonrpc":"2.0","id":1,"method":"describe","params":NaN}': -32700,
        b"[]": -32600,
        b'[{"jsonrpc":"2.0","id":1,"method":"describe"}]': -32600,
        b'{"jsonrpc":"2.0","method":"describe"}': -32600,
        b'{"jsonrpc":"1.0","id":1,"method":"describe"}': -32600,
        b'{"jsonrpc":"2.0","id":true,"method":"describe"}': -32600,
        b'{"jsonrpc":"2.0","id":1,"method":"describe","extra":1}': -32600,
        b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}': -32601,
        b'{"jsonrpc":"2.0","id":1,"method":"describe","params":[1]}': -32602,
        b'{"jsonrpc":"2.0","id":1,"method":"describe","params":{"x":1}}': -32602,
        b'{"jsonrpc":"2.0","id":1,"method":"step","params":{"episode_handle":"nope"}}': -32010,
        ("[" * 100000 + "]" * 100000).encode(): -32700,
        ("1" * 5000).encode(): -32700,
    }
    for raw, code in envelopes.items():
        status, body = post(port, raw, auth)
        assert status == 200, raw[:40]
        assert body["error"]["code"] == code, (raw[:60], body)
        _assert_clean_error(body, fuzz_server)
    assert fuzz_server.client.describe()["plan"]["size"] == _LIMIT


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
_FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_FUZZ
@given(raw=st.binary(max_size=512))
def test_fuzz_random_bytes(fuzz_server: ServerProcess, raw: bytes) -> None:
    status, body = post(fuzz_server.port, raw)
    assert status == 200
    if "error" in body:
        _assert_clean_error(body, fuzz_server)


@_FUZZ
@given(value=_JSON)
def test_fuzz_random_json_values(fuzz_server: ServerProcess, value: Any) -> None:
    status, body = post(fuzz_server.port, json.dumps(value).encode())
    assert status == 200
    if "error" in body:
        _assert_clean_error(body, fuzz_server)


_HEAVY = {"open"}  # a valid open would claim an episode; fuzz it with params that are wrong


@_FUZZ
@given(
    method=st.sampled_from([m for m in METHODS if m not in _HEAVY] + ["open"]),
    params=st.one_of(
        _JSON,
        st.fixed_dictionaries(
            {},
            optional={
                "episode_handle": _JSON,
                "sequence": _JSON,
                "action": _JSON,
                "visible_state": _JSON,
                "usage": _JSON,
                "path": _JSON,
                "client_counts": _JSON,
                "privileged": _JSON,
                "episode_id": _JSON,
            },
        ),
    ),
    request_id=st.one_of(st.integers(), st.text(max_size=8), _JSON),
)
def test_fuzz_wrong_param_types(
    fuzz_server: ServerProcess, method: str, params: Any, request_id: Any
) -> None:
    if method == "open" and (not isinstance(params, dict) or params.get("privileged") is not True):
        params = {"privileged": True, **(params if isinstance(params, dict) else {})}
    payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    status, body = post(fuzz_server.port, json.dumps(payload).encode())
    assert status == 200
    if "error" in body:
        _assert_clean_error(body, fuzz_server)
    elif method == "describe":
        assert body["result"]["wire_protocol"] == "humanclaw.sim-server/v1"


@pytest.mark.parametrize("authorized", [True, False])
def test_refused_body_sent_late_still_gets_the_status(
    fuzz_server: ServerProcess, authorized: bool
) -> None:
    """A client that keeps writing a refused body reads the 413/401, not a reset.

    The server answers from the headers alone; the body arrives only after the answer was
    written, which is the order a slow client or a busy machine produces.
    """
    import socket

    size = 3 << 20
    token = _TOKEN if authorized else "wrong-token-" + "x" * 32
    head = (
        f"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", fuzz_server.port), timeout=30) as sock:
        sock.sendall(head)
        time.sleep(0.3)  # the server has answered and (before the fix) closed by now
        sock.sendall(b"x" * size)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    status_line = received.split(b"\r\n", 1)[0]
    assert status_line.split()[1] == (b"413" if authorized else b"401"), status_line
    body = json.loads(received.split(b"\r\n\r\n", 1)[1])
    _assert_clean_error(body, fuzz_server)


def test_fuzzed_server_still_answers_and_claimed_nothing(fuzz_server: ServerProcess) -> None:
    assert fuzz_server.alive()
    d = fuzz_server.client.describe()
    assert d["plan"]["counts"]["pending"] == _LIMIT and d["active_episode"] is None
    outcomes = d["request_outcomes"]
    assert outcomes["unauthorized"] >= 1 and outcomes["parse_error"] >= 1
    assert "internal_error" not in outcomes
    log = fuzz_server.log()
    assert "Traceback" not in log, log[-3000:]
    assert "rpc method=" in log and _TOKEN not in log
    longest = max(len(line) for line in log.splitlines())
    assert longest < 400, "no bodies or images in the log"


def test_observation_png_is_lossless() -> None:
    from humanclaw_gym.server.session import encode_png

    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (448, 448, 3), dtype=np.uint8)
    obs = {
        "image_png_b64": encode_png(image),
        "width_px": 448,
        "height_px": 448,
        **{k: "x" for k in ("instruction", "episode_id", "scene_id", "target_category")},
        "step": 0,
        "max_steps": 3,
    }
    decoded, info = decode_observation(obs)
    np.testing.assert_array_equal(decoded, image)
    assert set(info) == {
        "instruction",
        "step",
        "max_steps",
        "episode_id",
        "scene_id",
        "target_category",
    }
    assert base64.b64decode(obs["image_png_b64"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_client_refuses_non_loopback_urls_and_bad_tokens() -> None:
    with pytest.raises(ValueError, match="loopback"):
        ServerClient("http://10.0.0.5:8765", token=_TOKEN)
    with pytest.raises(ValueError, match="http"):
        ServerClient("https://127.0.0.1:8765", token=_TOKEN)
    with pytest.raises(ValueError, match="32..256"):
        ServerClient("http://127.0.0.1:8765", token="short")
    assert _TOKEN not in repr(ServerClient("http://127.0.0.1:8765", token=_TOKEN))


# --------------------------------------------------------------------------------------
# failures: recorded, never re-queued, never disguised as safe refusals
# --------------------------------------------------------------------------------------


def test_policy_failure_through_the_driver_is_finished_as_abandoned(
    server: ServerProcess, tmp_path: Path
) -> None:
    from humanclaw_agents.server_driver import ServerDriver

    class Flaky(ScriptedPolicy):
        def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision:
            if len(self.seen) == 1:
                self.seen.append(observation)
                raise RuntimeError("model endpoint down")
            return super().act(observation, info)

    run = ServerDriver(server.url, token=_TOKEN).run_episode(
        Flaky(["Walk<forward><slow>"] * 3), output_root=tmp_path
    )
    assert run.result.ended_by == "error" and "model endpoint down" in run.result.error
    fin = run.finish
    assert fin["ended_by"] == "abandoned" and fin["metrics"] is None
    assert fin["counts"]["executed_actions"] == 1 and fin["counts"]["driver_decision_calls"] == 2
    record = json.loads((run.output_dir / "server_record.json").read_text())
    assert "model endpoint down" in record["abandon_reason"]
    assert server.client.describe()["active_episode"] is None


def _call(service: Any, method: str, params: Any = None) -> dict[str, Any]:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        request["params"] = params
    return service.handle(request)


def test_open_failure_is_recorded_and_not_requeued(tmp_path: Path) -> None:
    from humanclaw_gym.server.plan import EpisodePlan
    from humanclaw_gym.server.service import BenchService

    def factory() -> Any:
        raise RuntimeError(f"cannot build the env in {tmp_path}")

    service = BenchService(
        EpisodePlan.from_selection("val100", 0, tmp_path / "out", limit=3), env_factory=factory
    )
    answer = _call(service, "open")
    assert answer["error"]["data"]["error"] == "execution_error" and answer["id"] == 7
    assert str(tmp_path) not in json.dumps(answer)
    plan = _call(service, "describe")["result"]["plan"]
    assert [e["status"] for e in plan["episodes"]] == ["failed", "pending", "pending"]
    assert _call(service, "open")["error"]["data"]["plan_index"] == 1  # the next one, not a retry
    ledger = json.loads((tmp_path / "out" / "claims.json").read_text())
    assert "cannot build the env" in ledger["claims"][0]["error"]  # kept privately
    service.close()


def test_native_step_failure_is_not_disguised_as_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from humanclaw_gym.server.plan import EpisodePlan
    from humanclaw_gym.server.service import BenchService

    service = BenchService(
        EpisodePlan.from_selection("val100", 0, tmp_path / "out", limit=2), max_steps=3
    )
    try:
        opened = _call(service, "open")["result"]
        h = opened["episode_handle"]
        assert "result" in _call(service, "reset", {"episode_handle": h, "sequence": 0})
        physics = service._env.unwrapped._physics

        def explode(frame: Any) -> None:
            raise RuntimeError(f"solver exploded in {tmp_path}")

        # the engine call under every path (frame by frame, or a chunk recorded at once)
        monkeypatch.setattr(physics, "_step_engine", explode)
        walk = {"episode_handle": h, "sequence": 1, "action": "Walk<forward><normal>", "usage": []}
        error = _call(service, "step", walk)["error"]
        assert error["data"]["error"] == "execution_error" and error["data"]["executed"] is None
        assert str(tmp_path) not in json.dumps(error) and "exploded" not in json.dumps(error)
        assert _call(service, "step", walk)["error"]["data"]["error"] == "sequence_error"
        assert (
            _call(service, "step", {**walk, "sequence": 2})["error"]["data"]["error"]
            == "episode_over"
        )
        fin = _call(service, "finish", {"episode_handle": h})["result"]
        assert fin["ended_by"] == "error" and fin["metrics"] is None
        assert fin["counts"]["failed_actions"] == 1 and fin["counts"]["executed_actions"] == 0
        manifest = json.loads(
            (tmp_path / "out" / opened["artifact_dir"] / "replay_manifest.json").read_text()
        )
        assert manifest["complete"] is False and manifest["ended_by"] == "error"
        monkeypatch.undo()
        plan = _call(service, "describe")["result"]["plan"]
        assert [e["status"] for e in plan["episodes"]] == ["failed", "pending"]
        h2 = _call(service, "open")["result"]["episode_handle"]
        _call(service, "reset", {"episode_handle": h2, "sequence": 0})
        ok = _call(service, "step", {**walk, "episode_handle": h2})
        assert ok["result"]["executed"] is True  # the server carries on with the next episode
    finally:
        service.close()


def test_shutdown_with_an_active_episode_keeps_the_evidence(tmp_path: Path) -> None:
    proc = ServerProcess(tmp_path)
    try:
        c = proc.client
        opened = c.open()
        h = opened["episode_handle"]
        c.reset(h)
        c.step(h, 1, "Turn<left><20>")
    finally:
        proc.stop()
    assert proc.proc.returncode == 0
    first = json.loads((proc.output_dir / "claims.json").read_text())["claims"][0]
    assert first["status"] == "abandoned" and first["abandon_reason"] == "server shutdown"
    ep_dir = proc.output_dir / opened["artifact_dir"]
    record = json.loads((ep_dir / "server_record.json").read_text())
    assert record["ended_by"] == "abandoned" and record["counts"]["executed_actions"] == 1
    assert (ep_dir / "trajectory_after.npz").is_file()
