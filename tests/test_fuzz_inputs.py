"""Bounded, seeded fuzzing of the two inputs a policy controls: SkillCall texts and the
benchmark server's RPC bodies.

* 2,400 generated SkillCall texts (mutations of every skill's valid text, number and
  word edge cases, random strings): each is parsed into a valid call or refused with a
  :class:`SkillCallError` whose message is bounded; the refused ones are also sent to a
  live env, which must refuse them before any state changes.
* 2,000 generated RPC bodies sent over HTTP to a live server (in-process transport, real
  service, an episode open and reset): random bytes and JSON, broken envelopes, and
  requests for the active episode each carrying one defect (wrong handle, sequence,
  parameter type, invalid action, unknown key, ...). Each must get a JSON answer in time
  (no crash, no hang) and, when refused, leave the plan, the session and the simulator
  exactly as they were.

Fixed seeds: the same inputs every run. Both run in well under a minute.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from humanclaw_gym import SkillCall, SkillCallError
from humanclaw_gym.skills import Skill

_SEED = 20260
_SKILL_TEXTS = 2400
_RPC_BODIES = 2000
_TOKEN = secrets.token_urlsafe(32)
_MESSAGE_LIMIT = 2000

# ----------------------------------------------------------------------------------------
# generators (plain random.Random: the same inputs on every run and platform)
# ----------------------------------------------------------------------------------------
_NUMBERS = [
    "0", "10", "120", "121", "9.99", "30", "0.45", "0.15", "0.85", "0.1", "0.6", "0.5",
    "-30", "+30", "1e2", "1E-1", ".5", "5.", "0x1e", "1_0", "nan", "NaN", "inf", "-inf",
    "Infinity", "1e400", "9" * 400, "\u00b2", "\u0661\u0662", "\uff13\uff10", "3O", "",
    " 30 ", "30 30", "30,5", "1/2", "--1", "0.45.1", "\u200b30",
]  # fmt: skip
_WORDS = [
    "left", "right", "LEFT", "Right", "forward", "Forward", "backward", "slow", "normal",
    "fast", "FAST", "sprint", "", " ", "left right", "l\u0435ft", "\u00e9", "<", ">",
]  # fmt: skip
_PIECES = ["<", ">", "<>", "<<", ">>", " ", "\t", "\n", "\x00", "/", "\\", "\u2028", "\ufeff"]


def _valid_texts() -> list[str]:
    texts = []
    for skill in Skill:
        spec = skill.spec
        texts.append(spec.example)
        # the other spellings the parser accepts, with the example's parameters
        params = spec.example[len(spec.text_name) :]
        texts.extend(name + params for name in (spec.display_name, spec.key, *spec.aliases))
    return texts


def _mutate(rng: random.Random, text: str) -> str:
    choice = rng.randrange(9)
    if choice == 0 and text:  # delete a span
        i = rng.randrange(len(text))
        return text[:i] + text[i + rng.randint(1, 4) :]
    if choice == 1:  # insert a structural piece
        i = rng.randrange(len(text) + 1)
        return text[:i] + rng.choice(_PIECES) + text[i:]
    if choice == 2 and text:  # replace a character
        i = rng.randrange(len(text))
        return text[:i] + chr(rng.randrange(32, 0x3000)) + text[i + 1 :]
    if choice == 3:  # swap a parameter for an edge-case number
        name = text.split("<", 1)[0]
        return name + "".join(f"<{rng.choice(_NUMBERS)}>" for _ in range(rng.randint(0, 3)))
    if choice == 4:  # swap a parameter for an edge-case word
        name = text.split("<", 1)[0]
        params = [rng.choice(_WORDS + _NUMBERS) for _ in range(rng.randint(0, 3))]
        return name + "".join(f"<{p}>" for p in params)
    if choice == 5:  # change the letter case / spacing of the name
        return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)
    if choice == 6:  # duplicate or repeat
        return text * rng.randint(2, 4)
    if choice == 7:  # a long run of one character
        return text + rng.choice("<>9 a") * rng.choice((10, 300, 5000))
    return "".join(chr(rng.randrange(0, 0x250)) for _ in range(rng.randint(0, 24)))


def skill_texts(count: int = _SKILL_TEXTS, seed: int = _SEED) -> list[str]:
    """``count`` texts: every valid example, then seeded mutations (1-3 rounds each)."""
    rng = random.Random(seed)
    valid = _valid_texts()
    texts = list(valid)
    while len(texts) < count:
        text = rng.choice(valid)
        for _ in range(rng.randint(1, 3)):
            text = _mutate(rng, text)
        texts.append(text)
    return texts


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 2**53, -(2**63), 10**30, rng.randint(-5, 5)])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1.5, 1e308, -1e-308, rng.uniform(-1e3, 1e3)])
    if kind in (4, 5):
        return rng.choice(["", "x", "\x00", "\u00b2", "a" * 300, "Turn<left><30>", "../x"])
    if kind == 6:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["", "a", "id", "sequence", "action", "skill", "method", "\u00e9", "x" * 50]
    return {rng.choice(keys): _json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _bad_action(rng: random.Random, refused_texts: list[str]) -> Any:
    kind = rng.randrange(6)
    if kind < 3:
        return rng.choice(refused_texts)
    if kind == 3:
        return {"skill": "turn", "direction": "left", "angle_deg": rng.choice([500, -1, "30"])}
    if kind == 4:
        return {"skill": rng.choice(["fly", "", 99, None]), "speed": "normal"}
    return _json_value(rng)


def rpc_bodies(handle: str, refused_texts: list[str], count: int = _RPC_BODIES) -> list[bytes]:
    """``count`` request bodies; none of them may execute an action or end the episode."""
    rng = random.Random(_SEED + 1)
    bodies: list[bytes] = []
    while len(bodies) < count:
        kind = rng.randrange(10)
        if kind == 0:  # raw bytes, sometimes almost JSON
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
            bodies.append(rng.choice([raw, b"{" + raw, b'{"jsonrpc":"2.0"' + raw]))
            continue
        if kind == 1:  # any JSON value
            bodies.append(json.dumps(_json_value(rng)).encode())
            continue
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": rng.randint(1, 10**6)}
        if kind == 2:  # a broken envelope around a harmless method
            request["method"] = rng.choice(["describe", "open", "shutdown", "", "STEP"])
            broken = rng.randrange(5)
            if broken == 0:
                request["jsonrpc"] = rng.choice(["1.0", 2.0, None])
            elif broken == 1:
                request["id"] = rng.choice([True, None, [1], {"a": 1}, "i" * 200])
            elif broken == 2:
                request["extra"] = _json_value(rng)
            elif broken == 3:
                request["params"] = rng.choice([[1], "p", 5])
            else:
                request.pop("id")
        elif kind in (3, 4, 5, 6):  # step for the active episode, with one defect
            params: dict[str, Any] = {"episode_handle": handle, "sequence": 1}
            params["action"] = rng.choice(["Turn<left><30>", {"skill": "stop"}])
            defect = rng.randrange(7)
            if defect == 0:
                params["episode_handle"] = rng.choice([handle[:-1], handle.upper(), 7, "", None])
            elif defect == 1:
                params["sequence"] = rng.choice([0, 2, -1, 10**20, True, 1.0, "1", None])
            elif defect in (2, 3):
                params["action"] = _bad_action(rng, refused_texts)
            elif defect == 4:
                params[rng.choice(["seq", "Action", "", "privileged"])] = _json_value(rng)
            elif defect == 5:
                params["visible_state"] = rng.choice([5, ["a"], {"a": 1}, "v" * 20000])
            else:
                params["usage"] = rng.choice(
                    [{"stage": "x"}, [{"stage": ""}], [{"stage": "p", "input_tokens": -1}],
                     [{"stage": "p", "cost": 1}], [{}] * 65, "usage"]
                )  # fmt: skip
            request.update(method="step", params=params)
        elif kind == 7:  # reset (already done: always refused), possibly malformed
            params = {"episode_handle": rng.choice([handle, "nope"]), "sequence": 0}
            if rng.random() < 0.5:
                params[rng.choice(["sequence", "extra"])] = _json_value(rng)
            request.update(method="reset", params=params)
        elif kind == 8:  # finish with a defect (a valid finish would end the episode)
            params = {"episode_handle": handle}
            defect = rng.randrange(3)
            if defect == 0:
                params["episode_handle"] = rng.choice(["0" * 16, handle + "0", 1])
            elif defect == 1:
                params["client_counts"] = rng.choice(
                    [{"decision_calls": -1}, {"x": 1}, [1], {"acknowledged_steps": True}]
                )
            else:
                params["abandon_reason"] = rng.choice([1, ["a"], "r" * 5000])
            request.update(method="finish", params=params)
        else:  # open while an episode is active, read_artifact of anything
            if rng.random() < 0.5:
                request.update(method="open", params=rng.choice([{}, {"episode_id": "x"}]))
            else:
                path = rng.choice(["plan.json", "../claims.json", "/etc/passwd", "a/../b", ""])
                request.update(method="read_artifact", params={"path": path})
        bodies.append(json.dumps(request).encode())
    return bodies


# ----------------------------------------------------------------------------------------
# SkillCall texts
# ----------------------------------------------------------------------------------------
def _parse_outcomes() -> tuple[list[SkillCall], list[str]]:
    accepted, refused = [], []
    for text in skill_texts():
        try:
            call = SkillCall.parse(text)
        except SkillCallError as exc:  # anything else is a crash and fails the test
            assert len(str(exc)) < _MESSAGE_LIMIT, (text[:80], len(str(exc)))
            refused.append(text)
            continue
        assert SkillCall.parse(str(call)) == call  # a valid call has one canonical text
        accepted.append(call)
    return accepted, refused


def test_fuzzed_skill_texts_parse_or_are_refused_cleanly() -> None:
    texts = skill_texts()
    assert len(texts) >= 2000 and len(set(texts)) > 1800
    assert texts == skill_texts(), "the generator is seeded"
    accepted, refused = _parse_outcomes()
    assert len(accepted) + len(refused) == len(texts)
    assert len(accepted) >= len(_valid_texts()) and len(refused) >= 1500


def test_refused_skill_texts_change_no_env_state() -> None:
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
    from humanclaw_gym.episodes import load_split

    _, refused = _parse_outcomes()
    env = FindNavInteractEnv(split="val100", max_steps=5, privileged=True)
    try:
        env.reset(seed=0, options={"episode_id": load_split("val100")[0].episode_id})
        env.step(SkillCall.walk("normal"))

        def snapshot() -> tuple[Any, ...]:
            state = env.privileged_state()
            return (
                state.realized_frame.tobytes(),
                np.asarray(state.object_poses).tobytes(),
                env.task.step_count,
                env._obs.tobytes(),
                json.dumps(env.np_random.bit_generator.state, sort_keys=True, default=str),
            )

        before = snapshot()
        for text in refused:
            with pytest.raises(SkillCallError):
                env.step(text)
        assert snapshot() == before
        _, _, _, _, info = env.step(SkillCall.turn("left", 30))
        assert info["step"] == 2  # no refused text consumed a step
    finally:
        env.close()


# ----------------------------------------------------------------------------------------
# RPC bodies against a live server
# ----------------------------------------------------------------------------------------
class _LiveServer:
    def __init__(self, root: Path) -> None:
        from humanclaw_gym.server.plan import EpisodePlan
        from humanclaw_gym.server.service import BenchService
        from humanclaw_gym.server.transport import make_server

        plan = EpisodePlan.from_selection("val100", 0, root / "out", limit=2)
        self.service = BenchService(plan, max_steps=3)
        self.server = make_server(self.service, _TOKEN, port=0, request_timeout_s=10.0)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def post(self, body: bytes) -> tuple[int, dict[str, Any]]:
        head = (
            f"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {_TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as sock:
            sock.sendall(head + body)  # a timeout here or below is a hang: the test fails
            answer = b""
            while chunk := sock.recv(1 << 16):
                answer += chunk
        status_line, _, rest = answer.partition(b"\r\n")
        payload = rest.partition(b"\r\n\r\n")[2]
        return int(status_line.split()[1]), json.loads(payload)

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self.post(json.dumps(body).encode())[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.service.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[_LiveServer]:
    server = _LiveServer(tmp_path)
    try:
        yield server
    finally:
        server.close()


def _state(live: _LiveServer) -> tuple[Any, ...]:
    service = live.service
    d = service.describe()
    physics = service._env.unwrapped._physics
    session = service._session
    return (
        json.dumps(d["active_episode"], sort_keys=True),
        json.dumps(d["plan"], sort_keys=True),
        np.asarray(physics.realized_frame()).tobytes(),
        np.asarray(physics.object_poses()).tobytes(),
        session.executed,
        session.last_sequence,
        session.state,
        sorted(p.name for p in service.output_dir.iterdir()),
    )


def test_fuzzed_rpc_bodies_never_crash_hang_or_change_state(live: _LiveServer, caplog) -> None:
    opened = live.call("open", {})["result"]
    handle = opened["episode_handle"]
    assert "result" in live.call("reset", {"episode_handle": handle, "sequence": 0})
    _, refused_texts = _parse_outcomes()
    bodies = rpc_bodies(handle, refused_texts)
    assert len(bodies) >= 2000 and bodies == rpc_bodies(handle, refused_texts)
    before = _state(live)
    answered = {"error": 0, "describe": 0}
    with caplog.at_level(logging.INFO, logger="humanclaw_gym.server"):
        for body in bodies:
            status, reply = live.post(body)
            assert status == 200 and reply.get("jsonrpc") == "2.0", (body[:80], reply)
            if "error" in reply:
                answered["error"] += 1
                assert reply["error"]["data"]["error"] != "internal_error", body[:200]
                assert len(reply["error"]["message"]) <= 600
            else:  # only a well-formed describe may succeed, and it changes nothing
                assert "wire_protocol" in reply["result"], body[:200]
                answered["describe"] += 1
            assert _state(live) == before, body[:200]
    assert answered["error"] >= 1800
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    counts = live.service.outcome_counts()
    assert "internal_error" not in counts and counts.get("invalid_action", 0) >= 100
    # the episode carries on exactly where it was: the next step is sequence 1
    step = live.call("step", {"episode_handle": handle, "sequence": 1, "action": "Turn<left><30>"})
    assert step["result"]["executed"] is True and step["result"]["observation"]["step"] == 1
