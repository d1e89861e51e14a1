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

Hostile values and files (the second hardening round), each family seeded and small:

* path parts: generated ids (separators, ``..``, control characters, other scripts, long)
  are refused by the episode reader or become a folder inside the output;
* huge digit strings in skill texts, JSON actions, RPC bodies, replies and episode files;
* lone surrogates in every string an RPC request carries, in skill texts and replies;
* deep nesting in RPC bodies, replies, episode, model, scene-dataset, bundle, metrics
  and fingerprint files and backend option values;
* FIFOs where a file is expected (each read must come back at once, refused);
* gzip bombs as episode and scene files;
* pickles in every user-supplied file type: nothing is ever unpickled.

Fixed seeds: the same inputs every run. Each family runs in seconds.
"""

from __future__ import annotations

import json
import logging
import random
import re
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


# ----------------------------------------------------------------------------------------
# hostile values and files
# ----------------------------------------------------------------------------------------
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def hostile_ids(count: int = 400, seed: int = _SEED + 2) -> list[str]:
    """Ids mixing path syntax, control characters, other scripts and lengths."""
    rng = random.Random(seed)
    pieces = [
        "x", "hc_val_003", "..", ".", "/", "\\", "../", "..\\", "/etc/passwd", "~", "$HOME",
        "\x00", "\n", "\t", " ", "\u202e", "\u00e9", "\u4e2d", "\ud800", ":", "*", "?", "|",
        "C:", "-", "_", "0", "9" * 50, "a" * 97, "%2e%2e", "\u2215", "\uff0f", "<", ">", '"',
    ]  # fmt: skip
    ids = ["hc_val_003_000", "a", "A.b-c_9", "x" * 96, "x" * 97, "-x", ".x", "x/y", "..", ""]
    while len(ids) < count:
        ids.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 5))))
    return ids


def test_fuzzed_path_parts_are_refused_or_stay_inside(tmp_path: Path) -> None:
    from dataclasses import replace

    from humanclaw_gym.episodes import EpisodeFormatError, load_split
    from humanclaw_gym.episodes.io import gzip_bytes
    from humanclaw_gym.evaluation.batch import EpisodeSpec, rollout_dir

    template = load_split("val100")[0]
    out = tmp_path / "out"
    out.mkdir()
    accepted = 0
    for field in ("episode_id", "scene_id", "object_category"):
        for value in hostile_ids():
            try:
                ep = replace(template, **{field: value})
            except EpisodeFormatError as exc:
                assert field in str(exc) and len(str(exc)) < 600
                continue
            assert _SAFE_ID.fullmatch(value), value
            spec = EpisodeSpec("x", ep.scene_id, ep.episode_id, ep.object_category)
            folder = rollout_dir(out, spec).resolve()
            assert folder.parent.parent == out.resolve()
            accepted += 1
    assert accepted >= 10
    # and through a shard file: the reader names the file and the field
    record = template.to_dict()
    for k, value in enumerate(hostile_ids(40, seed=_SEED + 3)[10:]):
        if _SAFE_ID.fullmatch(value):
            continue
        doc = {"schema": "humanclaw_episodes_v2", "episodes": [{**record, "episode_id": value}]}
        folder = tmp_path / f"shard{k}"
        folder.mkdir()
        (folder / "s.json.gz").write_bytes(gzip_bytes(json.dumps(doc).encode()))
        with pytest.raises(EpisodeFormatError, match="episode_id"):
            load_split(folder)


_DIGITS = "9" * 5000
_HUGE_INT = 10**5000 - 1  # int(_DIGITS) itself is refused past 4,300 digits


def test_fuzzed_huge_digit_strings(live: _LiveServer) -> None:
    from humanclaw_agents.replies import ReplyExtractionError, read_reply_json

    rng = random.Random(_SEED + 4)
    forms: list[Any] = []
    for skill in Skill:
        spec = skill.spec
        forms.append(f"{spec.text_name}<{_DIGITS}>")
        forms.append(f"{_DIGITS}{spec.example[len(spec.text_name) :]}")
        if spec.params:
            forms.append({"skill": spec.key, **{p: _HUGE_INT for p in spec.params}})
        forms.append({"skill": 10 ** rng.randint(4301, 5000)})
        forms.append({"skill": _DIGITS[: rng.randint(10, 5000)]})
    for form in forms:
        with pytest.raises(SkillCallError) as exc:
            SkillCall.coerce(form)
        assert len(str(exc.value)) < _MESSAGE_LIMIT
    for reply in (f'{{"action_id": {_DIGITS}}}', f'x {{"a": 1, "b": {_DIGITS}}}'):
        for reader in ("reference", "tolerant"):
            with pytest.raises(ReplyExtractionError):
                read_reply_json(reply, reader=reader)
    handle = live.call("open", {})["result"]["episode_handle"]
    live.call("reset", {"episode_handle": handle, "sequence": 0})
    before = _state(live)
    for action in forms[:16]:
        if isinstance(action, dict) and any(
            isinstance(v, int) and v > 10**4300 for v in action.values()
        ):
            params = {"episode_handle": handle, "sequence": 1, "action": {"skill": 0}}
            request = {"jsonrpc": "2.0", "id": 1, "method": "step", "params": params}
            body = json.dumps(request).replace('"skill": 0', f'"skill": {_DIGITS}').encode()
            status, reply = live.post(body)
            assert reply["error"]["data"]["error"] == "parse_error"
            continue
        params = {"episode_handle": handle, "sequence": 1, "action": action}
        reply = live.call("step", params)
        assert reply["error"]["data"]["error"] == "invalid_action", reply
    assert _state(live) == before
    assert "internal_error" not in live.service.outcome_counts()


def test_fuzzed_surrogates(live: _LiveServer) -> None:
    from humanclaw_agents.replies import read_reply_json
    from humanclaw_gym.fileio import write_json_atomic

    lone = ["\ud800", "\udfff", "a\udc80b", "\ud83d", "x" * 10 + "\udbff"]
    opened = live.call("open", {"episode_id": lone[0]})
    assert opened["error"]["data"]["error"] == "plan_mismatch"
    handle = live.call("open", {})["result"]["episode_handle"]
    live.call("reset", {"episode_handle": handle, "sequence": 0})
    before = _state(live)
    step = {"episode_handle": handle, "sequence": 1, "action": "Turn<left><30>"}
    requests: list[tuple[str, dict[str, Any]]] = []
    for s in lone:
        requests += [
            ("reset", {"episode_handle": s, "sequence": 0}),
            ("step", {**step, "episode_handle": handle[:4] + s}),
            ("finish", {"episode_handle": s}),
            ("step", {**step, "action": f"Turn<{s}><30>"}),
            ("step", {**step, "action": {"skill": s}}),
            ("step", {**step, "action": {"skill": "turn", "direction": s, "angle_deg": 30}}),
            ("step", {**step, "visible_state": s, "sequence": 0}),
            ("step", {**step, "usage": [{"stage": s, "input_tokens": -1}]}),
            ("finish", {"episode_handle": handle, "abandon_reason": [s]}),
            ("read_artifact", {"path": s}),
            ("open", {"episode_id": s}),
            ("describe", {s: 1}),
        ]
    for method, params in requests:
        reply = live.call(method, params)
        assert "error" in reply and reply["error"]["data"]["error"] != "internal_error", (
            method,
            params,
        )
        assert _state(live) == before
    assert "internal_error" not in live.service.outcome_counts()
    for text in lone:
        with pytest.raises(SkillCallError):
            SkillCall.parse(f"Turn<left><30>{text}")
        for reader in ("reference", "tolerant"):
            data = read_reply_json(f'{{"visible_state": "{text}"}}', reader=reader).data
            assert data["visible_state"] == text
    # a record holding one is written (escaped), not refused
    path = write_json_atomic(
        live.service.output_dir / "record.json", {"v": lone[2]}, ensure_ascii=False
    )
    assert json.loads(path.read_text())["v"] == lone[2]


def _nested(depth: int = 50_000) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_fuzzed_deep_nesting(live: _LiveServer, tmp_path: Path) -> None:
    from humanclaw_agents.model_config import ModelConfigError, load_model_config
    from humanclaw_agents.replies import ReplyExtractionError, read_reply_json
    from humanclaw_gym.cli.backend_args import parse_options
    from humanclaw_gym.episodes import EpisodeFormatError, load_split
    from humanclaw_gym.episodes.io import gzip_bytes
    from humanclaw_gym.evaluation.fingerprint import RunFingerprintError, read_fingerprint
    from humanclaw_gym.metrics import MetricsFileError
    from humanclaw_gym.metrics.aggregate import read_metric_files
    from humanclaw_gym.replay import ReplayBundleError, load_bundle
    from humanclaw_gym.scenes.hssd import SceneDatasetError, open_scene_dataset

    deep = _nested()
    for body in (deep.encode(), ("[" * 100_000).encode(), ('{"a":' * 100_000).encode()):
        status, reply = live.post(body)
        assert status == 200 and reply["error"]["data"]["error"] == "parse_error"
    for reply in (deep, "x " + deep, "[" * 100_000, "<think>" + deep + "</think>{}"):
        for reader in ("reference", "tolerant"):
            try:
                read_reply_json(reply, reader=reader)
            except ReplyExtractionError:
                pass
    files = {
        "split/s.json.gz": gzip_bytes(deep.encode()),
        "ids.json": deep.encode(),
        "model.json": deep.encode(),
        "scenes/x.scene_dataset_config.json": deep.encode(),
        "bundle/replay_manifest.json": deep.encode(),
        "metrics/ep/metrics.json": deep.encode(),
        "run/run_fingerprint.json": deep.encode(),
    }
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    for call, error in (
        (lambda: load_split(tmp_path / "split"), EpisodeFormatError),
        (lambda: load_split(tmp_path / "ids.json"), EpisodeFormatError),
        (lambda: load_model_config(tmp_path / "model.json"), ModelConfigError),
        (lambda: open_scene_dataset(tmp_path / "scenes"), SceneDatasetError),
        (lambda: load_bundle(tmp_path / "bundle"), ReplayBundleError),
        (lambda: read_metric_files(tmp_path / "metrics"), MetricsFileError),
        (lambda: read_fingerprint(tmp_path / "run"), RunFingerprintError),
    ):
        with pytest.raises(error):
            call()
    assert parse_options(("x=" + "[" * 100_000,)) == (("x", "[" * 100_000),)


def _returns_promptly(call: Any, fifo: Path, seconds: float = 15.0) -> BaseException | None:
    """``call()``'s exception (or None); if it blocks, the FIFO is opened for writing to
    release it and the test fails."""
    outcome: dict[str, BaseException | None] = {}

    def target() -> None:
        try:
            call()
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        with open(fifo, "wb"):
            pass
        thread.join(10)
        pytest.fail(f"{call} blocked on the FIFO {fifo}")
    return outcome["error"]


def test_fifos_where_files_are_expected(tmp_path: Path) -> None:
    import os

    from humanclaw_agents.model_config import load_model_config
    from humanclaw_gym.body.smplx_model import body_model_file
    from humanclaw_gym.data.reader import load_episode
    from humanclaw_gym.episodes import load_split
    from humanclaw_gym.episodes.io import read_scene_file
    from humanclaw_gym.episodes.selection import select_episodes
    from humanclaw_gym.metrics.aggregate import read_metric_files
    from humanclaw_gym.replay import load_bundle
    from humanclaw_gym.scenes.hssd import open_scene_dataset

    def fifo(name: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        return path

    cases = [
        (fifo("split/s.json.gz"), lambda: load_split(tmp_path / "split")),
        (fifo("index/index.json"), lambda: load_split(tmp_path / "index")),
        (fifo("subset.json"), lambda: load_split(tmp_path / "subset.json")),
        (tmp_path / "subset.json", lambda: select_episodes(str(tmp_path / "subset.json"))),
        (fifo("scene.json.gz"), lambda: read_scene_file(tmp_path / "scene.json.gz")),
        (fifo("model.json"), lambda: load_model_config(tmp_path / "model.json")),
        (
            fifo("scenes/x.scene_dataset_config.json"),
            lambda: open_scene_dataset(tmp_path / "scenes"),
        ),
        (fifo("body/SMPLX_NEUTRAL.npz"), lambda: body_model_file(tmp_path / "body")),
        (fifo("bundle/replay_manifest.json"), lambda: load_bundle(tmp_path / "bundle")),
        (fifo("metrics/metrics.json"), lambda: read_metric_files(tmp_path / "metrics")),
        (fifo("demos/ep.npz.json"), lambda: load_episode(tmp_path / "demos" / "ep.npz")),
    ]
    for path, call in cases:
        error = _returns_promptly(call, path)
        assert isinstance(error, (ValueError, OSError)), (path, error)
        assert len(str(error)) < _MESSAGE_LIMIT


def test_gzip_bombs_are_refused(tmp_path: Path) -> None:
    import gzip

    from humanclaw_gym.episodes import EpisodeFormatError, load_split
    from humanclaw_gym.episodes.io import MAX_EPISODE_FILE_BYTES, read_scene_file

    megabyte = gzip.compress(b" " * (1 << 20))
    members = MAX_EPISODE_FILE_BYTES // (1 << 20) + 8
    padding = megabyte * members
    (tmp_path / "split").mkdir()
    bombs = {
        tmp_path / "split" / "s.json.gz": gzip.compress(b'{"episodes": []') + padding,
        tmp_path / "scene.json.gz": padding + gzip.compress(b"{}"),
    }
    for path, data in bombs.items():
        path.write_bytes(data)
        assert len(data) < 2 << 20
    with pytest.raises(EpisodeFormatError, match="gzip bomb"):
        load_split(tmp_path / "split")
    with pytest.raises(EpisodeFormatError, match="gzip bomb"):
        read_scene_file(tmp_path / "scene.json.gz")


class _Trap:
    """Unpickling it creates a file: any code from a user's file that ran."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_pickles_in_user_files_never_run(tmp_path: Path) -> None:
    import gzip
    import pickle

    from humanclaw_agents.model_config import ModelConfigError, load_model_config
    from humanclaw_gym.body.smplx_model import BodyModelError, read_body_model_arrays
    from humanclaw_gym.data.reader import load_episode
    from humanclaw_gym.data.schema import DatasetError
    from humanclaw_gym.episodes import EpisodeFormatError, load_split
    from humanclaw_gym.episodes.io import read_scene_file
    from humanclaw_gym.motion.flow.checkpoint import CheckpointError
    from humanclaw_gym.motion.flow.checkpoint import load_checkpoint as load_flow
    from humanclaw_gym.replay import ReplayBundleError, load_bundle
    from humanclaw_gym.replay.bundle import sha256_file
    from humanclaw_gym.scenes.hssd import SceneDatasetError, open_scene_dataset

    trap = tmp_path / "TRAPPED"
    payload = pickle.dumps({"x": _Trap(trap)})
    evil = np.empty((), dtype=object)
    evil[()] = _Trap(trap)

    def npz(path: Path, **arrays: Any) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            np.savez(handle, **arrays)
        return path

    (tmp_path / "split").mkdir()
    (tmp_path / "split" / "s.json.gz").write_bytes(gzip.compress(payload))
    (tmp_path / "model.json").write_bytes(payload)
    (tmp_path / "scene.json.gz").write_bytes(gzip.compress(payload))
    (tmp_path / "scenes").mkdir()
    (tmp_path / "scenes" / "x.scene_dataset_config.json").write_bytes(payload)
    (tmp_path / "SMPLX_NEUTRAL.pkl").write_bytes(payload)
    npz(tmp_path / "body" / "SMPLX_NEUTRAL.npz", v_template=evil, f=evil)
    bundle = tmp_path / "bundle"
    before = npz(bundle / "trajectory_before.npz", realized=evil)
    after = npz(bundle / "trajectory_after.npz", realized=evil)
    manifest = {
        "schema": "humanclaw_replay_v1", "scene_id": "s", "episode_id": "e",
        "scene_content_hash": "0", "complete": True, "ended_by": "stop",
        "files": {p.name: {"sha256": sha256_file(p)} for p in (before, after)},
    }  # fmt: skip
    (bundle / "replay_manifest.json").write_text(json.dumps(manifest))
    demo = npz(tmp_path / "demos" / "ep.npz", frames=evil, metadata=evil)
    (tmp_path / "demos" / "ep.npz.json").write_text(
        json.dumps({"schema": "humanclaw_demos_v1", "sha256": sha256_file(demo)})
    )
    flow = tmp_path / "flow"
    npz(flow / "weights.npz", w=evil)
    npz(flow / "normalization.npz", mean=evil)
    (flow / "manifest.json").write_text(json.dumps({"schema": "humanclaw_flow_motion_v1"}))
    calls = [
        (lambda: load_split(tmp_path / "split"), EpisodeFormatError),
        (lambda: load_model_config(tmp_path / "model.json"), ModelConfigError),
        (lambda: read_scene_file(tmp_path / "scene.json.gz"), EpisodeFormatError),
        (lambda: open_scene_dataset(tmp_path / "scenes"), SceneDatasetError),
        (lambda: read_body_model_arrays(tmp_path / "SMPLX_NEUTRAL.pkl"), BodyModelError),
        (lambda: read_body_model_arrays(tmp_path / "body" / "SMPLX_NEUTRAL.npz"), BodyModelError),
        (lambda: load_bundle(bundle), ReplayBundleError),
        (lambda: load_episode(demo), DatasetError),
        (lambda: load_flow(flow), CheckpointError),
    ]
    torch = pytest.importorskip("torch")
    from humanclaw_agents.bc_policy import CheckpointError as BCCheckpointError
    from humanclaw_agents.bc_policy import load_checkpoint as load_bc

    torch.save({"schema": "humanclaw_bc_policy_v1", "metadata": _Trap(trap)}, tmp_path / "bc.pt")
    calls.append((lambda: load_bc(tmp_path / "bc.pt"), BCCheckpointError))
    for call, error in calls:
        with pytest.raises(error):
            call()
        assert not trap.exists(), call
